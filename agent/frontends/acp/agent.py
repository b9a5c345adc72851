"""`agent acp`: the agent as an ACP (Agent Client Protocol) agent on stdin/stdout, for Zed, Toad, acpx.

Built on PyPI's `agent-client-protocol` (0.12, `import acp`). Like every front end it opens its sessions
through `open_session` (agent/session/live.py), turns the session's events into ACP updates and answers
approvals by asking the client (`session/request_permission`). It assembles nothing itself.

stdout is the protocol's alone: the real stdout is kept for it and file descriptor 1 is pointed at stderr
before the first message is read, so a stray print, or a child process that writes to its inherited stdout,
cannot corrupt the stream. Logs go to stderr (editors keep an agent's stderr in their logs).

One process serves many sessions. The server connection of a profile is opened once (in a thread, so
that the protocol keeps flowing while llama-server loads) and shared by the sessions on it; it is
stopped when the client goes. A workspace has one live session per process: opening another there
ends the previous one (its transcript is finished; `session/load` brings it back), because the
workspace lock refuses a second agent in the same folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from argparse import Namespace
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp import RequestError
from acp._transport import NdjsonTransport  # the SDK's line framing; pinned <0.13 in pyproject
from acp.schema import (
    AgentCapabilities,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    SseMcpServer,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallUpdate,
    UsageUpdate,
)
from acp.task import MessageSender, TaskSupervisor

from agent import __version__
from agent.core.llm import LLMError
from agent.core.loop import Limits, Outcome
from agent.core.workbench import mcp_configs
from agent.errors import AgentError
from agent.events import (
    ApprovalAnswer,
    ApprovalRequested,
    AssistantMessage,
    DraftOff,
    ErrorEvent,
    Event,
    Notice,
    PermissionDecided,
    ReasoningDelta,
    TextDelta,
    ToolCallStarted,
    ToolFinished,
    TurnCompleted,
    UserMessage,
)
from agent.server.lifecycle import log_tail
from agent.server.profiles import ServerProfile
from agent.session.connect import Connection, connect, resolve_profile
from agent.session.live import LiveSession, open_session
from agent.settings.config import Settings, load_settings, state_dir
from agent.store.telemetry import TurnStats
from agent.store.transcripts import load_session
from tools.mcp import MCPServerConfig
from tools.permissions import MODES

MODE_NAMES = {
    "ask": ("Ask", "Reads run; edits and commands ask first."),
    "auto-edit": ("Auto-edit", "Reads and edits run; commands ask first."),
    "full-auto": ("Full auto", "Everything runs, except what is dangerous or denied."),
    "read-only": ("Read-only", "Only reads run; nothing may change."),
}
FIGURES_META = "spec-agent/figures"  # the `_meta` key of a usage update
# How a prompt ended (the loop's outcome) as ACP's stop reason. The rest (a model that kept repeating
# itself, a server that died) is the agent refusing to go on: "refusal", with the reason in the answer.
STOP = {"completed": "end_turn", "limit": "max_turn_requests", "cancelled": "cancelled"}


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------- the tool calls
def tool_kind(name: str, effect: str) -> str:
    if name in ("grep", "list_files"):
        return "search"
    if name.startswith("mcp__"):
        return "fetch"  # a call out to another server
    return {"read": "read", "edit": "edit", "exec": "execute"}.get(effect, "other")


def tool_title(name: str, arguments: Any, summary: str) -> str:
    args = arguments if isinstance(arguments, dict) else {}
    path = args.get("path")
    titles = {
        "read_file": f"Read {path}",
        "write_file": f"Write {path}",
        "edit_file": f"Edit {path}",
        "multi_edit": f"Edit {path}",
        "list_files": f"List files in {path or '.'}",
        "grep": f"Search for `{args.get('pattern', summary)}`" + (f" in {path}" if path else ""),
        "bash": f"Run `{summary}`",
        "git_status": "git status",
        "git_diff": "git diff",
        "git_log": "git log",
    }
    title = titles.get(name) or (f"{name} {summary}".strip())
    return title if len(title) <= 200 else title[:199] + "…"


@dataclass
class CallView:
    """What the client has been told of one tool call, and the file's text before an edit."""

    kind: str
    title: str
    locations: list[ToolCallLocation]
    path: Path | None = None
    old_text: str | None = None


