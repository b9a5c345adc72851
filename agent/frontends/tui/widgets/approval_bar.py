"""The approval prompt, in place of the input: exactly what will run, and the answers.

Keys pressed in the first moment after it appears are not answers: a user who was typing would
answer by accident. They go on into the hidden input, with what was typed before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

from agent.events import ApprovalAnswer, ApprovalRequested
from agent.frontends.tui.widgets.prompt_input import PromptInput

KEY_GUARD_S = 0.3


class ApprovalBar(Vertical, can_focus=True):
    @dataclass
    class Answered(Message):
        answer: ApprovalAnswer
        save: bool = False  # "always", kept in the project's config too

    def __init__(self) -> None:
        super().__init__(id="approval")
        self.request: ApprovalRequested | None = None
        self._shown_at = 0.0
        self.display = False

    def compose(self) -> ComposeResult:
        yield Static("", id="approval-what")
        yield Static("", id="approval-keys")
        yield Input(
            placeholder="what should the model do instead? (Enter sends, Esc goes back)",
            id="approval-message",
        )

    def ask(self, request: ApprovalRequested) -> None:
        self.request = request
        self._shown_at = time.monotonic()
        what = Text.assemble(
            (f"{request.name}: ", "bold"), (request.summary, "bold"), (f"   {request.reason}", "dim")
        )
        self.query_one("#approval-what", Static).update(what)
        keys = Text.assemble(
            ("[y]", "bold green"), "es  ", ("[n]", "bold red"), "o  ",
            ("[a]", "bold"), f'lways "{request.suggested_rule or "*"}"  ',
            ("[s]", "bold"), "ave that rule to the project  ", ("[m]", "bold"), "essage to the model",
        )  # fmt: skip
        self.query_one("#approval-keys", Static).update(keys)
        message = self.query_one("#approval-message", Input)
        message.value = ""
        message.display = False
        self.display = True
        self.focus()

    def hide(self) -> None:
        self.request = None
        self.display = False

    def on_key(self, event: events.Key) -> None:
        message = self.query_one("#approval-message", Input)
        if event.key == "escape":
            event.stop()
            if message.display:  # back from the message to the keys
                message.display = False
                self.focus()
            else:  # Esc interrupts the work that asked, as everywhere else
                self.app.action_interrupt()
            return
        if self.request is None or message.display:
            return
        event.stop()
        if time.monotonic() - self._shown_at < KEY_GUARD_S:
            if event.is_printable and event.character:  # the user was typing: it belongs to the prompt
                self.screen.query_one(PromptInput).insert(event.character)
            return
        choice = event.character.lower() if event.character else event.key
        if choice == "y":
            self._answer(ApprovalAnswer("yes"))
        elif choice == "n":
            self._answer(ApprovalAnswer("no"))
        elif choice == "a":
            self._answer(ApprovalAnswer("always"))
        elif choice == "s":
            self._answer(ApprovalAnswer("always"), save=True)
        elif choice == "m":
            message = self.query_one("#approval-message", Input)
            message.display = True
            message.focus()

    @on(Input.Submitted, "#approval-message")
    def _send_message(self, event: Input.Submitted) -> None:
        event.stop()
        self._answer(ApprovalAnswer("no", event.value.strip()))

    def _answer(self, answer: ApprovalAnswer, save: bool = False) -> None:
        self.post_message(self.Answered(answer, save))
