"""`agent run task.md`: one task, no questions asked, for scripts and CI.

The task is the Markdown body; optional YAML front matter sets the profile, workdir, limits, the
approval mode, sampling overrides and a `check` command that decides success. Progress goes to
stderr, the final answer to stdout; `--json` writes one event per line to stdout instead.
Nothing ever waits for input: what would need approval is refused and the model is told why.

Exit codes: 0 success, 1 the task or its check failed, 2 usage or configuration, 3 a limit was hit,
4 the server failed, 130 interrupted.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.checks import CheckResult, work_until_checked
from agent.config import ApprovalMode, Settings, describe_validation_error, state_dir
from agent.errors import AgentError, ConfigError
from agent.events import ErrorEvent, Event, Notice, ReasoningDelta, SessionFinished, SessionStarted, TextDelta
from agent.llm import ModelClient

DEFAULT_CHECK_ROUNDS = 3
EXIT = {"success": 0, "failed": 1, "config": 2, "limit": 3, "server": 4, "interrupted": 130}


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


@dataclass
class Task:
    spec: TaskSpec
    body: str
    path: Path | None


def parse_task(text: str, source: str) -> tuple[TaskSpec, str]:
    front: dict[str, Any] = {}
    body = text
    if text.startswith("---"):
        match = re.match(r"---[ \t]*\n(.*?)\n---[ \t]*(?:\n|$)", text, re.S)
        if not match:
            raise ConfigError(f"{source}: the front matter has no closing '---' line")
        try:
            loaded = yaml.safe_load(match.group(1)) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: the front matter is not valid YAML", str(exc)) from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{source}: the front matter must be a mapping of keys to values")
        front, body = loaded, text[match.end() :]
    try:
        spec = TaskSpec.model_validate(front)
    except ValidationError as exc:
        known = ", ".join(TaskSpec.model_fields)
        raise ConfigError(
            f"invalid front matter in {source}",
            describe_validation_error(source, exc),
            f"Known keys: {known}.",
        ) from exc
    return spec, body.strip()


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
        raise ConfigError(
            f"task file {path} is not UTF-8 text", f"Byte {exc.start} cannot be decoded.", "Save it as UTF-8."
        ) from exc
    spec, body = parse_task(text, str(path))
    if not body:
        raise ConfigError(f"task file {path} holds no task", "After the front matter there is no text.")
    return Task(spec, body, path)


def check_command_exists(command: str, workdir: Path) -> None:
    """A check whose program cannot be found is a mistake in the task file: say so before working."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"the check command cannot be parsed: {command}", str(exc)) from exc
    program = next((w for w in words if "=" not in w), "")
    if not program or "/" in program or program in {"cd", "test", "[", "true", "false"}:
        return  # a path may be made by the task itself; shell builtins always exist
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
            sys.stdout.write(json.dumps(event.to_json(), ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
            return
        if self.quiet:
            return
        line = self.describe(event)
        if line:
            print(line, file=sys.stderr, flush=True)

    @staticmethod
    def describe(event: Event) -> str:
        kind = event.kind
        if kind == "assistant.message" and event.content.strip() and event.tool_calls:
            # (an answer without tool calls is the final one: it goes to stdout at the end)
            return "  " + event.content.strip().replace("\n", "\n  ")
        if kind == "tool.call":
            return f"▸ {event.name}  {event.summary}"[:200]
        if kind == "tool.result":
            first = event.output.strip().splitlines()[-1:] or [""]
            return f"  {'✓' if event.ok else '✗'} {event.seconds:.2f} s  {first[0][:120]}"
        if kind == "turn.completed":
            return f"  turn {event.turn} · {event.stats.summary()}"
        if kind == "check.result":
            verdict = "passed" if event.passed else "failed"
            return f"[check {event.round}] `{event.command}` {verdict} ({event.seconds:.1f} s)"
        if kind == "compaction":
            return f"[compaction] {event.tokens_before} → {event.tokens_after} tokens ({event.reason})"
        if kind in ("notice", "error"):
            return f"[{kind}] {event.message}"
        if kind == "permission.decided" and event.decision == "deny":
            return f"  denied: {event.reason}"
        return ""


async def run_task(args: Any, settings: Settings) -> int:
    from agent.connect import connect, resolve_profile
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
    started = resumed.started if resumed else {}
    # A resume without a task file carries on under the original task's front matter (its approval
    # mode, limits, check and MCP servers); a new task file given with --resume brings its own.
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
    if spec.check:
        check_command_exists(spec.check, workdir)
    profile = resolve_profile(
        settings, args.profile or spec.profile or started.get("profile"), args.base_url, workdir
    )
    actions = args.actions or spec.actions or profile.actions
    approval = args.approval or spec.approval or settings.approval
    if approval == "ask" and not args.quiet and not args.json:
        print("warning: approval mode 'ask' in a headless run: edits and commands will be refused. "
              "Use --approval auto-edit or full-auto.", file=sys.stderr)  # fmt: skip
    limits = Limits(
        max_turns=args.max_turns or spec.max_turns or settings.max_turns, max_seconds=spec.time_limit
    )
    progress = None if (args.quiet or args.json) else _start_progress(profile.name)

    with connect(settings, profile, start_progress=progress, on_build=_announce_build) as conn:
        client = ModelClient(conn.endpoint)
        model = await client.model_name()
        session_id = resumed.session_id if resumed else new_session_id()
        recorder = SessionRecorder(state_dir(), session_id, profile.name, model, profile.spec_label)

        def emit(event: Event) -> None:
            recorder(event)
            printer(event)

        emit(
            SessionStarted(
                session_id,
                profile.name,
                model,
                str(workdir),
                (task.body if task else "")[:500],
                bool(resumed),
                spec.model_dump(exclude_none=True, exclude_defaults=True),
            )
        )
        for note in conn.notes:
            emit(Notice(note))
        workbench = Workbench(workdir)
        mcp = await start_mcp(mcp_configs(settings, workdir, spec.mcp), emit, state_dir() / "logs")
        try:
            agent = await build_agent(
                settings, workbench, client, emit, approve=None, approval=approval, limits=limits,
                tool_choice=args.tool_choice or spec.tool_choice or "auto",
                history=[{"role": "system", "content": system_prompt(workdir, actions)}, *resumed.history()] if resumed else None,
                extra_tools=mcp.tools, actions=actions,
            )  # fmt: skip
            agent.request_overrides = spec.sampling.model_dump(exclude_none=True)
            message = workbench.task_message(task.body, actions, agent.context) if task else None
            rounds = args.check_rounds if args.check_rounds is not None else spec.check_rounds
            work = work_until_checked(
                agent, message, spec.check, workdir, DEFAULT_CHECK_ROUNDS if rounds is None else rounds, emit
            )
            outcome, check, interrupted = await _attempt(agent, work, spec.time_limit, emit)
        finally:
            await mcp.close()
            await client.close()
        status, code = _result(outcome, check, interrupted)
        if settings.auto_commit and workbench.checkpoints and status == "completed":
            sha = workbench.checkpoints.commit_changes(
                f"agent: {(task.body if task else 'resumed task').splitlines()[0][:60]}"
            )
            if sha:
                emit(Notice(f"committed {sha[:10]}"))
        summary = {
            **recorder.summary(),
            "exit_code": code,
            "check": check.to_dict() if check else None,
            "error": outcome.error if outcome else "",
        }
        emit(SessionFinished(status, len(recorder.stats), outcome.final if outcome else "", summary))
        recorder.close()
    if not args.json and outcome and outcome.final:
        print(outcome.final)
    if not args.json and not args.quiet:
        _explain(status, check, outcome, session_id, summary)
    return code


def _relative_to_task(workdir: str, task: Task | None) -> Path:
    path = Path(workdir).expanduser()
    return path if path.is_absolute() or task is None or task.path is None else task.path.parent / path


async def _attempt(agent, work, time_limit: float | None, emit) -> tuple[Any, CheckResult | None, bool]:
    """(outcome, last check, interrupted): the agent's work, ended early by a signal or the time limit."""
    from agent.loop import Outcome

    try:
        outcome, check = await _run_interruptible(work, time_limit)
        return outcome, check, False
    except asyncio.CancelledError:
        return None, None, True
    except TimeoutError:
        outcome = Outcome("limit", "", agent.turn, f"reached the time limit of {time_limit:.0f} s")
        emit(ErrorEvent("limit", outcome.error))
        return outcome, None, False


async def _run_interruptible(coro, time_limit: float | None):
    """Run the agent as a task that SIGINT and SIGTERM cancel, so it can leave a consistent history."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(coro)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await asyncio.wait_for(task, time_limit) if time_limit else await task
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _result(outcome, check: dict | None, interrupted: bool) -> tuple[str, int]:
    if interrupted or outcome is None:
        return "interrupted", EXIT["interrupted"]
    if outcome.status == "limit":
        return "limit", EXIT["limit"]
    if outcome.status == "error":
        return "error", EXIT["config"] if outcome.error.startswith("ContextTooSmall") else EXIT["server"]
    if outcome.status != "completed" or (check is not None and not check.passed):
        return "failed", EXIT["failed"]
    return "completed", EXIT["success"]


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
        lines.append(f"check `{check.command}` {verdict}")
        if not check.passed:
            lines += ["  " + ln for ln in check.output.strip().splitlines()[-15:]]
    if outcome and outcome.error:
        lines.append(f"stopped: {outcome.error}")
    lines.append(f"{status} · {_figures(summary)} · session {session_id}")
    lines.append(f"  agent stats {session_id}  |  agent run --resume {session_id}")
    print("\n".join(lines), file=sys.stderr)


def _start_progress(label: str):
    def progress(elapsed: float, phase: str) -> None:
        if phase == "ready":
            print(f"[{elapsed:4.1f}s] {label}: ready", file=sys.stderr, flush=True)

    return progress


def _announce_build() -> None:
    print(
        "the embedded llama-server is not built yet: building it once (about 6 min on 2 cores)",
        file=sys.stderr,
    )


def cmd_run(args: Any, settings: Settings) -> int:
    from agent.llm import LLMError

    try:
        return asyncio.run(run_task(args, settings))
    except LLMError as exc:  # the server failed before the session could start
        error = AgentError(
            f"the model server failed: {exc}", fix="`agent server status` and `agent server logs` show it."
        )
        error.exit_code = EXIT["server"]
        exc = error
        if args.json:
            print(
                json.dumps({"type": "error", "error": "server", "message": str(exc), "fatal": True}),
                flush=True,
            )
        raise exc from None
    except AgentError as exc:
        if args.json:
            kind = "config" if exc.exit_code == EXIT["config"] else "server"
            print(
                json.dumps({"type": "error", "error": kind, "message": str(exc), "fatal": True}), flush=True
            )
        raise
