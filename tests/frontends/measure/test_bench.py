"""`agent bench` without a model: statistics on known inputs, the identity report, the code check, the
time-left estimate, the agent's cost per request, and the output files end to end against two scripted
model servers (deterministic outputs and timings). The same paths on the real llama-server are in
tests/frontends/measure/test_bench_real.py."""

from __future__ import annotations

import asyncio
import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agent.cli import build_parser, main
from agent.frontends.measure.answers import code_check, compare_texts, first_difference
from agent.frontends.measure.bench_prompts import SEED_PROMPTS, BenchResult, Eta
from agent.frontends.measure.bench_record import command_line
from agent.frontends.measure.bench_results import CSV_COLUMNS, Spread, identity_report, summarise
from agent.frontends.measure.conversation import request_costs
from agent.frontends.measure.memory import GpuProbe, MemoryWatch
from agent.server.endpoint import Endpoint
from agent.session.parts import Completion, ModelClient
from agent.store.telemetry import TurnStats
from tests.scripted_server import ScriptedServer

SEED_SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "bench" / "test_llm_prompts.sh"


# ------------------------------------------------------------------------------------------- statistics


def test_spread_of_known_values():
    s = Spread.of([5, 1, 4, 2, 3])
    assert (s.n, s.median, s.min, s.max, s.q1, s.q3, s.iqr) == (5, 3, 1, 5, 2, 4, 2)
    two = Spread.of([10.0, 20.0])
    assert (two.median, two.q1, two.q3, two.iqr) == (15.0, 12.5, 17.5, 5.0)
    one = Spread.of([None, 7.0])
    assert (one.n, one.median, one.min, one.max, one.iqr) == (1, 7.0, 7.0, 7.0, 0.0)
    assert Spread.of([None, None]) is None and Spread.of([]) is None


def result(profile: str, prompt: str, run: int, tok_s: float, **stats) -> BenchResult:
    return BenchResult(profile, prompt, TurnStats(predicted_n=100, predicted_per_second=tok_s, **stats), run)


def test_summary_speedup_is_the_median_of_per_run_ratios_with_their_spread():
    rows = [
        BenchResult("base", "warm-up", TurnStats(predicted_n=8, predicted_per_second=1.0), 0, warmup=True),
        result("base", "a", 1, 40.0), result("base", "b", 1, 60.0),  # run 1 median 50
        result("base", "a", 2, 60.0), result("base", "b", 2, 60.0),  # run 2 median 60
        result("spec", "a", 1, 80.0, draft_n=100, draft_n_accepted=90),
        result("spec", "b", 1, 120.0, draft_n=100, draft_n_accepted=70),  # run 1 median 100: 2.0x
        result("spec", "a", 2, 200.0, draft_n=50, draft_n_accepted=50),
        result("spec", "b", 2, 160.0),  # run 2 median 180: 3.0x; nothing drafted here
    ]  # fmt: skip
    summary = summarise(rows)
    assert list(summary) == ["base", "spec"]
    assert summary["base"]["turns"] == 4  # the warm-up is not counted
    assert summary["base"]["speedup"] is None
    gen = summary["base"]["figures"]["gen_tok_s"]
    assert (gen["median"], gen["min"], gen["max"]) == (60.0, 40.0, 60.0)
    speedup = summary["spec"]["speedup"]
    assert speedup["against"] == "base" and speedup["per_run"] == [2.0, 3.0]
    assert speedup["spread"]["median"] == 2.5 and speedup["spread"]["iqr"] == 0.5
    # per prompt: the ratio of the medians over the runs (a: 140 / 50, b: 140 / 60)
    assert speedup["per_prompt"] == {"a": pytest.approx(2.8), "b": pytest.approx(140 / 60)}
    cells = summary["spec"]["per_prompt"]
    assert (cells["a"]["drafted"], cells["a"]["accepted"], cells["a"]["acceptance"]) == (150, 140, 140 / 150)
    assert cells["b"]["acceptance"] == 0.7  # a request without drafting adds nothing, not a 0%
    assert summary["spec"]["acceptance"] == 210 / 250
    assert summary["spec"]["figures"]["acceptance"]["n"] == 3


# ----------------------------------------------------------------------------------------- output quality


