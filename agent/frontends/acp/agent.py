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
editors get runs that command instead, through the host's dispatch of the one table
(agent/session/slash_commands.py), as the TUI's commands go. The commands are advertised in
an `available_commands_update` sent once the session/new (or session/load) response has been written:
Zed drops session updates that come before that response (zed#60199), and then refuses every command.
The SDK's stream observers (`observers=` of `acp.run_agent`) are told of each message after it is
written; `observe` watches for those responses.

One process serves many sessions, through one session host (agent/session/host.py): the server
connection of a profile is opened once (in a thread, so that the protocol keeps flowing while
llama-server loads) and shared by the sessions on it; it is stopped when the client goes, or when
/profile moves the last session on it to another server. A
workspace has one live session per process: opening another there ends the previous one (its
transcript is finished; `session/load` brings it back), because the workspace lock refuses a second
agent in the same folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

import acp
from acp import RequestError
from acp.connection import StreamDirection, StreamEvent
from acp.helpers import update_available_commands  # (in acp.helpers' __all__, not re-exported by `acp`)
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from agent import __version__
from agent.errors import AgentError, LLMError, first_line
from agent.events import (
    ApprovalAnswer,
    ApprovalRequested,
    DraftOff,
    ErrorEvent,
    Event,
    Notice,
)
from agent.frontends.acp import pickers
from agent.frontends.acp.approvals import ask_client
from agent.frontends.acp.commands import editor_commands, shown
from agent.frontends.acp.recorded import recorded, sessions_page
from agent.frontends.acp.session import AcpSession, client_servers, prompt_text
from agent.frontends.acp.views import replayed, updates
from agent.server.profiles import ServerProfile
from agent.session import slash_commands
from agent.session.actions import protocol_names
from agent.session.connect import Connection, last_log_line, server_log, session_profile
from agent.session.host import SessionHost, start_failure
from agent.session.live import SessionSetup
from agent.session.mcp_servers import mcp_configs
from agent.session.parts import Limits, Outcome
from agent.session.slash_commands import SlashCommand
from agent.settings.config import Settings, load_settings
from agent.store.transcripts import SessionRecord
from tools.approval import MODES

# How a prompt ended (the loop's outcome) as ACP's stop reason. The rest (a model that kept repeating
# itself, a server that died) is the agent refusing to go on: "refusal", with the reason in the answer.
STOP = {"completed": "end_turn", "limit": "max_turn_requests", "cancelled": "cancelled"}
# The requests whose response opens a session: once it is written, the session's commands follow.
OPENING_METHODS = ("session/new", "session/load", "session/resume")


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class SpecAgent:
    """The ACP agent: `acp.run_agent` calls these methods, one task per request."""

    def __init__(self, profile: str | None, base_url: str | None, figures_line: bool = True) -> None:
        self.profile_name, self.base_url, self.figures_line = profile, base_url, figures_line
        self.conn: Any = None
        self.sessions: dict[str, AcpSession] = {}
        self.host = SessionHost(progress=self._progress_threadsafe)
        self.loop: asyncio.AbstractEventLoop | None = None  # where a start's progress is told the client
        self._said: dict[str, tuple[float, str, str]] = {}  # each profile's last progress, said once
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
        record = recorded(session_id)
        if session_id in self.sessions:
            await self._close(self.sessions.pop(session_id))
        session = await self._open(Path(cwd), mcp_servers or [], resume=record)
        # The conversation as the client would have seen it, before the answer (the protocol's order).
        for event in record.events:
            for update in replayed(session, event):
                session.put(update)
        self._release_held(session)
        await session.flush()
        return LoadSessionResponse(modes=self._modes(session), config_options=self._options(session))

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers=None, **_: Any
    ) -> ResumeSessionResponse:
        """A recorded session (whichever front end recorded it) goes on without its replay: the client
        shows the conversation it kept. One open here already is answered as it is."""
        record = recorded(session_id)
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

        return await asyncio.to_thread(sessions_page, Path(cwd) if cwd else None, cursor)

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        """End the session (a running prompt is cancelled first, its transcript finished) and stop the
        server it ran on when no other session here uses it and this process started it."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            raise RequestError.resource_not_found(session_id)
        await self._close(session, why="the client closed the session (session/close)")
        await self.host.release(session.live.connection)
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
                session.put(update_available_commands(editor_commands()))

    async def _open(
        self,
        cwd: Path,
        client_mcp: list,
        resume: SessionRecord | None,
    ) -> AcpSession:
        """A session in `cwd`, new or resumed, on `agent acp`'s own profile flags, else what the resumed
        session ran on, with the action protocol the client picked for it (open_session's
        `resumed_actions`), else the profile's."""
        if not cwd.is_absolute() or not cwd.is_dir():
            raise RequestError.invalid_params(
                {"cwd": str(cwd), "message": "cwd must be an existing absolute folder"}
            )
        workspace = cwd.resolve()
        self.loop = asyncio.get_running_loop()
        for other in [s for s in self.sessions.values() if s.workspace == workspace]:
            await self._close(other)  # the workspace lock admits one agent per folder
            self.sessions.pop(other.session_id, None)
        early: list[str] = []  # notices from before the client knows the session: sent with its first update
        holder: list[AcpSession] = []
        try:
            settings = load_settings(workspace)
            profile = session_profile(settings, workspace, self.profile_name, self.base_url, resume, log)
            configs = mcp_configs(settings, workspace)
            configs.update(client_servers(client_mcp, taken=set(configs)))
            connection = await self._connection(settings, profile)
            setup = SessionSetup(
                settings, workspace, profile, "agent acp", approve=lambda asked: self._approve(holder[0], asked),
                approval=settings.approval, limits=Limits(max_turns=settings.max_turns), resume=resume,
                mcp_servers=configs, connection=connection,
            )  # fmt: skip
            hosted = await self.host.open(setup, lambda event: self._on_event(holder, early, event))
        except (AgentError, LLMError) as exc:  # a folder another agent holds, a bad config, a dead server
            raise RequestError(-32000, first_line(exc), {"message": str(exc)}) from exc
        session = AcpSession(hosted, asyncio.Queue(), held=early)
        holder.append(session)
        session.sender = asyncio.create_task(session.send_all(self.conn, log))
        self.sessions[session.session_id] = session
        return session

    async def _connection(self, settings: Settings, profile: ServerProfile) -> Connection:
        """The profile's server, started (or attached to) once per process by the host, in a thread: the
        protocol keeps flowing while it loads, and the client hears of its progress."""
        try:
            return await self.host.connection(settings, profile)
        except AgentError as exc:
            # Clients show the message alone: it carries the log's last line, the likeliest reason.
            last = last_log_line(profile)
            details = {"message": str(exc), "log": str(server_log(profile)), "log_last_line": last}
            raise RequestError(-32000, start_failure(exc, profile), details) from exc

    def _progress_threadsafe(self, profile: str, elapsed: float, phase: str, last: str) -> None:
        """A start's progress, from the host's thread: logged, and told the client in the event loop."""
        said = self._said.get(profile)
        if said is not None and said[1:] == (phase, last) and elapsed >= said[0]:
            return  # (called every 0.25 s: only what changed; a new start begins at 0 s again)
        self._said[profile] = (elapsed, phase, last)
        log(f"[{elapsed:5.1f}s] {profile}: {phase}  {last[:160]}")
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._progress, profile, elapsed, phase, last)

    def _progress(self, profile: str, elapsed: float, phase: str, last: str) -> None:
        """A server that takes time to load says so: an extension notification (ACP has no standard one
        before a session exists); clients that do not know it ignore it, and stderr has it too."""
        if self.conn is not None and not self.host.closing:
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
        session.put(ConfigOptionUpdate(session_update="config_option_update",
                                              config_options=self._options(session)))  # fmt: skip

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> SetSessionModeResponse:
        session = self._session(session_id)
        self._set_mode(session, mode_id, "modeId")
        self._options_changed(session)  # (a client that shows the pickers sees the mode there too)
        await session.flush()
        return SetSessionModeResponse()

    def _set_mode(self, session: AcpSession, mode: str, field: str) -> None:
        if mode not in MODES:
            raise RequestError.invalid_params({field: mode, "message": f"one of {', '.join(MODES)}"})
        session.live.agent.permissions.mode = mode
        session.live.recorder(Notice(f"approval mode: {mode} (set by the client)"))  # (the client knows)
        session.put(CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode))

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
            session.put(acp.update_agent_message_text(said + "\n"))
        else:
            raise RequestError.invalid_params(
                {
                    "configId": config_id,
                    "message": f"one of {pickers.PROFILE}, {pickers.MODE}, {pickers.ACTIONS}",
                }
            )
        await session.flush()
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
        work = self._command(session, typed, *command) if command else self._ask(session, content, typed)
        session.work = asyncio.create_task(work)
        try:
            outcome = await session.work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # the connection is closing: not the client's cancel
                raise
            outcome = Outcome("cancelled", "", 0)
        finally:
            session.work = None
        if session.closed:  # a switch after which it could not open again
            return PromptResponse(stop_reason=STOP.get(outcome.status, "refusal"))
        for call_id in list(session.calls):  # started, never finished: the client must not show them running
            session.calls.pop(call_id)
            session.put(acp.update_tool_call(
                call_id, status="failed", content=[acp.tool_content(acp.text_block("(interrupted)"))]
            ))  # fmt: skip
        if outcome.status not in STOP and outcome.error:
            # Stopped by the agent itself (a model repeating itself, a server that died): say why.
            session.put(acp.update_agent_message_text(f"\n\n**Stopped:** {outcome.error}\n"))
        await session.flush()
        stop = STOP.get(outcome.status, "refusal")
        if outcome.status == "limit" and "model requests" not in outcome.error:
            stop = "max_tokens"  # the time or output-token limit
        return PromptResponse(stop_reason=stop)

    async def _ask(self, session: AcpSession, content: str, typed: str) -> Outcome:
        """One prompt, the way every front end sends one (LiveSession.prompt): the task message on the
        first, the project's check loop (each round a tool call with its output, views.py), the changes
        and the auto-commit. A cancel leaves a whole history (every started call gets a result)."""
        return (await session.live.prompt(content, typed)).outcome

    async def _command(self, session: AcpSession, line: str, command: SlashCommand, argument: str) -> Outcome:
        """A slash command typed in the editor: it runs through the host's dispatch of the one table, as the
        TUI's do, and what it says is the agent's answer."""
        switching = command.name == "profile" and bool(argument)
        session.reopening = switching  # (its opening notices come as one thought, after the switch)
        try:
            reply = await self.host.run_command(line, session.hosted)
        finally:
            session.reopening = False
        self._release_held(session)
        if switching and not session.closed:
            self._options_changed(session)
        said = shown(reply) if reply is not None else ""
        session.put(acp.update_agent_message_text(said + "\n"))
        return Outcome("completed", said, 0)

    async def _switch_profile(self, session: AcpSession, name: str) -> str:
        """The profile picker, as /profile NAME: the other server is started first (this session goes on
        where it was if it fails), then the session continues on it (agent/session/host.py)."""
        session.reopening = True
        try:
            return await self.host.switch_profile(session.hosted, name)
        finally:
            session.reopening = False
            self._release_held(session)

    async def _switch_actions(self, session: AcpSession, mode: str) -> str:
        """The action-protocol picker: the session continues (reopened as its own transcript) with the
        other protocol's system prompt and tools, on the same server; the pick holds across profile
        switches, and a resume finds it in the transcript's options."""
        if mode not in protocol_names():
            raise RequestError.invalid_params(
                {"value": mode, "message": f"one of {', '.join(protocol_names())}"}
            )
        if mode == session.live.agent.actions.mode:
            return f"The action protocol {mode} is in use already."
        profile = session.live.profile.name
        session.reopening = True
        try:
            await self.host.reopen(session.hosted, actions=mode, options={"actions": mode})
        except (AgentError, LLMError) as exc:
            return (
                f"The session could not go on with {profile}: {first_line(exc)}. session/load brings it back."
            )
        finally:
            session.reopening = False
            self._release_held(session)
        return f"The model now acts with {mode}; the conversation carries over."

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.work is not None:
            session.work.cancel()  # the bash tool ends its command's process group on the way out

    # ------------------------------------------------------------------ approvals
    async def _approve(self, session: AcpSession, request: ApprovalRequested) -> ApprovalAnswer:
        await session.flush()  # the tool call's start reaches the client before the question
        return await ask_client(self.conn, session, request)

    # ------------------------------------------------------------------ events -> updates
    def _on_event(self, holder: list[AcpSession], early: list[str], event: Event) -> None:
        """The session's events (already recorded) as ACP updates, queued in order; a task sends them."""
        if not holder or holder[0].reopening:
            if isinstance(event, Notice | DraftOff) or (isinstance(event, ErrorEvent) and not event.fatal):
                (holder[0].held if holder else early).append(event.message)
            return
        for update in updates(holder[0], event, self.figures_line):
            holder[0].put(update)

    def _release_held(self, session: AcpSession) -> None:
        """The session's opening notices (a draft off, an untrusted folder), as one thought."""
        if session.held:
            session.put(acp.update_agent_thought_text("\n".join(session.held) + "\n"))
            session.held = []

    # ------------------------------------------------------------------ closing
    async def _close(self, session: AcpSession, why: str = "") -> None:
        """Finish the recorded session ("interrupted" when its last prompt was cut off), with `why`
        recorded before the end when given, and stop sending its updates."""
        work = session.work if session.work is not asyncio.current_task() else None
        if not session.closed:
            outcome = "interrupted" if session.live.interrupted or work else "completed"
            if work is not None:
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
            await self.host.close(session.hosted, outcome, why=why)
        if session.sender is not None:
            session.sender.cancel()
            await asyncio.gather(session.sender, return_exceptions=True)

    async def shutdown(self) -> None:
        """The client went (stdin closed): end every session whole, then the servers this process started."""
        self.host.closing = True  # a start under way stops at its next report
        for session in list(self.sessions.values()):
            await self._close(session)
        self.sessions.clear()
        await self.host.shutdown()
