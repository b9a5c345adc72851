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


@pytest.mark.slow  # a subprocess that imports the agent: about 2 s
def test_an_answer_refused_for_its_missing_path_is_read_again_and_judged(tmp_path):
    """examples/replay_answers.py: an answer the run refused for its missing path is read by today's
    reader, which takes a block holding every definition of one file as that file; the write lands and
    the check passes. The answer that was not refused is not read."""
    fixed = (REPO / "examples/tasks/fix-failing-test/solution/stats.py").read_text()
    session = tmp_path / "session.jsonl"
    events = [
        {"type": "session.started", "workspace": "/tmp/agent-tasks-x/fix-failing-test"},
        {"type": "assistant.message", "turn": 1, "content": f"Here:\n```python\n{fixed}```"},
        {
            "type": "user.message",
            "content": "Not applied: a ```python block without a file path was not applied.",
        },
        {"type": "assistant.message", "turn": 2, "content": "Done."},
        {"type": "user.message", "content": "The check failed."},
    ]
    session.write_text("".join(json.dumps(e) + "\n" for e in events))
    script = REPO / "examples" / "replay_answers.py"
    run = subprocess.run([sys.executable, str(script), str(session), "--write", "--check"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].startswith(
        "fix-failing-test turn 1: write_file stats.py: Replaced stats.py"
    )
    assert run.stdout.splitlines()[-1] == (
        "answers refused for a block without a path: 1; become calls: 1, of which pass the check: 1; "
        "still refused: 0"
    ), run.stdout
