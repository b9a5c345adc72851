"""Esc stops what runs (a stream, a command) without leaving the app, and the history stays whole."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from agent.frontends.tui.widgets.tool_call import ToolCallView
from tests.frontends.tui.helpers import SIZE, git_workspace, make_app, screen_text, send, wait_for
from tests.scripted_server import ScriptedServer


def pids_running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        with open(f"/proc/{entry}/stat") as s:
                            if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                                found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.slow
async def test_esc_during_a_stream_stops_it_and_the_next_prompt_works(tmp_path):
    slow = {"content": "word " * 400, "chunk_delay": 0.02}
    with ScriptedServer([slow, {"content": "Second answer."}]) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "talk a lot")
            await wait_for(pilot, lambda: "word word" in screen_text(app), what="the stream")
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.busy, timeout=5, what="the interruption")
            # The notice is mounted by a message handled after the worker ends: wait for it too.
            await wait_for(pilot, lambda: "interrupted" in screen_text(app), timeout=5, what="the notice")
            assert app.is_running
            await send(pilot, "again")
            await wait_for(pilot, lambda: "Second answer." in screen_text(app))
            # The interrupted answer never reached the history: the next request holds both prompts.
            last = server.requests[-1]["messages"]
            assert [m["role"] for m in last[1:]] == ["user", "user"]


@pytest.mark.slow
async def test_esc_during_a_long_command_kills_it(tmp_path):
    marker = f"sleep-marker-{uuid.uuid4().hex[:8]}"
    command = f"bash -c 'exec -a {marker} sleep 60'"
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"content": "ok"}]
    with ScriptedServer(replies) as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url, approval="full-auto")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, "wait")
            await wait_for(pilot, lambda: pids_running(marker), what="the command to start")
            began = time.monotonic()
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.busy, timeout=10)
            await wait_for(pilot, lambda: not pids_running(marker), timeout=10, what="the command to die")
            assert time.monotonic() - began < 10
            # The tool line learns its outcome by a message, which can come a frame after the worker ends.
            await wait_for(
                pilot,
                lambda: app.query_one(ToolCallView).state == "interrupted",
                timeout=5,
                what="the tool line",
            )
            assert "interrupted" in screen_text(app)
            assert len(server.requests) == 1  # nothing was sent after the interruption


async def test_ctrl_c_once_interrupts_twice_quits(tmp_path):
    with ScriptedServer() as server:
        app = make_app(git_workspace(tmp_path / "ws"), base_url=server.url)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert app.is_running
            await pilot.press("ctrl+c")
            await wait_for(pilot, lambda: not app.is_running, timeout=5)
