"""The real `agent` in a real terminal (tmux) against the real embedded llama-server: it starts the
server, takes a prompt, streams the answer with the turn's figures, quits, and leaves no process."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import llama_server_pids
from tests.frontends.tui.helpers import git_workspace

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def capture(socket: str) -> str:
    done = subprocess.run(
        ["tmux", "-L", socket, "capture-pane", "-p", "-t", "smoke"], capture_output=True, text=True
    )
    return done.stdout


def wait_for_screen(socket: str, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = capture(socket)
        if text in screen:
            return screen
        time.sleep(0.3)
    raise AssertionError(f"{text!r} never appeared; the screen:\n{capture(socket)}")


def test_agent_in_tmux_against_the_embedded_server(embedded, tmp_path):
    ws = git_workspace(tmp_path / "ws")
    socket = f"agent-smoke-{uuid.uuid4().hex[:8]}"  # its own tmux server: it inherits this test's environment
    command = f"cd '{ws}' && '{sys.executable}' -m agent -p tiny --approval read-only; echo AGENT-EXITED:$?; sleep 60"
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "smoke", "-x", "120", "-y", "36", command],
        check=True,
    )
    try:
        wait_for_screen(socket, "● ready", timeout=120)
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "smoke", "-l", "Say hello."], check=True)
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "smoke", "Enter"], check=True)
        screen = wait_for_screen(socket, "turn 1 ·", timeout=120)
        assert "Say hello." in screen and "tok/s gen" in screen
        assert llama_server_pids(), "the TUI's llama-server should be running"
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "smoke", "C-c"], check=True)
        time.sleep(0.3)
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "smoke", "C-c"], check=True)
        screen = wait_for_screen(socket, "AGENT-EXITED:", timeout=60)
        assert "AGENT-EXITED:0" in screen, screen
        assert "stopping the llama-server this session started" in screen
        deadline = time.monotonic() + 15
        while llama_server_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not llama_server_pids(), "the TUI left its llama-server running"
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
