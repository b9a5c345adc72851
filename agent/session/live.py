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

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core.history import repair_history
from agent.core.llm import ModelClient
from agent.core.loop import Agent, Approver, Limits
from agent.core.prompt import system_prompt
from agent.core.workbench import Workbench, build_agent, mcp_configs, start_mcp
from agent.events import Event, Notice, SessionFinished, SessionStarted
from agent.protocols.base import ActionsMode
from agent.server.build import Progress
from agent.server.lifecycle import StartProgress
from agent.server.profiles import ServerProfile
from agent.session.connect import Connection, connect, draft_recovery
from agent.settings.config import Settings, state_dir
from agent.settings.trust import untrusted_notice
from agent.store.lock import AgentLocks
from agent.store.recorder import SessionRecorder
from agent.store.redact import register_run
from agent.store.transcripts import SessionRecord, new_session_id
from tools.mcp import MCPServerConfig, MCPServers


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
    owns_mcp: bool = True  # False: the MCP servers outlive the session (the TUI keeps them)
    finished: bool = False

    def finish(self, outcome: str, final: str = "", **summary: Any) -> dict[str, Any]:
        """`session.finished` with the recorder's figures (and `summary`'s additions); the transcript is
        closed after it. Returns the summary."""
        figures = {**self.recorder.summary(), **summary}
        self.emit(SessionFinished(outcome, len(self.recorder.stats), final, figures))
        self.recorder.close()
        self.finished = True
        return figures


def resumed_history(record: SessionRecord) -> list[dict[str, Any]]:
    """A recorded session's history, safe to resend (tool calls closed, each with a result)."""
    messages = record.history()
    repair_history(messages)
    return messages


@asynccontextmanager
async def open_session(
    settings: Settings,
    workspace: Path,
    profile: ServerProfile,
    emit: Callable[[Event], None],
    *,
    holder: str,
    approve: Approver | None = None,
    approval: str | None = None,
    limits: Limits | None = None,
    tool_choice: str = "auto",
    actions: ActionsMode | None = None,
    resume: SessionRecord | None = None,
    history: list[dict[str, Any]] | None = None,
    task: str = "",
    options: dict[str, Any] | None = None,
    mcp_servers: dict[str, MCPServerConfig] | None = None,
    trust_notice: bool = True,
    workbench: Workbench | None = None,
    connection: Connection | None = None,
    locks: AgentLocks | None = None,
    mcp: MCPServers | None = None,
    start_progress: StartProgress | None = None,
    build_progress: Progress | None = None,
    on_build: Callable[[str], None] | None = None,
    keep_running: bool = False,
) -> AsyncIterator[LiveSession]:
    """A live session in `workspace` on `profile`'s server; every event goes to the recorder, then to
    `emit`. `resume` continues a recorded session; `history` carries a conversation over (a profile
    switch). `mcp_servers`: the servers' configs (default: the user's, the trusted project's).
    `connection`, `locks` and `mcp`, when given, are the caller's: used, never closed. `trust_notice`
    False: the front end says itself that the folder's project files were ignored."""
    session_id = resume.session_id if resume else new_session_id()
    actions = actions or profile.actions
    configs = mcp_configs(settings, workspace) if mcp_servers is None else mcp_servers
    async with AsyncExitStack() as stack:
        # Before a server starts or a file is touched: a second agent here is refused, naming the first.
        if locks is None:
            stack.enter_context(AgentLocks(state_dir(), workspace, holder).holding(session_id))
        else:
            locks.acquire(session_id)
        if connection is None:
            opening = connect(
                settings, profile, start_progress=start_progress, build_progress=build_progress,
                on_build=on_build, keep_running=keep_running,
            )  # fmt: skip
            connection = stack.enter_context(opening)
        register_run(connection.endpoint.api_key, configs)  # before the first event is written
        client = ModelClient(connection.endpoint)
        stack.push_async_callback(client.close)
        model = await client.model_name()
        recorder = SessionRecorder(state_dir(), session_id, profile.name, model, profile.spec_label)
        stack.callback(recorder.close)

        def emit_recorded(event: Event) -> None:
            recorder(event)
            emit(event)

        attached = (profile.base_url or "") if profile.name == "attach" else ""
        started_event = SessionStarted(
            session_id, profile.name, model, str(workspace), task[:500], bool(resume), options or {}, attached
        )
        emit_recorded(started_event)
        for note in connection.notes:
            emit_recorded(Notice(note))
        if draft_off := connection.draft_off_event():
            emit_recorded(draft_off)
        if trust_notice and (ignored := untrusted_notice(workspace)):
            emit_recorded(Notice(ignored))
        workbench = workbench or Workbench(workspace)
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
            settings, workbench, client, emit_recorded, approve=approve, approval=approval, limits=limits,
            tool_choice=tool_choice, extra_tools=mcp.tools, actions=actions,
            # the system prompt of now before a resumed history: the prefix the server caches
            history=[{"role": "system", "content": system_prompt(workspace, actions)}, *history] if history else None,
        )  # fmt: skip
        agent.recover = draft_recovery(connection, emit_recorded)  # a draft failing: on without it
        live = LiveSession(
            session_id, profile, model, connection, client, recorder, workbench, mcp, agent, emit_recorded,
            owns_mcp=owns_mcp,
        )  # fmt: skip
        yield live
