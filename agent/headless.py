"""`agent run task.md`: one task, no questions asked, for scripts and CI.

The task is the Markdown body; optional YAML front matter sets the profile, workdir, limits, the
approval mode, sampling overrides and a `check` command that decides success. Progress goes to
stderr, the final answer to stdout; `--json` writes one event per line to stdout instead.
Nothing ever waits for input: what would need approval is refused and the model is told why.
Everything written out, to stdout and stderr alike, has its secrets redacted (agent/redact.py).

Exit codes: 0 success, 1 the task or its check failed, 2 usage or configuration, 3 a limit was hit,
4 the server failed, 5 another agent works in this workspace (or has this session open), 130
interrupted (SIGINT, Ctrl+C), 143 terminated (SIGTERM).

One agent per workspace: the run holds the workspace's lock and its session's (agent/lock.py) from
before the server starts until it ends, and a second agent is refused with exit 5, naming the first.
SIGINT and SIGTERM during the work cancel it, so that the transcript ends with `session.finished`
("interrupted") and every started tool call has a result; SIGTERM earlier (while the server starts,
say) unwinds the same way, stopping a server the run started.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from frontmatter.default_handlers import YAMLHandler
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.checks import CheckResult, last_check, work_until_checked
from agent.config import ApprovalMode, Settings, describe_validation_error, load_settings, state_dir
from agent.errors import AgentError, ConfigError
from agent.events import ErrorEvent, Event, Notice, ReasoningDelta, SessionFinished, SessionStarted, TextDelta
from agent.llm import ModelClient
from agent.redact import redact, redact_record, register_run
from agent.trust import untrusted_notice

DEFAULT_CHECK_ROUNDS = 3
# What `--resume` without a task file says when the session ended on the model's answer.
RESUME_PROMPT = "Carry on with the task from where you stopped. If it is done, say so in one line."
EXIT = {
    "success": 0, "failed": 1, "config": 2, "limit": 3, "server": 4, "busy": 5, "interrupted": 130,
    "terminated": 143,
}  # fmt: skip
SIGNAL_EXIT = {signal.SIGINT: EXIT["interrupted"], signal.SIGTERM: EXIT["terminated"]}  # 128 + the signal


class SamplingOverrides(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    seed: int | None = None


class TaskSpec(BaseModel):
    """The front matter of a task file. Unknown keys are refused by name."""

    model_config = ConfigDict(extra="forbid")

    profile: str | None = Field(None, description="Server profile to run the task on.")
    workdir: str | None = Field(None, description="Where the agent works; relative to the task file.")
    max_turns: int | None = Field(None, ge=1, description="Model requests before stopping (exit 3).")
    time_limit: float | None = Field(None, gt=0, description="Seconds, or '90s', '10m', '1h' (exit 3).")
    approval: ApprovalMode | None = Field(None, description="ask, auto-edit, full-auto or read-only.")
    sampling: SamplingOverrides = Field(default_factory=SamplingOverrides)
    tool_choice: Literal["auto", "required"] | None = Field(None, description="Sent to the server as is.")
    check: str | None = Field(
        None, description="Shell command run in the workdir afterwards; exit 0 = success."
    )
    check_rounds: int | None = Field(
        None, ge=0, description="Times a failed check goes back to the model to fix (default 3)."
    )
    actions: Literal["tools", "blocks"] | None = Field(
        None, description="How the model acts: native tool calls, or edit blocks written as text."
    )
    mcp: dict[str, Any] | None = Field(
        None, description="MCP servers for this task, as in .mcp.json: {name: {command, args, env} or {url}}."
    )

    @field_validator("mcp")
    @classmethod
    def _mcp_servers(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from tools.mcp import parse_servers

            parse_servers(value)  # a ValidationError here names the server and the field
        return value

    @field_validator("time_limit", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
            if not match:
                raise ValueError("use seconds, or a number followed by s, m or h")
            return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
        return value


_FRONT_MATTER = YAMLHandler()


@dataclass
class Task:
    spec: TaskSpec
    body: str
    path: Path | None


def parse_task(text: str, source: str) -> tuple[TaskSpec, str]:
    """The front matter and the task. python-frontmatter finds the `---` lines whatever the line endings
    (CRLF from Windows editors) and takes an empty block; a UTF-8 BOM is dropped first, or the front
    matter would silently become part of the task."""
    text = text.removeprefix("\ufeff")
    front: dict[str, Any] = {}
    body = text
    if _FRONT_MATTER.detect(text):
        try:
            block, body = _FRONT_MATTER.split(text)
        except ValueError:
            raise ConfigError(f"{source}: the front matter has no closing '---' line") from None
        try:
            loaded = _FRONT_MATTER.load(block)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: the front matter is not valid YAML", str(exc)) from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{source}: the front matter must be a mapping of keys to values")
        front = loaded or {}
    try:
        spec = TaskSpec.model_validate(front)
    except ValidationError as exc:
        known = ", ".join(TaskSpec.model_fields)
        raise ConfigError(
            f"invalid front matter in {source}",
            describe_validation_error(source, exc),
            f"Known keys: {known}.",
        ) from exc
    return spec, body.replace("\r\n", "\n").strip()


def load_task(path: Path) -> Task:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"task file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read task file {path}", str(exc)) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))
        why = "It is UTF-16 (it starts with that BOM)." if utf16 else f"Byte {exc.start} cannot be decoded."
        raise ConfigError(f"task file {path} is not UTF-8 text", why, "Save it as UTF-8.") from exc
    spec, body = parse_task(text, str(path))
    if not body:
        raise ConfigError(f"task file {path} holds no task", "After the front matter there is no text.")
    return Task(spec, body, path)


# What a check may start with that is the shell's own, never a program on PATH (was: `if ...; fi`
# refused as "the check command's program 'if' is not installed").
SHELL_WORDS = frozenset({
    "cd", "test", "[", "[[", "true", "false", "if", "for", "while", "until", "case", "select", "{", "(",
    "!", "function", "exec", "eval", "source", ".", "set", "export", "command", "builtin", "time",
})  # fmt: skip


def check_command_exists(command: str, workdir: Path) -> None:
    """A check whose program cannot be found is a mistake in the task file: say so before working."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"the check command cannot be parsed: {command}", str(exc)) from exc
    program = next((w for w in words if "=" not in w), "")
    if not program or "/" in program or program in SHELL_WORDS:
        return  # a path may be made by the task itself; shell builtins and keywords always exist
    if shutil.which(program) is None:
        raise ConfigError(
            f"the check command's program '{program}' is not installed", f"check: {command}",
            "Install it or fix the check in the task file's front matter.",
        )  # fmt: skip


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