def _read_text(path: Path | None) -> str | None:
    try:
        return path.read_text(encoding="utf-8") if path and path.is_file() else None
    except (OSError, UnicodeDecodeError):
        return None


# ---------------------------------------------------------------------------------- one session
@dataclass
class AcpSession:
    live: LiveSession
    workspace: Path
    stack: AsyncExitStack
    outbox: asyncio.Queue
    sender: asyncio.Task | None = None
    work: asyncio.Task | None = None  # the running prompt
    calls: dict[str, CallView] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)  # notices from before the client knew the session
    prompts: int = 0
    interrupted: bool = False  # the last prompt was cut off (a cancel, the client gone)
    closed: bool = False

    @property
    def session_id(self) -> str:
        return self.live.session_id


class SpecAgent:
    """The ACP agent: `acp.run_agent` calls these methods, one task per request."""

    def __init__(self, profile: str | None, base_url: str | None, figures_line: bool = True) -> None:
        self.profile_name, self.base_url, self.figures_line = profile, base_url, figures_line
        self.conn: Any = None
        self.sessions: dict[str, AcpSession] = {}
        self.connections: dict[str, Connection] = {}
        self.servers = ExitStack()  # the connections this process opened, closed when the client goes
        # Starts run here, not in asyncio's pool: a client that goes mid-start cancels the request, not
        # the thread, and the shutdown must wait for the thread before it closes what it opened.
        self.starter = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agent-acp-start")
        self.starting: dict[str, asyncio.Future] = {}
        self.closing = False
        self.background: set[asyncio.Task] = set()  # progress notifications on their way

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
            ),
        )

    # ------------------------------------------------------------------ sessions
    async def new_session(self, cwd: str, mcp_servers=None, **_: Any) -> NewSessionResponse:
        session = await self._open(Path(cwd), mcp_servers or [], resume=None)
        return NewSessionResponse(session_id=session.session_id, modes=self._modes(session))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers=None, **_: Any
    ) -> LoadSessionResponse:
        try:
            record = load_session(state_dir(), session_id)
        except AgentError as exc:
            raise RequestError.resource_not_found(session_id) from exc
        if session_id in self.sessions:
            await self._close(self.sessions.pop(session_id))
        session = await self._open(Path(cwd), mcp_servers or [], resume=record)
        # The conversation as the client would have seen it, before the answer (the protocol's order).
        for event in record.events:
            self._replay(session, event)
        self._release_held(session)
        await self._flush(session)
        return LoadSessionResponse(modes=self._modes(session))

    async def _open(self, cwd: Path, client_mcp: list, resume) -> AcpSession:
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
            started = resume.latest_started if resume else {}
            profile = resolve_profile(
                settings, self.profile_name or started.get("profile"),
                self.base_url or (None if self.profile_name else started.get("base_url") or None),
                workspace, say=log,
            )  # fmt: skip
            configs = mcp_configs(settings, workspace)
            configs.update(client_servers(client_mcp, taken=set(configs)))
            connection = await self._connection(settings, profile)
            stack = AsyncExitStack()
            live = await stack.enter_async_context(
                open_session(
                    settings, workspace, profile, lambda event: self._on_event(holder, early, event),
                    holder="agent acp", approve=lambda request: self._approve(holder[0], request),
                    approval=settings.approval, limits=Limits(max_turns=settings.max_turns), resume=resume,
                    mcp_servers=configs, connection=connection,
                ),
            )  # fmt: skip
        except (AgentError, LLMError) as exc:  # a folder another agent holds, a bad config, a dead server
            raise RequestError(-32000, _first_line(exc), {"message": str(exc)}) from exc
        session = AcpSession(live, workspace, stack, asyncio.Queue(), held=early)
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
        log_path = state_dir() / "logs" / f"{profile.name}-{profile.port}.log"

        said: list[tuple[str, str]] = []

        def progress(elapsed: float, phase: str) -> None:
            if self.closing:  # the client went while the server loaded: `start` stops it
                raise AgentError("the client closed the connection while the server started")
            last = (log_tail(log_path, 1) or [""])[0]
            if said and said[-1] == (phase, last):  # (called every 0.25 s: only what changed)
                return
            said.append((phase, last))
            log(f"[{elapsed:5.1f}s] {profile.name}: {phase}  {last[:160]}")
            loop.call_soon_threadsafe(self._progress, profile.name, elapsed, phase, last)

        future: asyncio.Future = loop.create_future()
        self.starting[key] = future
        try:
            opening = connect(settings, profile, start_progress=progress)
            started = self.starter.submit(self.servers.enter_context, opening)
            connection = await asyncio.wrap_future(started)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # (retrieved: a second caller may never wait on it)
            if isinstance(exc, AgentError):
                last = (log_tail(log_path, 1) or [""])[0]
                # Clients show the message alone: it carries the log's last line, the likeliest reason.
                said = _first_line(exc) + (f" (log: {last.strip()})" if last.strip() else "")
                details = {"message": str(exc), "log": str(log_path), "log_last_line": last}
                raise RequestError(-32000, said, details) from exc
            raise
        finally:
            self.starting.pop(key, None)
        self.connections[key] = connection
        future.set_result(connection)
        return connection

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

    @staticmethod
    def _modes(session: AcpSession) -> SessionModeState:
        return SessionModeState(
            current_mode_id=session.live.agent.permissions.mode,
            available_modes=[
                SessionMode(id=m, name=MODE_NAMES[m][0], description=MODE_NAMES[m][1]) for m in MODES
            ],
        )

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> SetSessionModeResponse:
        session = self._session(session_id)
        if mode_id not in MODES:
            raise RequestError.invalid_params({"modeId": mode_id, "message": f"one of {', '.join(MODES)}"})
        session.live.agent.permissions.mode = mode_id
        session.live.recorder(Notice(f"approval mode: {mode_id} (set by the client)"))  # (the client knows)
        await self._send(
            session, CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id)
        )
        return SetSessionModeResponse()

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
        session.work = asyncio.create_task(self._ask(session, content, typed))
        try:
            outcome = await session.work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # the connection is closing: not the client's cancel
                raise
            outcome = Outcome("cancelled", "", 0)
        finally:
            session.work = None
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
        """One prompt worked on until the model is done, as the TUI's: the first prompt carries the
        environment note (and, for edit blocks, the files); later ones go as typed, so the prefix stays
        cached. A cancel leaves a whole history (every started call gets a result) and says so."""
        live, agent = session.live, session.live.agent
        first = session.prompts == 0 and len(agent.messages) <= 1
        session.prompts += 1
        message = (
            live.workbench.task_message(content, live.profile.actions, agent.context) if first else content
        )
        live.workbench.task_start = None  # auto-commit takes only what this prompt changes
        session.interrupted = False
        try:
            outcome = await agent.run(message, typed=typed)
        except asyncio.CancelledError:
            session.interrupted = True
            live.emit(ErrorEvent("interrupted", "interrupted: the model's work stopped here", fatal=False))
            raise
        if load_settings(session.workspace).auto_commit and outcome.status == "completed":
            note = live.workbench.auto_commit(f"agent: {typed.splitlines()[0][:60] if typed else 'prompt'}")
            if note:
                live.emit(Notice(note))
        return outcome

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
        for update in self._convert(holder[0], event):
            self._put(holder[0], update)

    def _release_held(self, session: AcpSession) -> None:
        """The session's opening notices (a draft off, an untrusted folder), as one thought."""
        if session.held:
            self._put(session, acp.update_agent_thought_text("\n".join(session.held) + "\n"))
            session.held = []

    def _convert(self, session: AcpSession, event: Event):
        if isinstance(event, TextDelta):
            yield acp.update_agent_message_text(event.text)
        elif isinstance(event, ReasoningDelta):
            yield acp.update_agent_thought_text(event.text)
        elif isinstance(event, ToolCallStarted):
            args = event.arguments if isinstance(event.arguments, dict) else {}
            effect = self._effect(session, event.name)
            path = session.workspace / args["path"] if isinstance(args.get("path"), str) else None
            view = CallView(
                tool_kind(event.name, effect), tool_title(event.name, event.arguments, event.summary),
                [ToolCallLocation(path=str(path))] if path else [], path,
                _read_text(path) if effect == "edit" else None,
            )  # fmt: skip
            session.calls[event.call_id] = view
            yield acp.start_tool_call(
                event.call_id, view.title, kind=view.kind, status="pending", locations=view.locations,
                raw_input=event.arguments,
            )  # fmt: skip
        elif isinstance(event, PermissionDecided):
            if event.decision == "allow":
                yield acp.update_tool_call(event.call_id, status="in_progress")
            # (a refusal ends the call: its result, "Not run: ...", follows and marks it failed)
        elif isinstance(event, ToolFinished):
            view = session.calls.pop(event.call_id, None)
            content: list[Any] = []
            if view and view.kind == "edit" and event.ok and view.path is not None:
                new_text = _read_text(view.path)
                if new_text is not None:
                    content.append(acp.tool_diff_content(str(view.path), new_text, view.old_text))
            output = event.output if len(event.output) <= 8000 else event.output[:8000] + "\n…"
            if view is None or view.kind != "edit" or not event.ok:
                fence = "```" if view and view.kind == "execute" else ""
                text = f"{fence}\n{output}\n{fence}" if fence else output
                content.append(acp.tool_content(acp.text_block(text)))
            yield acp.update_tool_call(
                event.call_id, status="completed" if event.ok else "failed", content=content,
                raw_output={"ok": event.ok, "seconds": round(event.seconds, 2), **event.display},
            )  # fmt: skip
        elif isinstance(event, TurnCompleted):
            yield self._usage(session, event.stats)
            if self.figures_line and (line := event.stats.summary()):
                # For clients that show text only: the TUI's dim line, in italics.
                yield acp.update_agent_message_text(f"\n\n*turn {event.turn} · {line}*\n\n")
        elif isinstance(event, Notice | DraftOff):
            yield acp.update_agent_thought_text(f"\n{event.message}\n")
        elif isinstance(event, ErrorEvent) and event.error != "interrupted":
            yield acp.update_agent_thought_text(f"\n[{event.error}] {event.message}\n")
        elif isinstance(event, AssistantMessage | UserMessage):
            return

    def _usage(self, session: AcpSession, stats: TurnStats) -> UsageUpdate:
        agent = session.live.agent
        size = agent.context.n_ctx if agent.context else 0
        used = (stats.prompt_tokens or 0) + (stats.completion_tokens or 0)
        if not used and agent.context:
            used = agent.context.estimate(agent.messages)
        figures = {
            "generation_tokens_per_second": stats.generation_tokens_per_second,
            "prefill_tokens_per_second": stats.prompt_per_second,
            "draft_acceptance": stats.acceptance,
            "cache_reuse": stats.cache_reuse,
            "output_tokens": stats.output_tokens,
            "ttft_s": stats.ttft_s,
            "summary": stats.summary(),
        }
        return UsageUpdate(
            session_update="usage_update", used=used, size=max(size, used), field_meta={FIGURES_META: figures}
        )

    @staticmethod
    def _effect(session: AcpSession, name: str) -> str:
        """read, edit or exec; a tool the registry does not know (a misspelt call) counts as exec."""
        return getattr(session.live.agent.tools.tools.get(name), "effect", "exec")

    def _replay(self, session: AcpSession, event: dict[str, Any]) -> None:
        """A recorded event as the client saw it live (load_session): prompts, answers, tool calls."""
        kind = event["type"]
        if kind == "user.message":
            self._put(session, acp.update_user_message_text(event.get("typed") or event["content"]))
        elif kind == "assistant.message" and event["content"].strip():
            self._put(session, acp.update_agent_message_text(event["content"]))
        elif kind == "tool.call":
            name, arguments = event["name"], event.get("arguments")
            title = tool_title(name, arguments, event.get("summary", ""))
            self._put(session, acp.start_tool_call(
                event["call_id"], title, kind=tool_kind(name, self._effect(session, name)), status="pending",
                raw_input=arguments,
            ))  # fmt: skip
        elif kind == "tool.result":
            output = acp.tool_content(acp.text_block(event.get("output", "")[:8000]))
            status = "completed" if event.get("ok") else "failed"
            self._put(session, acp.update_tool_call(event["call_id"], status=status, content=[output]))

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
    async def _close(self, session: AcpSession) -> None:
        """Finish the recorded session ("interrupted" when its last prompt was cut off) and close it."""
        if session.closed:
            return
        session.closed = True
        outcome = "interrupted" if session.interrupted or session.work else "completed"
        if session.work is not None:
            session.work.cancel()
            await asyncio.gather(session.work, return_exceptions=True)
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


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def prompt_text(blocks: list) -> tuple[str, str]:
    """(what the person typed, the message for the model): text as is; an attached file (an embedded
    resource) as its path and a fenced copy; a link to a file as its path for the model to read."""
    typed, parts = [], []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            typed.append(block.text)
            parts.append(block.text)
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            where = _path_of(block.resource.uri)
            parts.append(f"The file {where}, attached:\n```\n{block.resource.text}\n```")
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"(see the file {_path_of(block.uri)})")
    return "\n".join(typed), "\n\n".join(parts)