def test_first_difference_and_where_it_is():
    assert first_difference("same", "same") is None
    assert first_difference("abc", "abd") == 2
    assert first_difference("abc", "abcdef") == 3  # one is a prefix of the other
    diff = compare_texts("def f():\n    return 1\n", "def f():\n    return 2\n")
    assert not diff["identical"]
    assert diff["first_difference"]["char"] == 20
    assert (diff["first_difference"]["line"], diff["first_difference"]["column"]) == (2, 12)
    assert diff["first_difference"]["baseline"].endswith("return 1\n")
    assert diff["similarity"] == 0.5  # one line of two in common
    assert compare_texts("x", "x") == {"identical": True, "first_difference": None, "similarity": 1.0}


def test_identity_report_on_outputs_that_differ_and_outputs_that_do_not():
    def r(profile, prompt, run, content):
        return BenchResult(profile, prompt, TurnStats(predicted_n=5), run, content)

    rows = [
        r("base", "p1", 1, "print(1)\n"), r("base", "p2", 1, "x = 1\ny = 2\n"),
        r("spec", "p1", 1, "print(1)\n"), r("spec", "p2", 1, "x = 1\ny = 3\n"),
        r("base", "p1", 2, "print(1)\n"), r("base", "p2", 2, "x = 1\ny = 2\n"),
        r("spec", "p1", 2, "print(1)\n"), r("spec", "p2", 2, "x = 1\ny = 2\n"),
    ]  # fmt: skip
    report = identity_report(rows)
    assert report["baseline"] == "base"
    same, differs = report["pairs"]
    assert (same["prompt"], same["identical"], same["first_difference"]) == ("p1", True, None)
    assert (differs["prompt"], differs["identical"]) == ("p2", False)
    assert differs["first_difference"]["char"] == 10 and differs["first_difference"]["line"] == 2
    assert report["repeatable"] == {"base": {"p1": True, "p2": True}, "spec": {"p1": True, "p2": False}}


def test_code_check_parses_python_blocks():
    good = "Here:\n```python\ndef f(x):\n    return x + 1\n```\nDone."
    assert code_check(good) == {
        "blocks": 1,
        "whole_answer": False,
        "parses": True,
        "errors": [],
        "cut_off": False,
    }
    bad = code_check("```py\ndef f(:\n```\n```python\nx = 1\n```", finish_reason="stop")
    assert bad["blocks"] == 2 and not bad["parses"] and bad["errors"][0].startswith("block 1, line 1:")
    cut = code_check("```python\nclass A:\n    def f(self):\n        return (", finish_reason="length")
    assert cut["cut_off"] and not cut["parses"]  # a block cut at max_tokens runs to the end
    assert code_check("x = 1\n", prompt="Write Python")["whole_answer"]  # no fence: the whole answer
    assert code_check("Hello there", prompt="Say hello") is None  # no code asked for, none given
    assert code_check("```bash\nls\n```", prompt="Write Python") is None  # only other languages


# ---------------------------------------------------------------------------------------- progress, costs


def test_eta_from_the_measured_pace():
    eta = Eta({"a": 4, "b": 4}, warmup=True)
    assert eta.total == 10 and eta.remaining() is None  # nothing timed yet
    eta.profile_started("a", 2.0)
    eta.request_done("a", 0.5, warmup=True)
    # only a warm-up so far: it sets the pace (4 x 0.5 for a; b: start 2, warm-up 0.5, 4 x 0.5)
    assert eta.remaining() == pytest.approx(4 * 0.5 + 2.0 + 0.5 + 4 * 0.5)
    eta.request_done("a", 1.0)
    eta.request_done("a", 3.0)
    # a: 2 left at its own 2 s; b: its start (2 s, as a's), its warm-up and 4 requests at the pace (2 s)
    assert eta.remaining() == pytest.approx(2 * 2.0 + 2.0 + 0.5 + 4 * 2.0)
    for _ in range(2):
        eta.request_done("a", 2.0)
    eta.profile_started("b", 4.0)
    eta.request_done("b", 0.4, warmup=True)
    eta.request_done("b", 0.5)
    assert eta.completed == 7 and eta.remaining() == pytest.approx(3 * 0.5)


