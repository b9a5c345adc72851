"""What `agent new` shows: progress lines (or --json notices), what it needs from the run's events,
and the closing report."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.events import Event, Notice, SessionFinished, SessionStarted
from agent.frontends.scaffold.git import branch_log, changes_since, commit_count
from agent.frontends.scaffold.skeleton import Written
from agent.store.telemetry import summary_line


class Output:
    """Progress lines for people on stderr, or `agent run`'s notice events with --json."""

    def __init__(self, json_lines: bool) -> None:
        from agent.frontends.headless import (
            Printer,  # (lazy: agent run's front end and the session core behind it)
        )

        self.json_lines = json_lines
        self.printer = Printer(json_lines, quiet=False)

    def say(self, message: str) -> None:
        if self.json_lines:
            self.printer(Notice(message))
        else:
            print(message, file=sys.stderr, flush=True)

    def event(self, event: Event) -> None:
        self.printer(event)

    def summary(self, lines: list[str]) -> None:
        if self.json_lines:
            self.printer(Notice("\n".join(lines)))
        else:
            print("\n".join(lines), flush=True)


class RunObserver:
    """What `agent new` needs from the run's events: the session, and how it ended."""

    def __init__(self) -> None:
        self.session_id = ""
        self.finished: SessionFinished | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, SessionStarted):
            self.session_id = event.session_id
        elif isinstance(event, SessionFinished):
            self.finished = event


@dataclass
class Report:
    folder: Path
    template: str
    written: Written
    skeleton_sha: str
    check: dict[str, Any] | None = None  # CheckResult.to_dict()
    agent: str = ""  # how the agent part ended: "", completed, failed, limit, error, interrupted
    exit_code: int = 0
    session_id: str = ""
    run_summary: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    task_file: Path | None = None
    agent_commit: str | None = None
    check_shown: str = ""  # the template's check, when the command run adds the guard (guarded_check)
    tests: str = ""  # the folder the guard wants a test of the agent's in

    def lines(self) -> list[str]:
        lines = [f"new project: {self.folder} (template {self.template})"]
        changes = changes_since(self.folder, self.skeleton_sha)
        since = f"; since then (A added, M changed, D deleted): {len(changes)}" if changes else ""
        lines.append(f"  files: {len(self.written.files)} from the template{since}")
        lines += [f"    {change}" for change in changes[:20]]
        if self.written.kept:
            lines.append(f"  kept as they were (already there): {', '.join(self.written.kept)}")
        if self.check:
            code = self.check["exit_code"]
            verdict = "passed" if self.check["passed"] else f"failed (exit {code})" if code else "timed out"
            guard = ""
            if self.check_shown:
                guard = f", with a test of the agent's in {self.tests}/" if self.tests else ", with a change"
            lines.append(f"  check: `{self.check_shown or self.check['command']}` {verdict}{guard}")
        elif self.agent:
            lines.append("  check: did not run (the agent did not finish)")
        log = branch_log(self.folder)
        lines.append(f"  commits: {commit_count(self.folder)}")
        lines += [f"    {entry}" for entry in log]
        if self.agent:
            run_figures = summary_line(self.run_summary) if self.run_summary else "no turns"
            lines.append(f"  agent: {self.agent} · {run_figures} · {_duration(self.seconds)} in all")
        if self.error:
            lines.append(f"  stopped: {self.error}")
        if self.agent and self.exit_code != 0:
            lines.append("  the skeleton and its commit are kept; to continue:")
            if self.session_id:
                lines.append(f"    agent run --resume {self.session_id}")
            elif self.task_file:
                lines.append(f"    agent run {self.task_file}")
        elif self.session_id:
            lines.append(f"  session {self.session_id}: agent stats {self.session_id}")
        return lines


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"