async def run_task(args: Any, settings: Settings, observe: Callable[[Event], None] | None = None) -> int:
    """`observe`, when given, sees every event too (`agent new` reads the session and its end)."""
    from agent.connect import connect, draft_recovery, resolve_profile
    from agent.lock import AgentLocks
    from agent.loop import Limits
    from agent.prompt import system_prompt
    from agent.recorder import SessionRecorder
    from agent.session import load_session, new_session_id
    from agent.wiring import Workbench, build_agent, mcp_configs, start_mcp

    printer = Printer(args.json, args.quiet)
    resumed = load_session(state_dir(), args.resume) if args.resume else None
    task = load_task(Path(args.task)) if args.task else None
    if task is None and resumed is None:
        raise ConfigError(
            "give a task file, or --resume SESSION", fix="agent run TASK.md  |  agent run --resume ID"
        )
    started = resumed.latest_started if resumed else {}
    # A resume without a task file carries on under the task's front matter (its approval mode, limits,
    # check and MCP servers: the latest given); a new task file given with --resume brings its own.
    spec = task.spec if task else TaskSpec.model_validate(started.get("options", {}))

    workdir = Path(
        args.workdir
        or (spec.workdir and _relative_to_task(spec.workdir, task))
        or started.get("workspace")
        or Path.cwd()
    )
    if workdir.exists() and not workdir.is_dir():
        raise ConfigError(f"the workdir {workdir} is not a folder")
    if not workdir.exists():
        workdir.mkdir(parents=True)  # a task may start from nothing: scaffolding a new project
        if not args.quiet and not args.json:
            print(f"created the workdir {workdir}", file=sys.stderr)
    if workdir.resolve() != Path.cwd().resolve():  # the project config is the workspace's, not here's
        settings = load_settings(workdir)
    if spec.check:
        check_command_exists(spec.check, workdir)
    # A session attached with --base-url (or AGENT_BASE_URL) reconnects to that URL on --resume: its
    # profile, "attach", alone would mean the attach profile's own 127.0.0.1:8910. A profile named now wins.
    named_now = args.profile or (spec.profile if task else None)
    base_url = args.base_url or (None if named_now else started.get("base_url") or None)
    profile = resolve_profile(
        settings, named_now or spec.profile or started.get("profile"), base_url, workdir,
        say=None if (args.quiet or args.json) else lambda why: print(why, file=sys.stderr),
    )  # fmt: skip
    actions = args.actions or spec.actions or profile.actions
    approval = args.approval or spec.approval or settings.approval
    if approval == "ask" and not args.quiet and not args.json:
        print("warning: approval mode 'ask' in a headless run: edits and commands will be refused. "
              "Use --approval auto-edit or full-auto.", file=sys.stderr)  # fmt: skip
    limits = Limits(
        max_turns=args.max_turns or spec.max_turns or settings.max_turns, max_seconds=spec.time_limit
    )
    progress = None if (args.quiet or args.json) else _start_progress(profile.name)

    mcp_servers = mcp_configs(settings, workdir, spec.mcp)
    session_id = resumed.session_id if resumed else new_session_id()
    # Before a server starts or a file is touched: a second agent here is refused, naming the first.
    with (
        AgentLocks(state_dir(), workdir, "agent run").holding(session_id),
        connect(settings, profile, start_progress=progress, on_build=_announce_build) as conn,
    ):
        register_run(conn.endpoint.api_key, mcp_servers)  # before the first event is written
        client = ModelClient(conn.endpoint)
        model = await client.model_name()
        recorder = SessionRecorder(state_dir(), session_id, profile.name, model, profile.spec_label)

        def emit(event: Event) -> None:
            recorder(event)
            printer(event)
            if observe is not None:
                observe(event)

        emit(
            SessionStarted(
                session_id,
                profile.name,
                model,
                str(workdir),
                (task.body if task else "")[:500],
                bool(resumed),
                spec.model_dump(exclude_none=True, exclude_defaults=True),
                (profile.base_url or "") if profile.name == "attach" else "",
            )
        )
        for note in conn.notes:
            emit(Notice(note))
        if draft_off := conn.draft_off_event():
            emit(draft_off)
        if ignored := untrusted_notice(workdir):
            emit(Notice(ignored))
        workbench = Workbench(workdir)
        mcp = await start_mcp(mcp_servers, emit, state_dir() / "logs")
        try:
            agent = await build_agent(
                settings, workbench, client, emit, approve=None, approval=approval, limits=limits,
                tool_choice=args.tool_choice or spec.tool_choice or "auto",
                history=[{"role": "system", "content": system_prompt(workdir, actions)}, *resumed.history()] if resumed else None,
                extra_tools=mcp.tools, actions=actions,
            )  # fmt: skip
            agent.request_overrides = spec.sampling.model_dump(exclude_none=True)
            agent.recover = draft_recovery(conn, emit)  # a draft failing at a request: on without it
            message = workbench.task_message(task.body, actions, agent.context) if task else None
            if (
                message is None
                and agent.messages[-1]["role"] == "assistant"
                and not agent.messages[-1].get("tool_calls")
            ):
                # The session ended on the model's answer: sent as it is, a server continues that answer
                # (llama.cpp takes a last assistant message as a prefix), the transcript gets two answers
                # in a row, and the next resume is refused ("Cannot have 2 or more assistant messages").
                message = RESUME_PROMPT
            rounds = args.check_rounds if args.check_rounds is not None else spec.check_rounds
            work = work_until_checked(
                agent, message, spec.check, workdir, DEFAULT_CHECK_ROUNDS if rounds is None else rounds, emit
            )
            outcome, check, interrupted = await _attempt(agent, work, spec.time_limit, emit)
            if spec.check and outcome is not None and outcome.status == "limit" and check is None:
                check, outcome = await last_check(outcome, spec.check, workdir, emit)  # the time limit
        finally:
            await mcp.close()
            await client.close()
        gone = outcome is not None and outcome.error.startswith(("ServerGone", "ServerStalled"))
        if gone and (fate := conn.server_fate()):
            # The request failed because the server this run started died or was stopped: say so.
            emit(Notice(f"{fate}. `agent run --resume {session_id}` starts it again and continues."))
        status, code = _result(outcome, check, interrupted)
        if settings.auto_commit and status == "completed":
            note = workbench.auto_commit(
                f"agent: {(task.body if task else 'resumed task').splitlines()[0][:60]}"
            )
            if note:
                emit(Notice(note))
        summary = {
            **recorder.summary(),
            "exit_code": code,
            "check": check.to_dict() if check else None,
            "changes": workbench.changes(),
            "error": outcome.error if outcome else "",
        }
        emit(SessionFinished(status, len(recorder.stats), outcome.final if outcome else "", summary))
        recorder.close()
    if not args.json and outcome and outcome.final:
        print(redact(outcome.final))
    if not args.json and not args.quiet:
        _explain(status, check, outcome, session_id, summary)
    return code


