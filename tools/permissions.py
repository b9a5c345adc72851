"""Permissions: which tool calls run by themselves, which ask the user, which are refused, and why.

Modes: `ask` (reads run, the rest asks), `auto-edit` (file edits run too, commands ask), `full-auto`
(everything runs) and `read-only` (only reads run). Rules from the settings refine that per tool with
glob patterns. Dangerous commands always ask, even in full-auto, unless a rule allows them by name;
they are recognised by parsing the command line into simple commands (shlex), not by substrings.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Decision = Literal["allow", "ask", "deny"]
MODES = ("ask", "auto-edit", "full-auto", "read-only")

# Commands that only read, allowed without asking in every mode but read-only.
READ_ONLY_COMMANDS = {
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "grep",
    "rg",
    "which",
    "file",
    "stat",
    "tree",
    "du",
    "df",
    "whoami",
    "uname",
    "date",
    "env",
    "printenv",
    "true",
    "false",
    "diff",
    "cmp",
    "sort",
    "uniq",
}
READ_ONLY_GIT = {"status", "diff", "log", "show", "branch", "blame", "rev-parse", "ls-files"}
WRAPPERS = {"sudo", "doas", "env", "nohup", "time", "command", "exec", "nice", "timeout", "xargs", "builtin"}
SHELLS = {"sh", "bash", "zsh", "dash", "fish", "ksh", "python", "python3", "perl", "ruby", "node"}
OPERATORS = {";", "&&", "||", "|", "&", "|&", "(", ")", "\n"}
FORK_BOMB = re.compile(r"(\w+|:)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1")


@dataclass
class Verdict:
    decision: Decision
    reason: str
    rule: str = ""  # the suggested "always allow" rule for this call, e.g. "git push *"


@dataclass
class Rules:
    allow: dict[str, list[str]] = field(default_factory=dict)
    ask: dict[str, list[str]] = field(default_factory=dict)
    deny: dict[str, list[str]] = field(default_factory=dict)

    def match(self, kind: str, tool: str, subject: str) -> str | None:
        for pattern in getattr(self, kind).get(tool, []):
            if fnmatch.fnmatchcase(subject, pattern) or subject == pattern:
                return pattern
        return None


def split_commands(command: str) -> list[list[str]]:
    """Simple commands of a command line, split at ; && || | & and parentheses; $(...) and `...` too.

    A command that reads a pipe starts with the marker "|" so that `curl ... | sh` can be told apart
    from `curl ...; sh`.
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()\n")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in OPERATORS or set(token) <= set(";&|()\n"):
            commands.append(["|"] if token in ("|", "|&") else [])
        else:
            commands[-1].append(token)
    for inner in re.findall(r"\$\(([^()]*)\)|`([^`]*)`", command):
        commands += split_commands(inner[0] or inner[1])
    return [c for c in commands if c and c != ["|"]]


def _strip(words: list[str]) -> tuple[list[str], bool]:
    """The command without VAR=value prefixes and wrappers (sudo, env, nohup...); and whether sudo was there."""
    elevated = False
    i = 0
    while i < len(words):
        word = words[i]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            i += 1
        elif word in WRAPPERS:
            elevated |= word in ("sudo", "doas")
            i += 1
            while i < len(words) and words[i].startswith("-"):  # wrapper flags: sudo -u x, timeout -s
                i += 2 if words[i] in ("-u", "-g", "-s", "-k") else 1
            if word == "timeout" and i < len(words) and re.match(r"^\d", words[i]):
                i += 1
        else:
            break
    return words[i:], elevated


def danger(command: str, workspace: Path) -> str | None:
    """Why a command line is dangerous, or None. Unparseable lines count as dangerous: we cannot tell."""
    if FORK_BOMB.search(command):
        return "a fork bomb"
    try:
        commands = split_commands(command)
    except ValueError as exc:
        return f"it cannot be parsed ({exc})"
    for i, words in enumerate(commands):
        piped = words[:1] == ["|"]
        words, elevated = _strip(words[1:] if piped else words)
        if elevated:
            return "it runs as root (sudo)"
        if not words:
            continue
        name = Path(words[0]).name
        args = words[1:]
        if name in ("su", "doas"):
            return "it switches user"
        if name == "rm" and _recursive(args):
            outside = [a for a in args if not a.startswith("-") and not _inside(a, workspace)]
            if outside:
                return f"it deletes recursively outside the workspace ({' '.join(outside)})"
        if name.startswith("mkfs") or name in ("fdisk", "parted", "wipefs", "shred"):
            return f"{name} destroys disks or data"
        if name == "dd" and any(a.startswith("of=/dev/") for a in args):
            return "dd writes to a device"
        if name in ("shutdown", "reboot", "halt", "poweroff"):
            return f"{name} stops the machine"
        if (
            name == "git"
            and args[:1] == ["push"]
            and any(
                a in ("-f", "--force", "--force-with-lease", "--mirror", "--delete", "-d")
                or a.startswith("+")
                or a.startswith("--force")
                for a in args[1:]
            )
        ):
            return "it force-pushes or deletes remote history"
        if name in ("chmod", "chown") and _recursive(args) and any(a in ("/", "~", "/*") for a in args):
            return f"{name} -R on the whole system"
        if name in SHELLS and piped and _downloads(commands[i - 1]):
            return "it pipes a download into a shell"
    if re.search(r">\s*/dev/(sd|nvme|hd|disk)", command):
        return "it writes to a disk device"
    return None