def _path_of(uri: str) -> str:
    return uri.removeprefix("file://")


def client_servers(servers: list, taken: set[str]) -> dict[str, MCPServerConfig]:
    """The client's MCP servers in our configuration's terms, started beside the user's own; a name
    that clashes with one of the user's gets a `-client` suffix rather than replacing it."""
    configs: dict[str, MCPServerConfig] = {}
    for server in servers:
        name = f"{server.name}-client" if server.name in taken else server.name
        if isinstance(server, McpServerStdio):
            configs[name] = MCPServerConfig(
                command=server.command, args=list(server.args), env={e.name: e.value for e in server.env}
            )
        elif isinstance(server, HttpMcpServer | SseMcpServer):
            configs[name] = MCPServerConfig(
                url=server.url, headers={h.name: h.value for h in server.headers},
                type="sse" if isinstance(server, SseMcpServer) else "http",
            )  # fmt: skip
    return configs


# ---------------------------------------------------------------------------------- the wire
class StrictNdjson(NdjsonTransport):
    """The SDK's framing, with JSON-RPC's answers to bad input. The SDK only logs a line that does not
    parse (the client never hears of it), and its receive loop fails on JSON that is not an object."""

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                await self.send(_error(None, -32700, "Parse error", str(exc)))
                continue
            if not isinstance(message, dict) or not isinstance(message.get("method", ""), str):
                ident = message.get("id") if isinstance(message, dict) else None
                await self.send(_error(ident, -32600, "Invalid request", "a JSON-RPC message is an object"))
                continue
            return message


def _error(ident: Any, code: int, message: str, details: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "error": {"code": code, "message": message, "data": {"details": details}},
    }


async def serve(agent: SpecAgent) -> None:
    loop = asyncio.get_running_loop()
    # The protocol's stdout: the real one, kept aside; fd 1 becomes stderr for everything else.
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, protocol_out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    supervisor = TaskSupervisor(source="agent acp")
    wire = StrictNdjson(reader, MessageSender(writer, supervisor))
    try:
        await acp.run_agent(agent, wire)
    finally:
        await agent.shutdown()
        await supervisor.shutdown()


def cmd_acp(args: Namespace, _settings: Settings) -> int:
    agent = SpecAgent(args.profile, args.base_url, figures_line=not args.no_figures)
    try:
        asyncio.run(serve(agent))
    except KeyboardInterrupt:
        return 130
    return 0
