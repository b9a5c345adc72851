"""`agent run` on the real embedded llama-server with the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.frontends.test_headless import REPO, agent, events_of, sessions

pytestmark = pytest.mark.server


def tiny_profile(isolated_state: Path, name: str, ctx_size: int) -> str:
    folder = isolated_state.parent / "config" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    text = (REPO / "server_profiles" / "tiny.toml").read_text()
    text = text.replace("port = 8920", f"port = {free_port()}").replace(
        "ctx_size = 8192", f"ctx_size = {ctx_size}"
    )
    (folder / f"{name}.toml").write_text(text)
    return name


def test_an_example_runs_to_its_end_with_the_right_exit_code_a_transcript_and_stats(
    embedded, tmp_path, isolated_state
):
    profile = tiny_profile(isolated_state, "tiny-example", 8192)
    result = agent(
        "run",
        str(REPO / "examples" / "tasks" / "hello" / "task.md"),
        "-p",
        profile,
        "--workdir",
        str(tmp_path),
        "--fresh-starts",  # as many lines as before the default rose to six: each is one the tiny
        "2",  # model cannot use, and fresh starts have tests of their own
        timeout=600,
    )
    # The tiny base model cannot write hello.py: the check fails (1), or the turn limit is hit (3).
    assert result.returncode in (1, 3), result.stderr
    [path] = sessions(isolated_state)
    events = events_of(path)
    assert events[0]["type"] == "session.started" and events[-1]["type"] == "session.finished"
    assert events[-1]["summary"]["exit_code"] == result.returncode
    turns = [e for e in events if e["type"] == "turn.completed"]
    telemetry = [json.loads(x) for x in (isolated_state / "telemetry" / path.name).read_text().splitlines()]
    assert len(telemetry) == len(turns) >= 1
    assert all(t["stats"]["predicted_n"] > 0 and t["stats"]["prompt_per_second"] > 0 for t in telemetry)
    assert all(t["profile"] == profile for t in telemetry)


def mid_run(events: list[dict], index: int) -> bool:
    """Whether a turn of the same run came before event `index`: a compaction before a resumed run's
    first request meets a fresh server, whose cache holds nothing yet, so it proves nothing of the cache."""
    start = max((i for i, e in enumerate(events[:index]) if e["type"] == "session.started"), default=0)
    return any(e["type"] == "turn.completed" for e in events[start:index])


def test_forced_compaction_on_a_small_context_runs_more_turns_than_fit_and_keeps_the_cache(
    embedded, tmp_path, isolated_state
):
    n_ctx = 2048
    profile = tiny_profile(isolated_state, "tiny-small", n_ctx)
    task = tmp_path / "task.md"
    task.write_text(
        "---\napproval: full-auto\nmax_turns: 6\n---\nList the files, read them, and run the tests.\n"
    )
    # The base model often repeats a failing call, which ends a task early: follow-up tasks in the same
    # session keep it going until far more has gone through it than the context holds.
    session = None
    for _ in range(6):
        resume = ["--resume", session] if session else []
        result = agent("run", str(task), *resume, "-p", profile, "--workdir", str(tmp_path), "--tool-choice", "required",
                       timeout=900)  # fmt: skip
        # A limit, repeated failing calls, or (rarely, sampled at 0.7) an answer without a call that ends
        # the task: never a crash. A resume then carries the same session on either way.
        assert result.returncode in (0, 1, 3), result.stderr
        [path] = sessions(isolated_state)
        session = path.stem
        events = events_of(path)
        turns = [e["stats"] for e in events if e["type"] == "turn.completed"]
        compactions = [i for i, e in enumerate(events) if e["type"] == "compaction" and mid_run(events, i)]
        if compactions and sum(s["prompt_n"] + s["predicted_n"] for s in turns) > 2 * n_ctx:
            break
    assert compactions, "the context never needed compacting"
    assert not [e for e in events if e["type"] == "error" and e["error"] == "context_too_small"]
    assert sum(s["prompt_n"] + s["predicted_n"] for s in turns) > 2 * n_ctx
    prefix = turns[0]["prompt_n"] - 100  # the system prompt and tools, less the first user message
    following = [
        next((e["stats"] for e in events[i:] if e["type"] == "turn.completed"), None) for i in compactions
    ]
    following = [stats for stats in following if stats]
    assert following
    for after in following:
        assert after["cache_n"] >= prefix  # the prefix still comes from the cache after compaction
    # The turn after a compaction says why its cache broke, in its figures and in `agent stats`.
    why = [after["cache_break"] for after in following if after.get("cache_break")]
    assert why and all("a compaction summarised the history" in cause for cause in why), why
    stats = agent("stats", session, timeout=60)
    assert stats.returncode == 0, stats.stderr
    assert "a compaction summarised the history" in " ".join(stats.stdout.split())
