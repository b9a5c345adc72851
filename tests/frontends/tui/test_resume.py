"""Interactive sessions are recorded like headless ones, and continue where they stopped."""

from __future__ import annotations

import pytest

from agent.frontends.tui.session import newest_session
from agent.frontends.tui.widgets.speed_panel import SpeedPanel
from agent.settings.config import state_dir
from agent.store.telemetry import TelemetryLog
from agent.store.transcripts import load_session
from tests.frontends.tui.helpers import SIZE, git_workspace, make_app, screen_text, send, wait_for
from tests.scripted_server import ScriptedServer


async def run_one_prompt(ws, url, prompt) -> str:
    app = make_app(ws, base_url=url)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready)
        await send(pilot, prompt)
        await wait_for(pilot, lambda: "turn 1 ·" in screen_text(app))
        await app.quit_app()
    return app.session.session_id


async def test_a_tui_session_is_recorded_like_a_headless_one(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([{"content": "Recorded answer."}]) as server:
        session_id = await run_one_prompt(ws, server.url, "record me")
    record = load_session(state_dir(), session_id)
    kinds = [e["type"] for e in record.events]
    assert kinds[0] == "session.started" and kinds[-1] == "session.finished"
    assert "turn.completed" in kinds and record.turns == 1
    assert record.started["workspace"] == str(ws.resolve())
    assert len(TelemetryLog(state_dir() / "telemetry" / f"{session_id}.jsonl").read()) == 1


@pytest.mark.slow
async def test_resume_shows_the_conversation_and_continues_it(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([{"content": "First answer."}, {"content": "Second answer."}]) as server:
        session_id = await run_one_prompt(ws, server.url, "first prompt")
        assert newest_session(ws) == session_id  # what --continue picks
        app = make_app(ws, base_url=server.url, resume=session_id)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            text = screen_text(app)
            assert "first prompt" in text and "First answer." in text and "turn 1 ·" in text
            assert len(app.query_one(SpeedPanel).turns) == 1 and len(app.status.turns) == 1
            await send(pilot, "second prompt")
            await wait_for(pilot, lambda: "Second answer." in screen_text(app))
            contents = [m["content"] for m in server.requests[-1]["messages"]]
            assert any("first prompt" in c for c in contents) and "First answer." in contents
            assert app.session.session_id == session_id
            await app.quit_app()
    assert load_session(state_dir(), session_id).turns == 2


@pytest.mark.slow
async def test_a_resume_goes_on_the_server_the_session_ran_on(tmp_path):
    """`agent --resume ID` with no -p or --base-url: the server the session attached to, as `agent run
    --resume` and an editor's session/resume pick it (agent/session/connect.py:session_profile), not
    the default profile."""
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([{"content": "First answer."}, {"content": "Second answer."}]) as server:
        session_id = await run_one_prompt(ws, server.url, "first prompt")
        app = make_app(ws, resume=session_id)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            assert (app.session.profile.name, app.session.profile.base_url) == ("attach", server.url)
            await send(pilot, "second prompt")
            await wait_for(pilot, lambda: "Second answer." in screen_text(app))
            await app.quit_app()


@pytest.mark.slow
async def test_slash_resume_switches_to_a_recorded_session(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([{"content": "Old answer."}]) as server:
        old = await run_one_prompt(ws, server.url, "old prompt")
        app = make_app(ws, base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "/sessions")
            await wait_for(pilot, lambda: old in screen_text(app))
            await send(pilot, f"/resume {old}")
            await wait_for(pilot, lambda: app.session.session_id == old)
            assert "Old answer." in screen_text(app)
            await app.quit_app()


def test_continue_finds_nothing_in_a_new_folder(tmp_path):
    assert newest_session(git_workspace(tmp_path / "empty")) is None