def test_request_costs_split_the_time_between_server_tools_and_the_agent():
    first = TurnStats(prompt_n=100, prompt_ms=50.0, predicted_n=50, predicted_ms=500.0,
                      predicted_per_second=100.0, client_tokens_per_second=99.0, wall_s=0.56, tool_s=0.2)  # fmt: skip
    second = TurnStats(prompt_n=10, prompt_ms=20.0, predicted_n=10, predicted_ms=180.0, wall_s=0.21)
    no_timings = TurnStats(completion_tokens=5, wall_s=0.3)
    # task 1 starts at 0.0 (its message built), requests start at 0.1 and 1.0, it ends at 1.25;
    # task 2's one request has no server timings, and a third request failed (no stats)
    costs = request_costs([(0.0, [0.1, 1.0], 1.25, [first, second]), (2.0, [2.05, 2.5], 2.6, [no_timings])])
    assert [c.request for c in costs] == [1, 2, 3]
    one, two, three = costs
    assert one.span_s == 1.0 and one.server_s == pytest.approx(0.55) and one.tool_s == 0.2
    assert one.own_s == pytest.approx(0.25) and one.client_s == pytest.approx(0.01)
    assert one.client_over_server == pytest.approx(0.99)
    assert two.span_s == 0.25 and two.own_s == pytest.approx(0.05)
    assert three.span_s == pytest.approx(0.5) and three.server_s is None and three.own_s is None
    assert one.to_dict()["own_s"] == pytest.approx(0.25)


def test_command_line_is_what_to_type_again():
    args = build_parser().parse_args(
        ["bench", "tiny", "tiny-ngram", "--runs", "3", "--temperature", "0", "--out", "d", "--seed", "7"]
    )
    assert command_line(args) == "agent bench tiny tiny-ngram --seed 7 --out d --temperature 0 --runs 3"


def test_the_seed_script_is_shipped_and_asks_the_same_prompts():
    text = SEED_SCRIPT.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env bash\n") and "max_tokens: 1200" in text
    block = text.split("PROMPTS=(", 1)[1].split("\n)\n", 1)[0]
    assert re.findall(r'^"(.*)"$', block, re.MULTILINE) == list(SEED_PROMPTS.values())


# ------------------------------------------------------------------------------------------- memory


def test_memory_watch_reads_a_live_process(tmp_path):
    import os

    watch = MemoryWatch(GpuProbe.find(), interval=0.05)
    watch.before_load()
    watch.watch(os.getpid())
    ballast = bytearray(64 * 1024 * 1024)  # touched: resident
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    import time

    time.sleep(0.3)
    report = watch.stop()
    del ballast
    assert report["pid"] == os.getpid() and report["samples"] >= 2
    rss = report["rss_mib"]
    assert rss["loaded"] > 10 and rss["peak"] >= rss["loaded"] + 60  # the ballast is seen at its peak
    assert report["system_used_mib"]["before"] > 0
    assert (report["vram"] is None) == (GpuProbe.find() is None)


def test_memory_watch_without_a_visible_process():
    watch = MemoryWatch(None)
    watch.watch(None)
    report = watch.stop()
    assert report["pid"] is None and report["rss_mib"] == {"loaded": None, "peak": None, "end": None}


# -------------------------------------------------------------------------------- end to end, scripted


def _attach_profile(config: Path, name: str, url: str) -> None:
    folder = config / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(f'base_url = "{url}"\n')


def _prompt_of(body: dict) -> str:
    text = body["messages"][-1]["content"]
    return next((name for name, prompt in SEED_PROMPTS.items() if prompt == text), "warm-up")


def _reply(code_for: dict[str, str], timings: dict | None = None):
    def reply(body: dict) -> dict:
        out = {"content": f"```python\n{code_for.get(_prompt_of(body), 'pass')}\n```\n"}
        if timings:
            out["timings"] = timings
        return out

    return reply


@pytest.fixture
def two_scripted_profiles(isolated_state):
    """Profile `base` and a faster `spec` that drafts, as two attached scripted servers; `spec` writes
    the same as `base` except on kv-report."""
    base_code = {"task-store": "x = 1", "kv-report": "def f():\n    return 1", "linked-list": "y = 2"}
    spec_code = {**base_code, "kv-report": "def f():\n    return (1"}
    spec_timings = {"predicted_per_second": 250.0, "draft_n": 40, "draft_n_accepted": 30}
    with (
        ScriptedServer(default=_reply(base_code)) as base,
        ScriptedServer(default=_reply(spec_code, spec_timings)) as spec,
    ):
        config = isolated_state.parent / "config"
        _attach_profile(config, "base", base.url)
        _attach_profile(config, "spec", spec.url)
        yield base, spec


