"""The preflight's findings: one row per check, the memory figures, and the refusal they add up to."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent.errors import ServerError

Status = Literal["ok", "warn", "fail", "skip"]
GiB = 1024**3


class DraftError(ServerError):
    """The draft model cannot be used, but the target can run without it (the fallback's cue).

    `reason` is the short form shown as "draft off: <reason>"; `log_path` is the log of the server
    that failed on the draft ("" when the preflight refused it and nothing started).
    """

    def __init__(self, what: str, why: str = "", fix: str = "", reason: str = "", log_path: str = "") -> None:
        super().__init__(what, why, fix)
        self.reason = reason or what
        self.log_path = log_path


@dataclass
class Finding:
    """One row of the preflight. A failure names the file, the key read, what was expected and the fix."""

    check: str
    status: Status
    summary: str
    file: Path | None = None
    key: str = ""
    expected: str = ""
    found: str = ""
    fix: str = ""
    draft: bool = False  # a failure of the draft alone: the target can still run without it

    def explain(self) -> str:
        parts = [f"{self.check}: {self.summary}"]
        if self.file is not None:
            parts.append(f"  file: {self.file}")
        if self.key:
            parts.append(f"  key read: {self.key}")
        if self.expected:
            parts.append(f"  expected: {self.expected}")
        if self.found:
            parts.append(f"  found: {self.found}")
        return "\n".join(parts)


@dataclass
class Memory:
    """The memory figures behind the memory row, in bytes."""

    weights: int = 0
    kv_cache: int = 0
    draft_weights: int = 0
    draft_kv_cache: int = 0
    free: int | None = None
    where: str = ""
    ctx: int = 0
    cache_types: tuple[str, str] = ("f16", "f16")

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.draft_weights + self.draft_kv_cache


@dataclass
class PreflightReport:
    profile: str
    findings: list[Finding] = field(default_factory=list)
    memory: Memory | None = None
    seconds: float = 0.0

    def add(self, finding: Finding) -> Finding:
        self.findings.append(finding)
        return finding

    def failures(self, strict: bool = False) -> list[Finding]:
        bad = ("fail", "warn") if strict else ("fail",)
        return [f for f in self.findings if f.status in bad]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "warn"]

    def notes(self) -> list[str]:
        """The warnings, one line each, for a launch that goes ahead."""
        return [f"warning: {f.check}: {f.summary}" + (f" {f.fix}" if f.fix else "") for f in self.warnings]

    def error(self, strict: bool = False) -> ServerError | None:
        """The refusal for these findings: a DraftError when only the draft is at fault, else a ServerError."""
        failed = self.failures(strict)
        if not failed:
            return None
        first = failed[0]
        what = (
            f"preflight of profile '{self.profile}': {first.check}: {first.summary}"
            if len(failed) == 1
            else f"preflight of profile '{self.profile}' found {len(failed)} problems "
            f"({', '.join(f.check for f in failed)})"
        )
        why = "\n".join(f.explain() for f in failed)
        fixes = list(dict.fromkeys(f.fix for f in failed if f.fix))
        fix = (
            "\n".join(fixes)
            + ("\n" if fixes else "")
            + f"`agent server check {self.profile}` shows every check."
        )
        if all(f.draft for f in failed):
            return DraftError(what, why, fix, reason=first.summary)
        return ServerError(what, why, fix)

    def raise_for_failures(self, strict: bool = False) -> None:
        error = self.error(strict)
        if error is not None:
            raise error
