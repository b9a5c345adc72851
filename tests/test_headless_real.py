"""`agent run` on the real embedded llama-server with the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.test_headless import REPO, agent, events_of, sessions

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
        "run", str(REPO / "examples" / "hello.md"), "-p", profile, "--workdir", str(tmp_path), timeout=600
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


def test_forced_compaction_on_a_small_context_runs_more_turns_than_fit_and_keeps_the_cache(
    embedded, tmp_path, isolated_state
):
    n_ctx = 2048
    profile = tiny_profile(isolated_state, "tiny-small", n_ctx)
    task = tmp_path / "task.md"
    task.write_text(
        "---\napproval: full-auto\nmax_turns: 10\n---\nList the files, read them, and run the tests.\n"
    )
    result = agent(
        "run", str(task), "-p", profile, "--workdir", str(tmp_path), "--tool-choice", "required", timeout=900
    )
    assert result.returncode in (1, 3), result.stderr  # a limit or repeated failing calls, never a crash
    [path] = sessions(isolated_state)
    events = events_of(path)
    assert events[-1]["summary"]["error"] == "" or "ContextTooSmall" not in events[-1]["summary"]["error"]
    compactions = [i for i, e in enumerate(events) if e["type"] == "compaction"]
    assert compactions, "the context never needed compacting"
    turns = [e["stats"] for e in events if e["type"] == "turn.completed"]
    processed = sum(s["prompt_n"] + s["predicted_n"] for s in turns)
    assert processed > n_ctx  # more went through this session than the context holds
    after = [e["stats"] for e in events[compactions[0] :] if e["type"] == "turn.completed"]
    assert after and after[0]["cache_n"] > 0.5 * turns[0]["prompt_n"]  # the prefix still comes from the cache
