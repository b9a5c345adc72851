"""The TUI in an untrusted project: one notice naming the ignored files, and /trust."""

from __future__ import annotations

import pytest

from agent.settings.config import load_settings
from agent.settings.trust import is_trusted
from tests.frontends.tui.helpers import SIZE, git_workspace, make_app, screen_text, send, wait_for
from tests.scripted_server import ScriptedServer

CONFIG = 'approval = "full-auto"\n\n[permissions]\nallow = {bash = ["touch *"]}\n'


@pytest.mark.slow
async def test_an_untrusted_project_is_named_once_and_trust_applies_it_next_time(tmp_path):
    ws = git_workspace(tmp_path / "ws", {".agent/config.toml": CONFIG, ".mcp.json": '{"mcpServers": {}}'})
    with ScriptedServer() as server:
        app = make_app(ws, base_url=server.url, settings=load_settings(ws))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await wait_for(pilot, lambda: "not a trusted folder" in screen_text(app))
            text = screen_text(app)
            assert text.count("not a trusted folder") == 1
            assert ".agent/config.toml, .mcp.json" in text and "type /trust" in text
            assert app.session.agent.permissions.mode == "ask" and app.status.approval == "ask"

            await send(pilot, "/trust")
            await wait_for(pilot, lambda: f"trusted {ws.resolve()}" in screen_text(app))
            assert is_trusted(ws)
            assert (
                "Its .agent/config.toml, .mcp.json apply the next time `agent` starts here."
                in screen_text(app)
            )
            assert app.session.settings.approval == "full-auto"  # what the next connection uses

            await send(pilot, "/trust")
            await wait_for(pilot, lambda: "trusted already" in screen_text(app))

    with ScriptedServer() as server:
        app = make_app(ws, base_url=server.url, settings=load_settings(ws))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            assert "not a trusted folder" not in screen_text(app)
            assert app.session.agent.permissions.mode == "full-auto"


@pytest.mark.slow
async def test_restart_applies_the_projects_rules_after_trust(tmp_path, isolated_state, scripted_profile):
    scripted_profile(tmp_path / "elsewhere", "scripted")  # then made the user's own profile: no trust needed
    profiles = isolated_state.parent / "config" / "profiles"
    profiles.mkdir(parents=True)
    (tmp_path / "elsewhere" / ".agent" / "profiles" / "scripted.toml").rename(profiles / "scripted.toml")
    ws = git_workspace(tmp_path / "ws", {".agent/config.toml": CONFIG})
    app = make_app(ws, profile="scripted", settings=load_settings(ws))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready, timeout=40)
        assert app.session.agent.permissions.rules.allow == {}
        await send(pilot, "/trust")
        await wait_for(pilot, lambda: "/restart applies them now" in screen_text(app))
        assert "The approval mode stays ask over a restart: /approval full-auto" in screen_text(app)
        await send(pilot, "/restart")
        await wait_for(pilot, lambda: app.ready and app.session.agent.permissions.rules.allow, timeout=40)
        assert app.session.agent.permissions.rules.allow == {"bash": ["touch *"]}
        assert app.session.agent.permissions.mode == "ask"
        await app.quit_app()
        app.session.disconnect()


@pytest.mark.slow
async def test_a_resumed_session_shows_the_notice_after_its_conversation(tmp_path):
    from tests.frontends.tui.test_resume import run_one_prompt

    ws = git_workspace(tmp_path / "ws", {".mcp.json": '{"mcpServers": {}}'})
    with ScriptedServer([{"content": "First answer."}]) as server:
        session_id = await run_one_prompt(ws, server.url, "first prompt")
        app = make_app(ws, base_url=server.url, resume=session_id)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready and "not a trusted folder" in screen_text(app))
            text = screen_text(app)
            assert "First answer." in text and text.count("not a trusted folder") == 1
            assert text.index("First answer.") < text.index("not a trusted folder")
