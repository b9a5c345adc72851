"""Streamed text on its way to the screen: the text and reasoning deltas of one frame (1/30 s) gathered
and posted as one `Deltas` message. A fast stream costs one message and one screen update per frame, not
per token (a message per batch read from the socket was a tenth of a core at 2,000 tokens/s); any other
event posts the deltas before it, which keeps the order exact."""

from __future__ import annotations

import threading

from textual.app import App
from textual.timer import Timer

from agent.events import Event, ReasoningDelta, TextDelta
from agent.frontends.tui.messages import Deltas

FRAME_S = 1 / 30  # streamed text reaches the screen at most this often


class FrameOfDeltas:
    def __init__(self, app: App) -> None:
        self.app = app
        self.batch: list[Event] | None = None  # the deltas of this frame, not yet posted
        self.timer: Timer | None = None
        self.thread = threading.get_ident()

    def take(self, event: Event) -> bool:
        """Keep a delta for the frame (True); anything else is the caller's, after the deltas before it."""
        if isinstance(event, TextDelta | ReasoningDelta):
            if self.batch is None:
                self.batch = []
                self.timer = self.app.set_timer(FRAME_S, self._due)
            self.batch.append(event)
            return True
        if self.batch is not None and threading.get_ident() == self.thread:
            self.post()  # (deltas come from the agent's worker, in this thread; a notice may not)
        return False

    def _due(self) -> None:
        self.timer = None
        self.post()

    def post(self) -> None:
        if self.timer is not None:
            self.timer.stop()
            self.timer = None
        if self.batch:
            self.app.post_message(Deltas(self.batch))
        self.batch = None
