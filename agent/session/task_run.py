"""One task worked on until its check passes, in a session opened the one way (agent/session/live.py):
what `agent run` and `agent new` both do, each turning the events into its own output.

Exit codes: agent/errors.py's ExitCode.

SIGINT and SIGTERM during the work cancel it, so that the transcript ends with `session.finished`
("interrupted") and every started tool call has a result; SIGTERM earlier (while the server starts,
say) unwinds the same way (`Terminated`), stopping a server the run started.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.checks import CheckResult, fresh_start_note, last_check, work_until_checked
from agent.core.loop import Limits, Outcome
from agent.core.task_message import task_message_off_loop
from agent.core.workbench import auto_commit_subject
from agent.errors import ConfigError, ExitCode
from agent.events import ErrorEvent, Event, Notice
from agent.server.profiles import ServerProfile
from agent.session.connect import session_profile
from agent.session.live import LiveSession, SessionSetup, open_session
from agent.session.mcp_servers import mcp_configs
from agent.session.taskfile import Task, TaskSpec, check_command_exists, load_task
from agent.session.ways import fresh_start
from agent.settings.config import Settings, load_settings, state_dir
from agent.store.transcripts import SessionRecord, load_session
from tools.approval import EDITS_UNASKED

FRESH_START_BRANCH = "agent/fresh-starts/"  # + session id and number: a stuck line's work, put aside
# What `--resume` without a task file says when the session ended on the model's answer.
RESUME_PROMPT = "Carry on with the task from where you stopped. If it is done, say so in one line."
SIGNAL_EXIT = {signal.SIGINT: ExitCode.INTERRUPTED, signal.SIGTERM: ExitCode.TERMINATED}  # 128 + the signal


@dataclass
class TaskRequest:
    """What to run: a task file, or a session to resume (or both), and what overrides the file."""

    task: Path | None = None
    resume: str | None = None
    workdir: Path | None = None
    profile: str | None = None
    base_url: str | None = None
    max_turns: int | None = None
    approval: str | None = None
    actions: str | None = None  # an action protocol's name; None: the task file's, else the profile's
    check_rounds: int | None = None
    fresh_starts: int | None = None  # None: the task file's, else the settings'
    tool_choice: str | None = None
    auto_commit: bool | None = None  # None: the settings' (`agent new` commits the work itself)
    attempts: int | None = None  # None: the task file's, else 1


@dataclass
class TaskResult:
    session_id: str
    status: str  # completed, failed, limit, error, interrupted
    exit_code: int
    outcome: Outcome | None
    check: CheckResult | None
    summary: dict[str, Any] = field(default_factory=dict)  # the recorder's figures, exit code, check, error


@dataclass
class PreparedTask:
    """A task request read and resolved: what a session on it needs, before anything starts."""

    task: Task | None
    spec: TaskSpec
    resumed: SessionRecord | None
    workdir: Path
    settings: Settings
    profile: ServerProfile
    actions: str  # the action protocol's name
    approval: str
    limits: Limits
    rounds: int  # check rounds
    fresh_starts: int  # of a line that got stuck (`work_with_fresh_starts`)
    tool_choice: str
    check: str | None  # the task file's, else the project's (.agent/config.toml, in a trusted folder)

    @property
    def started(self) -> dict[str, Any]:
        return self.resumed.latest_started if self.resumed else {}

    def session_setup(self, holder: str, workdir: Path | None = None, **more: Any) -> SessionSetup:
        """What a session on this task opens with (in `workdir`, default the task's); `more`: the
        caller's own (a connection, progress reports)."""
        return SessionSetup(
            self.settings, workdir or self.workdir, self.profile, holder, approval=self.approval,
            limits=self.limits, tool_choice=self.tool_choice, actions=self.actions,
            task=self.task.body if self.task else "",
            options=self.spec.model_dump(exclude_none=True, exclude_defaults=True),
            mcp_servers=mcp_configs(self.settings, self.workdir, self.spec.mcp), resume=self.resumed, **more,
        )  # fmt: skip

    async def first_message(self, live: LiveSession) -> str | None:
        """The task message; for a resume without a task file, None (the history goes on as it is) or,
        when the session ended on the model's answer, RESUME_PROMPT."""
        agent = live.agent
        if self.task:
            return await task_message_off_loop(
                live.workbench, self.task.body, agent.actions, agent.context, prefix=agent.system_prompt
            )
        if agent.messages[-1]["role"] == "assistant" and not agent.messages[-1].get("tool_calls"):
            # The session ended on the model's answer: sent as it is, a server continues that answer
            # (llama.cpp takes a last assistant message as a prefix), the transcript gets two answers
            # in a row, and the next resume is refused ("Cannot have 2 or more assistant messages").
            return RESUME_PROMPT
        return None


def prepare_task(
    request: TaskRequest, settings: Settings, say: Callable[[str], None] | None = None
) -> PreparedTask:
    """Read the task (or the session to resume), make the workdir, resolve the profile and the options:
    every usage or configuration error is raised here, before any server starts."""
    resumed = load_session(state_dir(), request.resume) if request.resume else None
    task = load_task(request.task) if request.task else None
    if task is None and resumed is None:
        raise ConfigError(
            "give a task file, or --resume SESSION", fix="agent run TASK.md  |  agent run --resume ID"
        )
    started = resumed.latest_started if resumed else {}
    # A resume without a task file carries on under the task's front matter (its approval mode, limits,
    # check and MCP servers: the latest given); a new task file given with --resume brings its own.
    spec = task.spec if task else TaskSpec.model_validate(started.get("options", {}))

    workdir = Path(
        request.workdir
        or (spec.workdir and _relative_to_task(spec.workdir, task))
        or started.get("workspace")
        or Path.cwd()
    )
    if workdir.exists() and not workdir.is_dir():
        raise ConfigError(f"the workdir {workdir} is not a folder")
    if not workdir.exists():
        workdir.mkdir(parents=True)  # a task may start from nothing: scaffolding a new project
        if say:
            say(f"created the workdir {workdir}")
    if workdir.resolve() != Path.cwd().resolve():  # the project config is the workspace's, not here's
        settings = load_settings(workdir)
    check = spec.check or settings.check
    if check:
        check_command_exists(check, workdir)
    if spec.lint:
        settings = settings.model_copy(update={"lint_command": spec.lint})
    named_now = request.profile or (spec.profile if task else None)  # (a resume goes on where it ran)
    profile = session_profile(settings, workdir, named_now, request.base_url, resumed, say=say)
    approval = request.approval or spec.approval or settings.approval
    if approval == "ask" and say:
        say("warning: approval mode 'ask' in a headless run: edits and commands will be refused. "
            f"Use --approval {' or '.join(EDITS_UNASKED)}.")  # fmt: skip
    limits = Limits(
        max_turns=request.max_turns or spec.max_turns or settings.max_turns, max_seconds=spec.time_limit
    )
    rounds = next(
        r for r in (request.check_rounds, spec.check_rounds, settings.check_rounds) if r is not None
    )
    fresh_starts = next(
        n for n in (request.fresh_starts, spec.fresh_starts, settings.fresh_starts) if n is not None
    )
    return PreparedTask(
        task, spec, resumed, workdir, settings, profile, request.actions or spec.actions or profile.actions,
        approval, limits, rounds, fresh_starts, request.tool_choice or spec.tool_choice or "auto", check,
    )  # fmt: skip


def start_messages(profile: ServerProfile, say: Callable[[str], None] | None):
    """SessionSetup's (and connect's) progress keywords: the server's readiness and builds, to `say`."""
    if say is None:
        return {}

    def ready(elapsed: float, phase: str) -> None:
        if phase == "ready":
            say(f"[{elapsed:4.1f}s] {profile.name}: ready")

    return {"start_progress": ready, "on_build": say}  # on_build: what is built (CPU or CUDA), how long


async def run_task(
    request: TaskRequest,
    settings: Settings,
    emit: Callable[[Event], None],
    say: Callable[[str], None] | None = None,
) -> TaskResult:
    """Run the task; every event goes to `emit`. `say`, when given, gets the lines for people that are
    no events (the workdir made, a doubtful approval mode, the server ready, a build starting)."""
    prep = prepare_task(request, settings, say)
    spec, workdir = prep.spec, prep.workdir
    setup = prep.session_setup("agent run", **start_messages(prep.profile, say))
    async with open_session(setup, emit) as live:
        agent = live.agent
        agent.request_overrides = spec.sampling.model_dump(exclude_none=True)
        work = work_with_fresh_starts(prep, live)
        outcome, check, interrupted = await _attempt(agent, work, spec.time_limit, live.emit)
        if prep.check and outcome is not None and outcome.status == "limit" and check is None:
            check, outcome = await last_check(outcome, prep.check, workdir, live.emit)  # the time limit
        say_server_fate(live, outcome)
        status, code = result_status(outcome, check, interrupted)
        auto_commit = prep.settings.auto_commit if request.auto_commit is None else request.auto_commit
        if auto_commit and status == "completed":
            note = live.workbench.auto_commit(
                auto_commit_subject(prep.task.body if prep.task else "resumed task")
            )
            if note:
                live.emit(Notice(note))
        summary = live.finish(
            status, outcome.final if outcome else "", exit_code=code,
            check=check.to_dict() if check else None, error=outcome.error if outcome else "",
            changes=live.workbench.changes(),
        )  # fmt: skip
    return TaskResult(live.session_id, status, code, outcome, check, summary)


async def work_with_fresh_starts(
    prep: PreparedTask, live: LiveSession, workdir: Path | None = None, attempt: int | None = None
) -> tuple[Outcome, CheckResult | None]:
    """The task worked (in `workdir`, default the task's) until its check passes; when the line of
    thought gets stuck (the check still fails once the model repeats itself or its rounds are over),
    started afresh up to `prep.fresh_starts` times, within the task's time limit. `attempt`: which
    attempt of several this is (agent/session/attempts.py), so that its fresh starts sample apart.

    One session is one line of thought, and once a small model is wrong in it, it stays wrong: in the
    one one-attempt run of the small suite, 9 of 11 failures ended on the same answer given three times,
    in 26 to 206 s of their 300. A fresh start clears the conversation (recorded like /clear, so a
    resume starts there too), puts the stuck line's work aside on a branch and the files back as they
    were before the task (in git; elsewhere they stay as they are), gives the task again with the line
    the check failed on, and works the other way (a plan first or not) at a warmer temperature
    (agent/session/ways.py). Parallel attempts, which start from the task's start, won where the line
    that broke a file went on from it (dataclass-field: `load_notes` moved into the class, then the
    import of it "fixed" for three rounds). Once a line passes, the branches go."""
    agent, check_command, fresh_starts = live.agent, prep.check, prep.fresh_starts
    workdir = workdir or prep.workdir
    default_plan = agent.actions.plan_first
    base = prep.spec.sampling.model_dump(exclude_none=True)
    # `typed`: the task's own words, as a front end gives what the person typed: the protocol reads the
    # files the task names from them, not from the repository shown around them.
    typed = prep.task.body if prep.task else ""
    outcome, check = await work_until_checked(
        agent, await prep.first_message(live), check_command, workdir, prep.rounds, live.emit, typed=typed
    )
    for number in range(1, fresh_starts + 1):
        stuck = outcome.status in ("completed", "repeated") and check is not None and not check.passed
        if prep.task is None or not stuck:
            break
        assert check is not None and check_command is not None
        plan, agent.request_overrides = fresh_start(
            number, default_plan, agent.actions.can_plan, base, prep.profile.sampling.temperature, attempt
        )
        agent.actions.plan_first = plan
        branch = f"{FRESH_START_BRANCH}{live.session_id}-{number}"
        undone = live.workbench.start_over(branch)
        files = f"the work so far kept as branch {branch} and undone" if undone else "the files kept"
        way = ("a plan first, " if plan else "") if agent.actions.can_plan else ""
        live.emit(Notice(
            f"stuck ({outcome.error or 'the check still fails'}): starting afresh ({number} of "
            f"{fresh_starts}), the conversation cleared, {files}, {way}at temperature "
            f"{agent.request_overrides['temperature']}"
        ))  # fmt: skip
        live.clear(f"cleared for fresh start {number}")
        note = fresh_start_note(check, undone)
        message = await task_message_off_loop(
            live.workbench,
            prep.task.body,
            agent.actions,
            agent.context,
            note=note,
            prefix=agent.system_prompt,
        )
        outcome, check = await work_until_checked(
            agent, message, check_command, workdir, prep.rounds, live.emit, typed=typed
        )
    if check is not None and check.passed:
        live.workbench.drop_set_aside()  # the stuck lines' work: not wanted once one passed
    return outcome, check


def say_server_fate(live: LiveSession, outcome: Outcome | None) -> None:
    """The request failed because the server died or was stopped: say which, and what to do. A server
    this run started is started again by a resume; one it attached to is not its own to start."""
    gone = outcome is not None and outcome.error.startswith(("ServerGone", "ServerStalled"))
    if not gone:
        return
    resume = f"`agent run --resume {live.session_id}`"
    if fate := live.connection.server_fate():
        live.emit(Notice(f"{fate}. {resume} starts it again and continues."))
    elif live.connection.handle is None:
        url, profile = live.connection.endpoint.base_url, live.connection.profile.name
        named = "--base-url" if profile == "attach" else f"profile {profile}"
        live.emit(Notice(
            f"the model server at {url} ({named}) no longer answers: it was stopped, or moved. Start it "
            f"again (or give the address it answers at now with --base-url), then {resume} continues."
        ))  # fmt: skip


def _relative_to_task(workdir: str, task: Task | None) -> Path:
    path = Path(workdir).expanduser()
    return path if path.is_absolute() or task is None or task.path is None else task.path.parent / path


async def _attempt(agent, work, time_limit: float | None, emit) -> tuple[Any, CheckResult | None, int | None]:
    """(outcome, last check, the signal that interrupted it or None): the agent's work, ended early by
    SIGINT or SIGTERM, or by the time limit."""
    received: list[int] = []
    try:
        outcome, check = await run_interruptible(work, time_limit, received)
        return outcome, check, None
    except asyncio.CancelledError:
        return None, None, received[0] if received else signal.SIGINT
    except TimeoutError:
        outcome = Outcome("limit", "", agent.turn, f"reached the time limit of {time_limit:.0f} s")
        emit(ErrorEvent("limit", outcome.error))
        return outcome, None, None


async def run_interruptible(coro, time_limit: float | None, received: list[int]):
    """Run the agent as a task that SIGINT and SIGTERM cancel, so it can leave a consistent history.
    The signal is appended to `received` (the exit code is 128 + it). The handlers in place before
    (`run_task_blocking`'s for SIGTERM, asyncio's for SIGINT) are put back afterwards."""
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


def result_status(outcome, check: CheckResult | None, interrupted: int | None) -> tuple[str, int]:
    if interrupted is not None or outcome is None:
        return "interrupted", SIGNAL_EXIT.get(interrupted, ExitCode.INTERRUPTED)
    if outcome.status == "limit":
        return "limit", ExitCode.LIMIT
    if outcome.status == "error":
        return "error", ExitCode.CONFIG if outcome.error.startswith("ContextTooSmall") else ExitCode.SERVER
    if outcome.status != "completed" or (check is not None and not check.passed):
        return "failed", ExitCode.FAILED
    return "completed", ExitCode.SUCCESS
