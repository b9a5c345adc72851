"""examples/replay_write.py: a recorded session's writes, replayed on a fresh start of its task, are
judged by the task's own check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a subprocess that imports the agent: about 2 s
def test_a_recorded_write_is_replayed_and_the_task_check_judges_it(tmp_path):
    session = tmp_path / "session.jsonl"
    call = {"type": "tool.call", "turn": 1, "call_id": "block_1", "name": "write_file",
            "arguments": {"path": "hello.py", "content": 'print("Hello, world!")\n'}}  # fmt: skip
    session.write_text(json.dumps({"type": "session.started"}) + "\n" + json.dumps(call) + "\n")
    script = REPO / "examples" / "replay_write.py"
    task = REPO / "examples" / "tasks" / "hello"
    run = subprocess.run([sys.executable, str(script), str(session), str(task)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "--- write_file hello.py\nCreated hello.py (1 lines)." in run.stdout
    assert "--- the check exits 0" in run.stdout