@pytest.mark.slow
def test_bench_out_writes_results_csv_and_charts(two_scripted_profiles, tmp_path, capsys):
    base, _ = two_scripted_profiles
    out = tmp_path / "out"
    argv = ["bench", "base", "spec", "--runs", "2", "--temperature", "0", "--seed", "3", "--max-tokens", "64"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2.50x base" in printed and "output at temperature 0" in printed

    # what reached the servers: a warm-up, then the prompts twice, with the seed and no prompt cache
    sent = [_prompt_of(b) for b in base.requests]
    assert sent == ["warm-up", *list(SEED_PROMPTS) * 2]
    assert all(b["seed"] == 3 and b["temperature"] == 0 and b["cache_prompt"] is False for b in base.requests)
    assert base.requests[1]["max_tokens"] == 64 and base.requests[0]["max_tokens"] == 32

    doc = json.loads((out / "results.json").read_text())
    assert doc["schema"] == "spec-agent.bench/1"
    assert (
        doc["command"]
        == f"agent bench base spec --seed 3 --out {out} --max-tokens 64 --temperature 0 --runs 2"
    )
    assert doc["settings"]["prompts"] == SEED_PROMPTS and doc["settings"]["runs"] == 2
    assert len(doc["requests"]) == 12 and len(doc["warmup"]) == 2
    first = doc["requests"][0]
    assert set(first) == {
        "profile",
        "prompt",
        "run",
        "warmup",
        "stats",
        "client_over_server",
        "content",
        "code",
    }
    assert first["stats"]["predicted_per_second"] == 100.0 and first["code"]["parses"] is True
    assert doc["summary"]["spec"]["speedup"]["per_run"] == [2.5, 2.5]
    assert doc["summary"]["spec"]["acceptance"] == 0.75
    assert set(doc["profiles"]) == {"base", "spec"}
    memory = doc["profiles"]["base"]["memory"]
    assert memory["rss_mib"]["loaded"] > 0  # attached: the process listening there (this one)
    assert memory["system_used_mib"]["before"] is None  # it was running before: no "before" figures
    assert doc["profiles"]["base"]["started_here"] is False

    identity = {p["prompt"]: p for p in doc["identity"]["pairs"]}
    assert identity["task-store"]["identical"] and identity["linked-list"]["identical"]
    kv = identity["kv-report"]
    assert not kv["identical"] and kv["first_difference"]["line"] == 3 and kv["similarity"] < 1
    spec_kv = next(r for r in doc["requests"] if r["profile"] == "spec" and r["prompt"] == "kv-report")
    assert spec_kv["code"]["parses"] is False

    with (out / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 12
    spec_rows = {(r["prompt"], r["run"]): r for r in rows if r["profile"] == "spec"}
    assert spec_rows[("kv-report", "1")]["identical_to_baseline"] == "False"
    assert spec_rows[("task-store", "1")]["identical_to_baseline"] == "True"
    assert spec_rows[("task-store", "2")]["identical_to_baseline"] == ""  # compared on run 1 only
    assert spec_rows[("kv-report", "1")]["code_parses"] == "False"
    assert float(spec_rows[("task-store", "1")]["gen_tok_s"]) == 250.0

    for name in ("speed", "acceptance"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        svg = ET.parse(out / f"{name}.svg").getroot()
        assert svg.tag.endswith("svg")
    speed_svg = (out / "speed.svg").read_text()
    assert "2.50×" in speed_svg  # the ratio labels are drawn (as text in the SVG)


@pytest.mark.slow
def test_bench_json_without_temperature_zero_has_no_identity(two_scripted_profiles, capsys):
    assert main(["bench", "base", "spec", "--no-warmup", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["identity"] is None and doc["warmup"] == [] and len(doc["requests"]) == 6


@pytest.mark.slow
def test_bench_tasks_runs_one_task_and_writes_its_result(isolated_state, tmp_path, capsys):
    tasks = Path(__file__).resolve().parents[3] / "examples" / "tasks"
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.py", "content": 'print("Hello, world!")\n'}}]},
        {"content": "Created hello.py."},
    ]  # fmt: skip
    with ScriptedServer(script) as server:
        argv = ["bench", "--base-url", server.url, "--tasks", str(tasks), "--task", "hello"]
        assert main([*argv, "--out", str(tmp_path / "out"), "--json", "--task-timeout", "120"]) == 0
    [result] = json.loads(capsys.readouterr().out)["attach"]
    assert result["name"] == "hello" and result["solved"] and result["turns"] == 2
    [line] = (tmp_path / "out" / "attach.jsonl").read_text().splitlines()
    assert json.loads(line)["session_id"] == result["session_id"]


@pytest.mark.slow
def test_bench_fresh_starts_sets_how_often_each_task_starts_afresh(isolated_state, tmp_path, capsys):
    task = tmp_path / "tasks" / "never-passes"
    task.mkdir(parents=True)
    front = "---\napproval: full-auto\ncheck: python3 -c 'raise SystemExit(1)'\ncheck_rounds: 0\n---\n"
    (task / "task.md").write_text(front + "Write x.py.\n")
    with ScriptedServer() as server:  # "Done." to every request: each line is stuck at once
        argv = [
            "bench",
            "--base-url",
            server.url,
            "--tasks",
            str(tmp_path / "tasks"),
            "--out",
            str(tmp_path / "out"),
        ]
        assert main([*argv, "--fresh-starts", "1", "--json", "--task-timeout", "120"]) == 0
        # the first line and one fresh start, not the default two
        assert len(server.requests) == 2
    [result] = json.loads(capsys.readouterr().out)["attach"]
    assert not result["solved"]
    [line] = (tmp_path / "out" / "attach.jsonl").read_text().splitlines()
    assert json.loads(line)["agent_args"][-2:] == ["--fresh-starts", "1"]


def test_a_profile_named_twice_is_refused(isolated_state, capsys):
    assert main(["bench", "tiny", "tiny"]) == 2
    assert "named twice" in capsys.readouterr().err


def test_suite_line_sums_a_profiles_tasks():
    from agent.frontends.measure.bench_modes import suite_line
    from agent.frontends.measure.suite import TaskScore

    rows = [
        TaskScore("a", True, 0, turns=2, seconds=30, output_tokens=200, gen_tok_s=20.0, cache_reuse=0.9),
        TaskScore("b", False, 1, turns=5, seconds=100, output_tokens=900, gen_tok_s=10.0, acceptance=0.5),
        TaskScore("c", True, 0, turns=1, seconds=10, output_tokens=50, gen_tok_s=30.0, cache_reuse=0.7),
    ]
    assert suite_line("coder", rows) == (
        "coder: solved 2/3, 140 s in all (20 s per solved task), 8 turns, 1150 tokens, median 20.0 tok/s, "
        "draft 50%, cache 80%"
    )


@pytest.mark.slow
def test_a_looping_answer_is_read_whole_by_the_bench(isolated_state, capsys):
    # The agent's client cuts an answer that repeats itself; the bench must not (the seed reads whole
    # answers, and a cut stream has no timings): 3000 characters of one repeated line come back whole.
    loop = "<|turn>model\n" * 230
    with ScriptedServer(default={"content": loop}) as server:
        assert main(["bench", "--base-url", server.url, "--no-warmup", "--json"]) == 0
        agents_answer = asyncio.run(one_answer(server))
    doc = json.loads(capsys.readouterr().out)
    for r in doc["requests"]:
        assert r["content"] == loop and r["stats"]["predicted_n"] == len(loop) // 4
    # and a client of the agent's own still cuts the loop afterwards: the bench's choice is its client's
    assert agents_answer.repetition == len("<|turn>model\n") and len(agents_answer.content) < len(loop)


async def one_answer(server: ScriptedServer) -> Completion:
    client = ModelClient(Endpoint(base_url=server.url + "/v1"))
    try:
        async for item in client.stream([{"role": "user", "content": "hi"}]):
            if isinstance(item, Completion):
                return item
    finally:
        await client.close()
    raise AssertionError("no completion")


def test_a_failed_request_is_reported_as_an_error_not_a_traceback(isolated_state, capsys):
    failure = {
        "status": 500,
        "error": {"code": 500, "message": "Invalid input batch.", "type": "server_error"},
    }
    with ScriptedServer(default=failure) as server:
        code = main(["bench", "--base-url", server.url, "--no-warmup"])
    err = capsys.readouterr().err
    assert code != 0 and "attach: a bench request failed" in err and "Invalid input batch." in err
