"""Building the TUI for tests: a real git workspace, a session on a server, and waiting on the screen."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from agent.frontends.tui.app import AgentApp
from agent.frontends.tui.session import InteractiveSession, SessionOptions
from agent.settings.config import Settings

SIZE = (120, 36)


def git_workspace(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"notes.txt": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"], cwd=path, check=True
    )
    return path


def make_app(workspace: Path, base_url: str | None = None, profile: str | None = None, approval: str | None = None,
             resume: str | None = None, settings: Settings | None = None) -> AgentApp:  # fmt: skip
    options = SessionOptions(profile=profile, base_url=base_url, approval=approval)
    session = InteractiveSession(
        settings or Settings(), workspace, options, emit_ui=lambda _e: None, approve=None
    )
    return AgentApp(session, resume=resume)


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    """Wait on the app's state, not a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.05)


async def type_text(pilot, text: str) -> None:
    prompt = pilot.app.prompt
    prompt.insert(text)
    await pilot.pause()


async def send(pilot, text: str) -> None:
    await type_text(pilot, text)
    await pilot.press("enter")


def screen_text(app: AgentApp) -> str:
    """Everything the conversation holds, as text, scrolled into view or not."""
    import io

    from rich.console import Console
    from textual.widgets import Markdown, Static

    from agent.frontends.tui.widgets.live_answer import LiveAnswer

    parts = []
    for widget in app.conversation.query("*"):
        if isinstance(widget, Markdown | LiveAnswer):
            parts.append(widget.source)
        elif isinstance(widget, Static):
            content = widget.content
            if isinstance(content, str):
                parts.append(content)
            else:  # a Rich renderable (Text, Markdown, Syntax)
                console = Console(width=200, file=io.StringIO(), record=True, color_system=None)
                console.print(content)
                parts.append(console.export_text())
    return "\n".join(parts)


def screen_dump(app: AgentApp) -> str:
    """The whole screen as plain text, as a terminal would show it (for assertions on layout).

    Read from the compositor's strips: rendering an update instead clears the screen's dirty
    regions (the app then skips redrawing them), and its cursor moves can run lines together."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())