def _recursive(args: list[str]) -> bool:
    return any(
        a in ("-r", "-R", "--recursive") or (re.match(r"^-[a-zA-Z]+$", a) and ("r" in a or "R" in a))
        for a in args
    )


def _downloads(words: list[str]) -> bool:
    words = _strip(words[1:] if words[:1] == ["|"] else words)[0]
    return bool(words) and Path(words[0]).name in ("curl", "wget", "fetch")


def _inside(arg: str, workspace: Path) -> bool:
    if any(ch in arg for ch in "$`~") or arg in ("/", "*", "/*", ".."):
        return False  # unexpanded variables or home: we cannot know where they land
    path = Path(arg) if Path(arg).is_absolute() else workspace / arg
    resolved = path.resolve()
    root = workspace.resolve()
    return resolved != root and root in resolved.parents


def read_only_command(command: str) -> bool:
    try:
        commands = split_commands(command)
    except ValueError:
        return False
    if not commands or re.search(r"(?<![<>0-9&])>|>>|\btee\b", command):
        return False
    for words in commands:
        words, elevated = _strip(words[1:] if words[:1] == ["|"] else words)
        if elevated or not words:
            return False
        name = Path(words[0]).name
        if name == "git":
            if len(words) < 2 or words[1] not in READ_ONLY_GIT:
                return False
        elif name == "find":
            if any(a in ("-exec", "-execdir", "-delete", "-ok", "-fprint") for a in words):
                return False
        elif name not in READ_ONLY_COMMANDS:
            return False
    return True


def suggested_rule(tool: str, subject: str) -> str:
    """'git push *' for 'git push origin main': the command and its first word, then anything."""
    if tool != "bash":
        return "*"
    words = subject.split()
    return " ".join(words[:2]) + " *" if len(words) > 2 else subject


class Permissions:
    def __init__(self, mode: str = "ask", rules: Rules | None = None, workspace: Path | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown approval mode {mode!r}; one of {', '.join(MODES)}")
        self.mode = mode
        self.rules = rules or Rules()
        self.workspace = (workspace or Path.cwd()).resolve()

    def allow_always(self, tool: str, pattern: str) -> None:
        """The user's "always" answer: an allow rule for the rest of the session."""
        self.rules.allow.setdefault(tool, []).append(pattern)

    def check(self, tool: str, effect: str, subject: str) -> Verdict:
        """`effect` is the tool's: read, edit or exec. `subject` is the command line or the path."""
        rule = suggested_rule(tool, subject)
        if pattern := self.rules.match("deny", tool, subject):
            return Verdict("deny", f"denied by the rule {tool}: {pattern!r}")
        allowed = self.rules.match("allow", tool, subject)
        if tool == "bash" and (why := danger(subject, self.workspace)):
            if allowed and allowed != "*":
                return Verdict("allow", f"dangerous ({why}) but allowed by the rule {tool}: {allowed!r}")
            if self.mode == "read-only":
                return Verdict("deny", f"read-only mode, and dangerous: {why}")
            return Verdict("ask", f"dangerous: {why}", rule)
        if pattern := self.rules.match("ask", tool, subject):
            return Verdict("ask", f"the rule {tool}: {pattern!r} asks", rule)
        if allowed:
            return Verdict("allow", f"allowed by the rule {tool}: {allowed!r}")
        read = effect == "read" or (tool == "bash" and read_only_command(subject))
        if self.mode == "read-only":
            return (
                Verdict("allow", "reads only")
                if read
                else Verdict("deny", "read-only mode: nothing may change")
            )
        if read or self.mode == "full-auto":
            return Verdict("allow", "reads only" if read else "full-auto mode")
        if self.mode == "auto-edit" and effect == "edit":
            return Verdict("allow", "auto-edit mode: file edits run by themselves")
        return Verdict(
            "ask", f"{self.mode} mode: {'commands' if effect == 'exec' else 'edits'} need approval", rule
        )
