"""`agent server tune`: the sweep, the budget, the tuned profile and `-p auto`, without a server.
The real sweep on the tiny model is tests/frontends/measure/test_tune_real.py."""

from __future__ import annotations

import asyncio
import json
import time
import tomllib

import pytest

from agent.errors import ConfigError
from agent.frontends.measure.tune_setups import (
    Budget,
    Setup,
    SetupResult,
    add_speedups,
    best,
    parse_budget,
    setup_profile,
    sweep,
    tuned_profile_text,
)
from agent.server.profiles import get_profile, load_profile_file
from agent.session.connect import pick_auto, resolve_profile
from agent.settings.config import Settings
from agent.store.measurements import measured_here, record, store_path
from tools.text_files import write_atomically

UPSTREAM_TYPES = ("none", "draft-simple", "draft-dflash", "ngram-simple", "ngram-mod", "ngram-cache")


def accepts_all(flag: str) -> bool:
    return True


def test_the_sweep_starts_with_no_speculation_then_each_type_then_the_other_lengths():
    setups = sweep(get_profile("coder-draft"), UPSTREAM_TYPES, accepts_all)
    labels = [s.label for s in setups]
    assert labels[:4] == ["none", "draft-simple n8", "ngram-mod n32", "ngram-simple n32"]
    assert set(labels[4:]) == {
        "ngram-mod n16", "ngram-mod n64", "ngram-simple n16", "ngram-simple n64", "draft-simple n4", "draft-simple n16"
    }  # fmt: skip
    assert len(labels) == len(set(labels)) == 10


def test_a_profile_without_a_draft_gets_no_draft_setups():
    labels = [s.label for s in sweep(get_profile("coder"), UPSTREAM_TYPES, accepts_all)]
    assert not any(label.startswith("draft") for label in labels) and labels[0] == "none"


def test_what_the_binary_lacks_is_left_out():
    # BeeLlama 0.1: `dflash`, no ngram-simple, and no length flag for ngram-mod
    types = ("none", "draft-simple", "dflash", "ngram-mod")
    profile = get_profile("gemma4-31b-dflash")
    setups = sweep(profile, types, lambda flag: flag == "--spec-draft-n-max")
    assert [s.label for s in setups][:3] == ["none", "dflash n8", "ngram-mod"]
    assert all(s.spec_type != "ngram-simple" for s in setups)


def test_a_setup_profile_changes_only_the_speculation_and_never_falls_back():
    base = get_profile("coder-draft")
    variant = setup_profile(base, Setup("draft-simple", 4))
    assert variant.speculative.draft_max == 4 and variant.speculative.draft_model == "embedded:coder-0.5b"
    assert variant.fallback is False and variant.name == "coder-draft-tune-draft-simple-n4"
    assert (variant.model, variant.ctx_size, variant.args, variant.port) == (
        base.model, base.ctx_size, base.args, base.port
    )  # fmt: skip
    none = setup_profile(base, Setup("none"))
    assert none.speculative is None and "--spec-type" not in none.server_args("m.gguf", None, None)
    ngram = setup_profile(base, Setup("ngram-mod", 16))
    argv = ngram.server_args("m.gguf", None, None)
    assert argv[argv.index("--spec-ngram-mod-n-max") + 1] == "16"
    assert int(argv[argv.index("--spec-ngram-mod-n-min") + 1]) <= 16


def test_a_bench_run_past_its_time_stops_with_timeout(monkeypatch):
    from agent.frontends.measure import bench_prompts

    async def slow(*_a, **_k):
        await asyncio.sleep(5)

    monkeypatch.setattr(bench_prompts, "run_prompts", slow)
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        bench_prompts.run(None, {}, 8, 0.0, 1, 0.2)
    assert time.monotonic() - began < 2


def test_the_budget_starts_a_setup_only_when_the_slowest_so_far_still_fits():
    now = [0.0]
    budget = Budget(100, clock=lambda: now[0])
    assert budget.allows_another()  # the first always runs
    now[0] = 40
    budget.spent(40)
    assert budget.allows_another()  # 40 + 40 <= 100
    now[0] = 70
    budget.spent(30)
    assert not budget.allows_another()  # 70 + 40 > 100


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("90s", 90), ("1h30m", 5400), ("45", 45), ("2min", 120)]
)
def test_budgets_are_durations(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["ten minutes", "10x", "0", "-5m", ""])
def test_a_budget_that_is_not_a_duration_is_refused_with_the_form_to_use(text):
    with pytest.raises(ConfigError) as error:
        parse_budget(text)
    assert "10m" in (error.value.fix or "") + str(error.value)


def measured(label: str, gen: float | None, length: int | None = 8, **more) -> SetupResult:
    kind, _, _ = label.partition(" ")
    return SetupResult(
        Setup(kind, None if kind == "none" else length), status="measured", gen_tok_s=gen, **more
    )


