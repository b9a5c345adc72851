"""`agent server tune` on the real embedded llama-server and the tiny model (issue 16: tune runs in CI):
the sweep within a small budget, the tuned profile it writes, and an interrupted tune that leaves none.
Speeds are not asserted (docs/benchmarks.md holds them); what must hold on any machine is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.server.profiles import get_profile, load_profile_file
from agent.server.registry import ServerRegistry
from agent.session.connect import pick_auto
from agent.settings.config import Settings
from tests.conftest import free_port, llama_server_pids

pytestmark = pytest.mark.server

REPO = Path(__file__).resolve().parents[3]


def tiny_copy(isolated_state: Path, name: str = "tiny-t") -> Path:
    """The built-in `tiny` profile on a free port, in the user's profile folder, with `-p auto` allowed."""
    folder = isolated_state.parent / "config" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    text = (REPO / "server_profiles" / "tiny.toml").read_text()
    text = text.replace("port = 8920", f"port = {free_port()}").replace("auto = false", "auto = true")
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def tune(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agent", "server", "tune", *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
    )  # fmt: skip


@pytest.mark.timeout(600)
def test_tune_sweeps_the_tiny_model_and_writes_the_tuned_profile(embedded, isolated_state, tmp_path):
    source = tiny_copy(isolated_state)
    out = tmp_path / "out"
    proc = tune(
        "tiny-t", "--budget", "150s", "--max-tokens", "24", "--ngram-lengths", "16,64", "--out", str(out)
    )
    stdout, stderr = proc.communicate(timeout=540)
    assert proc.returncode == 0, stderr[-3000:]

    doc = json.loads((out / "results.json").read_text())
    labels = [r["setup"]["label"] for r in doc["results"]]
    assert labels[:3] == ["none", "ngram-mod n64", "ngram-simple n64"]  # the middle of two is the second
    measured = [r for r in doc["results"] if r["status"] == "measured"]
    assert measured[0]["setup"]["label"] == "none" and len(measured) >= 2, stderr
    for r in measured:
        assert r["gen_tok_s"] > 0 and r["server_argv"], r
        if r["setup"]["type"] != "none":
            assert "--spec-type" in r["server_argv"] and r["speedup"] is not None
    for r in doc["results"]:
        assert r["status"] in ("measured", "not run", "failed", "stopped")
        assert r["status"] != "not run" or "budget" in r["reason"]
    assert (out / "tune.png").stat().st_size > 10_000 and (out / "tune.svg").is_file()

    tuned_path = source.with_name("tiny-t-tuned.toml")
    tuned = load_profile_file(tuned_path)
    best = next(r for r in doc["results"] if r["setup"]["label"] == doc["best"])
    assert best["gen_tok_s"] == max(r["gen_tok_s"] for r in measured)
    assert tuned.spec_label == best["setup"]["type"]
    assert tuned.model == "embedded" and tuned.port == get_profile("tiny-t").port
    text = tuned_path.read_text()
    assert text.startswith("# Written by `agent server tune tiny-t --budget 150s")
    assert f"The fastest setup, {doc['best']}" in text and "cpus" in text
    assert f"wrote {tuned_path}" in stdout.replace("\n", "") or str(tuned_path) in stdout
    assert "generation tok/s per setup" in stdout  # the terminal chart

    # what it measured is what `-p auto` now picks
    profile, why = pick_auto(Settings(), tmp_path)
    assert profile.name == "tiny-t-tuned" and "agent server tune tiny-t" in why
    assert not ServerRegistry(isolated_state).running() and not llama_server_pids()


@pytest.mark.timeout(300)
def test_an_interrupted_tune_leaves_no_profile_and_no_server(embedded, isolated_state, tmp_path):
    source = tiny_copy(isolated_state)
    proc = tune("tiny-t", "--budget", "10m", "--max-tokens", "400", "--out", str(tmp_path / "out"))
    # the first setup is measured, the second is loading or generating: stop it there
    deadline = time.monotonic() + 200
    seen = ""
    while time.monotonic() < deadline and "[1/" not in seen:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert "[1/" in seen, seen
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode in (130, 143), seen + rest
    assert sorted(p.name for p in source.parent.iterdir()) == ["tiny-t.toml"]  # no tuned file, no temporary
    assert not ServerRegistry(isolated_state).running()
    assert not llama_server_pids()
