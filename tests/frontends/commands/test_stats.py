"""`agent stats` over recorded telemetry (`agent bench` on the real server: tests/frontends/measure/)."""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.store.telemetry import TelemetryLog, TurnStats


def record(log: TelemetryLog, turn: int, **stats) -> None:
    log.append(
        {
            "session": log.path.stem,
            "turn": turn,
            "profile": "p",
            "spec_mode": "ngram-mod",
            "stats": TurnStats(**stats).to_dict(),
        }
    )


@pytest.fixture
def two_sessions(isolated_state):
    slow = TelemetryLog(isolated_state / "telemetry" / "s1-slow.jsonl")
    fast = TelemetryLog(isolated_state / "telemetry" / "s2-fast.jsonl")
    for turn, rate in enumerate((40.0, 42.0, 41.0), 1):
        record(
            slow,
            turn,
            predicted_n=400,
            predicted_per_second=rate,
            prompt_n=100,
            cache_n=0,
            prompt_per_second=500.0,
        )
    for turn, rate in enumerate((130.0, 150.0, 140.0), 1):
        record(
            fast,
            turn,
            predicted_n=400,
            predicted_per_second=rate,
            prompt_n=10,
            cache_n=90,
            draft_n=300,
            draft_n_accepted=240,
            prompt_per_second=500.0,
        )
    return slow, fast


def test_stats_summarises_the_newest_session(two_sessions, capsys):
    assert main(["stats", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["sessions"][0]
    assert summary["session"] == "s2-fast"
    assert summary["median_gen_tok_s"] == 140.0
    assert summary["acceptance"] == 0.8
    assert summary["cache_reuse"] == 0.9
    assert summary["turns"] == 3 and summary["output_tokens"] == 1200


def test_stats_renders_a_turn_table_and_a_chart(two_sessions, capsys):
    assert main(["stats", "s2"]) == 0
    out = capsys.readouterr().out
    assert "80% (240/300)" in out  # acceptance per turn, with its counts
    assert "gen tok/s" in out and "draft accepted %" in out  # the chart's legend
    assert "median 140.0 tok/s gen" in out


def test_stats_compares_two_sessions_with_the_speedup(two_sessions, capsys):
    assert main(["stats", "s1", "s2"]) == 0
    out = capsys.readouterr().out
    assert "1.00x" in out and "3.41x" in out  # 140 / 41


def test_no_speculation_shows_no_acceptance(two_sessions, capsys):
    main(["stats", "s1", "--json"])
    assert json.loads(capsys.readouterr().out)["sessions"][0]["acceptance"] is None


def test_a_torn_last_line_is_skipped(two_sessions, capsys):
    slow, _ = two_sessions
    with slow.path.open("a") as f:
        f.write('{"session": "s1-slow", "turn": 4, "sta')
    main(["stats", "s1", "--json"])
    assert json.loads(capsys.readouterr().out)["sessions"][0]["turns"] == 3


def test_an_unknown_session_lists_recent_ones(two_sessions, capsys):
    assert main(["stats", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no session 'nope'" in err and "s2-fast" in err


def test_no_sessions_yet_says_what_to_run(capsys):
    assert main(["stats"]) == 2
    assert "agent bench" in capsys.readouterr().err


def test_stats_of_one_session_says_where_its_cache_broke_and_what_each_draft_position_accepted(
    isolated_state, capsys
):
    log = TelemetryLog(isolated_state / "telemetry" / "s3-broke.jsonl")
    record(log, 1, predicted_n=100, prompt_n=900, cache_n=0, metrics_drafts=10, accepted_per_position=[9, 5])
    why = "880 tokens lost: the agent changed the system prompt"
    record(log, 2, predicted_n=100, prompt_n=1000, cache_n=20, cache_break=why, metrics_drafts=10,
           accepted_per_position=[7, 3, 1])  # fmt: skip
    assert main(["stats", "s3-broke"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"cache broke at turn 2: {why}" in out
    assert "cache broke at turn 1" not in out
    assert "accepted by draft position: 1: 80%, 2: 40%, 3: 5% of 20 drafts" in out
