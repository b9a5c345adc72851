"""Per-position draft acceptance (issue #25): llama-server's
`llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="N"}`, read before and after each
request like the other draft counters, summed per profile by `agent bench`, drawn beside its charts.

The parsing runs on /metrics text recorded from the real embedded tiny-ngram server (three greedy
completions); the last test runs `agent bench` on that real server.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.frontends.measure.bench_charts import draw_charts
from agent.frontends.measure.bench_prompts import BenchResult
from agent.frontends.measure.bench_results import summarise
from agent.store.telemetry import (
    TurnStats,
    accepted_per_position,
    parse_server_counters,
    per_position_rates,
    position_line,
)
from tests.conftest import FIXTURES
from tests.frontends.measure.test_bench_real import tiny_profile

RECORDED = (FIXTURES / "metrics-tiny-ngram.txt").read_text()


def test_recorded_metrics_give_the_counters_and_each_position() -> None:
    counters = parse_server_counters(RECORDED)
    assert counters["drafts"] == 8 and counters["drafted"] == 445 and counters["accepted"] == 445
    # every position the server lists (0..63), the ones that accepted nothing too
    assert sum(k.startswith("accepted_at:") for k in counters) == 64
    assert (
        counters["accepted_at:0"] == 8 and counters["accepted_at:41"] == 6 and counters["accepted_at:63"] == 5
    )
    # what the per-position counts add up to is the accepted total, as it must
    assert sum(v for k, v in counters.items() if k.startswith("accepted_at:")) == counters["accepted"]


def test_per_position_is_a_delta_with_the_idle_tail_dropped() -> None:
    after = parse_server_counters(RECORDED)
    # recorded: 8 at positions 0-40, 6 at 41-42, 5 at 43-63; as if 5 drafts had all gone to 64 before
    before = {"drafts": 3.0, **{f"accepted_at:{i}": 5.0 for i in range(64)}}
    assert accepted_per_position(before, after) == [3] * 41 + [1, 1]
    assert (
        accepted_per_position({}, parse_server_counters("llamacpp:spec_decode_num_drafts_total 3\n")) is None
    )


@pytest.mark.parametrize(
    "name",
    [
        "llamacpp:spec_decode_accepted_tokens_per_pos_total",  # the spelling FACTS.md recorded
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    ],
)
def test_other_spellings_of_the_counter(name: str) -> None:
    text = f'# TYPE {name} counter\n{name}{{position="0"}} 7\n{name}{{position="1"}} 2\n'
    assert accepted_per_position({}, parse_server_counters(text)) == [7, 2]


def stats(drafts: int, per_position: list[int] | None) -> TurnStats:
    return TurnStats(predicted_per_second=10.0, metrics_drafts=drafts, accepted_per_position=per_position)


def test_rates_are_accepted_at_each_position_over_all_drafts() -> None:
    rates = per_position_rates([stats(4, [4, 3, 1]), stats(6, [5, 2]), stats(0, None)])
    assert rates == {"drafts": 10, "accepted": [9, 5, 1], "rate": [0.9, 0.5, 0.1]}
    assert per_position_rates([stats(0, None), TurnStats()]) is None
    assert position_line(rates) == "1: 90%, 2: 50%, 3: 10% of 10 drafts"


def doc_with(rows: list[BenchResult]) -> dict:
    return {
        "command": "agent bench",
        "settings": {"runs": 1, "max_tokens": 16, "temperature": 0.0},
        "requests": [{"prompt": r.prompt} for r in rows],
        "profiles": {},
        "summary": summarise(rows),
    }


def test_bench_summary_and_chart_per_profile(tmp_path: Path) -> None:
    rows = [
        BenchResult("base", "p1", stats(0, None)),
        BenchResult("ngram", "p1", stats(4, [4, 2])),
        BenchResult("ngram", "p2", stats(4, [3])),
    ]
    doc = doc_with(rows)
    assert doc["summary"]["base"]["acceptance_per_position"] is None
    assert doc["summary"]["ngram"]["acceptance_per_position"] == {
        "drafts": 8,
        "accepted": [7, 2],
        "rate": [0.875, 0.25],
    }
    written = {p.name for p in draw_charts(doc, tmp_path)}
    assert {"acceptance_per_position.png", "acceptance_per_position.svg"} <= written
    assert "ngram: 8 drafts" in (tmp_path / "acceptance_per_position.svg").read_text()


def test_no_chart_when_no_profile_counted_positions(tmp_path: Path) -> None:
    written = {p.name for p in draw_charts(doc_with([BenchResult("base", "p1", stats(0, None))]), tmp_path)}
    assert "acceptance_per_position.png" not in written and "speed.png" in written


@pytest.mark.server
@pytest.mark.timeout(300)
def test_bench_on_the_real_ngram_server_reports_acceptance_by_position(embedded, isolated_state, tmp_path):
    # A prompt the base model repeats: n-gram drafting finds its continuation and drafts.
    prompt = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n"
    (tmp_path / "prompts.txt").write_text(prompt)
    name = tiny_profile(isolated_state, "tiny-n", ctx_size=2048, spec="ngram-mod")
    out = tmp_path / "out"
    argv = ["bench", name, "--prompt-file", str(tmp_path / "prompts.txt"), "--max-tokens", "120"]
    assert main([*argv, "--temperature", "0", "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    per_position = doc["summary"][name]["acceptance_per_position"]
    assert per_position is not None and per_position["drafts"] > 0
    accepted = per_position["accepted"]
    # A token at position i is accepted only after the one at i-1 was, in every draft: the counts
    # cannot rise with the position, and none exceeds the number of drafts.
    assert accepted and all(a >= b for a, b in itertools.pairwise(accepted))
    assert accepted[0] <= per_position["drafts"]
    [request] = doc["requests"]
    assert sum(request["stats"]["accepted_per_position"]) == request["stats"]["draft_n_accepted"]
    assert (out / "acceptance_per_position.png").stat().st_size > 0
