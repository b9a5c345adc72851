"""The screen at its limits: a small terminal, a huge paste."""

from __future__ import annotations

import pytest

from tests.frontends.tui.helpers import git_workspace, make_app, screen_dump, screen_text, send, wait_for
from tests.scripted_server import ScriptedServer


async def test_an_80_by_24_terminal_shows_the_conversation_input_and_status(tmp_path):
    with ScriptedServer([{"content": "Short answer."}]) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "hi")
            await wait_for(pilot, lambda: "turn 1 ·" in screen_text(app))
            lines = screen_dump(app).splitlines()
            assert len(lines) == 24 and all(len(line) <= 80 for line in lines)
            assert "Short answer." in "\n".join(lines)
            assert "● ready" in lines[-1]
            assert "Ask for a change" in "\n".join(lines[-4:])


@pytest.mark.slow
async def test_a_paste_of_5000_lines_is_kept_whole_and_sent(tmp_path):
    from textual import events

    pasted = "\n".join(f"line {i}" for i in range(5000))
    with ScriptedServer([{"content": "Got it."}]) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.ready)
            app.post_message(events.Paste(pasted))  # as the terminal driver delivers it
            await wait_for(pilot, lambda: app.prompt.document.line_count == 5000)
            assert app.prompt.size.height <= 12  # the input grows to a limit, the rest scrolls
            await pilot.press("enter")
            await wait_for(pilot, lambda: "Got it." in screen_text(app))
            assert server.requests[0]["messages"][-1]["content"].endswith("line 4999")
