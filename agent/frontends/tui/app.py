"""The Textual app: it lays out the widgets and routes messages between them and the session.

The agent runs in a worker and reaches the screen only through events, posted as messages; the
server starts in a thread worker so the screen never freezes. Slash commands live in `slash.py`.
"""

from __future__ import annotations

import asyncio
import gc
import time
from contextlib import suppress
from pathlib import Path

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.widget import MountError
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from agent.errors import AgentError
from agent.events import (
    ApprovalAnswer,
    ApprovalRequested,
    AssistantMessage,
    CheckFinished,
    CheckStarted,
    Compacted,
    DraftOff,
    ErrorEvent,
    Event,
    Notice,
    SessionStarted,
    TextDelta,
    ToolCallStarted,
    ToolFinished,
    TurnCompleted,
    TurnStarted,
)
from agent.frontends.tui import slash
from agent.frontends.tui.frames import FrameOfDeltas
from agent.frontends.tui.messages import (
    AgentEvent,
    ApprovalNeeded,
    ApprovalWithdrawn,
    Deltas,
    ServerFailed,
    ServerProgress,
    ServerReady,
)
from agent.frontends.tui.session import InteractiveSession
from agent.frontends.tui.widgets.approval_bar import ApprovalBar
from agent.frontends.tui.widgets.completion_menu import CompletionMenu
from agent.frontends.tui.widgets.conversation import Conversation
from agent.frontends.tui.widgets.prompt_input import PromptInput
from agent.frontends.tui.widgets.server_start import ServerStart
from agent.frontends.tui.widgets.speed_panel import SpeedPanel
from agent.frontends.tui.widgets.status_line import StatusLine
from agent.server.profiles import load_profiles
from agent.session.host import StartCancelled
from agent.settings.config import state_dir
from agent.settings.trust import is_trusted, untrusted_notice
from agent.store.telemetry import TurnStats
from agent.store.transcripts import load_session

QUIT_WINDOW_S = 2.0  # a second Ctrl+C within this leaves
FREEZE_EVERY = 1000  # deltas: while text streams, what it made is frozen this often (see on_deltas)
TOK_S_EVERY_S = 0.25  # the live tok/s in the status line changes at most this often