def test_the_best_setup_is_the_fastest_and_speedups_are_over_none():
    results = [measured("none", 20.0), measured("ngram-mod", 24.0), measured("draft-simple", 13.0)]
    results.append(SetupResult(Setup("ngram-simple", 16), status="failed", reason="exit 1"))
    add_speedups(results)
    assert best(results).setup.spec_type == "ngram-mod"
    assert results[1].speedup == pytest.approx(1.2) and results[3].speedup is None


def test_with_tasks_the_most_solved_wins_before_speed():
    results = [
        measured("none", 20.0, solved=3, task_seconds=200.0),
        measured("ngram-mod", 30.0, solved=2, task_seconds=90.0),
    ]
    assert best(results).setup.spec_type == "none"


def test_nothing_measured_means_no_best():
    assert best([SetupResult(Setup("none"), status="failed", reason="x")]) is None


def test_the_tuned_profile_keeps_the_file_and_records_the_measurement(tmp_path):
    base = get_profile("coder-draft")
    results = [
        measured("none", 20.0),
        measured("draft-simple", 25.0, length=4, acceptance=0.9, accepted_per_draft=3.1),
    ]
    results.append(SetupResult(Setup("ngram-mod", 64), reason="over the budget (2m)"))
    add_speedups(results)
    text = tuned_profile_text(
        base, results[1], results, ["Written by `agent server tune coder-draft` on today."]
    )
    path = tmp_path / "coder-draft-tuned.toml"
    write_atomically(path, text)
    assert text.startswith("# Written by `agent server tune coder-draft`")
    assert "draft-simple n4" in text and "1.25x" in text and "over the budget" in text
    tuned = load_profile_file(path)
    assert tuned.speculative.type == "draft-simple" and tuned.speculative.draft_max == 4
    assert tuned.model == base.model and tuned.args == base.args and tuned.actions == base.actions
    assert "tuned on this machine" in tuned.description
    # the original file's own comments travel with it
    assert "same family and tokenizer" in path.read_text().lower()


def test_a_tuned_profile_without_speculation_has_no_speculative_table(tmp_path):
    base = get_profile("coder-draft")
    results = [measured("none", 20.0)]
    path = tmp_path / "x-tuned.toml"
    write_atomically(path, tuned_profile_text(base, results[0], results, ["h"]))
    assert "speculative" not in tomllib.loads(path.read_text())


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "p.toml"
    path.write_text("old = 1\n")

    def interrupted(*_a):
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, "new = 2\n")
    assert path.read_text() == "old = 1\n" and [p.name for p in tmp_path.iterdir()] == ["p.toml"]


# ------------------------------------------------------------------------------------------ -p auto


def test_auto_with_nothing_measured_takes_the_embedded_default(tmp_path):
    profile, why = pick_auto(Settings(), tmp_path)
    assert profile.name == "coder-ngram" and "nothing measured" in why


def test_auto_takes_the_fastest_profile_measured_on_this_machine(tmp_path, monkeypatch):
    monkeypatch.setattr("agent.server.profile_status", lambda p, s: "ready")
    record("coder", 20.5, "bench", "agent bench coder")
    record("coder-ngram", 23.0, "bench", "agent bench coder-ngram")
    record("tiny", 90.0, "bench", "agent bench tiny")  # fast, but a test model: `auto = false`
    record("coder-draft", 13.0, "bench", "agent bench coder-draft")
    said = []
    profile = resolve_profile(Settings(), "auto", None, tmp_path, say=said.append)
    assert profile.name == "coder-ngram"
    assert "23.0 tok/s" in said[0] and "agent bench coder-ngram" in said[0] and "coder 20.5" in said[0]
    assert "tiny" not in said[0]


def test_auto_ignores_other_machines_and_profiles_that_cannot_start_here(tmp_path, monkeypatch):
    record("coder", 20.0, "bench", "agent bench coder")
    with store_path().open("a") as f:  # another machine's figure
        f.write('{"machine": "elsewhere", "profile": "coder-ngram", "gen_tok_s": 99, "command": "x"}\n')
    monkeypatch.setattr(
        "agent.server.profile_status", lambda p, s: "missing: x.gguf" if p.name == "coder" else "ready"
    )
    assert set(measured_here()) == {"coder"}
    profile, why = pick_auto(Settings(), tmp_path)
    assert (
        profile.name == "coder-ngram" and "nothing measured" in why
    )  # the measured one cannot start: default


def test_the_newest_measurement_of_a_profile_counts(tmp_path, monkeypatch):
    monkeypatch.setattr("agent.server.profile_status", lambda p, s: "ready")
    record("coder", 30.0, "bench", "old")
    record("coder-ngram", 25.0, "bench", "b")
    record("coder", 20.0, "bench", "new")
    profile, why = pick_auto(Settings(), tmp_path)
    assert profile.name == "coder-ngram" and "coder 20.0" in why


