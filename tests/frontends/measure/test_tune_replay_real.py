"""`agent server tune --from-sessions` on the real embedded llama-server and the tiny model: a real
session recorded (`agent bench --conversation`, a session like any other), then replayed on the setups
of the profile. Speeds are not asserted; what must hold on any machine is (tests/frontends/measure/
test_tune_replay.py checks the replayed requests byte for byte on the scripted server)."""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.server.profiles import load_profile_file
from agent.server.registry import ServerRegistry
from agent.store.transcripts import list_session_paths
from tests.conftest import llama_server_pids
from tests.frontends.measure.test_tune_real import tiny_copy

pytestmark = pytest.mark.server


@pytest.mark.timeout(600)
def test_a_recorded_session_is_replayed_on_each_setup_and_the_fastest_kept(
    embedded, isolated_state, tmp_path
):
    source = tiny_copy(isolated_state)
    source.write_text(source.read_text().replace("max_tokens = 160", "max_tokens = 24"))
    prompts = tmp_path / "prompts.md"
    prompts.write_text("Say hello.\n---\nSay goodbye.\n")
    assert main(["bench", "tiny-t", "--conversation", "--prompt-file", str(prompts), "--max-turns", "1"]) == 0
    [session] = list_session_paths(isolated_state)
    answers = sum(
        json.loads(line)["type"] == "assistant.message" for line in session.read_text().splitlines()
    )
    assert answers == 2

    out = tmp_path / "out"
    argv = [
        "server",
        "tune",
        "tiny-t",
        "--from-sessions",
        "--last",
        "1",
        "--ngram-lengths",
        "16",
        "--out",
        str(out),
    ]
    assert main(argv) == 0

    doc = json.loads((out / "results.json").read_text())
    assert [r["setup"]["label"] for r in doc["results"]] == ["none", "ngram-mod n16", "ngram-simple n16"]
    for r in doc["results"]:
        assert r["status"] == "measured", r
        assert r["requests"] == 2 and 0 <= r["same_answers"] <= 2
        assert r["turn_s"] > 0 and r["gen_tok_s"] > 0
        assert sum(k["requests"] for k in r["by_kind"].values()) == 2
        if r["acceptance"] is not None:  # drafted: llama-server's /metrics counts it by position too
            assert r["per_position"]["drafts"] > 0
    best = min((r for r in doc["results"]), key=lambda r: r["turn_s"])
    assert doc["best"] == best["setup"]["label"]
    tuned_path = source.with_name("tiny-t-tuned.toml")
    assert load_profile_file(tuned_path).spec_label == best["setup"]["type"]
    assert "On 2 recorded requests replayed" in tuned_path.read_text()
    assert not ServerRegistry(isolated_state).running() and not llama_server_pids()
