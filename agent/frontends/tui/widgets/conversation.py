"""The conversation: prompts, streamed answers, tool calls, turn figures and notices, in order.

Answers stream into a Markdown widget through `Markdown.get_stream`, which appends and batches
instead of re-rendering the whole answer per token. The view stays anchored to the bottom while the
user has not scrolled up.
"""

from __future__ import annotations

from typing import Any

from rich.markdown import Markdown as RichMarkdown
from rich.text import Text
from textual.containers import VerticalScroll
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets._markdown import MarkdownStream

from agent.events import ToolCallStarted, ToolFinished
from agent.frontends.tui.widgets.tool_call import ToolCallView
from agent.store.telemetry import TurnStats

SPLIT_CHARS = 4000  # a streamed answer longer than this goes on in a new Markdown widget
FRAME_S = 1 / 30  # streamed text is written at most this often


class Conversation(VerticalScroll):
    def __init__(self) -> None:
        super().__init__(id="conversation")
        self._answer: MarkdownStream | None = None
        self._answer_chars = 0  # in the current answer widget
        self._unwritten = ""  # text that waits for the next frame
        self._frame: Timer | None = None
        self._fences = 0  # ``` seen in it: odd means inside a code block
        self._reasoning: MarkdownStream | None = None
        self._calls: dict[str, ToolCallView] = {}

    def on_mount(self) -> None:
        self.anchor()

    async def add(self, widget: Widget) -> Widget:
        await self.mount(widget)
        return widget

    async def user(self, text: str) -> None:
        await self.end_stream()
        await self.add(_prompt_line(text))

    async def text(self, delta: str) -> None:
        """Text is written to the answer at most once a frame: every write re-parses and re-styles
        the answer's last blocks, so a write per token would spend the CPU the stream needs."""
        await self._end_reasoning()
        self._unwritten += delta
        if self._frame is None:
            self._frame = self.set_timer(FRAME_S, self._write_frame)

    async def _write_frame(self) -> None:
        self._frame = None
        delta, self._unwritten = self._unwritten, ""
        if not delta:
            return
        if self._answer is None:
            await self._new_answer()
        if self._answer_chars > SPLIT_CHARS and (cut := self._boundary(delta)) is not None:
            # A long answer continues in a new widget: appending re-lays out the widget it goes
            # to, so a 20k-token answer in one widget would slow every token down as it grows.
            await self._write(delta[:cut])
            await self._close_answer()
            await self._new_answer()
            delta = delta[cut:]
        await self._write(delta)

    async def _new_answer(self) -> None:
        widget = await self.add(Markdown(classes="answer"))
        self._answer = Markdown.get_stream(widget)
        self._answer_chars = self._fences = 0

    async def _write(self, text: str) -> None:
        self._answer_chars += len(text)
        self._fences += text.count("```")
        await self._answer.write(text)

    def _boundary(self, delta: str) -> int | None:
        """Where the answer may be cut in two: after a blank line outside a code block."""
        at = delta.find("\n\n")
        while at != -1:
            if (self._fences + delta[:at].count("```")) % 2 == 0:
                return at + 2
            at = delta.find("\n\n", at + 1)
        return None

    async def reasoning(self, delta: str) -> None:
        if self._reasoning is None:
            body = Markdown(classes="reasoning-text")
            await self.add(Collapsible(body, title="reasoning", collapsed=True, classes="reasoning"))
            self._reasoning = Markdown.get_stream(body)
        await self._reasoning.write(delta)

    async def end_stream(self) -> None:
        await self._end_reasoning()
        if self._frame is not None:
            self._frame.stop()
        await self._write_frame()
        await self._close_answer()

    async def _close_answer(self) -> None:
        """The answer (or a part of a long one) is complete: its blocks, one widget each, give way to
        one widget. The screen's layout then costs the same per frame at token 20,000 as at 20."""
        if self._answer is not None:
            stream, self._answer = self._answer, None
            await stream.stop()
            widget = stream.markdown_widget
            if widget.source.strip():
                await self.mount(_past_answer(widget.source), before=widget)
            await widget.remove()

    async def _end_reasoning(self) -> None:
        if self._reasoning is not None:
            stream, self._reasoning = self._reasoning, None
            await stream.stop()

    async def tool_started(self, call: ToolCallStarted) -> ToolCallView:
        await self.end_stream()
        view = ToolCallView(call)
        self._calls[call.call_id] = view
        await self.add(view)
        return view

    def tool_view(self, call_id: str) -> ToolCallView | None:
        return self._calls.get(call_id)

    def tool_finished(self, result: ToolFinished) -> None:
        view = self._calls.get(result.call_id)
        if view is not None:
            view.finish(result)

    def interrupted(self) -> None:
        for view in self._calls.values():
            if view.state in ("running", "asking"):
                view.set_state("interrupted")

    async def figures(self, turn: int, stats: TurnStats) -> None:
        await self.end_stream()
        await self.add(_figures_line(turn, stats))

    async def notice(self, message: str, severity: str = "information") -> None:
        await self.end_stream()
        await self.add(_notice_line(message, severity))

    async def clear(self) -> None:
        await self.end_stream()
        self._calls.clear()
        await self.remove_children()

    async def replay(self, events: list[dict[str, Any]]) -> None:
        """Show a recorded session as it happened (for /resume and --continue). Its widgets are
        built first and mounted at once: one layout, not one per event. Past answers are rendered
        by Rich's Markdown, one widget each, far lighter than Textual's widget per block."""
        widgets: list[Widget] = []
        for event in events:
            kind = event["type"]
            if kind == "user.message":
                widgets.append(_prompt_line(event.get("typed") or event["content"]))
            elif kind == "assistant.message" and event["content"].strip():
                widgets.append(_past_answer(event["content"]))
            elif kind == "tool.call":
                call = ToolCallStarted(
                    event["turn"],
                    event["call_id"],
                    event["name"],
                    event.get("arguments"),
                    event.get("summary", ""),
                )
                self._calls[call.call_id] = view = ToolCallView(call)
                widgets.append(view)
            elif kind == "tool.result":
                fields = {k: event.get(k) for k in ("turn", "call_id", "name", "ok", "output", "seconds")}
                self.tool_finished(ToolFinished(**fields, display=event.get("display") or {}))
            elif kind == "turn.completed":
                widgets.append(_figures_line(event["turn"], TurnStats.from_dict(event["stats"])))
            elif kind == "check.result":
                verdict = "passed" if event["passed"] else "failed"
                widgets.append(_notice_line(f"check `{event['command']}` {verdict}", "information"))
        if widgets:
            await self.mount_all(widgets)


def _past_answer(markdown: str) -> Static:
    return Static(RichMarkdown(markdown), classes="answer past")


def _prompt_line(text: str) -> Static:
    return Static(Text("› ", "bold") + Text(text), classes="user")


def _figures_line(turn: int, stats: TurnStats) -> Static:
    return Static(f"turn {turn} · {stats.summary()}", classes="figures")


def _notice_line(message: str, severity: str) -> Static:
    return Static(Text(message), classes=f"notice {severity}")
