"""The real BeeLlama 0.1 llama-server with a wrong DFlash draft: the tiny model, an ordinary GGUF.

BeeLlama loads such a draft, turns healthy, and then answers HTTP 500 "Invalid input batch" to every
request that drafts (FACTS.md). The agent must refuse it before launch (the preflight), or drop the
draft and finish the task, saying why. These tests run the real binary, which the test suite does not build:
set BEELLAMA_SERVER_BIN to a BeeLlama 0.1 llama-server (AGENTS.md says how to build one); unset, the
module is skipped. The scripted stand-ins of tests/frontends/tui/test_draft_off.py cover the same paths in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from agent.cli import main
from agent.server import lifecycle
from agent.server.launch_plan import plan_launch
from agent.server.preflight.report import DraftError
from agent.server.profiles import get_profile
from agent.server.registry import ServerRegistry
from tests.conftest import free_port, llama_server_pids
from tests.frontends.test_headless import REPO, SCHEMA, events_of, sessions

pytestmark = pytest.mark.server

BINARY = os.environ.get("BEELLAMA_SERVER_BIN", "")
if not (BINARY and Path(BINARY).is_file() and os.access(BINARY, os.X_OK)):
    pytest.skip(
        "BEELLAMA_SERVER_BIN does not name an executable BeeLlama 0.1 llama-server", allow_module_level=True
    )

REFUSED = "the draft is not a DFlash model (its architecture is 'gemma3')"
LOGGED = "the draft model is not a DFlash model (the server logged n_target_layers=0)"
AT_REQUEST = 'the draft model is not a DFlash model (HTTP 500 "Invalid input batch" on a request)'


def write_profile(isolated_state: Path, embedded, name: str, **fields: object) -> str:
    """A profile in the user's profile folder: the tiny model as target and as its `dflash` draft,
    run by the BeeLlama binary named by $BEELLAMA_SERVER_BIN, greedy, short, on a free port.
    --kv-unified as in the seed: with DFlash on, BeeLlama 0.1 makes two sequences of one slot, and
    without it each gets half of ctx_size (1,024 tokens here, too small for the agent's prompt)."""
    folder = isolated_state.parent / "config" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    (folder / f"{name}.toml").write_text(
        'description = "the tiny model as its own DFlash draft, on BeeLlama 0.1"\n'
        'dialect = "beellama-0.1"\nbinary = "$BEELLAMA_SERVER_BIN"\nmodel = "embedded"\n'
        f"port = {free_port()}\nctx_size = 2048\n"
        'chat_template_file = "embedded:google-gemma-4-31B-it.jinja"\n'
        f'args = ["-np", "1", "--kv-unified", "--metrics"]\n{extra}\n'
        f'[speculative]\ntype = "dflash"\ndraft_model = "{embedded.embedded_model("tiny")}"\n\n'
        "[sampling]\ntemperature = 0.0\nmax_tokens = 16\n"
    )
    return name


def run_json(tmp_path: Path, profile: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """`agent run --json` on a tiny task, as a user runs it; its events, checked against the schema."""
    task = tmp_path / "task.md"
    task.write_text("---\nmax_turns: 2\n---\nWrite a Python function that adds two numbers.\n")
    result = subprocess.run(
        [sys.executable, "-m", "agent", "run", str(task), "-p", profile,
         "--workdir", str(tmp_path / "work"), "--json"],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=os.environ.copy(),
    )  # fmt: skip
    events = [json.loads(line) for line in result.stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    return result, events


def no_bare_invalid_batch(*texts: str) -> None:
    """The server's bare "Invalid input batch" may appear only quoted inside the reason that says what
    it means (the draft is not a DFlash model), plain or JSON-escaped (--json output)."""
    for text in texts:
        explained = text.replace('\\"Invalid input batch\\" on a request', "").replace(
            '"Invalid input batch" on a request', ""
        )
        assert "Invalid input batch" not in explained, text


def test_the_preflight_refuses_an_ordinary_gguf_as_beellama_s_dflash_draft_before_any_start(
    embedded, isolated_state
):
    name = write_profile(isolated_state, embedded, "bee-refused")
    before = llama_server_pids()
    check = subprocess.run(
        [sys.executable, "-m", "agent", "server", "check", name],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=os.environ.copy(),
    )  # fmt: skip
    assert check.returncode == 4, check.stderr
    assert f"binary         ok      {BINARY} (beellama-0.1)" in check.stdout
    assert f"draft type     fail    {REFUSED}" in check.stdout
    assert "flags          ok" in check.stdout  # the dialect: BeeLlama takes `--spec-type dflash`
    assert f"error: preflight of profile '{name}': draft type" in check.stderr
    with pytest.raises(DraftError) as caught:
        plan_launch(get_profile(name), embedded)
    assert caught.value.reason == REFUSED and caught.value.log_path == ""  # nothing started: no log
    assert caught.value.what == f"preflight of profile '{name}': draft type: {REFUSED}"
    assert "key read: general.architecture" in str(caught.value)
    assert llama_server_pids() == before
    assert not (isolated_state / "logs").exists() or not list((isolated_state / "logs").glob("*.log"))


def test_with_the_default_fallback_agent_run_completes_without_the_draft(embedded, tmp_path, isolated_state):
    profile = write_profile(isolated_state, embedded, "bee-fallback")
    result, events = run_json(tmp_path, profile)
    assert result.returncode == 0, result.stderr
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.started" and kinds[-1] == "session.finished"
    [marker] = [e for e in events if e["type"] == "draft.off"]
    assert marker["reason"] == REFUSED and marker["profile"] == profile
    assert marker["message"].startswith(f"draft off: {REFUSED}. The server runs profile '{profile}' without")
    finished = events[-1]
    assert finished["outcome"] == "completed" and finished["summary"]["draft_off"] == REFUSED
    assert "error" not in kinds
    # Refused before launch: the only start was the target alone, with no failed start to keep.
    logs = list((isolated_state / "logs").glob("*.log"))
    assert [log.name for log in logs] == [f"{profile}-{get_profile(profile).port}.log"]
    first_line = logs[0].read_text().splitlines()[0]
    assert first_line.startswith(f"$ {BINARY} ") and "--spec-draft-model" not in first_line
    [transcript] = sessions(isolated_state)
    assert [e["reason"] for e in events_of(transcript) if e["type"] == "draft.off"] == [REFUSED]
    no_bare_invalid_batch(result.stdout, result.stderr)


def test_without_the_preflight_beellama_starts_with_the_draft_and_the_start_check_drops_it(
    embedded, tmp_path, isolated_state
):
    """preflight = false: BeeLlama really loads the ordinary GGUF as a DFlash draft and logs
    n_target_layers=0; the lifecycle reads that before any request, and the task runs without it."""
    profile = write_profile(isolated_state, embedded, "bee-loaded", preflight=False)
    result, events = run_json(tmp_path, profile)
    assert result.returncode == 0, result.stderr
    [marker] = [e for e in events if e["type"] == "draft.off"]
    assert marker["reason"] == LOGGED
    assert events[-1]["outcome"] == "completed" and events[-1]["summary"]["draft_off"] == LOGGED
    # The failed start is kept: the real BeeLlama took the draft (its command line has it) and said why.
    [failed] = (isolated_state / "logs").glob("*.draft-failed.log")
    assert str(failed) in marker["message"]
    failed_text = failed.read_text()
    assert "--spec-draft-model" in failed_text.splitlines()[0] and "--spec-type dflash" in failed_text
    assert "n_target_layers=0" in failed_text
    no_bare_invalid_batch(result.stdout, result.stderr)


def test_when_only_the_first_real_request_fails_with_500_the_run_restarts_without_the_draft(
    embedded, tmp_path, isolated_state, monkeypatch, capsys
):
    """The last line of defence: a BeeLlama whose log does not give the draft away (the start check
    is blinded here) starts with it, passes the 2-token probe, and answers the first real request
    with HTTP 500 "Invalid input batch". `Connection.fall_back` restarts it without the draft, on the
    same port, and the same request is sent again. In process, so that the blinding holds."""
    monkeypatch.setattr(lifecycle, "_NO_TARGET_LAYERS", "a line no llama-server writes")
    profile = write_profile(isolated_state, embedded, "bee-500", preflight=False)
    task = tmp_path / "task.md"
    task.write_text("---\nmax_turns: 2\n---\nWrite a Python function that adds two numbers.\n")
    code = main(["run", str(task), "-p", profile, "--workdir", str(tmp_path / "work"), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    events = [json.loads(line) for line in out.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    kinds = [e["type"] for e in events]
    [marker] = [e for e in events if e["type"] == "draft.off"]
    assert marker["reason"] == AT_REQUEST
    # Marked where it happened: in the first turn, before its answer; no error reached the user.
    assert kinds.index("turn.started") < kinds.index("draft.off") < kinds.index("assistant.message")
    assert "error" not in kinds
    assert events[-1]["outcome"] == "completed" and events[-1]["summary"]["draft_off"] == AT_REQUEST
    # The start with the draft really served: its log has the 2-token probe and the 500 after it.
    [failed] = (isolated_state / "logs").glob("*.draft-failed.log")
    assert str(failed) in marker["message"]
    failed_text = failed.read_text()
    assert "--spec-draft-model" in failed_text.splitlines()[0] and "n_target_layers=0" in failed_text
    # The restart: same port, no draft.
    [log] = [p for p in (isolated_state / "logs").glob("*.log") if p != failed]
    assert "--spec-draft-model" not in log.read_text().splitlines()[0]
    assert log.name == f"{profile}-{get_profile(profile).port}.log"
    no_bare_invalid_batch(out, err)
    assert ServerRegistry(isolated_state).running() == []
