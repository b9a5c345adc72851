"""`agent stats` over recorded telemetry, and `agent bench` on the real embedded server."""

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


@pytest.mark.server
def test_bench_runs_the_seed_prompts_on_the_real_server_and_logs_them(embedded, capsys, isolated_state):
    from tests.conftest import free_port

    profile_dir = isolated_state.parent / "config" / "profiles"
    profile_dir.mkdir(parents=True)
    (profile_dir / "tiny-bench.toml").write_text(
        f'binary = "embedded"\nmodel = "embedded"\nport = {free_port()}\nctx_size = 2048\nargs = ["--metrics"]\n'
    )
    assert main(["bench", "tiny-bench", "--max-tokens", "48", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["prompt"] for r in out["requests"]] == ["task-store", "kv-report", "linked-list"]
    for r in out["requests"]:
        assert r["stats"]["predicted_n"] > 0 and r["stats"]["client_tokens_per_second"] > 0
    assert [r["prompt"] for r in out["warmup"]] == ["warm-up"]
    logs = list((isolated_state / "telemetry").glob("bench-*-tiny-bench-*.jsonl"))
    assert len(logs) == 1 and len(logs[0].read_text().splitlines()) == 3  # the warm-up is not logged


@pytest.mark.server
def test_bench_conversation_runs_the_agent_loop_and_reports_cache_reuse(
    embedded, capsys, isolated_state, tmp_path
):
    from tests.conftest import free_port

    profile_dir = isolated_state.parent / "config" / "profiles"
    profile_dir.mkdir(parents=True)
    (profile_dir / "tiny-conv.toml").write_text(
        f'binary = "embedded"\nmodel = "embedded"\nport = {free_port()}\nctx_size = 4096\nargs = ["--metrics"]\n'
        'chat_template_file = "embedded:google-gemma-4-31B-it.jinja"\n[sampling]\nmax_tokens = 24\n'
    )
    prompts = tmp_path / "prompts.md"
    prompts.write_text("Say hello.\n---\nSay goodbye.\n")
    argv = [
        "bench",
        "tiny-conv",
        "--conversation",
        "--prompt-file",
        str(prompts),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "requests 2-2: cache reuse" in out
    assert "own time per request" in out and "the agent's code: median" in out
    report = json.loads((tmp_path / "o" / "conversation.json").read_text())["profiles"]["tiny-conv"]
    assert len(report["requests"]) == 2
    for cost in report["requests"]:
        # the server's time and the agent's own add up to the request's span: each is a real part of it
        assert cost["server_s"] > 0 and cost["own_s"] > 0 and cost["tool_s"] == 0
        assert cost["span_s"] == pytest.approx(cost["server_s"] + cost["own_s"], abs=1e-5)
        assert 0.5 < cost["client_over_server"] < 1.5
    assert report["median_own_ms"] > 0
    for cost in report["requests"]:
        # llama-server's own handling outside its timings is part of that time, measured apart
        assert cost["server_handling_s"] > 0
        assert cost["agent_s"] == pytest.approx(cost["own_s"] - cost["server_handling_s"], abs=1e-5)
    assert report["median_agent_ms"] is not None
    [log] = (isolated_state / "telemetry").glob("*.jsonl")
    records = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(records) == 2 and records[1]["stats"]["cache_n"] >= records[0]["stats"]["prompt_n"]
    assert list((isolated_state / "sessions").glob("*.jsonl"))  # a real session, resumable and listed
