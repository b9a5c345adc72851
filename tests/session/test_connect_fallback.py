"""The work goes on when the draft fails (agent/session/connect.py): the real embedded llama-server, restarted
without the profile's draft, and the session marked "draft off" in the event log and `agent stats`."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from agent.server.lifecycle import stop
from agent.server.preflight.gguf import read_gguf_header
from agent.server.preflight.report import DraftError
from agent.server.profiles import get_profile
from agent.server.registry import ServerRegistry
from agent.session.connect import connect
from agent.settings.config import Settings
from tests.conftest import free_port, llama_server_pids
from tests.frontends.test_headless import REPO, SCHEMA, agent, events_of, sessions
from tests.gguf_files import write_dflash

pytestmark = pytest.mark.server

NOT_DFLASH = "the draft model is not a DFlash model"


def write_profile(isolated_state: Path, name: str, draft: str = "embedded", **fields: object) -> str:
    """A tiny profile (the user's config folder) naming `draft` as its DFlash draft, greedy and short."""
    folder = isolated_state.parent / "config" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    (folder / f"{name}.toml").write_text(
        f'description = "tiny with {draft} as its DFlash draft"\nmodel = "embedded"\nport = {free_port()}\n'
        'ctx_size = 2048\nchat_template_file = "embedded:google-gemma-4-31B-it.jinja"\n'
        f'args = ["-np", "1", "--metrics"]\n{extra}\n'
        f'[speculative]\ntype = "draft-dflash"\ndraft_model = "{draft}"\n\n'
        "[sampling]\ntemperature = 0.0\nmax_tokens = 12\n"
    )
    return name


def test_a_draft_that_aborts_the_server_at_load_falls_back_and_the_task_completes(
    embedded, tmp_path, isolated_state
):
    # preflight = false: the launch goes ahead, and upstream aborts on its assert while loading the draft.
    profile = write_profile(isolated_state, "tiny-fake-dflash", preflight=False)
    task = tmp_path / "task.md"
    task.write_text("---\nmax_turns: 2\n---\nSay hello.\n")
    result = agent(
        "run", str(task), "-p", profile, "--workdir", str(tmp_path / "work"), "--json", timeout=600
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.started" and kinds[1] == "draft.off" and kinds[-1] == "session.finished"
    marker = events[1]
    assert marker["reason"] == NOT_DFLASH and marker["profile"] == profile
    assert marker["message"].startswith(
        f"draft off: {NOT_DFLASH}. The server runs profile '{profile}' without"
    )
    finished = events[-1]
    assert finished["outcome"] == "completed" and finished["summary"]["draft_off"] == NOT_DFLASH
    assert finished["turns"] >= 1

    # The failed start's log is kept, with the assert that says why.
    [failed_log] = (isolated_state / "logs").glob("*.draft-failed.log")
    assert failed_log.name == failed_log.name.split(".")[0] + ".draft-failed.log"
    assert "DFlash model has no target_layer_ids" in failed_log.read_text()
    assert str(failed_log) in marker["message"]

    # The transcript and the telemetry carry it; `agent stats` shows it.
    [transcript] = sessions(isolated_state)
    assert next(e for e in events_of(transcript) if e["type"] == "draft.off")["reason"] == NOT_DFLASH
    telemetry = [
        json.loads(x) for x in (isolated_state / "telemetry" / transcript.name).read_text().splitlines()
    ]
    assert telemetry and all(t["draft_off"] == NOT_DFLASH and t["spec_mode"] == "none" for t in telemetry)
    stats = agent("stats", "--json")
    assert json.loads(stats.stdout)["sessions"][0]["draft_off"] == NOT_DFLASH
    shown = agent("stats")
    assert f"profile {profile} (draft off: {NOT_DFLASH})" in shown.stdout
    # Every turn ran without speculation: no draft figures at all.
    assert all(t["stats"]["draft_n"] is None for t in telemetry)


def test_a_preflight_refusal_starts_the_target_alone_and_a_reuse_says_so(embedded, isolated_state):
    name = write_profile(isolated_state, "tiny-refused")
    profile = get_profile(name)
    with connect(Settings(), profile, keep_running=True) as conn:
        # Nothing was launched with the draft: the first and only command line has none.
        assert conn.draft_off == "the draft is not a DFlash model (its architecture is 'gemma3')"
        assert "--spec-draft-model" not in conn.handle.record.argv
        assert conn.profile.speculative is None and conn.endpoint.spec_mode == "none"
        assert conn.draft_log == ""  # no failed start, no log to keep
        event = conn.draft_off_event()
        assert event is not None and event.to_json()["type"] == "draft.off"
        log = Path(conn.handle.record.log_path).read_text()
        assert log.startswith("$ ") and "--spec-type" not in log.splitlines()[0]
        pid = conn.handle.record.pid
    # The server stays (keep_running): the next connection reuses it and still says why the draft is off.
    with connect(Settings(), profile) as again:
        assert again.handle.reused and again.handle.record.pid == pid
        assert again.draft_off == conn.draft_off
        assert again.profile.speculative is None
    assert stop(again.handle, ServerRegistry(isolated_state))  # ours, left running: stopped here
    assert ServerRegistry(isolated_state).running() == []


def test_fallback_false_refuses_and_leaves_nothing_running(embedded, isolated_state):
    profile = get_profile(write_profile(isolated_state, "tiny-no-fallback", fallback=False, preflight=False))
    before = llama_server_pids()
    with pytest.raises(DraftError) as caught, connect(Settings(), profile):
        pass
    assert NOT_DFLASH in caught.value.what and "exited while starting" in caught.value.what
    assert "This binary (upstream) loads DFlash drafts with general.architecture 'dflash'" in caught.value.fix
    assert llama_server_pids() == before
    assert ServerRegistry(isolated_state).running() == []


def test_a_draft_that_passes_the_preflight_but_fails_to_load_falls_back_naming_the_missing_key(
    embedded, tmp_path, isolated_state
):
    """A header-only `dflash` file with the tiny model's tokenizer: the preflight accepts it (the
    positive path), upstream then refuses its hyperparameters, and the target runs alone."""
    tokens = [t.decode() for t in read_gguf_header(embedded.embedded_model("tiny")).tokens]
    draft = write_dflash(tmp_path / "draft.gguf", "dflash", tokens=tokens)
    profile = get_profile(write_profile(isolated_state, "tiny-header-only", draft=str(draft)))
    with connect(Settings(), profile) as conn:
        assert conn.draft_off == "llama-server could not load the draft model"
        failed = Path(conn.draft_log).read_text()
        assert "--spec-draft-model" in failed.splitlines()[0]
        assert "key not found in model: dflash." in failed
        assert "--spec-draft-model" not in conn.handle.record.argv
    assert (REPO / "server_profiles").is_dir()