class AgentApp(App):
    CSS_PATH = "main.tcss"
    TITLE = "agent"
    ENABLE_COMMAND_PALETTE = False  # Ctrl+P is the speed panel; slash commands do the rest
    BINDINGS = [
        Binding("escape", "interrupt", "stop", show=False),
        Binding("ctrl+c", "ctrl_c", "quit", show=False, priority=True),
        Binding("ctrl+p", "toggle_speed", "speed", show=False, priority=True),
    ]

    def __init__(self, session: InteractiveSession, resume: str | None = None) -> None:
        super().__init__()
        self.session = session
        session.emit_ui = self._emit
        session.approve = self._approve
        self.resume = resume
        self.ready = False
        self._pending: ApprovalNeeded | None = None
        self._ctrl_c_at = 0.0
        self._turn_started = self._tok_s_shown = 0.0
        self._unfrozen_deltas = 0
        self._frozen_in_stream = False
        self._deltas = 0
        self._frame = FrameOfDeltas(self)
        self._trust_noticed = False

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="title")
        yield Conversation()
        yield SpeedPanel()
        yield CompletionMenu()
        yield PromptInput(self.session.workspace, state_dir() / "prompt_history.jsonl")
        yield ApprovalBar()
        yield StatusLine()

    def _title(self) -> str:
        home = str(Path.home())
        where = str(self.session.workspace).replace(home, "~", 1)
        profile, recorder = self.session.profile, self.session.recorder
        if profile is None:
            return f"agent ─ {where}"
        server = profile.base_url if profile.kind == "attach" else profile.name
        model = recorder.meta["model"] if recorder else ""
        spec = profile.spec_label if profile.kind != "attach" else ""
        if spec and self.session.connection is not None and self.session.connection.draft_off:
            spec = "off (the draft failed)"
        return " ─ ".join(
            part for part in ("agent", where, server, model, spec and f"speculation: {spec}") if part
        )

    @property
    def conversation(self) -> Conversation:
        return self.query_one(Conversation)

    @property
    def status(self) -> StatusLine:
        return self.query_one(StatusLine)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one(PromptInput)

    async def on_mount(self) -> None:
        self.status.approval = self.session.options.approval or self.session.settings.approval
        self.prompt.focus()
        if not self.resume:  # a resumed session's replay clears the conversation: shown after it then
            self._notice_untrusted()
        await self.start_server()

    def _notice_untrusted(self) -> None:
        """Once per run: the project files ignored because this folder is not trusted."""
        if not self._trust_noticed and (
            ignored := untrusted_notice(self.session.workspace, how="type /trust")
        ):
            self.session.emit(Notice(ignored))
        self._trust_noticed = True

    # ------------------------------------------------------------------ the server
    async def start_server(self) -> None:
        self.ready = False
        try:
            profile = self.session.profile or self.session.resolve(self.resume)
        except AgentError as exc:
            await self.conversation.mount(ServerStart(self.session.options.profile or "?"))
            self.post_message(ServerFailed(exc))
            return
        self.query_one("#title", Static).update(self._title())
        for old in self.query(ServerStart):
            await old.remove()
        await self.conversation.mount(ServerStart(profile.name))
        self.status.state, self.status.detail = "starting", profile.name
        self._connect()

    @work(thread=True, exclusive=True, group="server", exit_on_error=False)
    def _connect(self) -> None:
        def progress(elapsed: float, phase: str, line: str) -> None:
            self.post_message(ServerProgress(elapsed, phase, line))

        try:
            self.session.connect(progress)
        except StartCancelled:
            return
        except AgentError as exc:
            self.post_message(ServerFailed(exc))
            return
        except Exception as exc:  # an unexpected failure is shown, never a crash
            self.post_message(
                ServerFailed(AgentError(f"the server could not start: {type(exc).__name__}", str(exc)))
            )
            return
        self.post_message(ServerReady())

    def on_server_progress(self, message: ServerProgress) -> None:
        for view in self.query(ServerStart):
            view.progress(message.elapsed, message.phase, message.log_line)
        self.status.detail = f"{message.phase} {message.elapsed:.0f} s"

    def on_server_failed(self, message: ServerFailed) -> None:
        self.status.state, self.status.detail = "failed", message.error.what[:80]
        try:
            profiles = [
                (n, p.description[:60]) for n, p in sorted(load_profiles(self.session.workspace).items())
            ]
        except AgentError:
            profiles = []
        for view in self.query(ServerStart):
            view.failed(str(message.error), profiles)
        self.notify(message.error.what, title="the server did not start", severity="error")

    @on(ServerStart.Retry)
    async def _retry(self, message: ServerStart.Retry) -> None:
        if message.profile:
            self.session.options.profile, self.session.options.base_url = message.profile, None
        self.session.profile = None
        await self.start_server()

    @work(exclusive=True, group="server", exit_on_error=False)
    async def on_server_ready(self, _message: ServerReady) -> None:
        resume, self.resume = self.resume, None
        try:
            await self.session.open(resume=resume)
        except AgentError as exc:
            self.post_message(ServerFailed(exc))
            return
        for view in self.query(ServerStart):
            await view.remove()
        if resume:
            await self.show_recorded(load_session(state_dir(), self.session.session_id).events)
        self._notice_untrusted()
        self.ready = True
        self.status.state, self.status.detail = "ready", ""
        self.query_one("#title", Static).update(self._title())
        self.refresh_figures()
        if not self.query_one(ApprovalBar).display:
            self.prompt.focus()
        # What is alive now (the imports, the app, the session: ~130,000 objects) stays for the run.
        # Frozen, a full collection no longer walks it: walking it took 50-100 ms, several times a
        # second while a fast model streamed, each a pause of the screen (the lag's p99).
        gc.freeze()

    def on_unmount(self) -> None:
        gc.unfreeze()  # (tests run many apps in one process: what the last one froze is collectable again)

    async def show_recorded(self, events: list[dict]) -> None:
        """A recorded session on screen: its conversation, and its turns in the status and speed panel."""
        await self.conversation.clear()
        await self.conversation.replay(events)
        speed = self.query_one(SpeedPanel)
        self.status.turns.clear()
        speed.turns.clear()
        for event in events:
            if event["type"] == "turn.completed":
                stats = TurnStats.from_dict(event["stats"])
                self.status.add_turn(stats)
                speed.add_turn(stats)

    async def restart_server(self, profile: str | None = None) -> None:
        """/profile and /restart: stop this server (if ours), start one, keep the conversation."""
        self.status.state = "stopped"
        await self.session.stop_server()
        if profile:
            self.session.options.profile, self.session.options.base_url = profile, None
        self.session.profile = None
        await self.start_server()

    # ------------------------------------------------------------------ prompts and the agent
    @on(PromptInput.Submitted)
    async def _submitted(self, message: PromptInput.Submitted) -> None:
        text = message.text
        if text.startswith("/"):
            await slash.run(self, text)
            return
        if not self.ready:
            self.notify(
                "The server is not ready yet: your prompt is kept in the history (Up).", severity="warning"
            )
            return
        if self.busy:
            self.notify("Still working on the last prompt: Esc interrupts it.", severity="warning")
            self.prompt.load_text(text)
            return
        await self.conversation.user(text)
        self.run_agent_job(lambda: self.session.ask(text))

    @property
    def busy(self) -> bool:
        return any(
            w.group == "agent" and w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in self.workers
        )

    @work(exclusive=True, group="agent", exit_on_error=False)
    async def run_agent_job(self, job) -> None:
        """Work on the agent (a prompt, /compact) in the worker Esc cancels."""
        self.status.state = "working"
        try:
            await job()
        finally:
            self.status.state = "ready" if self.ready else self.status.state
            self.refresh_figures()

    def refresh_figures(self) -> None:
        used = self.session.context_used
        if used:
            self.status.context = used
        self.status.checkpoints = self.session.checkpoint_count()
        if self.session.agent is not None:
            self.status.approval = self.session.agent.permissions.mode

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title="something failed", severity="error")
            self.status.state = "ready" if self.ready else "failed"

    # ------------------------------------------------------------------ events from the agent
    def _emit(self, event: Event) -> None:
        """The session's events become messages; deltas go a frame at a time (frames.py)."""
        if not self._frame.take(event):
            self.post_message(AgentEvent(event))

    async def on_deltas(self, message: Deltas) -> None:
        with suppress(NoMatches, MountError):  # (as on_agent_event)
            await self._show_deltas(message.events)

    async def _show_deltas(self, events: list[Event]) -> None:
        self._deltas += len(events)
        now = time.monotonic()
        if self._deltas == len(events):
            self._turn_started = self._tok_s_shown = now
        elif now - self._tok_s_shown > TOK_S_EVERY_S:  # a redrawn status line per batch costs a frame's work
            self._tok_s_shown = now
            self.status.live_tok_s = self._deltas / (now - self._turn_started)
        self.status.state = "generating"
        start = 0
        for end in range(1, len(events) + 1):  # runs of one kind, written at once
            if end == len(events) or type(events[end]) is not type(events[start]):
                text = "".join(e.text for e in events[start:end])
                if isinstance(events[start], TextDelta):
                    await self.conversation.text(text)
                else:
                    await self.conversation.reasoning(text)
                start = end
        self._unfrozen_deltas += len(events)
        if self._unfrozen_deltas >= FREEZE_EVERY:
            # A full collection walks every object not frozen, and a long answer makes tens of
            # thousands that live on (its rendered lines): at 2,000 tokens/s, walking them paused
            # the screen for 20-50 ms a few times a second. Frozen as it streams, collected once it
            # ends; counted in deltas, as the pauses come with them (a slow stream has few).
            gc.freeze()
            self._unfrozen_deltas = 0
            self._frozen_in_stream = True

    def _collect_streamed(self) -> None:
        """What the stream froze is collectable again: one full collection, when nothing streams."""
        if self._frozen_in_stream:
            self._frozen_in_stream = False
            gc.unfreeze()
            gc.collect()
            gc.freeze()

    async def on_agent_event(self, message: AgentEvent) -> None:
        # The app closed while this was shown (work cancelled on the way out: its "interrupted"
        # comes after the conversation is gone, and may find an answer still streaming).
        with suppress(NoMatches, MountError):
            await self.show_event(message.event)

    async def show_event(self, event: Event) -> None:
        conversation = self.conversation
        if isinstance(event, TurnStarted):
            self._deltas = 0
            self.status.live_tok_s = 0.0
        elif isinstance(event, AssistantMessage):
            await conversation.end_stream()
            self.status.state = "working" if self.busy else "ready"
            self.call_after_refresh(self._collect_streamed)  # (after its last frame is drawn)
        elif isinstance(event, ToolCallStarted):
            await conversation.tool_started(event)
        elif isinstance(event, ToolFinished):
            conversation.tool_finished(event)
        elif isinstance(event, TurnCompleted):
            await conversation.figures(event.turn, event.stats)
            self.status.add_turn(event.stats)
            self.query_one(SpeedPanel).add_turn(event.stats)
            self.status.state = "working" if self.busy else "ready"
            self.refresh_figures()
        elif isinstance(event, DraftOff):
            self.status.draft_off = event.reason
            self.query_one("#title", Static).update(self._title())
            await conversation.notice(event.message, "warning")
        elif isinstance(event, Notice):
            await conversation.notice(event.message)
        elif isinstance(event, Compacted) and event.tokens_before:
            await conversation.notice(
                f"compacted: {event.tokens_before} → {event.tokens_after} tokens ({event.reason})"
            )
        elif isinstance(event, CheckStarted | CheckFinished):
            await conversation.end_stream()
            await conversation.add(conversation.check_line(event.to_json()))
        elif isinstance(event, ErrorEvent):
            await self._error(event)
        elif isinstance(event, SessionStarted):
            self.status.detail = ""
            self.status.draft_off = ""  # a new session on a new connection: its DraftOff follows

    async def _error(self, event: ErrorEvent) -> None:
        if event.error in ("server_gone", "server_failure", "server_loading"):
            started = self.session.connection is not None and self.session.connection.started_here
            self.status.state = "down"
            fix = (
                "/restart starts it again; the conversation continues"
                if started
                else "start it again, then send your prompt again"
            )
            await self.conversation.notice(f"the model server failed: {event.message}\n{fix}", "error")
            return
        if event.error == "interrupted":
            self.conversation.interrupted()
        await self.conversation.notice(
            event.message, "warning" if event.error in ("interrupted", "limit") else "error"
        )

    # ------------------------------------------------------------------ approvals
    async def _approve(self, request: ApprovalRequested) -> ApprovalAnswer:
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.post_message(ApprovalNeeded(request, future))
        try:
            return await future
        finally:
            if not future.done() or future.cancelled():  # (cancelling this task cancels the future)
                future.cancel()
                self.post_message(ApprovalWithdrawn(request.call_id))

    def on_approval_needed(self, message: ApprovalNeeded) -> None:
        self._pending = message
        if view := self.conversation.tool_view(message.request.call_id):
            view.set_state("asking")
        self.prompt.display = False  # hidden, not cleared: what the user was typing stays
        self.query_one(CompletionMenu).hide()
        self.query_one(ApprovalBar).ask(message.request)

    @on(ApprovalBar.Answered)
    def _answered(self, message: ApprovalBar.Answered) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        request = pending.request
        if message.save and request.suggested_rule:
            path = self.session.save_rule(request.name, request.suggested_rule)
            later = (
                ""
                if is_trusted(self.session.workspace)
                else " (later sessions use it once you /trust this folder)"
            )
            self.notify(f'{request.name}: "{request.suggested_rule}" is now allowed in {path}{later}')
        if view := self.conversation.tool_view(request.call_id):
            view.set_state("running")
        if not pending.answer.done():
            pending.answer.set_result(message.answer)
        self._close_approval()

    def on_approval_withdrawn(self, message: ApprovalWithdrawn) -> None:
        if self._pending and self._pending.request.call_id == message.call_id:
            self._pending = None
            self._close_approval()

    def _close_approval(self) -> None:
        self.query_one(ApprovalBar).hide()
        self.prompt.display = True
        self.prompt.focus()

    # ------------------------------------------------------------------ keys
    def action_interrupt(self) -> None:
        if self.busy:
            self.workers.cancel_group(self, "agent")
        elif not self.ready and self.status.state == "starting":
            self.session.cancel_start()
            self.notify("Stopping the server's start.")

    def action_ctrl_c(self) -> None:
        now = time.monotonic()
        if now - self._ctrl_c_at < QUIT_WINDOW_S:
            self.run_worker(self.quit_app(), exclusive=True, group="quit")
            return
        self._ctrl_c_at = now
        self.action_interrupt()
        self.notify("Press Ctrl+C again to quit.", timeout=QUIT_WINDOW_S)

    def action_toggle_speed(self) -> None:
        self.query_one(SpeedPanel).toggle()

    async def quit_app(self) -> None:
        self.session.cancel_start()
        self.workers.cancel_group(self, "agent")
        await self.session.close()
        self.exit()
