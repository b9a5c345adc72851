"""The list of completions above the input: slash commands, or workspace files after '@'."""

from __future__ import annotations

from textual.widgets import OptionList
from textual.widgets.option_list import Option


class CompletionMenu(OptionList, can_focus=False):
    def __init__(self) -> None:
        super().__init__(id="completions")
        self.display = False

    def show(self, items: list[tuple[str, str]]) -> None:
        """(value inserted, what the line says) pairs; nothing to show hides the menu."""
        self.clear_options()
        if not items:
            self.display = False
            return
        self.add_options([Option(label, id=value) for value, label in items])
        self.highlighted = 0
        self.display = True

    def hide(self) -> None:
        self.display = False

    def chosen(self) -> str | None:
        if not self.display or self.highlighted is None:
            return None
        return self.get_option_at_index(self.highlighted).id

    def move(self, step: int) -> None:
        if self.option_count:
            self.highlighted = ((self.highlighted or 0) + step) % self.option_count
