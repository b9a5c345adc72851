"""The conversation: prompts, streamed answers, tool calls, turn figures and notices, in order.

Answers stream into a Markdown widget through `Markdown.get_stream`, which appends and batches
instead of re-rendering the whole answer per token. The view stays anchored to the bottom while the
user has not scrolled up.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets._markdown import MarkdownStream

from agent.events import ToolCallStarted, ToolFinished
from agent.telemetry import TurnStats
from agent.tui.tool_call import ToolCallView


class Conversation(VerticalScroll):
    def __init__(self) -> None:
        super().__init__(id="conversation")
        self._answer: MarkdownStream | None = None
        self._reasoning: MarkdownStream | None = None
        self._calls: dict[str, ToolCallView] = {}

    def on_mount(self) -> None:
        self.anchor()

    async def add(self, widget: Widget) -> Widget:
        await self.mount(widget)
        return widget

    async def user(self, text: str) -> None:
        await self.end_stream()
        await self.add(Static(Text("› ", "bold") + Text(text), classes="user"))

    async def text(self, delta: str) -> None:
        await self._end_reasoning()
        if self._answer is None:
            widget = await self.add(Markdown(classes="answer"))
            self._answer = Markdown.get_stream(widget)
        await self._answer.write(delta)

    async def reasoning(self, delta: str) -> None:
        if self._reasoning is None:
            body = Markdown(classes="reasoning-text")
            await self.add(Collapsible(body, title="reasoning", collapsed=True, classes="reasoning"))
            self._reasoning = Markdown.get_stream(body)
        await self._reasoning.write(delta)

    async def answer(self, text: str) -> None:
        """A whole answer at once (a resumed session's history)."""
        if text.strip():
            await self.add(Markdown(text, classes="answer"))

    async def end_stream(self) -> None:
        await self._end_reasoning()
        if self._answer is not None:
            stream, self._answer = self._answer, None
            await stream.stop()

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
        await self.add(Static(f"turn {turn} · {stats.summary()}", classes="figures"))

    async def notice(self, message: str, severity: str = "information") -> None:
        await self.end_stream()
        await self.add(Static(Text(message), classes=f"notice {severity}"))

    async def clear(self) -> None:
        await self.end_stream()
        self._calls.clear()
        await self.remove_children()

    async def replay(self, events: list[dict[str, Any]]) -> None:
        """Show a recorded session as it happened (for /resume and --continue)."""
        for event in events:
            kind = event["type"]
            if kind == "user.message":
                await self.user(event["content"])
            elif kind == "assistant.message":
                await self.answer(event["content"])
            elif kind == "tool.call":
                call = ToolCallStarted(
                    event["turn"],
                    event["call_id"],
                    event["name"],
                    event.get("arguments"),
                    event.get("summary", ""),
                )
                await self.tool_started(call)
            elif kind == "tool.result":
                fields = {k: event.get(k) for k in ("turn", "call_id", "name", "ok", "output", "seconds")}
                self.tool_finished(ToolFinished(**fields, display=event.get("display") or {}))
            elif kind == "turn.completed":
                await self.figures(event["turn"], TurnStats.from_dict(event["stats"]))
            elif kind == "check.result":
                verdict = "passed" if event["passed"] else "failed"
                await self.notice(f"check `{event['command']}` {verdict}")
