"""A prompt, its streamed answer, reasoning, tool calls and the turn's figures, on the scripted server."""

from __future__ import annotations

import pytest
from textual.widgets import Collapsible

from agent.frontends.tui.widgets.status_line import StatusLine
from agent.frontends.tui.widgets.tool_call import ToolCallView
from tests.frontends.tui.helpers import (
    SIZE,
    git_workspace,
    make_app,
    screen_dump,
    screen_text,
    send,
    wait_for,
)
from tests.scripted_server import ScriptedServer


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


async def test_a_prompt_streams_its_answer_and_ends_with_the_turns_figures(tmp_path):
    with ScriptedServer([{"content": "Hello **there**, I read it."}]) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready, what="the server")
            await send(pilot, "say hello")
            await wait_for(pilot, lambda: "turn 1 ·" in screen_text(app), what="the figures")
            text = screen_text(app)
            assert "say hello" in text
            assert "Hello there, I read it." in text  # rendered: the bold is a style now
            assert "tok/s gen" in text and "prefill" in text and "cache" in text
            assert server.requests[0]["messages"][-1]["content"].endswith("say hello")
            status = app.query_one(StatusLine)
            await wait_for(pilot, lambda: len(status.turns) == 1, what="the turn in the status line")
            assert status.context[1] > 0


async def test_reasoning_is_shown_collapsed(tmp_path):
    with ScriptedServer([{"reasoning": "Let me think about greetings.", "content": "Hi."}]) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "greet")
            await wait_for(pilot, lambda: "turn 1 ·" in screen_text(app))
            box = app.query_one(".reasoning", Collapsible)
            assert box.collapsed
            assert "Let me think about greetings." in screen_text(app)


@pytest.mark.slow
async def test_a_tool_call_is_one_line_that_opens_on_its_diff(tmp_path):
    ws = git_workspace(tmp_path / "ws", {"app.py": "x = 1\n"})
    edit = call("edit_file", path="app.py", old_string="x = 1\n", new_string="x = 2\n")
    with ScriptedServer([{"tool_calls": [edit]}, {"content": "Changed."}]) as server:
        app = make_app(ws, base_url=server.url, approval="auto-edit")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "set x to 2")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
            view = app.query_one(ToolCallView)
            assert view.state == "ok" and not view.expanded
            header = str(view.query_one(".tool-header").render())
            assert "edit_file" in header and "app.py" in header and "✓" in header
            view.focus()
            await pilot.press("enter")
            assert view.expanded
            detail = view.query_one(".tool-detail")
            assert detail.display
            await pilot.pause()
            assert "+x = 2" in screen_dump(app) and "-x = 1" in screen_dump(app)
            await pilot.click(view)
            assert not view.expanded
            assert (ws / "app.py").read_text() == "x = 2\n"


async def test_a_bash_call_opens_on_its_command_exit_code_and_output(tmp_path):
    run = call("bash", command="echo out-line; exit 3")
    with ScriptedServer([{"tool_calls": [run]}, {"content": "It failed."}]) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url, approval="full-auto")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "run it")
            await wait_for(pilot, lambda: "turn 2 ·" in screen_text(app))
            view = app.query_one(ToolCallView)
            assert view.state == "failed"
            assert "exit 3" in str(view.query_one(".tool-header").render())
            view.action_toggle()
            await pilot.pause()
            shown = screen_dump(app)
            assert "$ echo out-line; exit 3" in shown and "out-line" in shown and "[exit code 3]" in shown
