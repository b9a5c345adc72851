"""SpecAgent, the ACP agent: its answers to the protocol's requests (initialize, new and loaded sessions,
modes, prompts, cancel), the server connections it opens, the approvals it asks the client for, and each
session's updates sent in order.

Like every front end it opens its sessions through `open_session` (agent/session/live.py), turns the
session's events into ACP updates (views.py) and answers approvals by asking the client
(`session/request_permission`). It assembles nothing itself.

Sessions outlive the process: `session/list` lists the recorded ones (of a folder, whichever front end
recorded them), `session/load` reopens one and replays it to the client, `session/resume` reopens one
without the replay, and `session/close` ends one and stops the server it started when no other session
uses it. The session's settings are the client's pickers (config options, pickers.py): the profile and
the action protocol reopen the session on the other server or protocol, as /profile does.

A prompt goes the one way every front end sends it (`LiveSession.prompt`: the task message, the
project's check loop, the changes, the auto-commit); a prompt that starts with one of the slash commands
editors get (agent/session/slash_commands.py) runs that command instead. The commands are advertised in
an `available_commands_update` sent once the session/new (or session/load) response has been written:
Zed drops session updates that come before that response (zed#60199), and then refuses every command.
The SDK's stream observers (`observers=` of `acp.run_agent`) are told of each message after it is
written; `observe` watches for those responses.

One process serves many sessions. The server connection of a profile is opened once (in a thread, so
that the protocol keeps flowing while llama-server loads) and shared by the sessions on it; it is
stopped when the client goes, or when /profile moves the last session on it to another server. A
workspace has one live session per process: opening another there ends the previous one (its
transcript is finished; `session/load` brings it back), because the workspace lock refuses a second
agent in the same folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import acp
from acp import RequestError
from acp.connection import StreamDirection, StreamEvent
from acp.helpers import update_available_commands  # (in acp.helpers' __all__, not re-exported by `acp`)
from acp.schema import (
    AgentCapabilities,
    AvailableCommand,
    AvailableCommandInput,
    CloseSessionResponse,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolCallUpdate,
    UnstructuredCommandInput,
)

from agent import __version__
from agent.errors import AgentError, ConfigError, LLMError
from agent.events import (
    ApprovalAnswer,
    ApprovalRequested,
    DraftOff,
    ErrorEvent,
    Event,
    Notice,
)
from agent.frontends.acp import pickers
from agent.frontends.acp.session import AcpSession, client_servers, prompt_text
from agent.frontends.acp.views import replayed, updates
from agent.server.profiles import ServerProfile, get_profile
from agent.session import slash_commands
from agent.session.actions import protocol_names
from agent.session.connect import Connection, connect, last_log_line, server_log, session_profile
from agent.session.live import SessionSetup, open_session
from agent.session.mcp_servers import mcp_configs
from agent.session.parts import Limits, Outcome
from agent.session.slash_commands import EDITOR_COMMANDS, SlashCommand
from agent.settings.config import Settings, load_settings, state_dir
from agent.store.transcripts import SessionRecord, SessionSummary, load_session, recorded_sessions
from tools.approval import MODES

# How a prompt ended (the loop's outcome) as ACP's stop reason. The rest (a model that kept repeating
# itself, a server that died) is the agent refusing to go on: "refusal", with the reason in the answer.
STOP = {"completed": "end_turn", "limit": "max_turn_requests", "cancelled": "cancelled"}
# The requests whose response opens a session: once it is written, the session's commands follow.
OPENING_METHODS = ("session/new", "session/load", "session/resume")
LIST_PAGE = 50  # sessions per session/list answer


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class SpecAgent:
    """The ACP agent: `acp.run_agent` calls these methods, one task per request."""

    def __init__(self, profile: str | None, base_url: str | None, figures_line: bool = True) -> None:
        self.profile_name, self.base_url, self.figures_line = profile, base_url, figures_line
        self.conn: Any = None
        self.sessions: dict[str, AcpSession] = {}
        self.connections: dict[str, Connection] = {}
        # The connections this process opened, each in a stack of its own (closed when /profile leaves it
        # unused) inside `servers`, which closes them all when the client goes, a start cut short too.
        self.servers = ExitStack()
        self.server_stacks: dict[str, ExitStack] = {}
        # Starts run here, not in asyncio's pool: a client that goes mid-start cancels the request, not
        # the thread, and the shutdown must wait for the thread before it closes what it opened.
        self.starter = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agent-acp-start")
        self.starting: dict[str, asyncio.Future] = {}
        self.closing = False
        self.background: set[asyncio.Task] = set()  # progress notifications on their way
        self.opening: dict[Any, str | None] = {}  # session/new and /load requests: their session's id

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # ------------------------------------------------------------------ initialize
    async def initialize(self, protocol_version: int, client_capabilities=None, client_info=None, **_: Any):
        return InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_info=Implementation(name="spec-agent", title="spec-agent", version=__version__),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                ),
            ),
        )

    # ------------------------------------------------------------------ sessions
    async def new_session(self, cwd: str, mcp_servers=None, **_: Any) -> NewSessionResponse:
        session = await self._open(Path(cwd), mcp_servers or [], resume=None)
        return NewSessionResponse(
            session_id=session.session_id, modes=self._modes(session), config_options=self._options(session)
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers=None, **_: Any
    ) -> LoadSessionResponse:
        record = _recorded(session_id)
        if session_id in self.sessions:
            await self._close(self.sessions.pop(session_id))
        session = await self._open(Path(cwd), mcp_servers or [], resume=record)
        # The conversation as the client would have seen it, before the answer (the protocol's order).
        for event in record.events:
            for update in replayed(session, event):
                self._put(session, update)
        self._release_held(session)
        await self._flush(session)
        return LoadSessionResponse(modes=self._modes(session), config_options=self._options(session))

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers=None, **_: Any
    ) -> ResumeSessionResponse:
        """A recorded session (whichever front end recorded it) goes on without its replay: the client
        shows the conversation it kept. One open here already is answered as it is."""
        record = _recorded(session_id)
        session = self.sessions.get(session_id)
        if session is None or session.closed or session.workspace != Path(cwd).resolve():
            if session is not None:
                await self._close(self.sessions.pop(session_id))
            session = await self._open(Path(cwd), mcp_servers or [], resume=record)
        return ResumeSessionResponse(modes=self._modes(session), config_options=self._options(session))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any):
        """The recorded sessions, newest first, of the folder `cwd` when given (whichever front end
        recorded them); a page at a time, the cursor being the last id of the page before."""
        if cwd is not None and not Path(cwd).is_absolute():
            raise RequestError.invalid_params({"cwd": cwd, "message": "cwd must be an absolute path"})

        def page() -> tuple[list, str | None]:
            found = recorded_sessions(state_dir(), Path(cwd) if cwd else None)
            after = (s for s in found if not cursor or s.session_id < cursor)
            listed = list(itertools.islice(after, LIST_PAGE + 1))
            more = len(listed) > LIST_PAGE
            return listed[:LIST_PAGE], listed[LIST_PAGE - 1].session_id if more else None

        listed, next_cursor = await asyncio.to_thread(page)
        return ListSessionsResponse(sessions=[_info(s) for s in listed], next_cursor=next_cursor)

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        """End the session (a running prompt is cancelled first, its transcript finished) and stop the
        server it ran on when no other session here uses it and this process started it."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            raise RequestError.resource_not_found(session_id)
        await self._close(session, why="the client closed the session (session/close)")
        await self._release(session.live.connection)
        return CloseSessionResponse()

    # ------------------------------------------------------------------ the commands, after the response
    def observe(self, event: StreamEvent) -> None:
        """The SDK's stream observer, told of each message once it is read or written. A session/new, /load
        or /resume request is noted; once its (successful) response has been written, the session's
        commands go out, first in its queue of updates."""
        message = event.message
        if "id" not in message:
            return
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") in OPENING_METHODS:
                self.opening[message["id"]] = (message.get("params") or {}).get("sessionId")
        elif "method" not in message and message["id"] in self.opening:  # our response to one of them
            session_id = self.opening.pop(message["id"]) or (message.get("result") or {}).get("sessionId")
            session = self.sessions.get(session_id) if "result" in message else None
            if session is not None and not session.closed:
                self._put(session, update_available_commands(editor_commands()))

    async def _open(
        self,
        cwd: Path,
        client_mcp: list,
        resume: SessionRecord | None,
        profile: ServerProfile | None = None,
        approval: str | None = None,
        actions: str | None = None,
    ) -> AcpSession:
        """A session in `cwd`, new or resumed, on `profile` (a switch's; else `agent acp`'s own flags',
        else what the resumed session ran on) with `actions` (a switch's; else what the client picked for
        the resumed session, open_session's `resumed_actions`; else the profile's)."""
        if not cwd.is_absolute() or not cwd.is_dir():
            raise RequestError.invalid_params(
                {"cwd": str(cwd), "message": "cwd must be an existing absolute folder"}
            )
        workspace = cwd.resolve()
        for other in [s for s in self.sessions.values() if s.workspace == workspace]:
            await self._close(other)  # the workspace lock admits one agent per folder
            self.sessions.pop(other.session_id, None)
        early: list[str] = []  # notices from before the client knows the session: sent with its first update
        holder: list[AcpSession] = []
        try:
            settings = load_settings(workspace)
            if profile is None:
                profile = session_profile(settings, workspace, self.profile_name, self.base_url, resume, log)
            configs = mcp_configs(settings, workspace)
            configs.update(client_servers(client_mcp, taken=set(configs)))
            connection = await self._connection(settings, profile)
            setup = SessionSetup(
                settings, workspace, profile, "agent acp", approve=lambda asked: self._approve(holder[0], asked),
                approval=approval or settings.approval, limits=Limits(max_turns=settings.max_turns),
                actions=actions, options={"actions": actions} if actions else {},  # (for a resume)
                resume=resume, mcp_servers=configs, connection=connection,
            )  # fmt: skip
            stack = AsyncExitStack()
            live = await stack.enter_async_context(
                open_session(setup, lambda event: self._on_event(holder, early, event))
            )
        except (AgentError, LLMError) as exc:  # a folder another agent holds, a bad config, a dead server
            raise RequestError(-32000, _first_line(exc), {"message": str(exc)}) from exc
        session = AcpSession(
            live, workspace, stack, asyncio.Queue(), held=early, client_mcp=client_mcp, actions=actions
        )
        holder.append(session)
        session.sender = asyncio.create_task(self._send_loop(session))
        self.sessions[session.session_id] = session
        return session

    async def _connection(self, settings: Settings, profile: ServerProfile) -> Connection:
        """The profile's server, started (or attached to) once per process, in a thread: the protocol
        keeps flowing while it loads, and the client hears of its progress."""
        key = f"{profile.name}:{profile.port}:{profile.base_url or ''}"
        if key in self.connections:
            return self.connections[key]
        if key in self.starting:
            return await asyncio.shield(self.starting[key])
        loop = asyncio.get_running_loop()
        said: list[tuple[str, str]] = []

        def progress(elapsed: float, phase: str, last: str) -> None:
            if self.closing:  # the client went while the server loaded: `start` stops it
                raise AgentError("the client closed the connection while the server started")
            if said and said[-1] == (phase, last):  # (called every 0.25 s: only what changed)
                return
            said.append((phase, last))
            log(f"[{elapsed:5.1f}s] {profile.name}: {phase}  {last[:160]}")
            loop.call_soon_threadsafe(self._progress, profile.name, elapsed, phase, last)

        future: asyncio.Future = loop.create_future()
        self.starting[key] = future
        stack = self.servers.enter_context(ExitStack())  # (before the thread enters the connection in it)
        try:
            opening = connect(settings, profile, report=progress)
            started = self.starter.submit(stack.enter_context, opening)
            connection = await asyncio.wrap_future(started)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # (retrieved: a second caller may never wait on it)
            if isinstance(exc, AgentError):
                last = last_log_line(profile)
                # Clients show the message alone: it carries the log's last line, the likeliest reason.
                said = _first_line(exc) + (f" (log: {last.strip()})" if last.strip() else "")
                details = {"message": str(exc), "log": str(server_log(profile)), "log_last_line": last}
                raise RequestError(-32000, said, details) from exc
            raise
        finally:
            self.starting.pop(key, None)
        self.connections[key], self.server_stacks[key] = connection, stack
        future.set_result(connection)
        return connection

    async def _release(self, connection: Connection) -> None:
        """Stop a server no session uses any more (one this process started; an attached one is left)."""
        if any(s.live.connection is connection for s in self.sessions.values()):
            return
        for key, known in list(self.connections.items()):
            if known is connection:
                del self.connections[key]
                await asyncio.to_thread(self.server_stacks.pop(key).close)

    def _progress(self, profile: str, elapsed: float, phase: str, last: str) -> None:
        """A server that takes time to load says so: an extension notification (ACP has no standard one
        before a session exists); clients that do not know it ignore it, and stderr has it too."""
        if self.conn is not None and not self.closing:
            params = {"profile": profile, "elapsed": round(elapsed, 1), "phase": phase, "log": last}
            task = asyncio.ensure_future(
                self._quietly(self.conn.ext_notification("spec-agent/server_progress", params))
            )
            self.background.add(task)  # (a task nobody holds may be collected before it runs)
            task.add_done_callback(self.background.discard)

    @staticmethod
    async def _quietly(coro) -> None:
        with contextlib.suppress(Exception):  # the client is gone: nothing to tell
            await coro

    # ------------------------------------------------------------------ settings: modes and config options
    @staticmethod
    def _modes(session: AcpSession) -> Any:
        return pickers.modes(session.live.agent.permissions.mode)

    @staticmethod
    def _options(session: AcpSession) -> list:
        live = session.live
        return pickers.config_options(
            live.profile, live.agent.permissions.mode, live.agent.actions.mode, session.workspace
        )

    def _options_changed(self, session: AcpSession) -> None:
        self._put(session, ConfigOptionUpdate(session_update="config_option_update",
                                              config_options=self._options(session)))  # fmt: skip

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> SetSessionModeResponse:
        session = self._session(session_id)
        self._set_mode(session, mode_id, "modeId")
        self._options_changed(session)  # (a client that shows the pickers sees the mode there too)
        await self._flush(session)
        return SetSessionModeResponse()

    def _set_mode(self, session: AcpSession, mode: str, field: str) -> None:
        if mode not in MODES:
            raise RequestError.invalid_params({field: mode, "message": f"one of {', '.join(MODES)}"})
        session.live.agent.permissions.mode = mode
        session.live.recorder(Notice(f"approval mode: {mode} (set by the client)"))  # (the client knows)
        self._put(session, CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode))

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> SetSessionConfigOptionResponse:
        """A picker changed: the mode at once; the profile or the action protocol by reopening the session
        on them (as /profile does), which the session's updates tell. The answer holds every option as
        it now is (unchanged, with the reason in the updates, when the switch did not happen)."""
        session = self._session(session_id)
        if config_id == pickers.MODE:
            self._set_mode(session, str(value), "value")
        elif config_id in (pickers.PROFILE, pickers.ACTIONS):
            if session.work is not None:
                raise RequestError.invalid_request(
                    {
                        "sessionId": session_id,
                        "message": f"a prompt is running: change the {config_id} after it",
                    }
                )
            switch = self._switch_profile if config_id == pickers.PROFILE else self._switch_actions
            said = await switch(session, str(value))
            session = self.sessions.get(session_id, session)
            if session.closed:  # it closed for the switch and did not open again (session/load can)
                raise RequestError(-32000, said)
            self._put(session, acp.update_agent_message_text(said + "\n"))
        else:
            raise RequestError.invalid_params(
                {
                    "configId": config_id,
                    "message": f"one of {pickers.PROFILE}, {pickers.MODE}, {pickers.ACTIONS}",
                }
            )
        await self._flush(session)
        return SetSessionConfigOptionResponse(config_options=self._options(session))

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None or session.closed:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "message": "no such session in this agent"}
            )
        return session

    # ------------------------------------------------------------------ prompt and cancel
    async def prompt(self, session_id: str, prompt: list, **_: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.work is not None:
            raise RequestError.invalid_request(
                {"sessionId": session_id, "message": "a prompt is already running in this session"}
            )
        typed, content = prompt_text(prompt)
        self._release_held(session)
        command = slash_commands.editor_command(typed)
        work = self._command(session, *command) if command else self._ask(session, content, typed)
        session.work = asyncio.create_task(work)
        try:
            outcome = await session.work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # the connection is closing: not the client's cancel
                raise
            outcome = Outcome("cancelled", "", 0)
        finally:
            session.work = None
        session = self.sessions.get(session_id, session)  # after /profile: the session reopened
        if session.closed:
            return PromptResponse(stop_reason=STOP.get(outcome.status, "refusal"))
        for call_id in list(session.calls):  # started, never finished: the client must not show them running
            session.calls.pop(call_id)
            self._put(session, acp.update_tool_call(
                call_id, status="failed", content=[acp.tool_content(acp.text_block("(interrupted)"))]
            ))  # fmt: skip
        if outcome.status not in STOP and outcome.error:
            # Stopped by the agent itself (a model repeating itself, a server that died): say why.
            self._put(session, acp.update_agent_message_text(f"\n\n**Stopped:** {outcome.error}\n"))
        await self._flush(session)
        stop = STOP.get(outcome.status, "refusal")
        if outcome.status == "limit" and "model requests" not in outcome.error:
            stop = "max_tokens"  # the time or output-token limit
        return PromptResponse(stop_reason=stop)

    async def _ask(self, session: AcpSession, content: str, typed: str) -> Outcome:
        """One prompt, the way every front end sends one (LiveSession.prompt): the task message on the
        first, the project's check loop (each round a tool call with its output, views.py), the changes
        and the auto-commit. A cancel leaves a whole history (every started call gets a result)."""
        return (await session.live.prompt(content, typed)).outcome

    async def _command(self, session: AcpSession, command: SlashCommand, argument: str) -> Outcome:
        """A slash command typed in the editor: it runs as the TUI's does (agent/session/slash_commands.py),
        and what it says is the agent's answer."""
        live = session.live
        try:
            if command.name == "profile" and argument:
                said = await self._switch_profile(session, argument)
                self._options_changed(self.sessions.get(session.session_id, session))
            elif command.name == "profile":
                said = slash_commands.profiles_line(live.profile.name, session.workspace)
            elif command.name == "compact":
                _, said = await slash_commands.compact(live.agent)
            elif command.name == "undo":
                said = _fenced(await asyncio.to_thread(slash_commands.undo, live.workbench))
            elif command.name == "diff":
                diff = await asyncio.to_thread(slash_commands.diff, live.workbench)
                said = _fenced(diff, "diff") if diff.strip() else slash_commands.NO_DIFF
            elif command.name == "stats":
                said = _fenced("\n".join(slash_commands.stats_lines(live.session_id, live.recorder.stats)))
            elif command.name == "clear":
                live.clear()
                said = "Cleared the conversation: the next prompt starts afresh, on the same server."
            elif command.name == "mcp":
                said = _fenced("\n".join(slash_commands.mcp_lines(live.mcp)))
            else:  # (a command marked for editors that this agent does not run: a mistake of ours)
                said = f"/{command.name} does not run in editors"
        except AgentError as exc:
            said = str(exc)
        target = self.sessions.get(session.session_id, session)
        self._put(target, acp.update_agent_message_text(said + "\n"))
        return Outcome("completed", said, 0)

    async def _switch_profile(self, session: AcpSession, name: str) -> str:
        """/profile NAME, or the profile picker: the other server is started first (this session goes on
        where it was if it fails), then this session continues on it (`_reopen`), and the server it
        left is stopped when no session uses it and this process started it."""
        live = session.live
        try:
            profile = get_profile(name, session.workspace)  # an unknown name raises, with the list
        except ConfigError as exc:
            return str(exc)
        if profile.name == live.profile.name:
            return f"The profile {profile.name} is in use already."
        try:
            await self._connection(load_settings(session.workspace), profile)
        except RequestError as exc:  # it did not start: this session goes on where it was
            return f"{profile.name} did not start, so this session stays on {live.profile.name}: {exc}"
        left = live.connection
        reopened = await self._reopen(session, profile, session.actions)
        await self._release(left)
        if isinstance(reopened, str):
            return reopened
        return (
            f"Switched to the profile {profile.name} ({reopened.live.model}); the conversation carries over. "
            f"The server of {live.profile.name} was stopped if this session had started it."
        )

    async def _switch_actions(self, session: AcpSession, mode: str) -> str:
        """The action-protocol picker: the session continues (`_reopen`) with the other protocol's system
        prompt and tools, on the same server; the client's pick holds across profile switches."""
        if mode not in protocol_names():
            raise RequestError.invalid_params(
                {"value": mode, "message": f"one of {', '.join(protocol_names())}"}
            )
        if mode == session.live.agent.actions.mode:
            return f"The action protocol {mode} is in use already."
        reopened = await self._reopen(session, session.live.profile, mode)
        if isinstance(reopened, str):
            return reopened
        return f"The model now acts with {mode}; the conversation carries over."

    async def _reopen(
        self, session: AcpSession, profile: ServerProfile, actions: str | None
    ) -> AcpSession | str:
        """The session closed and opened again as a resume of its own transcript (same id, the history
        carried, the client's approval mode kept) on `profile` with `actions`; what went wrong, if it
        could not (session/load then brings it back)."""
        mode = session.live.agent.permissions.mode
        if session.work is asyncio.current_task():
            session.work = None  # (a command's own task: the close must not wait for it)
        await self._flush(session)  # what this session said so far, before its sender stops
        await self._close(session)
        self.sessions.pop(session.session_id, None)
        record = load_session(state_dir(), session.session_id)
        try:
            reopened = await self._open(
                session.workspace, session.client_mcp, resume=record, profile=profile, approval=mode,
                actions=actions,
            )  # fmt: skip
        except RequestError as exc:
            return f"The session could not go on with {profile.name}: {exc}. session/load brings it back."
        self._release_held(reopened)
        return reopened

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.work is not None:
            session.work.cancel()  # the bash tool ends its command's process group on the way out

    # ------------------------------------------------------------------ approvals
    async def _approve(self, session: AcpSession, request: ApprovalRequested) -> ApprovalAnswer:
        await self._flush(session)  # the tool call's start reaches the client before the question
        view = session.calls.get(request.call_id)
        rule = request.suggested_rule
        always = request.name if rule in ("", "*") else f"{request.name} `{rule}`"
        options = [
            PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
            PermissionOption(
                option_id="allow_always",
                name=f"Always allow {always} (this session)",
                kind="allow_always",
            ),
            PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        why = f"Needs approval: {request.reason}" + (f" (rule: `{rule}`)" if rule else "")
        tool_call = ToolCallUpdate(
            tool_call_id=request.call_id, status="pending", title=view.title if view else request.summary,
            kind=view.kind if view else None, locations=view.locations if view else None,
            content=[acp.tool_content(acp.text_block(why))],  # what clients show beside the options
        )  # fmt: skip
        response = await self.conn.request_permission(
            session_id=session.session_id,
            tool_call=tool_call,
            options=options,
            reason=request.reason,
            rule=rule,
        )
        outcome = response.outcome
        chosen = getattr(outcome, "option_id", None) if outcome.outcome == "selected" else "cancelled"
        # The answer, in the client's words, goes into the transcript beside the loop's decision (not back
        # to the client, who gave it).
        session.live.recorder(
            Notice(f"the client answered {chosen} to {request.name}: {request.summary[:200]}")
        )
        if chosen == "allow_always":
            return ApprovalAnswer("always")
        return ApprovalAnswer("yes" if chosen == "allow_once" else "no")

    # ------------------------------------------------------------------ events -> updates
    def _on_event(self, holder: list[AcpSession], early: list[str], event: Event) -> None:
        """The session's events (already recorded) as ACP updates, queued in order; a task sends them."""
        if not holder:
            if isinstance(event, Notice | DraftOff) or (isinstance(event, ErrorEvent) and not event.fatal):
                early.append(event.message)
            return
        for update in updates(holder[0], event, self.figures_line):
            self._put(holder[0], update)

    def _release_held(self, session: AcpSession) -> None:
        """The session's opening notices (a draft off, an untrusted folder), as one thought."""
        if session.held:
            self._put(session, acp.update_agent_thought_text("\n".join(session.held) + "\n"))
            session.held = []

    # ------------------------------------------------------------------ sending
    def _put(self, session: AcpSession, update: Any) -> None:
        session.outbox.put_nowait(update)

    async def _send(self, session: AcpSession, update: Any) -> None:
        self._put(session, update)
        await self._flush(session)

    async def _flush(self, session: AcpSession) -> None:
        await session.outbox.join()

    async def _send_loop(self, session: AcpSession) -> None:
        gone = False
        while True:
            update = await session.outbox.get()
            try:
                if not gone:
                    await self.conn.session_update(session_id=session.session_id, update=update)
            except Exception as exc:  # the client went: the work is wound up and recorded, unsent
                gone = True
                log(f"acp: the client no longer hears session {session.session_id}: {exc}")
            finally:
                session.outbox.task_done()

    # ------------------------------------------------------------------ closing
    async def _close(self, session: AcpSession, why: str = "") -> None:
        """Finish the recorded session ("interrupted" when its last prompt was cut off) and close it;
        `why`, when given, is recorded before the end."""
        if session.closed:
            return
        session.closed = True
        outcome = "interrupted" if session.live.interrupted or session.work else "completed"
        if session.work is not None:
            session.work.cancel()
            await asyncio.gather(session.work, return_exceptions=True)
        if why and not session.live.finished:
            session.live.recorder(Notice(why))  # (the transcript's: the client knows)
        if not session.live.finished:
            session.live.finish(outcome)
        await session.stack.aclose()
        if session.sender is not None:
            session.sender.cancel()
            await asyncio.gather(session.sender, return_exceptions=True)

    async def shutdown(self) -> None:
        """The client went (stdin closed): end every session whole, then the servers this process started."""
        self.closing = True
        for session in list(self.sessions.values()):
            await self._close(session)
        self.sessions.clear()
        await asyncio.to_thread(self.starter.shutdown, wait=True)  # a start under way fails at its next check
        await asyncio.to_thread(self.servers.close)
        self.connections.clear()
        self.server_stacks.clear()


def _info(summary: SessionSummary) -> SessionInfo:
    updated = datetime.fromtimestamp(summary.updated, UTC).isoformat(timespec="seconds")
    return SessionInfo(
        session_id=summary.session_id, cwd=summary.workspace, title=summary.title or None, updated_at=updated
    )


def _recorded(session_id: str) -> SessionRecord:
    try:
        return load_session(state_dir(), session_id)
    except AgentError as exc:
        raise RequestError.resource_not_found(session_id) from exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _fenced(text: str, language: str = "") -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def editor_commands() -> list[AvailableCommand]:
    """The slash commands editors get, as ACP names them: each with its description, and an input hint
    where it takes an argument."""
    hint = lambda c: AvailableCommandInput(UnstructuredCommandInput(hint=c.hint or c.argument))  # noqa: E731
    return [
        AvailableCommand(name=c.name, description=c.description, input=hint(c) if c.argument else None)
        for c in EDITOR_COMMANDS
    ]
