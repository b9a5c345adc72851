"""The prompt: multi-line input with history and completion of /commands and @files.

Enter sends; Ctrl+J (or Shift+Enter where the terminal tells them apart) starts a new line. Up and
Down walk the history from the first or last line. Tab completes what the menu shows.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from agent.frontends.tui.widgets.completion_menu import CompletionMenu
from agent.session import slash_commands
from agent.store.redact import redact

HISTORY_LIMIT = 500
FILE_LIST_TTL = 5.0  # seconds: the workspace's file list is read again after this


class PromptInput(TextArea):
    @dataclass
    class Submitted(Message):
        text: str

    def __init__(self, workspace: Path, history_path: Path | None = None) -> None:
        super().__init__(id="prompt", soft_wrap=True, compact=True, highlight_cursor_line=False,
                         placeholder="Ask for a change, or type / for commands, @ for files")  # fmt: skip
        self.workspace = workspace
        self.history_path = history_path
        self.past = _load_history(history_path)
        self._history_index: int | None = None
        self._draft = ""
        self._files: list[str] = []
        self._files_read = 0.0

    @property
    def menu(self) -> CompletionMenu:
        return self.screen.query_one(CompletionMenu)

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        menu_open = self.menu.display
        if key in ("tab", "down", "up", "escape") and menu_open:
            event.stop()
            event.prevent_default()
            if key == "tab":
                self._complete()
            elif key == "escape":
                self.menu.hide()
            else:
                self.menu.move(1 if key == "down" else -1)
            return
        if key == "enter":
            event.stop()
            event.prevent_default()
            if menu_open and self.text.startswith("/") and " " not in self.text:
                self._complete()
                if self.text.endswith(" "):  # completed to a command that takes an argument: type it
                    return
            self._submit()
            return
        if key in ("ctrl+j", "shift+enter"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if key == "up" and self.cursor_at_first_line and self.past:
            event.stop()
            event.prevent_default()
            self._walk_history(-1)
            return
        if key == "down" and self.cursor_at_last_line and self._history_index is not None:
            event.stop()
            event.prevent_default()
            self._walk_history(1)
            return
        await super()._on_key(event)

    def _submit(self) -> None:
        text = self.text.strip()
        self.menu.hide()
        if not text:
            return
        self.remember(text)
        self.clear()
        self.post_message(self.Submitted(text))

    def remember(self, text: str) -> None:
        if not self.past or self.past[-1] != text:
            self.past.append(text)
            del self.past[:-HISTORY_LIMIT]
            _save_history(self.history_path, text)
        self._history_index = None

    def _walk_history(self, step: int) -> None:
        if self._history_index is None:
            if step > 0:
                return
            self._draft = self.text
            self._history_index = len(self.past)
        self._history_index += step
        if self._history_index >= len(self.past):
            self._history_index = None
            self.load_text(self._draft)
        else:
            self._history_index = max(0, self._history_index)
            self.load_text(self.past[self._history_index])
        self.move_cursor(self.document.end)

    # ------------------------------------------------------------------ completion
    def on_text_area_changed(self, _event: TextArea.Changed) -> None:
        self.menu.show(self.candidates())

    def candidates(self) -> list[tuple[str, str]]:
        text = self.text
        if text.startswith("/") and "\n" not in text and " " not in text:
            if text[1:] in slash_commands.BY_NAME:
                return []  # complete already
            return [
                (f"/{c.name}", f"/{(c.name + ' ' + c.argument).strip():<18} {c.help}")
                for c in slash_commands.completions(text)
            ]
        before = self.document.get_text_range((0, 0), self.cursor_location)
        match = re.search(r"(?:^|\s)@([^\s@]*)$", before)
        if not match:
            return []
        typed = match.group(1).lower()
        files = [f for f in self._workspace_files() if typed in f.lower()]
        files.sort(key=lambda f: (not f.lower().startswith(typed), "/" in f and not typed, len(f)))
        return [(f"@{f}", f"@{f}") for f in files[:8]]

    def _complete(self) -> None:
        value = self.menu.chosen()
        self.menu.hide()
        if value is None:
            return
        if value.startswith("/"):
            command = slash_commands.BY_NAME[value[1:]]
            self.load_text(value + (" " if command.argument else ""))
            self.move_cursor(self.document.end)
            return
        before = self.document.get_text_range((0, 0), self.cursor_location)
        start = before.rfind("@")
        row, col = self.cursor_location
        self.replace(value + " ", (row, col - (len(before) - start)), self.cursor_location)

    def _workspace_files(self) -> list[str]:
        if time.monotonic() - self._files_read > FILE_LIST_TTL:
            from tools.search import workspace_files
            from tools.workspace import Workspace

            root = self.workspace
            self._files = [p.relative_to(root).as_posix() for p in workspace_files(Workspace(root), root)]
            self._files_read = time.monotonic()
        return self._files


def _load_history(path: Path | None) -> list[str]:
    if path is None or not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[-HISTORY_LIMIT:]:
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn line from a crash: the rest of the history holds
    return [e for e in entries if isinstance(e, str)]


def _save_history(path: Path | None, text: str) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        # A pasted key stays recallable in this session (self.past), but is not kept on disk.
        file.write(json.dumps(redact(text), ensure_ascii=False) + "\n")