def _relative_to_task(workdir: str, task: Task | None) -> Path:
    path = Path(workdir).expanduser()
    return path if path.is_absolute() or task is None or task.path is None else task.path.parent / path


async def _attempt(agent, work, time_limit: float | None, emit) -> tuple[Any, CheckResult | None, int | None]:
    """(outcome, last check, the signal that interrupted it or None): the agent's work, ended early by
    SIGINT or SIGTERM, or by the time limit."""
    from agent.loop import Outcome

    received: list[int] = []
    try:
        outcome, check = await _run_interruptible(work, time_limit, received)
        return outcome, check, None
    except asyncio.CancelledError:
        return None, None, received[0] if received else signal.SIGINT
    except TimeoutError:
        outcome = Outcome("limit", "", agent.turn, f"reached the time limit of {time_limit:.0f} s")
        emit(ErrorEvent("limit", outcome.error))
        return outcome, None, None


async def _run_interruptible(coro, time_limit: float | None, received: list[int]):
    """Run the agent as a task that SIGINT and SIGTERM cancel, so it can leave a consistent history.
    The signal is appended to `received` (the exit code is 128 + it). The handlers in place before
    (`cmd_run`'s for SIGTERM, asyncio's for SIGINT) are put back afterwards."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(coro)

    def interrupt(sig: int) -> None:
        received.append(sig)
        task.cancel()

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in before:
        loop.add_signal_handler(sig, interrupt, sig)
    try:
        return await asyncio.wait_for(task, time_limit) if time_limit else await task
    finally:
        for sig, handler in before.items():
            loop.remove_signal_handler(sig)  # (this leaves the default handler, not the one before)
            if handler is not None:
                signal.signal(sig, handler)


def _result(outcome, check: dict | None, interrupted: int | None) -> tuple[str, int]:
    if interrupted is not None or outcome is None:
        return "interrupted", SIGNAL_EXIT.get(interrupted, EXIT["interrupted"])
    if outcome.status == "limit":
        return "limit", EXIT["limit"]
    if outcome.status == "error":
        return "error", EXIT["config"] if outcome.error.startswith("ContextTooSmall") else EXIT["server"]
    if outcome.status != "completed" or (check is not None and not check.passed):
        return "failed", EXIT["failed"]
    return "completed", EXIT["success"]


def shown_command(command: str, width: int = 100) -> str:
    """A command on one line for progress output: a check can be a whole hidden script (a heredoc),
    printed in full twice per run before this; its first line says what it is."""
    lines = command.strip().splitlines() or [""]
    first = lines[0]
    if len(lines) == 1 and len(first) <= width:
        return first
    more = f" … ({len(lines)} lines)" if len(lines) > 1 else " …"
    return first[: width - 2].rstrip() + more


def _figures(summary: dict[str, Any]) -> str:
    parts = [f"{summary['turns']} turn{'s' if summary['turns'] != 1 else ''}"]
    if summary.get("median_gen_tok_s"):
        parts.append(f"{summary['median_gen_tok_s']:.0f} tok/s gen (median)")
    if summary.get("acceptance") is not None:
        parts.append(f"draft {summary['acceptance']:.0%}")
    if summary.get("cache_reuse") is not None:
        parts.append(f"cache {summary['cache_reuse']:.0%}")
    return " · ".join(parts)


def _explain(
    status: str, check: CheckResult | None, outcome, session_id: str, summary: dict[str, Any]
) -> None:
    lines = []
    if check:
        verdict = "passed" if check.passed else f"failed (exit {check.exit_code})"
        lines.append(f"check `{shown_command(check.command)}` {verdict}")
        if not check.passed:
            lines += ["  " + ln for ln in check.output.strip().splitlines()[-15:]]
    if outcome and outcome.error:
        lines.append(f"stopped: {outcome.error}")
    lines += changes_lines(summary.get("changes") or [])
    lines.append(f"{status} · {_figures(summary)} · session {session_id}")
    lines.append(f"  agent stats {session_id}  |  agent run --resume {session_id}")
    print(redact("\n".join(lines)), file=sys.stderr)


def changes_lines(changes: list[dict], limit: int = 20) -> list[str]:
    """The files a run changed, each with its lines added and deleted; a big deletion is flagged."""
    if not changes:
        return []
    lines = [f"changed {len(changes)} file{'s' if len(changes) != 1 else ''} (lines added, deleted):"]
    for change in changes[:limit]:
        added, deleted = change.get("added"), change.get("deleted")
        if added is None:
            lines.append(f"  {change['path']}  (binary)")
            continue
        flag = (
            "   <- deleted more than it added; `agent undo` restores it"
            if deleted > max(20, 2 * added)
            else ""
        )
        lines.append(f"  {change['path']}  +{added} -{deleted}{flag}")
    if len(changes) > limit:
        lines.append(f"  ... and {len(changes) - limit} more (`git status`)")
    return lines


def _start_progress(label: str):
    def progress(elapsed: float, phase: str) -> None:
        if phase == "ready":
            print(f"[{elapsed:4.1f}s] {label}: ready", file=sys.stderr, flush=True)

    return progress


def _announce_build(message: str) -> None:
    print(message, file=sys.stderr)


class Terminated(BaseException):
    """SIGTERM outside the agent's work (while the server starts, say): unwinds like Ctrl+C, so that
    `finally` blocks run and a server this run started is stopped, then exits 143."""


def _terminate(_signum: int, _frame: Any) -> None:
    raise Terminated()


def cmd_run(args: Any, settings: Settings, observe: Callable[[Event], None] | None = None) -> int:
    from agent.llm import LLMError
    from agent.lock import WorkspaceBusy

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return asyncio.run(run_task(args, settings, observe))
    except Terminated:
        print("terminated", file=sys.stderr)
        return EXIT["terminated"]
    except LLMError as exc:  # the server failed before the session could start
        error = AgentError(
            f"the model server failed: {exc}", fix="`agent server status` and `agent server logs` show it."
        )
        error.exit_code = EXIT["server"]
        exc = error
        if args.json:
            print(
                json.dumps({"type": "error", "error": "server", "message": redact(str(exc)), "fatal": True}),
                flush=True,
            )
        raise exc from None
    except AgentError as exc:
        if args.json:
            kind = (
                "busy"
                if isinstance(exc, WorkspaceBusy)
                else "config"
                if exc.exit_code == EXIT["config"]
                else "server"
            )
            print(
                json.dumps({"type": "error", "error": kind, "message": redact(str(exc)), "fatal": True}),
                flush=True,
            )
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
