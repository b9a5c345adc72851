"""One tool call: a compact line (name, the argument that matters, time, outcome) that opens on
click or Enter to show what it did: an edit's diff, a command's exit code and output, an MCP tool."""

from __future__ import annotations

from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from agent.events import ToolCallStarted, ToolFinished

MAX_DETAIL_LINES = 400  # the transcript keeps everything; the screen keeps what can be read


class ToolCallView(Vertical, can_focus=True):
    BINDINGS = [("enter", "toggle", "open or close")]

    def __init__(self, call: ToolCallStarted) -> None:
        super().__init__(classes="tool-call")
        self.call = call
        self.result: ToolFinished | None = None
        self.state = "running"  # running | asking | ok | failed | denied | interrupted

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="tool-header")
        yield Static("", classes="tool-detail")

    @property
    def expanded(self) -> bool:
        return self.has_class("expanded")

    def on_mount(self) -> None:
        self.query_one(".tool-detail").display = False

    def set_state(self, state: str) -> None:
        self.state = state
        if self.is_mounted:  # (a replayed call is finished before it is mounted)
            self.query_one(".tool-header", Static).update(self._header())

    def finish(self, result: ToolFinished) -> None:
        self.result = result
        denied = result.output.startswith("Not run:")
        self.set_state("denied" if denied else ("ok" if result.ok else "failed"))
        if self.expanded and self.is_mounted:
            self._fill()

    def action_toggle(self) -> None:
        self.toggle_class("expanded")
        detail = self.query_one(".tool-detail", Static)
        detail.display = self.expanded
        if self.expanded:
            self._fill()
        self.query_one(".tool-header", Static).update(self._header())

    def on_click(self) -> None:
        self.action_toggle()

    def _header(self) -> Text:
        arrow = "▾" if self.expanded else "▸"
        line = Text.assemble(
            (f"{arrow} ", "dim"),
            (self.call.name, "bold"),
            "  ",
            self.call.summary.splitlines()[0][:160] if self.call.summary else "",
        )
        tail = Text()
        display: dict[str, Any] = self.result.display if self.result else {}
        if display.get("exit_code") is not None:
            tail.append(f"exit {display['exit_code']} · ", "dim")
        if self.result is not None:
            tail.append(f"{self.result.seconds:.2f} s  ", "dim")
        mark = {"running": ("…", "dim"), "asking": ("? waiting for you", "yellow"), "ok": ("✓", "green"),
                "failed": ("✗", "red"), "denied": ("⊘ not run", "yellow"), "interrupted": ("■ interrupted", "yellow")}[self.state]  # fmt: skip
        tail.append(*mark)
        line.append("  ")
        line.append_text(tail)
        return line

    def _fill(self) -> None:
        self.query_one(".tool-detail", Static).update(detail_renderable(self.call, self.result))


def detail_renderable(call: ToolCallStarted, result: ToolFinished | None):
    display = result.display if result else {}
    if display.get("diff"):
        return Syntax(display["diff"].rstrip("\n"), "diff", theme="ansi_dark", background_color="default")
    text = Text()
    if display.get("command") is not None:
        text.append(f"$ {display['command']}\n", "bold")
    elif call.name.startswith("mcp__"):  # MCP tools are named mcp__server__tool
        server, _, tool = call.name.removeprefix("mcp__").partition("__")
        text.append(f"MCP server {server} · tool {tool}\n", "bold")
        text.append(f"{call.arguments}\n", "dim")
    if result is None:
        text.append("(running)", "dim")
        return text
    lines = result.output.splitlines()
    if len(lines) > MAX_DETAIL_LINES:
        lines = [
            *lines[: MAX_DETAIL_LINES // 2],
            f"… {len(lines) - MAX_DETAIL_LINES} lines …",
            *lines[-MAX_DETAIL_LINES // 2 :],
        ]
    text.append("\n".join(lines))
    return text
