"""examples/attempts_timeline.py: the attempts of a run, read back from their recorded sessions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def session(folder: Path, name: str, workspace: str, rows: list[dict]) -> None:
    started = {
        "time": 1000.0,
        "type": "session.started",
        "workspace": workspace,
        "task": "Fix the bug.\nMore.",
    }
    (folder / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in [started, *rows]) + "\n")


@pytest.mark.slow  # a subprocess that imports the agent: about 2 s
def test_each_attempt_says_its_answers_and_the_run_its_waits_and_rates(tmp_path, isolated_state):
    folder = isolated_state / "sessions"
    folder.mkdir(parents=True)
    turn = {"type": "turn.completed", "turn": 1, "stats": {"predicted_n": 80, "predicted_per_second": 4.0}}
    short = {"type": "turn.completed", "turn": 2, "stats": {"predicted_n": 9, "predicted_per_second": 30.0}}
    session(folder, "20261206-1900-a", "/s/attempts/RUN1/1", [
        {"time": 1090.0, "type": "assistant.message"}, turn, {"time": 1120.0, "type": "assistant.message"},
        short, {"type": "check.result"}, {"type": "error", "message": "the model gave the same answer 3 times"},
    ])  # fmt: skip
    session(
        folder, "20261206-1900-b", "/s/attempts/RUN1/2", [{"time": 1300.0, "type": "assistant.message"}, turn]
    )
    session(folder, "20261206-1900-c", "/s/attempts/RUN1/3", [])
    session(folder, "20261206-1900-d", "/home/me/project", [{"time": 1001.0, "type": "assistant.message"}])
    session(folder, "20261206-1700-e", "/s/attempts/RUN0/1", [{"time": 1001.0, "type": "assistant.message"}])
    script = REPO / "examples" / "attempts_timeline.py"
    run = subprocess.run([sys.executable, str(script), "20261206-19"], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[:4] == [
        "RUN1: Fix the bug.",
        "  attempt 1: 2 answers, first after 90 s, 1 checks; the model gave the same answer 3 times",
        "  attempt 2: 1 answers, first after 300 s, 0 checks",
        "  attempt 3: 0 answers, first after -, 0 checks",
    ]
    assert "2 of 3 attempts answered; first answer after a median of 195 s (90-300)" in run.stdout
    assert "generation, 2 requests of 50+ tokens: median 4.0 tok/s" in run.stdout
