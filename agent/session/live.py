"""The one way to open a session: every front end (`agent run`, the TUI, `agent new`, `agent bench
--conversation`) gets its live agent from `open_session`.

In order: the workspace's lock (and the session's), the server connection, the run's secrets registered
for redaction, the model client, the recorder (transcript and telemetry), `session.started`, the
connection's notes and draft-off event, the untrusted-folder notice, the MCP servers, the agent with its
action protocol, the draft recovery, and a resumed or carried-over history after the system prompt.
Leaving it closes what it opened, in reverse; what the caller handed in (a connection, locks, MCP
servers the TUI keeps across sessions) is left open. A front end turns the session's events into its
own output and answers approvals; it never assembles a session itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.checks import CheckResult, work_until_checked
from agent.core.history import repair_history
from agent.core.llm import ModelClient, RequestGate
from agent.core.loop import Agent, Approver, Limits, Outcome
from agent.core.task_message import task_message_off_loop
from agent.core.workbench import Workbench, auto_commit_subject, changes_lines
from agent.errors import ConfigError
from agent.events import Compacted, ErrorEvent, Event, Notice, SessionFinished, SessionStarted
from agent.protocols.registry import protocol_names, protocols
from agent.server.build import Progress
from agent.server.lifecycle import StartProgress
from agent.server.profiles import ServerProfile
from agent.session.build_agent import build_agent
from agent.session.connect import Connection, connect, draft_recovery
from agent.session.mcp_servers import mcp_configs, start_mcp
from agent.settings.config import Settings, load_settings, state_dir, untrusted_check
from agent.settings.trust import untrusted_notice
from agent.store.lock import AgentLocks
from agent.store.recorder import SessionRecorder
from agent.store.redact import register_run
from agent.store.transcripts import SessionRecord, new_session_id
from tools.mcp import MCPServerConfig, MCPServers


@dataclass
class PromptResult:
    """How one prompt ended: the loop's outcome, the project's check as it last ran (None: none ran), the
    files changed (lines added and deleted) and the auto-commit's notice ("" when nothing was committed)."""

    outcome: Outcome
    check: CheckResult | None = None
    changes: list[dict] = field(default_factory=list)
    committed: str = ""


