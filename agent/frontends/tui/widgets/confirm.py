"""A yes/no question over the screen, for what cannot be undone by a keypress (a server restart)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class Confirm(ModalScreen[bool]):
    BINDINGS = [("y", "answer(True)", "yes"), ("n", "answer(False)", "no"), ("escape", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(self.question)
            yield Static("[b]y[/b]es  [b]n[/b]o", classes="keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
