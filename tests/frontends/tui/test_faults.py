"""Failures inside the TUI become messages on the screen, never a crash."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.frontends.tui.helpers import SIZE, git_workspace, make_app, screen_text, send, wait_for
from tests.scripted_server import ScriptedServer


async def test_a_failing_worker_is_a_notification_and_the_app_goes_on(tmp_path, monkeypatch):
    with ScriptedServer([{"content": "Fine now."}]) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            original = app.session.ask

            async def broken(text):
                raise RuntimeError("a bug in the session")

            monkeypatch.setattr(app.session, "ask", broken)
            await send(pilot, "first")
            await wait_for(
                pilot, lambda: any("a bug in the session" in str(n.message) for n in app._notifications)
            )
            assert app.is_running and app.status.state == "ready"
            monkeypatch.setattr(app.session, "ask", original)
            await send(pilot, "second")
            await wait_for(pilot, lambda: "Fine now." in screen_text(app))


@pytest.mark.slow
def test_agent_without_a_terminal_says_how_to_run_headless(tmp_path):
    done = subprocess.run([sys.executable, "-m", "agent"], cwd=tmp_path, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "not a terminal" in done.stderr and "agent run TASK.md" in done.stderr
