"""Approvals are real: what asks is shown in place of the input and waits for the user's answer."""

from __future__ import annotations

import tomllib

import pytest

from agent.frontends.tui.widgets import approval_bar
from agent.frontends.tui.widgets.approval_bar import KEY_GUARD_S, ApprovalBar
from agent.frontends.tui.widgets.tool_call import ToolCallView
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


def bash(command):
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def tool_results(server) -> list[str]:
    return [m["content"] for body in server.requests for m in body["messages"] if m["role"] == "tool"]


async def ask_and_answer(pilot, key: str) -> ApprovalBar:
    app = pilot.app
    bar = app.query_one(ApprovalBar)
    await wait_for(pilot, lambda: bar.display, what="the approval prompt")
    assert not app.prompt.display
    await pilot.pause(KEY_GUARD_S + 0.05)
    await pilot.press(key)
    return bar


@pytest.mark.slow
async def test_yes_runs_the_command_and_the_input_comes_back(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([bash("touch made-by-agent"), {"content": "Made it."}]) as server:
        app = make_app(ws, base_url=server.url, approval="ask")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "make the file")
            bar = app.query_one(ApprovalBar)
            # exactly what will run, on the screen (the bar shows before the next frame draws it)
            await wait_for(pilot, lambda: "bash: touch made-by-agent" in screen_dump(app))
            assert app.query_one(ToolCallView).state == "asking"
            await pilot.pause(KEY_GUARD_S + 0.05)
            await pilot.press("y")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
            assert (ws / "made-by-agent").exists()
            assert not bar.display and app.prompt.display and app.prompt.has_focus


@pytest.mark.slow
async def test_no_refuses_and_the_model_is_told(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([bash("touch refused"), {"content": "OK, I won't."}]) as server:
        app = make_app(ws, base_url=server.url, approval="ask")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "make the file")
            await ask_and_answer(pilot, "n")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
            assert not (ws / "refused").exists()
            assert "the user declined" in tool_results(server)[0]
            assert app.query_one(ToolCallView).state == "denied"


@pytest.mark.slow
async def test_no_with_a_message_sends_the_message_to_the_model(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([bash("rm notes.txt"), {"content": "Understood."}]) as server:
        app = make_app(ws, base_url=server.url, approval="ask")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "clean up")
            await ask_and_answer(pilot, "m")
            await pilot.press(*"keep the notes")
            await pilot.press("enter")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
            assert (ws / "notes.txt").exists()
            assert "the user declined: keep the notes" in tool_results(server)[0]


@pytest.mark.slow
async def test_always_allows_the_rule_for_the_rest_of_the_session(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    replies = [bash("mkdir -p build/a"), bash("mkdir -p build/b"), {"content": "Both made."}]
    with ScriptedServer(replies) as server:
        app = make_app(ws, base_url=server.url, approval="ask")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "make folders")
            bar = await ask_and_answer(pilot, "a")
            await wait_for(pilot, lambda: "turn 3 ·" in screen_text(app))
            assert (ws / "build" / "a").is_dir() and (ws / "build" / "b").is_dir()
            assert not bar.display  # the second command did not ask
            assert app.session.agent.permissions.rules.allow["bash"] == ["mkdir -p *"]
            assert not (ws / ".agent" / "config.toml").exists()  # this session only


@pytest.mark.slow
async def test_save_keeps_the_rule_in_the_project_config(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([bash("mkdir -p build/x"), {"content": "Made."}]) as server:
        app = make_app(ws, base_url=server.url, approval="ask")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "status?")
            await ask_and_answer(pilot, "s")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
    config = tomllib.loads((ws / ".agent" / "config.toml").read_text())
    assert config["permissions"]["allow"]["bash"] == ["mkdir -p *"]


@pytest.mark.slow
async def test_what_the_user_was_typing_survives_an_approval(tmp_path, monkeypatch):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([{"delay": 0.5, **bash("touch x")}, {"content": "Done."}]) as server:
        app = make_app(ws, base_url=server.url, approval="ask")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "make x")
            await type_text(pilot, "next I want")
            bar = app.query_one(ApprovalBar)
            # The guard's clock is set by the test: on a loaded box the key could arrive after 0.3 s.
            monkeypatch.setattr(approval_bar, "KEY_GUARD_S", 60.0)
            await wait_for(pilot, lambda: bar.display)
            await pilot.press("s")  # within the guard: the user was typing, not answering
            assert bar.display
            monkeypatch.setattr(approval_bar, "KEY_GUARD_S", 0.0)
            await pilot.press("y")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
            assert app.prompt.text == "next I wants"


@pytest.mark.slow
async def test_esc_while_asking_withdraws_the_question_and_keeps_the_app(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    with ScriptedServer([bash("touch never"), {"content": "ok"}]) as server:
        app = make_app(ws, base_url=server.url, approval="ask")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "make it")
            bar = app.query_one(ApprovalBar)
            await wait_for(pilot, lambda: bar.display)
            await pilot.press("escape")
            # Focus and the tool line's state arrive by messages queued after the bar hides: wait for them.
            await wait_for(
                pilot,
                lambda: not bar.display and not app.busy and app.prompt.has_focus
                and app.query_one(ToolCallView).state == "interrupted",
                what="the question withdrawn, the input focused and the call marked interrupted",
            )  # fmt: skip
            assert app.prompt.display and app.prompt.has_focus
            assert not (ws / "never").exists()
            assert app.query_one(ToolCallView).state == "interrupted"
