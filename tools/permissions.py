"""Permissions: which tool calls run by themselves, which ask the user, which are refused, and why.

Modes: `ask` (reads run, the rest asks), `auto-edit` (file edits run too, commands ask), `full-auto`
(everything runs) and `read-only` (only reads run). Rules from the settings refine that per tool with
glob patterns; `git push *` also matches a bare `git push`.

A command line is judged command by command (tools/shell_parser.py finds each simple command, wherever it
hides). Every command must be allowed for the line to run; the most restrictive verdict wins
(deny > ask > allow). Between rules that match one command, the most specific (the longest literal
text) decides, so `ask: git push *` beats `allow: git *`. Dangerous commands (tools/command_danger.py:
the DANGERS table and the checks below it) always ask, even in full-auto, unless an allow rule names
the words that make them dangerous (`git push --force origin feature-*` names a force push; `git *`
does not). Reads that name paths outside the workspace ask. What the parser cannot read asks.

Places where a file written now runs as code later (tools/protected.py: git's hooks and config,
.envrc, IDE tasks) are judged for every file-changing tool and for every command that writes: the
file tools' writes into .git are refused, the others ask in every mode; a command that writes
them is dangerous, except where the sandbox mounts them read-only (then the write fails inside it).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from tools import protected
from tools.approval import MODES
from tools.command_danger import FORK_BOMB, CommandPlace, command_danger, reads_only
from tools.shell_parser import ParsedLine, SimpleCommand, parse

Decision = Literal["allow", "ask", "deny"]
SEVERITY = {"allow": 0, "ask": 1, "deny": 2}

WRITE_SUMMARY = re.compile(r" \(\d+ lines\)$")  # what write_file's summary adds to the path


@dataclass
class Verdict:
    decision: Decision
    reason: str
    rule: str = ""  # the suggested "always allow" rule for this call, e.g. "git push *"


# The tools that change a file: a rule written for one of them holds for all three, or `deny
# write_file = [".env"]` would still let edit_file and multi_edit change .env.
FILE_CHANGERS = ("edit_file", "multi_edit", "write_file")


@dataclass
class Rules:
    allow: dict[str, list[str]] = field(default_factory=dict)
    ask: dict[str, list[str]] = field(default_factory=dict)
    deny: dict[str, list[str]] = field(default_factory=dict)

    def decide(self, tool: str, *subjects: str) -> tuple[Decision, str] | None:
        """The most specific rule matching any of the subjects, as (kind, pattern). On equal
        specificity the stricter kind wins."""
        best: tuple[int, int, Decision, str] | None = None
        names = FILE_CHANGERS if tool in FILE_CHANGERS else (tool,)
        for kind in ("allow", "ask", "deny"):
            for pattern in (p for name in names for p in getattr(self, kind).get(name, [])):
                if any(_matches(subject, pattern) for subject in subjects):
                    rank = (_specificity(pattern), SEVERITY[kind], kind, pattern)
                    best = max(best, rank) if best else rank
        return (best[2], best[3]) if best else None


def _matches(subject: str, pattern: str) -> bool:
    if subject == pattern or fnmatch.fnmatchcase(subject, pattern):
        return True
    # "git push *" covers "git push" itself, as a prefix rule would
    return pattern.endswith(" *") and subject == pattern[:-2]


def _specificity(pattern: str) -> int:
    return len(re.sub(r"[*?]|\[[^]]*]", "", pattern))


def suggested_rule(tool: str, subject: str) -> str:
    """'git push *' for 'git push origin main': the command and its first word, then anything."""
    if tool != "bash":
        return "*"
    words = subject.split()
    return " ".join(words[:2]) + " *" if len(words) > 2 else subject


def _names(pattern: str, triggers: list[str]) -> bool:
    """Whether an allow rule spells out what makes a command dangerous, outside its wildcards."""
    literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    return all(t in literal for t in triggers)


class Permissions:
    def __init__(
        self,
        mode: str = "ask",
        rules: Rules | None = None,
        workspace: Path | None = None,
        sandboxed: Callable[[], bool] | None = None,
    ) -> None:
        """`sandboxed`: whether commands run in the sandbox now (it depends on the mode, and on bwrap)."""
        if mode not in MODES:
            raise ValueError(f"unknown approval mode {mode!r}; one of {', '.join(MODES)}")
        self.mode = mode
        self.rules = rules or Rules()
        self.workspace = (workspace or Path.cwd()).resolve()
        self.place = CommandPlace(self.workspace, sandboxed or (lambda: False))

    def allow_always(self, tool: str, pattern: str) -> None:
        """The user's "always" answer: an allow rule for the rest of the session."""
        self.rules.allow.setdefault(tool, []).append(pattern)

    def check(self, tool: str, effect: str, subject: str) -> Verdict:
        """`effect` is the tool's: read, edit or exec. `subject` is the command line or the path."""
        if tool == "bash":
            return self._line(subject)
        if tool in FILE_CHANGERS:
            return self._file(
                tool, effect, WRITE_SUMMARY.sub("", subject) if tool == "write_file" else subject
            )
        return self._by_rules(tool, effect, subject)

    def check_files(self, tool: str, effect: str, subject: str, paths: list[str]) -> Verdict:
        """A call that changes several files (a rename): the call's own verdict, and each file's as an
        edit of that file would get it (the rules for the file tools, and the places where code runs
        later); the strictest wins, naming the file it came from."""
        verdicts = [self.check(tool, effect, subject)]
        # A file whose verdict is only the mode's (ask mode asks for each) adds nothing to the call's.
        mode = self._by_mode(False, effect, "").reason
        verdicts += [
            Verdict(v.decision, f"{path}: {v.reason}", v.rule)
            for path in paths
            if (v := self.check("edit_file", effect, path)).decision != "allow" and v.reason != mode
        ]
        worst = max(verdicts, key=lambda v: SEVERITY[v.decision])
        if worst.decision == "ask":  # asked once, for all the files that ask
            asking = [v.reason for v in verdicts if v.decision == "ask"]
            return Verdict(
                "ask", "; ".join(asking), verdicts[0].rule if verdicts[0].decision == "ask" else ""
            )
        return worst

    def _by_rules(self, tool: str, effect: str, subject: str) -> Verdict:
        rule = self.rules.decide(tool, subject)
        if rule:
            kind, pattern = rule
            said = {"allow": "allowed", "ask": "asks", "deny": "denied"}[kind]
            return Verdict(kind, f"{said} by the rule {tool}: {pattern!r}", suggested_rule(tool, subject))
        return self._by_mode(effect == "read", effect, suggested_rule(tool, subject))

    def _file(self, tool: str, effect: str, path: str) -> Verdict:
        """A file-changing tool on `path`: git's own folder is refused and the other places where code
        runs later ask, in every mode (tools/protected.py); an allow rule that names the path exactly
        lets one of those run. Otherwise the rules, then the mode."""
        raw = Path(os.path.expanduser(path))
        written = raw if raw.is_absolute() else self.workspace / raw
        lexical = PurePosixPath(os.path.normpath(written))
        hooks = protected.hooks_path(self.workspace)
        place = protected.for_files([lexical, PurePosixPath(written.resolve())], self.workspace, hooks)
        if place is None:
            return self._by_rules(tool, effect, path)
        rel = protected.relative_path(lexical, self.workspace)
        if place.files == "refuse":
            return Verdict("deny", protected.refusal(rel))
        rule = self.rules.decide(tool, path)
        if rule and rule[0] == "deny":
            return Verdict("deny", f"denied by the rule {tool}: {rule[1]!r}")
        if self.mode == "read-only":
            return Verdict("deny", "read-only mode: nothing may change")
        if rule and rule[0] == "allow" and _names(rule[1], [path]):
            return Verdict(
                "allow", f"{protected.asking(rel, place)}, but allowed by the rule {tool}: {rule[1]!r}"
            )
        return Verdict("ask", protected.asking(rel, place), path)

    def _by_mode(self, read: bool, effect: str, rule: str) -> Verdict:
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
        what = "commands" if effect == "exec" else "edits"
        return Verdict("ask", f"{self.mode} mode: {what} need approval", rule)

    def _line(self, line: str) -> Verdict:
        parsed: ParsedLine = parse(line)
        whole = self.rules.decide("bash", line)
        if parsed.unreadable or FORK_BOMB.search(line) or parsed.opaque:
            why = ("a fork bomb" if FORK_BOMB.search(line) else
                   parsed.unreadable or f"it runs code it cannot see: {parsed.opaque[0]}")  # fmt: skip
            if whole and whole[0] == "deny":
                return Verdict("deny", f"denied by the rule bash: {whole[1]!r}")
            if whole and whole[0] == "allow" and not re.search(r"[*?\[]", whole[1]):
                return Verdict("allow", f"{why}, but allowed by the exact rule bash: {whole[1]!r}")
            return Verdict("deny" if self.mode == "read-only" else "ask", f"dangerous: {why}", line)
        verdicts = [self._command(c) for c in parsed.commands] or [Verdict("allow", "nothing to run")]
        # the strictest verdict; among questions, danger first: that is what the user must see
        worst = max(verdicts, key=lambda v: (SEVERITY[v.decision], v.reason.startswith("dangerous")))
        if worst.decision == "allow" and len(verdicts) > 1:
            reasons = sorted({v.reason for v in verdicts})
            return Verdict("allow", "; ".join(reasons))
        return worst

    def _command(self, command: SimpleCommand) -> Verdict:
        text, full = command.text, command.full_text
        rule = self.rules.decide("bash", text, full)
        suggestion = suggested_rule("bash", text)
        if rule and rule[0] == "deny":
            return Verdict("deny", f"denied by the rule bash: {rule[1]!r}")
        if found := command_danger(command, self.place):
            why, triggers = found
            if rule and rule[0] == "allow" and _names(rule[1], triggers):
                return Verdict("allow", f"dangerous ({why}) but allowed by the rule bash: {rule[1]!r}")
            if self.mode == "read-only":
                return Verdict("deny", f"read-only mode, and dangerous: {why}")
            return Verdict("ask", f"dangerous: {why}", text if command.elevated else suggestion)
        if rule and rule[0] == "ask":
            return Verdict("ask", f"the rule bash: {rule[1]!r} asks", suggestion)
        if rule:
            return Verdict("allow", f"allowed by the rule bash: {rule[1]!r}")
        read, why_not = reads_only(command, self.place)
        if why_not.startswith("it reads outside"):
            return Verdict("ask", f"`{text}`: {why_not}", suggestion)
        verdict = self._by_mode(read, "exec", suggestion)
        if verdict.decision != "allow":
            verdict.reason = f"`{text}`: {verdict.reason}"
        return verdict
