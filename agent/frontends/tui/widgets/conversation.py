"""The conversation: prompts, streamed answers, tool calls, turn figures and notices, in order.

Streamed text comes once a frame (the app gathers deltas) and is written into a `LiveAnswer`, whose
cost per frame is about what arrived in it; a finished answer (or a ~4k part of a long one) is shown
as Rich Markdown, one widget each, as a resumed session shows it. The view stays anchored to the
bottom while the user has not scrolled up.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from agent.events import ToolCallStarted, ToolFinished
from agent.frontends.tui.widgets.live_answer import LiveAnswer, RenderedOnce
from agent.frontends.tui.widgets.tool_call import ToolCallView
from agent.store.telemetry import TurnStats

SPLIT_CHARS = 4000  # a streamed answer's complete blocks beyond this become a past answer
CHECK_TAIL = 12  # lines of a failed check's output shown (the model gets it all, capped)


class Conversation(VerticalScroll):
    def __init__(self) -> None:
        super().__init__(id="conversation")
        self._answer: LiveAnswer | None = None
        self._reasoning: LiveAnswer | None = None
        self._writing = asyncio.Lock()
        self._part_due = False
        self._calls: dict[str, ToolCallView] = {}
        self._rounds_left = 0  # of the check running: how many more failures go back to the model

    def on_mount(self) -> None:
        self.anchor()

    async def add(self, widget: Widget) -> Widget:
        await self.mount(widget)
        return widget

    async def user(self, text: str) -> None:
        await self.end_stream()
        await self.add(_prompt_line(text))

    async def text(self, delta: str) -> None:
        """A frame's text (the app gathers deltas into frames), written at once."""
        async with self._writing:
            await self._end_reasoning()
            if self._answer is None:
                self._answer = await self.add(LiveAnswer(classes="answer"))
            self._answer.write(delta)
            if len(self._answer.settled) > SPLIT_CHARS and not self._part_due:
                # A long answer's complete blocks become a past answer: the live part stays short,
                # so what a frame costs (a settle, a width change) does not grow with the answer.
                # (After this frame is drawn, as the live answer's settling; in this widget's
                # message loop, not the screen's, which runs what waits for a refresh.)
                self._part_due = True
                self.call_after_refresh(self.call_later, self._close_part)

    async def _close_part(self) -> None:
        async with self._writing:
            self._part_due = False
            if self._answer is not None and len(self._answer.settled) > SPLIT_CHARS:
                await self.mount(_past_answer(self._answer.take_settled()), before=self._answer)

    async def reasoning(self, delta: str) -> None:
        async with self._writing:
            if self._reasoning is None:
                body = LiveAnswer(classes="reasoning-text")
                await self.add(Collapsible(body, title="reasoning", collapsed=True, classes="reasoning"))
                self._reasoning = body
            self._reasoning.write(delta)

    async def end_stream(self) -> None:
        """(Changes to the stream hold `_writing`: a worker (the replay of a resumed session) may
        clear the conversation while a handler is at a mount.)"""
        async with self._writing:
            await self._end_reasoning()
            await self._close_answer()

    async def _close_answer(self) -> None:
        """The answer is complete: it is shown as one Rich Markdown widget, as a past answer."""
        if self._answer is not None:
            live, self._answer = self._answer, None
            if live.source.strip():
                await self.mount(_past_answer(live.rendered()), before=live)
            await live.remove()

    async def _end_reasoning(self) -> None:
        if self._reasoning is not None:
            reasoning, self._reasoning = self._reasoning, None
            reasoning.finish()

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

    def check_line(self, event: dict[str, Any]) -> Static:
        """A round of the project's (or task's) check, as it starts and as it ends: its verdict, and on a
        failure the output's last lines and whether the model gets it back."""
        command = _one_line(event["command"])
        if event["type"] == "check.started":
            self._rounds_left = event.get("rounds_left", 0)
            return _notice_line(f"check `{command}` · round {event['round']} · running…", "information")
        took = f"round {event['round']} · {event['seconds']:.1f} s"
        if event["passed"]:
            return _notice_line(f"check `{command}` passed · {took}", "information")
        code = event["exit_code"]
        verdict = "timed out" if code is None else f"failed (exit {code})"
        then = "its output goes back to the model" if self._rounds_left else "no rounds left"
        tail = "\n".join(f"  {line}" for line in event["output"].rstrip().splitlines()[-CHECK_TAIL:])
        return _notice_line(
            f"check `{command}` {verdict} · {took} · {then}" + (f"\n{tail}" if tail else ""), "error"
        )

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
                widgets.append(_past_answer(RenderedOnce(event["content"])))
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
            elif kind in ("check.started", "check.result"):
                widgets.append(self.check_line(event))
        if widgets:
            await self.mount_all(widgets)


def _past_answer(answer: RenderedOnce) -> Static:
    return Static(answer, classes="answer past")


def _prompt_line(text: str) -> Static:
    return Static(Text("› ", "bold") + Text(text), classes="user")


def _figures_line(turn: int, stats: TurnStats) -> Static:
    return Static(Text(f"turn {turn} · {stats.summary()}"), classes="figures")  # a cause may hold "["


def _one_line(command: str, width: int = 100) -> str:
    lines = command.strip().splitlines() or [""]
    return lines[0][:width] + (" …" if len(lines) > 1 or len(lines[0]) > width else "")


def _notice_line(message: str, severity: str) -> Static:
    return Static(Text(message), classes=f"notice {severity}")
