"""The session host: one per process, for the front ends that keep sessions open (the TUI, ACP).

It owns the server connections, one per profile: started (or attached to) once, in a thread, shared by
the sessions on it and stopped when none uses it any more. It opens sessions through `open_session`,
reopens one with its history (on another profile or action protocol; as its own transcript, or as a new
one the conversation is carried into), switches a session's profile, and runs slash commands through
the one table (`slash_commands.dispatch`). A front end keeps only what is its own: how it shows a start,
an event, a reply.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from agent.errors import AgentError, ConfigError, LLMError, first_line
from agent.events import Compacted, Event, Notice
from agent.server.profiles import ServerProfile, get_profile
from agent.session import slash_commands
from agent.session.connect import Connection, StartReport, connect, last_log_line
from agent.session.live import LiveSession, SessionSetup, open_session
from agent.session.parts import Workbench
from agent.session.slash_commands import CommandTarget, OwnRun, Reply
from agent.settings.config import Settings, load_settings, state_dir
from agent.store.transcripts import load_session

CARRIED_OVER = "carried over from the previous server"


class StartCancelled(AgentError):
    """A server's start was called off (the user quit, the client went) while it loaded."""

    def __init__(self) -> None:
        super().__init__("the server's start was called off", "It was stopped while it loaded.")


@dataclass
class HostedSession:
    """A session the host opened. It outlives its reopenings: after a profile switch it holds the new
    `live` session, so what a front end keeps of it stays valid; `closed` once it ended for good."""

    live: LiveSession
    setup: SessionSetup  # what it was opened with: a reopening starts from it
    emit: Callable[[Event], None]
    stack: AsyncExitStack
    closed: bool = False

    @property
    def session_id(self) -> str:
        return self.live.session_id

    @property
    def workspace(self) -> Path:
        return self.live.workspace

    @property
    def connection(self) -> Connection:
        return self.live.connection


def _profile_key(profile: ServerProfile) -> str:
    return f"{profile.name}:{profile.port}:{profile.base_url or ''}"


ProgressReport = Callable[[str, float, str, str], None]  # a start's progress, the profile's name first


