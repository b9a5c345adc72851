"""`agent acp` in Toad (PyPI `batrachian-toad`, a Textual ACP client no one here wrote), run in tmux and
read with capture-pane, against the scripted model server: a prompt and its streamed answer.

Toad needs Python 3.14 (its `requires-python`); this project's CI runs 3.11, where pip cannot install
it, so the test skips there and says so. Where `toad` is on PATH it runs. The approval step of the
issue's Toad scenario is not driven: Toad's permission dialog could not be seen here to script it.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.frontends.acp.test_acp import alive
from tests.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(
        shutil.which("toad") is None,
        reason="Toad is not installed: batrachian-toad needs Python 3.14 (pip install batrachian-toad)",
    ),
]

ANSWER = "The notes are fine as they are."


def capture(socket: str) -> str:
    done = subprocess.run(
        ["tmux", "-L", socket, "capture-pane", "-p", "-t", "toad"], capture_output=True, text=True
    )
    return done.stdout


def test_toad_sends_a_prompt_and_shows_the_streamed_answer(tmp_path, isolated_state):
    ws = tmp_path / "ws"
    ws.mkdir()
    socket = f"agent-toad-{uuid.uuid4().hex[:8]}"  # its own tmux server, with this test's environment
    with ScriptedServer([{"content": ANSWER}]) as server:
        agent = shlex.join([sys.executable, "-m", "agent", "acp", "--base-url", server.url])
        command = f"cd {shlex.quote(str(ws))} && toad acp {shlex.quote(agent)}"
        subprocess.run(
            ["tmux", "-L", socket, "new-session", "-d", "-s", "toad", "-x", "140", "-y", "40", command],
            check=True,
        )
        try:
            time.sleep(5)  # Toad starts the agent and opens a session
            subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "toad", "-l", "Are the notes fine?"])
            subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "toad", "Enter"], check=True)
            deadline = time.monotonic() + 60
            while ANSWER not in capture(socket) and time.monotonic() < deadline:
                time.sleep(0.3)
            screen = capture(socket)
            assert ANSWER in screen, screen
            assert server.requests, "Toad's prompt never reached the model"
        finally:
            pids = subprocess.run(
                ["tmux", "-L", socket, "list-panes", "-a", "-F", "#{pane_pid}"],
                capture_output=True,
                text=True,
            ).stdout.split()
            subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    assert not [p for p in pids if alive(int(p))]
