"""Slash commands, their completion, the prompt history, and their errors."""

from __future__ import annotations

import pytest

from agent.frontends.tui.widgets.completion_menu import CompletionMenu
from tests.frontends.tui.helpers import (
    SIZE,
    git_workspace,
    make_app,
    screen_dump,
    screen_text,
    send,
    type_text,
    wait_for,
)
from tests.scripted_server import ScriptedServer


def edit(path, old, new):
    return {
        "tool_calls": [
            {"name": "edit_file", "arguments": {"path": path, "old_string": old, "new_string": new}}
        ]
    }


async def ready_app(pilot):
    await wait_for(pilot, lambda: pilot.app.ready)


@pytest.mark.slow
async def test_undo_after_an_edit_restores_the_file_and_says_what_changed(tmp_path):
    ws = git_workspace(tmp_path / "ws", {"app.py": "x = 1\n"})
    with ScriptedServer([edit("app.py", "x = 1\n", "x = 2\n"), {"content": "Done."}]) as server:
        app = make_app(ws, base_url=server.url, approval="auto-edit")
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "x to 2")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
            assert (ws / "app.py").read_text() == "x = 2\n"
            assert app.status.checkpoints == 1
            # What the prompt changed, file by file, as `agent run` ends with.
            assert "changed 1 file (lines added, deleted):" in screen_text(app)
            assert "app.py  +1 -1" in screen_text(app)
            await send(pilot, "/diff")
            await pilot.pause()
            assert "+x = 2" in screen_dump(app)
            await send(pilot, "/undo")
            await wait_for(pilot, lambda: "restored the checkpoint" in screen_text(app))
            assert (ws / "app.py").read_text() == "x = 1\n"
            assert "app.py" in screen_text(app).split("restored the checkpoint", 1)[1]
            assert app.status.checkpoints == 0


async def test_undo_with_no_checkpoint_says_so(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "/undo")
            await wait_for(pilot, lambda: "nothing to undo" in screen_text(app))
            assert "There is no checkpoint" in screen_text(app)


async def test_an_unknown_command_names_the_close_one(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "/stast")
            await wait_for(pilot, lambda: "unknown command /stast" in screen_text(app))
            assert "Did you mean /stats?" in screen_text(app)
            assert not server.requests or all("/stast" not in str(r) for r in server.requests)


async def test_an_unknown_profile_lists_the_known_ones(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "/profile nope")
            await wait_for(pilot, lambda: "nope" in screen_text(app).split("/profile nope", 1)[-1])
            assert "coder" in screen_text(app) and "tiny" in screen_text(app)
            assert app.session.profile.kind == "attach"  # nothing was switched


async def test_resume_of_an_unknown_id_says_so_and_keeps_the_session(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            before = app.session.session_id
            await send(pilot, "/resume 19990101-nothing")
            await wait_for(pilot, lambda: "no session '19990101-nothing'" in screen_text(app))
            assert app.session.session_id == before


async def test_help_lists_every_command(tmp_path):
    from agent.session.slash_commands import COMMANDS

    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "/help")
            await pilot.pause()
            text = screen_text(app)
            assert all(f"/{c.name}" in text for c in COMMANDS)


async def test_approval_switches_the_mode(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "/approval full-auto")
            await pilot.pause()
            assert app.session.agent.permissions.mode == "full-auto" and app.status.approval == "full-auto"
            await send(pilot, "/approval sometimes")
            await wait_for(pilot, lambda: "unknown approval mode 'sometimes'" in screen_text(app))
            assert app.session.agent.permissions.mode == "full-auto"


@pytest.mark.slow
async def test_slash_completes_command_names_and_at_completes_files(tmp_path):
    ws = git_workspace(tmp_path / "ws", {"src/taskstore/store.py": "", "README.md": ""})
    with ScriptedServer() as server:
        app = make_app(ws, base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            menu = app.query_one(CompletionMenu)
            await type_text(pilot, "/com")
            assert menu.display and menu.chosen() == "/compact"
            await pilot.press("tab")
            assert app.prompt.text == "/compact" and not menu.display
            app.prompt.clear()
            await type_text(pilot, "look at @stor")
            assert menu.chosen() == "@src/taskstore/store.py"
            await pilot.press("tab")
            assert app.prompt.text == "look at @src/taskstore/store.py "


@pytest.mark.slow
async def test_up_walks_the_prompt_history(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "first prompt")
            await wait_for(pilot, lambda: "turn 1 ·" in screen_text(app))
            await send(pilot, "/help")
            await type_text(pilot, "draft")
            await pilot.press("up")
            assert app.prompt.text == "/help"
            await pilot.press("up")
            assert app.prompt.text == "first prompt"
            await pilot.press("down", "down")
            assert app.prompt.text == "draft"


@pytest.mark.slow
async def test_clear_starts_a_new_session(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await ready_app(pilot)
            await send(pilot, "hello")
            await wait_for(pilot, lambda: "turn 1 ·" in screen_text(app))
            first = app.session.session_id
            await send(pilot, "/clear")
            await wait_for(pilot, lambda: app.session.session_id != first)
            assert "hello" not in screen_text(app)
            await send(pilot, "again")
            await wait_for(pilot, lambda: "turn 1 ·" in screen_text(app))
            assert [m["role"] for m in server.requests[-1]["messages"]] == ["system", "user"]
