"""The interactive session behind the TUI: its server connection and session, kept by the session host
(agent/session/host.py), its recorder and MCP.

It knows nothing of Textual. Blocking work (starting or stopping llama-server) is plain methods the
app runs in a thread; the rest is async and runs in the app's event loop. Everything the agent does
leaves through `emit`, exactly as in `agent run`, and is recorded the same way, so `agent sessions`,
`agent stats` and `--resume` see interactive sessions too.

Like `agent run`, it holds the workspace's lock (agent/store/lock.py) from before the server starts, and its
session's once that is known: a second agent in the folder is refused with a message naming this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import AgentError
from agent.events import Event, Notice
from agent.server.profiles import ServerProfile
from agent.session.connect import Connection, StartReport, session_profile
from agent.session.host import HostedSession, SessionHost
from agent.session.live import PromptResult, SessionSetup
from agent.session.parts import Agent, Approver, Limits, Outcome, Workbench
from agent.settings.config import PROJECT_CONFIG, Settings, state_dir
from agent.store.lock import AgentLocks
from agent.store.recorder import SessionRecorder
from agent.store.transcripts import SessionRecord, load_session, recorded_sessions
from tools.mcp import MCPServers


@dataclass
class SessionOptions:
    """What `agent` was started with; the TUI's equivalent of a task file's front matter."""

    profile: str | None = None
    base_url: str | None = None
    approval: str | None = None
    keep_server: bool = False
    max_turns: int | None = None


@dataclass
class InteractiveSession:
    settings: Settings
    workspace: Path
    options: SessionOptions
    emit_ui: Callable[[Event], None]
    approve: Approver
    profile: ServerProfile | None = None
    connection: Connection | None = None
    hosted: HostedSession | None = None  # the session open now, or the last one
    outcomes: list[Outcome] = field(default_factory=list)
    carry_over: bool = False  # the next session continues the last one's conversation (/restart, /profile)
    _mcp: MCPServers | None = None
    _locks: AgentLocks | None = None

    def __post_init__(self) -> None:
        self.workspace = self.workspace.resolve()
        self.workbench = Workbench(self.workspace)
        self.host = SessionHost(keep_running=self.options.keep_server)

    @property
    def open_session(self) -> HostedSession | None:
        return self.hosted if self.hosted is not None and not self.hosted.closed else None

    @property
    def agent(self) -> Agent | None:
        return self.hosted.live.agent if self.hosted is not None else None

    @property
    def session_id(self) -> str:
        return self.hosted.session_id if self.hosted is not None else ""

    @property
    def recorder(self) -> SessionRecorder | None:
        return self.open_session.live.recorder if self.open_session is not None else None

    # ------------------------------------------------------------------ the server (blocking: a thread)
    def resolve(self, resume: str | None = None) -> ServerProfile:
        """The profile to start, as every front end picks it: `agent -p`'s or `--base-url`'s, else what
        the session to `resume` last ran on, else the settings'."""
        record = load_session(state_dir(), resume) if resume else None
        self.profile = session_profile(
            self.settings, self.workspace, self.options.profile, self.options.base_url, record,
            say=lambda why: self.emit(Notice(why)),
        )  # fmt: skip
        return self.profile

    def connect(self, progress: StartReport) -> Connection:
        """Start the profile's server (or reuse or attach to one) and wait until it is ready.
        `progress` gets the seconds elapsed, the loading phase and the log's last line."""
        profile = self.profile or self.resolve()
        self._hold_locks()  # before a server starts: another agent here is refused, named
        self.connection = self.host.connect(self.settings, profile, report=progress)
        return self.connection

    def cancel_start(self) -> None:
        self.host.cancel_start()

    def disconnect(self) -> None:
        """Stop the server if this session started it; leave one it found running."""
        connection, self.connection = self.connection, None
        if connection is not None:
            self.host.disconnect(connection)
        self._release_locks()

    def _hold_locks(self, session_id: str = "") -> None:
        """The workspace's lock (and the session's, given its id); WorkspaceBusy names the holder."""
        if self._locks is None:
            self._locks = AgentLocks(state_dir(), self.workspace, "agent (TUI)")
        self._locks.acquire(session_id)

    def _release_locks(self) -> None:
        if self._locks is not None:
            self._locks.release()

    # ------------------------------------------------------------------ the agent (async)
    async def open(self, resume: str | None = None) -> None:
        """A session on the connected server, through the host (agent/session/host.py). `resume`
        continues a recorded session; after /restart or /profile (`carry_over`) the last session's
        conversation goes on in a new transcript. The MCP servers live on across sessions on one server."""
        assert self.connection is not None and self.profile is not None
        if self._locks is None:
            self._locks = AgentLocks(state_dir(), self.workspace, "agent (TUI)")
        if self.carry_over and self.hosted is not None:
            approval = self.options.approval or self.hosted.live.agent.permissions.mode
            await self.host.reopen(
                self.hosted, keep_transcript=False, settings=self.settings, profile=self.profile,
                connection=self.connection, mcp=self._mcp, approval=approval,
            )  # fmt: skip
            self.carry_over = False
        else:
            record = load_session(state_dir(), resume) if resume else None
            setup = SessionSetup(
                self.settings, self.workspace, self.profile, "agent (TUI)", approve=self.approve,
                approval=self.options.approval,
                limits=Limits(max_turns=self.options.max_turns or self.settings.max_turns), resume=record,
                trust_notice=False,  # the app says it, once per run and after a resumed session's replay
                workbench=self.workbench, connection=self.connection, locks=self._locks, mcp=self._mcp,
            )  # fmt: skip
            self.hosted = await self.host.open(setup, lambda event: self.emit_ui(event))
        live = self.hosted.live
        live.owns_mcp = False  # closed by `close`, unless another session on this server follows
        self._mcp = live.mcp

    def emit(self, event: Event) -> None:
        if self.open_session is not None and not self.open_session.live.finished:
            self.open_session.live.emit(event)
        else:
            self.emit_ui(event)

    async def ask(self, text: str) -> PromptResult:
        """One user prompt, the one way every front end sends it (LiveSession.prompt: the task message,
        the project's check loop, the changes, the auto-commit). Cancelling the task (Esc) interrupts
        it; the loop leaves a history the next prompt can continue."""
        assert self.open_session is not None
        result = await self.open_session.live.prompt(text)
        self.outcomes.append(result.outcome)
        return result

    async def close(self, keep_locks: bool = False) -> None:
        """End the recorded session and the MCP servers (the server itself: `disconnect`), and let go
        of the workspace unless another session follows at once (`keep_locks`)."""
        if self.open_session is not None:
            final = self.outcomes[-1].final if self.outcomes else ""
            await self.host.close(self.open_session, "completed", final)
        if self._mcp is not None:
            await self._mcp.close()
            self._mcp = None
        if not keep_locks:
            self._release_locks()

    async def stop_server(self) -> None:
        """/profile and /restart: the session closed, its conversation kept for the next one, and the
        server stopped if this session started it."""
        self.carry_over = self.hosted is not None
        await self.close()
        await asyncio.to_thread(self.disconnect)

    async def restart_session(self, resume: str | None = None) -> None:
        """/clear and /resume: end this recorded session and open another on the same server."""
        mcp, self._mcp = self._mcp, None  # MCP servers live on across sessions
        await self.close(keep_locks=True)
        self._mcp = mcp
        self.hosted = None
        await self.open(resume=resume)

    # ------------------------------------------------------------------ what slash commands need
    @property
    def context_used(self) -> tuple[int, int] | None:
        if self.agent is None or self.agent.context is None:
            return None
        return self.agent.context.estimate(self.agent.messages), self.agent.context.n_ctx

    def checkpoint_count(self) -> int:
        return len(self.workbench.checkpoints.list()) if self.workbench.checkpoints else 0

    def save_rule(self, tool: str, pattern: str) -> Path:
        """An "always" answer kept in the project's config, for the next sessions too."""
        import tomlkit

        path = self.workspace / PROJECT_CONFIG
        path.parent.mkdir(parents=True, exist_ok=True)
        document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() else tomlkit.document()
        permissions = document.setdefault("permissions", tomlkit.table())
        allow = permissions.setdefault("allow", tomlkit.table())
        rules = allow.setdefault(tool, tomlkit.array())
        if pattern not in rules:
            rules.append(pattern)
        path.write_text(tomlkit.dumps(document), encoding="utf-8")
        return path

    def recent_sessions(self, limit: int = 10) -> list[SessionRecord]:
        return workspace_sessions(self.workspace, limit)


def workspace_sessions(workspace: Path, limit: int = 10) -> list[SessionRecord]:
    """The workspace's recorded sessions, newest first, whichever front end recorded them."""
    found = []
    for summary in itertools.islice(recorded_sessions(state_dir(), workspace), limit):
        with contextlib.suppress(AgentError):  # (a transcript that broke since it was listed)
            found.append(load_session(state_dir(), summary.session_id))
    return found


def newest_session(workspace: Path) -> str | None:
    """`--continue`: the id of this workspace's newest session."""
    newest = next(recorded_sessions(state_dir(), workspace), None)
    return newest.session_id if newest else None