@dataclass
class LiveSession:
    """An open session: what the front end works with until it leaves `open_session`."""

    session_id: str
    profile: ServerProfile
    model: str
    connection: Connection
    client: ModelClient
    recorder: SessionRecorder
    workbench: Workbench
    mcp: MCPServers
    agent: Agent
    emit: Callable[[Event], None]
    settings: Settings
    owns_mcp: bool = True  # False: the MCP servers outlive the session (the TUI keeps them)
    finished: bool = False
    interrupted: bool = False  # the last prompt was cut off (Esc, a client's cancel, the client gone)
    outcomes: list[Outcome] = field(default_factory=list)
    _check_noticed: bool = False

    @property
    def workspace(self) -> Path:
        return self.workbench.workspace

    def finish(self, outcome: str, final: str = "", **summary: Any) -> dict[str, Any]:
        """`session.finished` with the recorder's figures (and `summary`'s additions); the transcript is
        closed after it. Returns the summary."""
        figures = {**self.recorder.summary(), **summary}
        self.emit(SessionFinished(outcome, len(self.recorder.stats), final, figures))
        self.recorder.close()
        self.finished = True
        return figures

    async def prompt(self, text: str, typed: str | None = None) -> PromptResult:
        """One prompt of a conversation, the same way in every interactive front end (the TUI, ACP):
        worked on until the model is done and, when the project declares a check, until it passes or its
        rounds run out (each failure fed back, as `agent run` does); then what changed, file by file, and
        the auto-commit. `typed`: the person's own words, when `text` adds to them (an attached file).

        The conversation's first prompt carries the environment note (and, for edit blocks, the files);
        later ones go as typed, so that the prefix the server cached stays. A cancel (Esc, the client's
        session/cancel) leaves a whole history the next prompt continues, says "interrupted" and
        raises CancelledError on."""
        agent, workbench = self.agent, self.workbench
        typed = text if typed is None else typed
        settings = self._prompt_settings()
        first = len(agent.messages) <= 1  # the system prompt alone: a new (or cleared) conversation
        workbench.task_start = None  # the changes and the auto-commit take only what this prompt does
        self.interrupted = False
        if not settings.check:
            self._notice_untrusted_check()
        try:
            message = (
                await task_message_off_loop(
                    workbench, text, agent.actions, agent.context, prefix=agent.system_prompt
                )
                if first
                else text
            )
            outcome, check = await work_until_checked(
                agent, message, settings.check, self.workspace, settings.check_rounds, self.emit, typed=typed
            )
        except asyncio.CancelledError:
            self.interrupted = True
            self.emit(ErrorEvent("interrupted", "interrupted: the model's work stopped here", fatal=False))
            raise
        self.outcomes.append(outcome)
        if check is not None and not check.passed:
            self.emit(Notice(
                f"the check `{_one_line(check.command)}` still fails, and this prompt's rounds are over"
                + ("; the work is not committed" if settings.auto_commit else "")
            ))  # fmt: skip
        # What this prompt changed, file by file, so that a large deletion cannot go unseen (as at the
        # end of `agent run`); `task_start` is this prompt's first checkpoint.
        changes = workbench.changes()
        if lines := changes_lines(changes):
            self.emit(Notice("\n".join(lines)))
        committed = ""
        passed = check is None or check.passed
        if settings.auto_commit and outcome.status == "completed" and passed:
            committed = workbench.auto_commit(auto_commit_subject(typed)) or ""
            if committed:
                self.emit(Notice(committed))
        return PromptResult(outcome, check, changes, committed)

    def _prompt_settings(self) -> Settings:
        """The settings a prompt acts on after the model's work (the check, its rounds, the auto-commit),
        read again at each prompt, in every front end alike. An editor keeps a session open for hours,
        and the project's .agent/config.toml is where a check is declared: an edit of it, or trusting
        the folder (/trust), applies from the next prompt on, without reopening the session. What the
        session was built with (approval mode, permission rules, tools, MCP servers, lint) stays as it
        was opened: the client may have changed the mode since, and the tools are running. A file that
        does not read (half edited) leaves the last good settings, and says why."""
        try:
            self.settings = load_settings(self.workspace)
        except ConfigError as exc:
            self.emit(Notice(f"the settings did not read, so this prompt goes by the last good ones: {exc}"))
        return self.settings

    def _notice_untrusted_check(self) -> None:
        """An untrusted folder's declared check does not run (it is a command): said once per session."""
        if not self._check_noticed and (declared := untrusted_check(self.workspace)):
            self._check_noticed = True
            self.emit(Notice(
                f"this folder's .agent/config.toml declares the check `{_one_line(declared)}`, which does "
                "not run: the folder is not trusted, and a check is a command. Read the file, then trust the "
                "folder (`agent trust`, or /trust in the terminal) to have each prompt's work checked."
            ))  # fmt: skip

    def clear(self, reason: str = "cleared with /clear") -> None:
        """Forget the conversation (the system prompt stays): the next prompt starts afresh, as the
        first. Recorded as a compaction to nothing, so that a resume of this session starts afresh too."""
        agent = self.agent
        dropped = len(agent.messages) - 1
        before = agent.context.estimate(agent.messages) if agent.context else 0
        del agent.messages[1:]
        self.workbench.tool_state.clear()  # what the model was shown whole: nothing any more
        if agent.context:
            agent.context.known = None
        self.emit(Compacted(before, 0, dropped, reason, []))


def _one_line(command: str, width: int = 100) -> str:
    lines = command.strip().splitlines() or [""]
    return lines[0][:width] + (" …" if len(lines) > 1 or len(lines[0]) > width else "")


def resumed_actions(record: SessionRecord) -> str | None:
    """The action protocol a resumed session was given (a task file's `actions:`, an editor's pick),
    which it goes on with unless one is named now; None: its profile's."""
    picked = (record.latest_started.get("options") or {}).get("actions")
    return picked if picked in protocols() else None


def resumed_history(record: SessionRecord) -> list[dict[str, Any]]:
    """A recorded session's history, safe to resend (tool calls closed, each with a result)."""
    messages = record.history()
    repair_history(messages)
    return messages


