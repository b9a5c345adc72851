"""`agent stats` on a session whose draft failed: "draft off: <reason>" in place of its speculation."""

from __future__ import annotations

import json

from agent.cli import main
from agent.events import DraftOff, TurnCompleted, TurnStarted
from agent.store.recorder import SessionRecorder
from agent.store.telemetry import TurnStats

REASON = "the draft model is not a DFlash model"


def record_session(state, session: str, draft_off: bool, rate: float) -> None:
    recorder = SessionRecorder(state, session, "gemma-dflash", "gemma", "draft-dflash")
    if draft_off:
        recorder(DraftOff(REASON, "gemma-dflash", f"draft off: {REASON}."))
    for turn in (1, 2):
        recorder(TurnStarted(turn))
        recorder(
            TurnCompleted(turn, TurnStats(predicted_n=100, predicted_per_second=rate, prompt_n=10, cache_n=0))
        )
    recorder.close()


def test_a_draft_off_session_says_so_in_stats_alone_and_compared(isolated_state, capsys):
    record_session(isolated_state, "s1-with-draft", False, 130.0)
    record_session(isolated_state, "s2-draft-off", True, 40.0)
    assert main(["stats", "s2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["sessions"][0]
    assert summary["draft_off"] == REASON and summary["spec_mode"] == "none"
    assert main(["stats", "s2"]) == 0
    assert f"profile gemma-dflash (draft off: {REASON})" in capsys.readouterr().out
    assert main(["stats", "s1", "s2"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("s")}
    assert "draft-dflash" in rows["s1-with-draft"] and "draft off" not in rows["s1-with-draft"]
    assert "draft off: the draft model is" in rows["s2-draft-off"]