def test_a_torn_store_line_is_skipped(tmp_path):
    record("coder", 20.0, "bench", "a")
    with store_path().open("a") as f:
        f.write('{"profile": "cod')
    assert list(measured_here()) == ["coder"]


def test_no_recorded_session_to_replay_says_how_to_record_one(capsys):
    from agent.cli import main

    assert main(["server", "tune", "tiny", "--from-sessions"]) == 2
    err = capsys.readouterr().err
    assert "no recorded session to replay" in err and "agent run TASK.md -p PROFILE" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--last", "2"], "--last goes with --from-sessions"),
        (["--from-sessions", "--tasks"], "--from-sessions and --tasks measure different work"),
        (["--from-sessions", "20261205", "--last", "2"], "session ids or --last N, not both"),
        (["--from-sessions", "--last", "0"], "--last 0 picks no session"),
    ],
)
def test_what_to_replay_is_said_one_way(argv, said, capsys):
    from agent.cli import main

    assert main(["server", "tune", "tiny", *argv]) == 2
    assert said in capsys.readouterr().err


def test_each_request_is_rebuilt_from_the_events_before_its_answer(isolated_state, tmp_path):
    """A cut turn (no figures: its length estimated), a resume, and a compaction before a request."""
    from agent.frontends.measure.tune_replay import pick_sessions
    from agent.store.transcripts import sessions_dir

    started = {"type": "session.started", "profile": "tiny", "model": "tiny", "workspace": str(tmp_path)}
    compacted = [{"role": "user", "content": "summary"}]
    events = [
        started,
        {"type": "user.message", "content": "first"},
        {"type": "assistant.message", "turn": 1, "content": "x" * 90},  # kill -9 in its tools: no figures
        {**started, "resumed": True},
        {"type": "user.message", "content": "again"},
        {"type": "assistant.message", "turn": 1, "content": "ok"},
        {"type": "turn.completed", "turn": 1, "stats": {"predicted_n": 5}},
        {"type": "compaction", "history": compacted},
        {"type": "assistant.message", "turn": 2, "content": "done"},
        {"type": "turn.completed", "turn": 2, "stats": {"completion_tokens": 7}},
    ]
    folder = sessions_dir(isolated_state)
    folder.mkdir(parents=True)
    (folder / "20261205-120000-abcd.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))

    [session] = pick_sessions([], None, Settings(), "blocks")
    first, second, third = session.requests
    assert session.model == "gemma-3-270m-q4_k_m.gguf"  # the tiny profile's file, not its name
    system = first.messages[0]
    assert system["role"] == "system" and first.tools == []  # never acted: the fallback, blocks
    assert first.messages[1:] == [{"role": "user", "content": "first"}] and first.max_tokens == 30
    assert second.messages[1:] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "x" * 90},
        {"role": "user", "content": "again"},
    ]
    assert second.max_tokens == 5
    assert third.messages == [system, *compacted] and third.max_tokens == 7


def test_with_a_comma_list_the_draft_model_also_runs_joined_by_each_ngram_type():
    profile = get_profile("coder-draft-ngram")  # its own type is already a list: its draft type leads
    labels = [s.label for s in sweep(profile, UPSTREAM_TYPES, accepts_all, type_list=True)]
    assert labels[:6] == [
        "none", "draft-simple n8", "ngram-mod n32", "ngram-simple n32",
        "draft-simple,ngram-mod n8", "draft-simple,ngram-simple n8",
    ]  # fmt: skip
    assert "draft-simple,ngram-mod n4" in labels and len(labels) == len(set(labels)) == 16
    assert not any("," in s.label for s in sweep(profile, UPSTREAM_TYPES, accepts_all))  # one type only
    combined = setup_profile(profile, Setup("draft-simple,ngram-mod", 4))
    argv = combined.server_args("m.gguf", "d.gguf", None)
    assert argv[argv.index("--spec-type") + 1] == "draft-simple,ngram-mod"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "4" and "--spec-draft-model" in argv


def test_setup_picks_setups_by_their_sweep_labels_and_names_the_ones_it_has_when_one_is_unknown():
    from agent.errors import AgentError
    from agent.frontends.measure.tune_command import _chosen

    setups = sweep(get_profile("coder-draft"), UPSTREAM_TYPES, accepts_all, (8,), (16,), type_list=True)
    picked = _chosen(setups, ["draft-simple,ngram-mod n8", "none", "ngram-mod n16"])
    assert [s.label for s in picked] == ["none", "ngram-mod n16", "draft-simple,ngram-mod n8"]  # sweep order
    with pytest.raises(AgentError) as refused:
        _chosen(setups, ["none", "ngram-mod n32"])
    assert "no setup 'ngram-mod n32'" in str(refused.value)
    assert "ngram-mod n16" in refused.value.why  # what there is to pick from
