"""The server's start, shown in place: what loads, for how long, the log's last line; and when it
fails, why, the log's tail, and the way out (retry, or another profile)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option


class ServerStart(Vertical):
    @dataclass
    class Retry(Message):
        profile: str | None  # None: the same one

    def __init__(self, label: str) -> None:
        super().__init__(id="server-start")
        self.label = label

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("Starting ", ""), (self.label, "bold"), " …"), id="start-title")
        yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="start-bar")
        yield Static("", id="start-phase")
        yield Static("", id="start-error")
        with Horizontal(id="start-actions"):
            yield Button("Retry", id="start-retry", variant="primary")
            yield Button("Another profile", id="start-other")
        yield OptionList(id="start-profiles")

    def on_mount(self) -> None:
        for selector in ("#start-error", "#start-actions", "#start-profiles"):
            self.query_one(selector).display = False

    def progress(self, elapsed: float, phase: str, log_line: str) -> None:
        text = Text.assemble((f"{elapsed:5.1f} s  ", "bold"), phase)
        if log_line:
            text.append(f"\n{log_line[-200:]}", "dim")
        self.query_one("#start-phase", Static).update(text)

    def failed(self, message: str, profiles: list[tuple[str, str]]) -> None:
        self.query_one("#start-bar").display = False
        self.query_one("#start-title", Static).update(
            Text.assemble(("Could not start ", "red"), (self.label, "bold red"))
        )
        self.query_one("#start-error", Static).update(Text(message))
        self.query_one("#start-error").display = True
        self.query_one("#start-actions").display = True
        options = self.query_one("#start-profiles", OptionList)
        options.clear_options()
        options.add_options([Option(f"{name}  {what}", id=name) for name, what in profiles])
        self.query_one("#start-retry", Button).focus()

    @on(Button.Pressed, "#start-retry")
    def _retry(self) -> None:
        self.post_message(self.Retry(None))

    @on(Button.Pressed, "#start-other")
    def _other(self) -> None:
        options = self.query_one("#start-profiles", OptionList)
        options.display = True
        options.focus()

    @on(OptionList.OptionSelected, "#start-profiles")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.post_message(self.Retry(event.option.id))
