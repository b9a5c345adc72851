"""What one shell command does that matters for its approval: whether it is dangerous, with the words
that make it so (an allow rule must name them to let it run), and whether it only reads inside the
workspace; and the same for a whole command line (`danger`, `read_only_command`).

Dangerous: a use listed in the DANGERS table (force pushes, formatting a disk, sudo, ...), deleting or
writing outside the workspace, a write to a place where code runs later (tools/protected.py) unless
the sandbox mounts it read-only, running a download or piped data as code, reading credentials.

Separate from the approval itself (tools/permissions.py), which weighs these findings against the
mode and the rules; this module knows nothing of either.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tools import protected
from tools.shell_parser import SHELLS, SimpleCommand, Word, parse


@dataclass(frozen=True)
class Danger:
    """One dangerous use of a command: `command [sub] ...` with any of `flags` (short flags also
    match inside clusters: "-f" matches "-fdx"), or with any of `words` as an argument."""

    command: str
    why: str
    sub: str = ""
    flags: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()  # flags that make it harmless (`git restore --staged`)


DANGERS = (
    Danger("git", "it force-pushes or deletes remote history", "push",
           ("-f", "--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "-d",
            "--prune")),
    Danger("git", "it discards uncommitted work", "reset", ("--hard", "--merge", "--keep")),
    Danger("git", "it deletes untracked files", "clean", ("-f", "--force")),
    Danger("git", "it discards uncommitted work", "checkout", ("-f", "--force"), (".", "--")),
    Danger("git", "it discards uncommitted work", "restore", unless=("--staged", "-S")),
    Danger("git", "it deletes a branch that may not be merged", "branch", ("-D",)),
    Danger("git", "it deletes stashed work", "stash", words=("drop", "clear")),
    Danger("git", "it rewrites history", "filter-branch"),
    Danger("git", "it rewrites history", "filter-repo"),
    Danger("git", "it deletes the reflog, the history of what was undone", "reflog",
           words=("expire", "delete")),
    Danger("git", "it deletes a ref", "update-ref", ("-d",)),
    Danger("mkfs", "it formats a disk"),
    Danger("mkswap", "it formats a disk"),
    Danger("fdisk", "it edits disk partitions"),
    Danger("sfdisk", "it edits disk partitions"),
    Danger("parted", "it edits disk partitions"),
    Danger("wipefs", "it wipes disk signatures"),
    Danger("shred", "it destroys file contents for good"),
    Danger("shutdown", "it stops the machine"),
    Danger("reboot", "it stops the machine"),
    Danger("halt", "it stops the machine"),
    Danger("poweroff", "it stops the machine"),
    Danger("systemctl", "it stops the machine", words=("poweroff", "reboot", "halt", "kexec")),
    Danger("init", "it stops the machine", words=("0", "6")),
    Danger("kill", "it signals every process the user owns", words=("-1",)),
    Danger("killall5", "it signals every process"),
    Danger("su", "it switches user"),
    Danger("pkexec", "it runs as root"),
    Danger("run0", "it runs as root"),
    Danger("crontab", "it deletes the user's scheduled jobs", flags=("-r",)),
)  # fmt: skip

READ_ONLY_COMMANDS = {
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "grep", "egrep", "fgrep", "rg", "which",
    "type", "file", "stat", "tree", "du", "df", "whoami", "id", "uname", "date", "env", "printenv",
    "true", "false", "test", "[", "diff", "cmp", "sort", "uniq", "basename", "dirname", "realpath",
    "readlink", "nproc", "hostname", "cd", "find", "command", "git", "jq", "less", "more",
}  # fmt: skip
READ_ONLY_GIT = {"status", "diff", "log", "show", "branch", "blame", "rev-parse", "ls-files", "describe",
                 "shortlog", "rev-list", "cat-file", "ls-tree", "grep", "tag", "remote"}  # fmt: skip
# Options that make a read-only command write or run something.
WRITING_OPTIONS = {
    "sort": ("-o", "--output"), "tree": ("-o",), "date": ("-s", "--set"), "rg": ("--pre",),
    "find": ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"),
    "hostname": ("-b", "-F", "--file", "--boot"),
}  # fmt: skip
# `git branch NAME` creates a branch: these list only without names and without these options.
GIT_NAMING_OPTIONS = {
    "branch": ("-d", "-D", "-m", "-M", "-c", "-C", "-f", "--delete", "--move", "--copy", "--force",
               "--set-upstream-to", "-u", "--unset-upstream", "--edit-description"),
    "tag": ("-a", "-s", "-u", "-f", "-d", "-m", "-F", "--annotate", "--sign", "--force", "--delete"),
}  # fmt: skip
# Commands whose words are not paths (so `echo /etc` reads nothing).
NOT_PATHS = {"echo", "printf", "which", "type", "command", "date", "true", "false", "test", "[", "uname",
             "whoami", "id", "env", "printenv", "pwd", "nproc", "hostname", "basename", "dirname"}  # fmt: skip
PATTERN_FIRST = {"grep", "egrep", "fgrep", "rg", "jq"}  # their first word is a pattern, not a path
DOWNLOADERS = {"curl", "wget", "fetch", "aria2c", "http", "https", "nc", "ncat"}
DECODERS = {"base64", "base32", "xxd", "openssl", "gpg", "gunzip", "zcat", "uudecode"}
INTERPRETERS = SHELLS | {"python", "python3", "perl", "ruby", "node", "php", "source", "."}
FORK_BOMB = re.compile(r"(\w+|:)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1")
HARMLESS_WRITES = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
DISK_DEVICE = re.compile(r"^/dev/(sd|nvme|hd|vd|xvd|mmcblk|disk|loop|md|dm-)")
# Commands that write the file named last (or after -t): where they copy, link or install to.
COPIERS = {"cp", "ln", "install", "rsync", "mv"}
IN_PLACE_EDITORS = {"sed", "perl"}  # with -i they rewrite the files named after the script
GIT_CONFIG_READS = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
                    "--get-colorbool", "-l", "--list")  # fmt: skip
GIT_CONFIG_WRITES = ("--unset", "--unset-all", "--add", "--replace-all", "--rename-section",
                     "--remove-section", "-e", "--edit")  # fmt: skip
GIT_CONFIG_VALUED = ("--file", "-f", "--blob", "--type", "--default", "--comment")
SECRET_PATHS = (
    "~/.ssh/*", "~/.aws/*", "~/.netrc", "~/.git-credentials", "~/.config/gh/*", "~/.docker/config.json",
    "~/.kube/*", "~/.gnupg/*", "~/.pypirc", "~/.npmrc", "~/.config/gcloud/*", "~/.azure/*",
    "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "*/id_rsa", "*/id_ed25519", "*/id_ecdsa", "*/id_dsa",
)  # fmt: skip


# ------------------------------------------------------------------ judging one simple command
@dataclass
class CommandPlace:
    """Resolves a command's path arguments against the workspace, following `cd` on the line."""

    workspace: Path
    sandboxed: Callable[[], bool] = lambda: False  # whether commands run in the sandbox now

    def home(self) -> str:
        return os.path.expanduser("~")

    def resolve(self, word: Word, cwd: str | None) -> PurePosixPath | None:
        """The absolute path a word names, or None when it cannot be known before it runs."""
        text = word.text
        if word.dynamic and not text.startswith(("$HOME", "${HOME}")):
            return None
        text = re.sub(r"^(\$HOME|\$\{HOME\}|~)(?=/|$)", self.home(), text)
        if text.startswith("~"):
            return None  # ~other-user
        base = PurePosixPath(self.workspace)
        if cwd is not None:
            where = self.resolve(Word(cwd, cwd == "$?"), None)
            if where is None:
                return None
            base = where
        return PurePosixPath(os.path.normpath(base / text))

    def inside(self, word: Word, cwd: str | None) -> bool:
        path = self.resolve(word, cwd)
        return path is not None and (
            path == PurePosixPath(self.workspace) or PurePosixPath(self.workspace) in path.parents
        )

    def strictly_inside(self, word: Word, cwd: str | None) -> bool:
        """Inside, and not the workspace itself nor all it holds (`rm -rf *` deletes everything)."""
        path = self.resolve(word, cwd)
        root = PurePosixPath(self.workspace)
        if path is None or (path.name in ("*", ".*") and path.parent == root):
            return False
        return root in path.parents


