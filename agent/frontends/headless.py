"""`agent run task.md`: one task, no questions asked, for scripts and CI.

The task is the Markdown body; optional YAML front matter sets the profile, workdir, limits, the
approval mode, sampling overrides and a `check` command that decides success. Progress goes to
stderr, the final answer to stdout; `--json` writes one event per line to stdout instead.
Nothing ever waits for input: what would need approval is refused and the model is told why.
Everything written out, to stdout and stderr alike, has its secrets redacted (agent/store/redact.py).

Exit codes: agent/errors.py's ExitCode, as agent/session/task_run.py gives them.

One agent per workspace: the run holds the workspace's lock and its session's (agent/store/lock.py) from
before the server starts until it ends, and a second agent is refused with exit 5 (BUSY), naming the first.
The work itself (the session, the check loop, signals, exit codes) is agent/session/task_run.py's, shared with
`agent new`; the task-file format is agent/session/taskfile.py's. This module turns events into output.
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

from agent.errors import AgentError, ExitCode
from agent.events import Event, ReasoningDelta, TextDelta
from agent.session.parts import changes_lines
from agent.session.run import run_task_blocking
from agent.session.task_run import TaskRequest, TaskResult
from agent.settings.config import Settings
from agent.store.lock import WorkspaceBusy
from agent.store.redact import redact, redact_record
from agent.store.telemetry import summary_line


class Printer:
    """Progress for people on stderr, or every event as a JSON line on stdout."""

    def __init__(self, json_lines: bool, quiet: bool) -> None:
        self.json_lines, self.quiet = json_lines, quiet

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta | ReasoningDelta):
            return
        if self.json_lines:
            sys.stdout.write(json.dumps(redact_record(event.to_json()), ensure_ascii=False) + "\n")
            sys.stdout.flush()
            return
        if self.quiet:
            return
        line = self.describe(event)
        if line and event.attempt is not None:
            line = f"[attempt {event.attempt}] {line.lstrip()}"
        if line:
            print(redact(line), file=sys.stderr, flush=True)

    @staticmethod
    def describe(event: Event) -> str:
        kind = event.kind
        if kind == "assistant.message" and event.content.strip() and event.tool_calls:
            # (an answer without tool calls is the final one: it goes to stdout at the end)
            return "  " + event.content.strip().replace("\n", "\n  ")
        # (redacted before they are cut short: half a key is no longer recognisable)
        if kind == "tool.call":
            return f"▸ {event.name}  {redact(event.summary)}"[:200]
        if kind == "tool.result":
            first = redact(event.output).strip().splitlines()[-1:] or [""]
            return f"  {'✓' if event.ok else '✗'} {event.seconds:.2f} s  {first[0][:120]}"
        if kind == "turn.completed":
            return f"  turn {event.turn} · {event.stats.summary()}"
        if kind == "check.result":
            verdict = "passed" if event.passed else "failed"
            return f"[check {event.round}] `{shown_command(event.command)}` {verdict} ({event.seconds:.1f} s)"
        if kind == "compaction":
            return f"[compaction] {event.tokens_before} → {event.tokens_after} tokens ({event.reason})"
        if kind in ("notice", "error", "draft.off"):
            return f"[{kind}] {event.message}"
        if kind == "permission.decided" and event.decision == "deny":
            return f"  denied: {event.reason}"
        return ""


def shown_command(command: str, width: int = 100) -> str:
    """A command on one line for progress output: a check can be a whole hidden script (a heredoc),
    printed in full twice per run before this; its first line says what it is."""
    lines = command.strip().splitlines() or [""]
    first = lines[0]
    if len(lines) == 1 and len(first) <= width:
        return first
    more = f" … ({len(lines)} lines)" if len(lines) > 1 else " …"
    return first[: width - 2].rstrip() + more


def explain(result: TaskResult) -> None:
    """How the run ended, for people on stderr: the check, why it stopped, the figures, what next."""
    check, outcome, session_id = result.check, result.outcome, result.session_id
    lines = []
    if check:
        verdict = "passed" if check.passed else f"failed (exit {check.exit_code})"
        lines.append(f"check `{shown_command(check.command)}` {verdict}")
        if not check.passed:
            lines += ["  " + ln for ln in check.output.strip().splitlines()[-15:]]
    if outcome and outcome.error:
        lines.append(f"stopped: {outcome.error}")
    lines += attempts_lines(result.summary)
    lines += changes_lines(result.summary.get("changes") or [])
    lines.append(f"{result.status} · {summary_line(result.summary)} · session {session_id}")
    lines.append(f"  agent stats {session_id}  |  agent run --resume {session_id}")
    print(redact("\n".join(lines)), file=sys.stderr)


def attempts_lines(summary: dict) -> list[str]:
    """Each attempt of a run of several: how it ended, what it changed, and how to take a kept one."""
    attempts, winner = summary.get("attempts") or [], summary.get("winner")
    if not attempts:
        return []
    lines = [f"attempt {winner} passed its check first: its change is applied" if winner else
             f"no attempt of {len(attempts)} passed its check: the workspace is as it was"]  # fmt: skip
    if summary.get("attempts_tok_s"):
        lines.append(f"  {summary['attempts_output_tokens']} tokens in {summary['attempts_seconds']:.0f} s: "
                     f"{summary['attempts_tok_s']:.1f} tok/s summed over the server's slots")  # fmt: skip
    for row in attempts:
        check = {True: "check passed", False: f"check failed (exit {row.get('check_exit_code')})"}.get(
            row.get("check_passed"), "not checked"
        )
        added = sum(c.get("added") or 0 for c in row["changes"])
        deleted = sum(c.get("deleted") or 0 for c in row["changes"])
        lines.append(
            f"  attempt {row['attempt']}: {row['status']}, {check}, {len(row['changes'])} files +{added} "
            f"-{deleted}, {row['seconds']:.0f} s, {row.get('turns') or 0} turns, temperature "
            f"{row.get('temperature') if row.get('temperature') is not None else 'as the profile'}"
            f"{', a plan first' if row.get('plan_first') else ''}, session {row['session_id']}"
        )
        if row.get("branch"):
            lines.append(f"    kept as {row['branch']}: take it with `git diff {row['branch']}~1 "
                         f"{row['branch']} | git apply`")  # fmt: skip
        if row.get("fresh_start_branches"):
            lines.append(
                f"    its lines that got stuck before it started afresh: {', '.join(row['fresh_start_branches'])}"
            )
    return lines


def print_json_error(exc: AgentError) -> None:
    """The error that ended a run before its session did, as the last JSON line (--json)."""
    kind = (
        "busy"
        if isinstance(exc, WorkspaceBusy)
        else "config"
        if exc.exit_code == ExitCode.CONFIG
        else "server"
    )
    print(
        json.dumps({"type": "error", "error": kind, "message": redact(str(exc)), "fatal": True}), flush=True
    )


def request_from(args: Namespace) -> TaskRequest:
    return TaskRequest(
        task=Path(args.task) if args.task else None, resume=args.resume,
        workdir=Path(args.workdir) if args.workdir else None, profile=args.profile, base_url=args.base_url,
        max_turns=args.max_turns, approval=args.approval, actions=args.actions, check_rounds=args.check_rounds,
        fresh_starts=args.fresh_starts, tool_choice=args.tool_choice, attempts=args.attempts,
    )  # fmt: skip


def cmd_run(args: Namespace, settings: Settings) -> int:
    printer = Printer(args.json, args.quiet)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        result = run_task_blocking(
            request_from(args), settings, printer, None if (args.quiet or args.json) else say
        )
    except AgentError as exc:
        if args.json:
            print_json_error(exc)
        raise
    if result is None:
        print("terminated", file=sys.stderr)
        return ExitCode.TERMINATED
    if not args.json and result.outcome and result.outcome.final:
        print(redact(result.outcome.final))
    if not args.json and not args.quiet:
        explain(result)
    return result.exit_code