@dataclass
class SessionSetup:
    """What a session is opened with: `open_session`'s one argument besides where its events go.

    The first four say what and where; then how the agent works; then what it starts from; then what
    the caller already holds (used, never closed); then how a server started for it reports."""

    settings: Settings
    workspace: Path
    profile: ServerProfile
    holder: str  # who holds the workspace's lock, named to a second agent that is refused
    # the agent
    approve: Approver | None = None
    approval: str | None = None  # None: the settings'
    limits: Limits | None = None
    tool_choice: str = "auto"
    actions: str | None = None  # an action protocol's name (agent/protocols/registry.py); None: the profile's
    mcp_servers: dict[str, MCPServerConfig] | None = None  # None: the user's and the trusted project's
    # what it starts from
    resume: SessionRecord | None = None  # a recorded session to continue
    history: list[dict[str, Any]] | None = None  # a conversation carried over (a profile switch)
    task: str = ""  # recorded in session.started
    options: dict[str, Any] = field(default_factory=dict)  # the task's front matter, for a resume
    trust_notice: bool = True  # False: the front end says itself that the project files were ignored
    # the caller's own, when given: used, never closed
    workbench: Workbench | None = None
    connection: Connection | None = None
    locks: AgentLocks | None = None
    mcp: MCPServers | None = None
    request_gate: RequestGate | None = None  # what each model request waits for first (a shared prefill)
    # a server started for the session
    start_progress: StartProgress | None = None
    build_progress: Progress | None = None
    on_build: Callable[[str], None] | None = None
    keep_running: bool = False


@asynccontextmanager
async def open_session(setup: SessionSetup, emit: Callable[[Event], None]) -> AsyncIterator[LiveSession]:
    """A live session in `setup.workspace` on `setup.profile`'s server; every event goes to the
    recorder, then to `emit`. `resume` continues a recorded session; `history` carries a conversation
    over (a profile switch). `connection`, `locks` and `mcp`, when given, are the caller's."""
    settings, workspace, profile = setup.settings, setup.workspace, setup.profile
    resume, history, connection, mcp = setup.resume, setup.history, setup.connection, setup.mcp
    session_id = resume.session_id if resume else new_session_id()
    actions = setup.actions or (resumed_actions(resume) if resume else None) or profile.actions
    if actions not in protocols():  # a profile's name for one (the CLI and task files check theirs)
        raise ConfigError(
            f"profile '{profile.name}' names no action protocol '{actions}'",
            f"{profile.source or profile.name}: field 'actions': the protocols are {', '.join(protocol_names())}",
            "Fix the field, or pass --actions.",
        )
    configs = mcp_configs(settings, workspace) if setup.mcp_servers is None else setup.mcp_servers
    async with AsyncExitStack() as stack:
        # Before a server starts or a file is touched: a second agent here is refused, naming the first.
        if setup.locks is None:
            stack.enter_context(AgentLocks(state_dir(), workspace, setup.holder).holding(session_id))
        else:
            setup.locks.acquire(session_id)
        if connection is None:
            opening = connect(
                settings, profile, start_progress=setup.start_progress, build_progress=setup.build_progress,
                on_build=setup.on_build, keep_running=setup.keep_running,
            )  # fmt: skip
            connection = stack.enter_context(opening)
        register_run(connection.endpoint.api_key, configs)  # before the first event is written
        client = ModelClient(connection.endpoint, request_gate=setup.request_gate)
        stack.push_async_callback(client.close)
        model = await client.model_name()
        recorder = SessionRecorder(state_dir(), session_id, profile.name, model, profile.spec_label)
        stack.callback(recorder.close)

        def emit_recorded(event: Event) -> None:
            recorder(event)
            emit(event)

        attached = (profile.base_url or "") if profile.name == "attach" else ""
        started_event = SessionStarted(
            session_id, profile.name, model, str(workspace), setup.task[:500], bool(resume), setup.options,
            attached,
        )  # fmt: skip
        emit_recorded(started_event)
        for note in connection.notes:
            emit_recorded(Notice(note))
        if draft_off := connection.draft_off_event():
            emit_recorded(draft_off)
        if setup.trust_notice and (ignored := untrusted_notice(workspace)):
            emit_recorded(Notice(ignored))
        workbench = setup.workbench or Workbench(workspace)
        live: LiveSession | None = None
        if mcp is None:
            mcp = await start_mcp(configs, emit_recorded, state_dir() / "logs")
            ours = mcp

            async def close_mcp() -> None:
                if live is None or live.owns_mcp:
                    await ours.close()

            stack.push_async_callback(close_mcp)
            owns_mcp = True
        else:
            owns_mcp = False
        if resume is not None:
            history = resumed_history(resume)
        agent = await build_agent(
            settings, workbench, client, emit_recorded, approve=setup.approve, approval=setup.approval,
            limits=setup.limits, tool_choice=setup.tool_choice, extra_tools=mcp.tools, actions=actions,
            plan_first=profile.plan_first,
            history=history,
        )  # fmt: skip
        agent.recover = draft_recovery(connection, emit_recorded)  # a draft failing: on without it
        live = LiveSession(
            session_id, profile, model, connection, client, recorder, workbench, mcp, agent, emit_recorded,
            settings, owns_mcp=owns_mcp,
        )  # fmt: skip
        yield live
