"""The TUI on a profile whose draft fails: the server starts without it (a real child process, the
scripted server standing in for llama-server) and the status line and title say "draft off"."""

from __future__ import annotations

import json

import pytest

from agent.settings.config import state_dir
from agent.store.transcripts import load_session
from tests.conftest import FIXTURES
from tests.frontends.test_headless import agent
from tests.frontends.tui.helpers import SIZE, git_workspace, make_app, screen_text, send, wait_for
from tests.frontends.tui.test_server import quit_and_stop
from tests.gguf_files import write_dflash, write_gguf

REASON = "the draft is not a DFlash model (its architecture is 'scripted')"


@pytest.mark.slow
async def test_a_refused_draft_is_dropped_and_the_status_line_says_draft_off(tmp_path, scripted_profile):
    ws = git_workspace(tmp_path / "ws")
    scripted_profile(ws, "dflash", default={"content": "Answer without the draft."})
    draft = write_gguf(tmp_path / "not-dflash.gguf", "scripted")  # an ordinary model, not a DFlash one
    profile = ws / ".agent" / "profiles" / "dflash.toml"
    text = profile.read_text().replace(
        "\n[env]", f'\n[speculative]\ntype = "draft-dflash"\ndraft_model = "{draft}"\n\n[env]'
    )
    profile.write_text(text)
    app = make_app(ws, profile="dflash")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready, what="the server to start without its draft")
        assert app.session.connection.draft_off == REASON
        assert "--spec-draft-model" not in app.session.connection.handle.record.argv
        status = str(app.status.render())
        assert f"draft off: {REASON[:47]}…" in status  # cut to fit the line
        assert app._title().endswith("speculation: off (the draft failed)")
        assert f"draft off: {REASON}" in screen_text(app)  # the notice in the conversation
        await send(pilot, "hi")
        await wait_for(pilot, lambda: "Answer without the draft." in screen_text(app))
        assert "draft off" in str(app.status.render())  # still there after a turn's figures
        session_id = app.session.session_id
        await quit_and_stop(pilot)
    events = load_session(state_dir(), session_id).events
    assert [e["reason"] for e in events if e["type"] == "draft.off"] == [REASON]
    telemetry = (state_dir() / "telemetry" / f"{session_id}.jsonl").read_text().splitlines()
    assert telemetry and all(json.loads(line)["draft_off"] == REASON for line in telemetry)


def beellama_dflash_profile(
    tmp_path, ws, scripted_profile, monkeypatch, name: str, bad_draft: str, **fields
) -> None:
    """A scripted server standing in for BeeLlama 0.1 (its --help), with a draft that passes the
    preflight (a `dflash-draft` header) but fails the way FACTS.md records: SCRIPTED_BAD_DRAFT."""
    monkeypatch.setenv("SCRIPTED_HELP", str(FIXTURES / "llama-server-beellama-0.1-help.txt"))
    monkeypatch.setenv("SCRIPTED_BAD_DRAFT", bad_draft)
    scripted_profile(ws, name, default={"content": "Answer without the draft."})
    draft = write_dflash(tmp_path / "draft.gguf", "dflash-draft")
    profile = ws / ".agent" / "profiles" / f"{name}.toml"
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    text = profile.read_text().replace(
        "\n[env]", f'{extra}\n[speculative]\ntype = "dflash"\ndraft_model = "{draft}"\n\n[env]'
    )
    profile.write_text(text)


@pytest.mark.slow
async def test_invalid_input_batch_at_the_first_request_restarts_without_the_draft_and_answers(
    tmp_path, scripted_profile, monkeypatch
):
    ws = git_workspace(tmp_path / "ws")
    beellama_dflash_profile(tmp_path, ws, scripted_profile, monkeypatch, "bee", "batch")
    app = make_app(ws, profile="bee")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready, what="the server to start")
        # The 2-token probe drafts nothing and passes: the server starts with its draft.
        first = app.session.connection.handle.record
        assert app.session.connection.draft_off == "" and "--spec-draft-model" in first.argv
        await send(pilot, "hi")
        await wait_for(pilot, lambda: "Answer without the draft." in screen_text(app), what="the answer")
        # The streamed text shows before the turn is recorded: on a loaded box, quitting at once ended
        # the turn before its assistant.message reached the transcript.
        await wait_for(pilot, lambda: not app.busy, what="the turn's end")
        connection = app.session.connection
        assert connection.draft_off.startswith("the draft model is not a DFlash model (HTTP 500")
        assert connection.handle.record.pid != first.pid and connection.handle.record.port == first.port
        assert "--spec-draft-model" not in connection.handle.record.argv
        assert "draft off" in str(app.status.render())
        assert "Invalid input batch" not in screen_text(app).replace('"Invalid input batch"', "")
        session_id = app.session.session_id
        await quit_and_stop(pilot)
    kinds = [e["type"] for e in load_session(state_dir(), session_id).events]
    # Marked where it happened: after the turn started, before its answer.
    assert kinds.index("draft.off") > kinds.index("turn.started")
    assert kinds.index("draft.off") < kinds.index("assistant.message")
    assert "error" not in kinds


@pytest.mark.slow
def test_n_target_layers_0_in_the_log_falls_back_at_start_in_agent_run(
    tmp_path, scripted_profile, monkeypatch
):
    ws = git_workspace(tmp_path / "ws")
    beellama_dflash_profile(tmp_path, ws, scripted_profile, monkeypatch, "bee-log", "log")
    task = tmp_path / "task.md"
    task.write_text("Say hello.\n")
    result = agent("run", str(task), "-p", "bee-log", "--workdir", str(ws), "--json", cwd=ws)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [marker] = [e for e in events if e["type"] == "draft.off"]
    assert marker["reason"] == "the draft model is not a DFlash model (the server logged n_target_layers=0)"
    assert events[-1]["outcome"] == "completed" and events[-1]["final"] == "Answer without the draft."


@pytest.mark.slow
def test_with_fallback_false_the_failed_request_is_explained_not_bare(
    tmp_path, scripted_profile, monkeypatch
):
    ws = git_workspace(tmp_path / "ws")
    beellama_dflash_profile(
        tmp_path, ws, scripted_profile, monkeypatch, "bee-strict", "batch", fallback=False
    )
    task = tmp_path / "task.md"
    task.write_text("Say hello.\n")
    result = agent("run", str(task), "-p", "bee-strict", "--workdir", str(ws), "--json", cwd=ws)
    assert result.returncode == 4
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [error] = [e for e in events if e["type"] == "error"]
    assert "Invalid input batch." in error["message"]
    assert (
        "the server's draft is not a DFlash model it can use: `agent server check PROFILE`"
        in error["message"]
    )
    assert not [e for e in events if e["type"] == "draft.off"]