class SessionHost:
    def __init__(self, keep_running: bool = False, progress: ProgressReport | None = None) -> None:
        self.keep_running = keep_running  # servers started here outlive the process (`agent --keep-server`)
        self.progress = progress  # how a start reports when its caller hands in no `report`
        self.sessions: dict[str, HostedSession] = {}
        self.connections: dict[str, Connection] = {}
        # Each connection in a stack of its own (closed when no session uses it) inside `_servers`, which
        # closes them all when the process ends, a start cut short too.
        self._servers = ExitStack()
        self._stacks: dict[str, ExitStack] = {}
        # Starts run here, not in asyncio's pool: a caller that goes mid-start cancels its wait, not the
        # thread, and the shutdown must wait for the thread before it closes what it opened.
        self._starter = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agent-server-start")
        self._starting: dict[str, asyncio.Future] = {}
        self._cancelled = False
        self.closing = False

    # ------------------------------------------------------------------ connections
    def connect(
        self, settings: Settings, profile: ServerProfile, report: StartReport | None = None
    ) -> Connection:
        """The profile's server: the one open already, else started (or attached to) now and kept. It
        blocks while the server loads (run it in a thread); `report` hears of its progress, and the
        start stops at its next report once `cancel_start` or `shutdown` is called."""
        key = _profile_key(profile)
        if key in self.connections:
            return self.connections[key]
        self._cancelled = False
        if report is None and self.progress is not None:
            report = functools.partial(self.progress, profile.name)

        def checked(elapsed: float, phase: str, log_line: str) -> None:
            if self._cancelled or self.closing:  # raising here makes the start stop the half-started server
                raise StartCancelled()
            if report is not None:
                report(elapsed, phase, log_line)

        stack = self._servers.enter_context(ExitStack())  # (before the start: a shutdown closes it too)
        connection = stack.enter_context(
            connect(settings, profile, report=checked, keep_running=self.keep_running)
        )
        self.connections[key], self._stacks[key] = connection, stack
        return connection

    async def connection(
        self, settings: Settings, profile: ServerProfile, report: StartReport | None = None
    ) -> Connection:
        """`connect` in the host's thread, so the event loop keeps flowing while the server loads; those
        who ask for the same profile meanwhile wait on the one start."""
        key = _profile_key(profile)
        if key in self.connections:
            return self.connections[key]
        if key in self._starting:
            return await asyncio.shield(self._starting[key])
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._starting[key] = future
        try:
            connection = await asyncio.wrap_future(
                self._starter.submit(self.connect, settings, profile, report)
            )
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # (retrieved: a second caller may never wait on it)
            raise
        finally:
            self._starting.pop(key, None)
        future.set_result(connection)
        return connection

    def cancel_start(self) -> None:
        """Call off a start under way (the user quit while the server loaded)."""
        self._cancelled = True

    def disconnect(self, connection: Connection) -> None:
        """Stop the server now if this process started it (one attached to is left running)."""
        for key, known in list(self.connections.items()):
            if known is connection:
                del self.connections[key]
                self._stacks.pop(key).close()

    async def release(self, connection: Connection) -> None:
        """Stop a server no open session uses any more."""
        if not any(s.connection is connection for s in self.sessions.values()):
            await asyncio.to_thread(self.disconnect, connection)

    # ------------------------------------------------------------------ sessions
    async def open(self, setup: SessionSetup, emit: Callable[[Event], None]) -> HostedSession:
        """A session opened the one way (`open_session`), kept until `close`."""
        stack = AsyncExitStack()
        live = await stack.enter_async_context(open_session(setup, emit))
        hosted = HostedSession(live, setup, emit, stack)
        self.sessions[live.session_id] = hosted
        return hosted

    async def close(self, hosted: HostedSession, outcome: str = "", final: str = "", why: str = "") -> None:
        """Finish its transcript (`outcome`; by default "interrupted" when its last prompt was cut off),
        with `why` recorded before the end, and close what it opened. Its server stays: `release`."""
        if hosted.closed:
            return
        hosted.closed = True
        if self.sessions.get(hosted.session_id) is hosted:
            del self.sessions[hosted.session_id]
        live = hosted.live
        if why and not live.finished:
            live.recorder(Notice(why))  # (the transcript's: the front end has said it its own way)
        if not live.finished:
            live.finish(outcome or ("interrupted" if live.interrupted else "completed"), final)
        await hosted.stack.aclose()

    async def reopen(self, hosted: HostedSession, keep_transcript: bool = True, **changes) -> None:
        """The session closed (if it is not yet) and opened again with its history and its approval mode,
        with `changes` to what it was opened with (SessionSetup's fields: a profile, a connection, an
        action protocol). `keep_transcript`: it goes on as a resume of its own transcript, under its id;
        else a new transcript starts with the conversation carried over, so that a resume finds it.
        If it cannot open again it stays closed, and the error is raised."""
        agent = hosted.live.agent
        history, approval = agent.messages[1:], agent.permissions.mode
        await self.close(hosted)
        if keep_transcript:
            resumed = {"resume": load_session(state_dir(), hosted.session_id), "history": None}
        else:
            resumed = {"resume": None, "history": history}
        setup = replace(hosted.setup, **{"approval": approval, **resumed, **changes})
        stack = AsyncExitStack()
        live = await stack.enter_async_context(open_session(setup, hosted.emit))
        hosted.live, hosted.setup, hosted.stack, hosted.closed = live, setup, stack, False
        self.sessions[live.session_id] = hosted
        if not keep_transcript:
            live.emit(Compacted(0, 0, 0, CARRIED_OVER, history))

    async def switch_profile(
        self, hosted: HostedSession, name: str, report: StartReport | None = None
    ) -> str:
        """Move the session to the profile `name`: its server is started first (if it fails, the session
        goes on where it was), then the session reopens on it as its own transcript, and the server it
        left is stopped when no session uses it and this process started it. What happened, in words."""
        live = hosted.live
        try:
            profile = get_profile(name, hosted.workspace)  # an unknown name raises, with the list
        except ConfigError as exc:
            return str(exc)
        if profile.name == live.profile.name:
            return f"The profile {profile.name} is in use already."
        settings = load_settings(hosted.workspace)
        try:
            connection = await self.connection(settings, profile, report)
        except AgentError as exc:
            said = start_failure(exc, profile)
            return f"{profile.name} did not start, so this session stays on {live.profile.name}: {said}"
        left = live.connection
        try:
            await self.reopen(hosted, profile=profile, settings=settings, connection=connection)
        except (AgentError, LLMError) as exc:
            return f"The session could not go on with {profile.name}: {first_line(exc)}. session/load brings it back."
        finally:
            await self.release(left)
        return (
            f"Switched to the profile {profile.name} ({hosted.live.model}); the conversation carries over. "
            f"The server of {live.profile.name} was stopped if this session had started it."
        )

    # ------------------------------------------------------------------ slash commands
    async def run_command(
        self,
        line: str,
        hosted: HostedSession | None,
        own: Mapping[str, OwnRun] | None = None,
        busy: bool = False,
        workbench: Workbench | None = None,
    ) -> Reply | None:
        """A typed slash command, through the one table (`slash_commands.dispatch`), on `hosted` (None
        while its server starts: `workbench` is the folder's then). `own`: the front end's own way of
        running some commands, by name."""
        if hosted is not None and not hosted.closed:
            target = CommandTarget(
                hosted.live.workbench, hosted.live, lambda name: self.switch_profile(hosted, name)
            )
        elif workbench is not None:
            target = CommandTarget(workbench, None, _no_switch)
        else:
            raise ValueError("a command needs the session or the folder's workbench")
        return await slash_commands.dispatch(line, target, own, busy)

    # ------------------------------------------------------------------ the end
    async def shutdown(self) -> None:
        """Every session finished whole, then the servers this process started (one loading too)."""
        self.closing = True
        for hosted in list(self.sessions.values()):
            await self.close(hosted)
        await asyncio.to_thread(
            self._starter.shutdown, wait=True
        )  # a start under way fails at its next report
        await asyncio.to_thread(self._servers.close)
        self.connections.clear()
        self._stacks.clear()


async def _no_switch(name: str) -> str:
    raise AgentError(f"/profile {name} needs the server", "It is not ready yet.")


def start_failure(exc: BaseException, profile: ServerProfile) -> str:
    """Why a server did not start, in a line: the error's first, and the log's last, the likeliest reason."""
    last = last_log_line(profile).strip()
    return first_line(exc) + (f" (log: {last})" if last else "")