def _flag_in(args: list[str], flag: str) -> bool:
    for arg in args:
        if arg == flag or (flag.startswith("--") and arg.startswith(flag + "=")):
            return True
        if len(flag) == 2 and re.match(r"^-[a-zA-Z]{2,}$", arg) and flag[1] in arg[1:]:
            return True  # -f inside -fdx
    return False


def _git_sub(args: list[str]) -> tuple[str, list[str]]:
    """`git -C dir -c k=v push -f` -> ("push", ["-f"])."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    return (args[i], args[i + 1 :]) if i < len(args) else ("", [])


def _recursive(args: list[str]) -> bool:
    return _flag_in(args, "-r") or _flag_in(args, "-R") or "--recursive" in args


def command_danger(command: SimpleCommand, place: CommandPlace) -> tuple[str, list[str]] | None:
    """Why one simple command is dangerous, and the words that make it so (an allow rule must name
    them to let it run); None when it is not."""
    name, words = command.name, [w.text for w in command.args]
    if command.elevated:
        return "it runs as root (sudo)", [w for w in command.wrappers if w in ("sudo", "doas")]
    if name.startswith("mkfs"):
        name = "mkfs"
    sub, rest = _git_sub(words) if name == "git" else ("", words)
    for danger in DANGERS:
        if danger.command != name or (danger.sub and danger.sub != sub):
            continue
        if danger.unless and any(_flag_in(rest, f) for f in danger.unless):
            continue
        hit = [f for f in danger.flags if _flag_in(rest, f)] + [w for w in danger.words if w in rest]
        if name == "git" and sub == "push":
            hit += [w for w in rest if w.startswith("+")]  # +main: a forced refspec
        if hit or not (danger.flags or danger.words):
            return danger.why, [name, *([sub] if sub else []), *hit]
    if name in ("rm", "rmdir", "unlink") or (name == "find" and "-delete" in words):
        if name == "find":  # what it finds under its starting points, the workspace included
            outside = [t.text for t in _find_starts(command) if not place.inside(t, command.cwd)]
        else:
            outside = [t.text for t in _paths(command) if not place.strictly_inside(t, command.cwd)]
        if command.extra_args and name == "rm" and _recursive(words):
            outside.append("(paths given by a pipe or find)")
        if outside:
            return f"it deletes outside the workspace, or all of it ({' '.join(outside)})", [command.text]
    if name in ("chmod", "chown", "chgrp"):
        targets = _paths(command)[1:]  # after the mode or owner
        if any(not place.inside(t, command.cwd) for t in targets):
            return f"{name} changes files outside the workspace", [command.text]
    written = command.writes + [Word(w[3:]) for w in words if name == "dd" and w.startswith("of=")]
    for target in written:
        if DISK_DEVICE.match(target.text):
            return "it writes to a disk device", [target.text]
        harmless = target.text in HARMLESS_WRITES or target.text.startswith("/tmp/")
        if not harmless and not place.inside(target, command.cwd):
            return f"it writes outside the workspace ({target.text})", [target.text]
    if found := _guarded_write(command, place, written):
        return found
    if name in INTERPRETERS and (why := _runs_unseen_code(command)):
        return why, [command.text]
    if secret := _secret_path(command, place):
        return f"it reads credentials ({secret})", [secret]
    return None


def _guarded_write(
    command: SimpleCommand, place: CommandPlace, redirected: list[Word]
) -> tuple[str, list[str]] | None:
    """Why a command that writes a place where code runs later (tools/protected.py) is dangerous,
    and the path an allow rule must name; None when it writes none, or the sandbox keeps it out."""
    name, words = command.name, [w.text for w in command.args]
    sandboxed = place.sandboxed()
    if name == "git" and not sandboxed:
        sub, rest = _git_sub(words)
        if sub == "config" and _writes_git_config(rest):
            return (
                "it changes git's config, which can name commands git runs later as the user "
                "(core.fsmonitor, core.hooksPath, core.sshCommand, aliases, pagers)",
                ["git", "config"],
            )
    targets = [t for t in [*redirected, *_written_paths(command)] if t.text not in HARMLESS_WRITES]
    if not targets:
        return None
    hooks = protected.hooks_path(place.workspace)
    for target in targets:
        path = place.resolve(target, command.cwd)
        if path is None:
            continue
        if guarded := protected.for_commands(path, place.workspace, hooks, sandboxed):
            rel = protected.relative_path(path, place.workspace)
            return protected.asking(rel, guarded), [target.text]
    return None


def _written_paths(command: SimpleCommand) -> list[Word]:
    """The files a command writes through its arguments (redirections are the caller's): tee's, where
    cp/mv/ln/install/rsync put things (a folder, and the name in it), what mv takes away, the files
    sed -i and perl -i rewrite, the files chmod changes, and git config --file's file."""
    name, args, words = command.name, command.args, [w.text for w in command.args]
    paths = _paths(command)
    if name == "tee":
        return paths
    if name in COPIERS:
        valued = [args[i + 1] for i, w in enumerate(words[:-1]) if w in ("-t", "--target-directory")]
        valued += [Word(w.text.split("=", 1)[1], w.dynamic) for w in args
                   if w.text.startswith("--target-directory=")]  # fmt: skip
        sources = [p for p in paths if all(p is not v for v in valued)]
        target = valued[0] if valued else (sources.pop() if sources else None)
        if target is None:
            return []
        inside = [Word(f"{target.text}/{PurePosixPath(s.text).name}", target.dynamic) for s in sources]
        return [target, *(sources if name == "mv" else []), *inside]
    if name in IN_PLACE_EDITORS and any(
        re.match(r"^-[a-zA-Z]*i", w) or w.startswith("--in-place") for w in words
    ):
        scripts = [args[i + 1] for i, w in enumerate(words[:-1])
                   if w in ("-e", "--expression", "-f", "--file")]  # fmt: skip
        files = [p for p in paths if all(p is not s for s in scripts)]
        return files if scripts else files[1:]
    if name == "chmod":
        return paths[1:]
    if name == "git":
        sub, rest = _git_sub(words)
        if sub == "config":
            return [Word(rest[i + 1]) for i, w in enumerate(rest[:-1]) if w in ("--file", "-f")]
    return []


def _writes_git_config(rest: list[str]) -> bool:
    """Whether `git config ...` (its arguments after `config`) changes git's own config files;
    one with --file writes that file, judged as any written file."""
    if any(w in ("--file", "-f", "--blob") or w.startswith(("--file=", "--blob=")) for w in rest):
        return False
    if rest[:1] in (["get"], ["list"]):
        return False
    if rest[:1] in (["set"], ["unset"], ["rename-section"], ["remove-section"], ["edit"]):
        return True
    if any(_flag_in(rest, flag) for flag in GIT_CONFIG_WRITES):
        return True
    if any(_flag_in(rest, flag) for flag in GIT_CONFIG_READS):
        return False
    names, skip = [], False
    for word in rest:
        if skip:
            skip = False
        elif word in GIT_CONFIG_VALUED:
            skip = True
        elif not word.startswith("-"):
            names.append(word)
    return len(names) >= 2  # `git config KEY` reads it; `git config KEY VALUE` sets it


def _runs_unseen_code(command: SimpleCommand) -> str | None:
    feeders = [*command.stdin_from, *command.substituted]
    if any(f.name in DOWNLOADERS for f in feeders):
        return "it runs a download (curl | sh)"
    if command.name in SHELLS | {"source", "."}:
        script = [w for w in command.args if not w.text.startswith("-")]
        if command.substituted:
            return "it runs commands from a <(...) substitution"
        if command.stdin_from and not script and any(f.name in DECODERS for f in command.stdin_from):
            return "it runs decoded data as commands"
        if command.stdin_from and not script and "-c" not in [w.text for w in command.args]:
            return "it runs whatever the pipe gives it"
    return None


def _secret_path(command: SimpleCommand, place: CommandPlace) -> str | None:
    home = place.home()
    for word in [*command.args, *command.writes]:
        path = place.resolve(word, command.cwd)
        if path is None:
            continue
        shown = str(path).replace(home, "~", 1) if str(path).startswith(home) else str(path)
        if any(fnmatch.fnmatchcase(shown, p) for p in SECRET_PATHS):
            return shown
    return None


def _find_starts(command: SimpleCommand) -> list[Word]:
    """find's starting points: the words before its first test (`.` when there are none)."""
    starts = []
    for word in command.args:
        if word.text.startswith(("-", "(", "!")):
            break
        starts.append(word)
    return starts or [Word(".")]


def _paths(command: SimpleCommand) -> list[Word]:
    """The words of a command that name files: not options, not `--`."""
    return [w for w in command.args if not w.text.startswith("-") or w.dynamic]


def reads_only(command: SimpleCommand, place: CommandPlace) -> tuple[bool, str]:
    """(reads only, why not). A read of something outside the workspace is not counted as one."""
    name, words = command.name, [w.text for w in command.args]
    if command.elevated or (command.writes and any(w.text not in HARMLESS_WRITES for w in command.writes)):
        return False, "it writes a file"
    if name not in READ_ONLY_COMMANDS:
        return False, ""
    if name == "env" and words:
        return False, ""  # env with a command was unwrapped; with options it may run one
    if name == "uniq" and len(_paths(command)) > 1:
        return False, "uniq writes its second file"
    if name == "git":
        sub, rest = _git_sub(words)
        if sub not in READ_ONLY_GIT or "-c" in words[: len(words) - len(rest) - 1]:
            return False, ""  # `git -c core.pager=...` can run anything
        named = [w for w in rest if not w.startswith("-")]
        if sub in GIT_NAMING_OPTIONS and (
            (named and not (_flag_in(rest, "--list") or _flag_in(rest, "-l")))
            or any(_flag_in(rest, o) for o in GIT_NAMING_OPTIONS[sub])
        ):
            return False, f"git {sub} with a name or these options changes it"
        if sub == "remote" and rest[:1] not in ([], ["-v"], ["show"], ["get-url"]):
            return False, "git remote with a name changes it"
        if any(_flag_in(rest, o) for o in ("--output", "--ext-diff")):
            return False, "it writes a file or runs a diff program"
    elif any(_flag_in(words, o) for o in WRITING_OPTIONS.get(name, ())):
        return False, ""
    if name in NOT_PATHS:
        return True, ""
    paths = _paths(command)
    if name in PATTERN_FIRST:  # the pattern is not a path: the word after -e, or the first one
        given = [command.args[i + 1] for i, w in enumerate(words[:-1]) if w in ("-e", "--regexp")]
        paths = [p for p in paths if all(p is not g for g in given)] if given else paths[1:]
    if name == "cd":
        return True, ""  # moving is harmless; what runs there is judged with the new directory
    outside = [p.text for p in paths if not place.inside(p, command.cwd)]
    if (
        not paths
        and command.cwd is not None
        and not place.inside(Word(command.cwd, command.cwd == "$?"), None)
    ):
        outside.append(command.cwd)
    if outside:
        return False, f"it reads outside the workspace ({' '.join(outside)})"
    return True, ""


# ------------------------------------------------------------------ whole lines
def danger(line: str, workspace: Path) -> str | None:
    """Why a command line is dangerous, or None. Unreadable lines count as dangerous: nobody can tell."""
    if FORK_BOMB.search(line):
        return "a fork bomb"
    parsed = parse(line)
    if parsed.unreadable:
        return f"it cannot be parsed ({parsed.unreadable})"
    if parsed.opaque:
        return f"it runs code it cannot see: {parsed.opaque[0]}"
    place = CommandPlace(workspace)
    for command in parsed.commands:
        if found := command_danger(command, place):
            return found[0]
    return None


def read_only_command(line: str, workspace: Path | None = None) -> bool:
    parsed = parse(line)
    place = CommandPlace((workspace or Path.cwd()).resolve())
    return (
        bool(parsed.commands)
        and not parsed.unreadable
        and not parsed.opaque
        and all(reads_only(c, place)[0] for c in parsed.commands)
    )
