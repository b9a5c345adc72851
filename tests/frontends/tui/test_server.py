"""The TUI starts its profile's server as a real child process, shows a failed start, survives the
server's death, switches profiles and stops what it started. The scripted server stands in for
llama-server (a real subprocess); the real one is in test_smoke_tmux.py."""

from __future__ import annotations

import os
import signal

import pytest

from agent.frontends.tui.widgets.confirm import Confirm
from agent.frontends.tui.widgets.server_start import ServerStart
from agent.server.registry import ServerRegistry
from agent.settings.config import state_dir
from tests.frontends.tui.helpers import (
    SIZE,
    git_workspace,
    make_app,
    screen_dump,
    screen_text,
    send,
    wait_for,
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def quit_and_stop(pilot) -> None:
    await pilot.app.quit_app()
    pilot.app.session.disconnect()


@pytest.mark.slow
async def test_the_tui_starts_the_profiles_server_and_stops_it_on_quit(tmp_path, scripted_profile):
    ws = git_workspace(tmp_path / "ws")
    scripted_profile(ws, "scripted", default={"content": "From the started server."})
    app = make_app(ws, profile="scripted")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready, what="the server to start")
        pid = app.session.connection.handle.record.pid
        assert alive(pid) and app.session.connection.started_here
        await send(pilot, "hi")
        await wait_for(pilot, lambda: "From the started server." in screen_text(app))
        await quit_and_stop(pilot)
    assert not alive(pid)
    assert ServerRegistry(state_dir()).running() == []


@pytest.mark.slow
async def test_a_failed_start_says_why_and_another_profile_can_be_picked(tmp_path, scripted_profile):
    ws = git_workspace(tmp_path / "ws")
    scripted_profile(ws, "good", default={"content": "Working now."})
    scripted_profile(ws, "broken", model_path=tmp_path / "no-such-model.gguf")
    app = make_app(ws, profile="broken")
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ServerStart)
        await wait_for(pilot, lambda: app.status.state == "failed", what="the failure")
        await wait_for(
            pilot,
            lambda: all(
                part in screen_dump(app) for part in ("Could not start broken", "no-such-model.gguf")
            ),
            what="the failure and its cause shown",
        )
        await pilot.click("#start-other")
        await pilot.pause()
        options = view.query_one("#start-profiles")
        names = [options.get_option_at_index(i).id for i in range(options.option_count)]
        options.highlighted = names.index("good")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.ready, what="the other profile")
        assert app.session.profile.name == "good"
        await send(pilot, "hello")
        await wait_for(pilot, lambda: "Working now." in screen_text(app))
        await quit_and_stop(pilot)


@pytest.mark.slow
async def test_the_server_dying_mid_stream_is_shown_and_restart_continues_the_session(
    tmp_path, scripted_profile
):
    ws = git_workspace(tmp_path / "ws")
    scripted_profile(ws, "fragile", replies=[{"content": "a long answer " * 200, "chunk_delay": 0.02}],
                     default={"content": "Back again."})  # fmt: skip
    app = make_app(ws, profile="fragile")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready)
        pid = app.session.connection.handle.record.pid
        await send(pilot, "first question")
        await wait_for(pilot, lambda: "a long answer a long" in screen_text(app), what="the stream")
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: "the model server failed" in screen_text(app), timeout=30)
        assert "/restart" in screen_text(app)
        assert app.status.state == "down"
        await send(pilot, "/restart")
        await wait_for(
            pilot, lambda: app.ready and app.session.connection.handle.record.pid != pid, timeout=30
        )
        await send(pilot, "second question")
        await wait_for(pilot, lambda: "Back again." in screen_text(app))
        # The conversation carried over: the new server got the first question too.
        sent = app.session.agent.messages
        assert any("first question" in str(m.get("content")) for m in sent)
        await quit_and_stop(pilot)


@pytest.mark.slow
async def test_profile_switches_after_confirmation_and_keeps_the_conversation(tmp_path, scripted_profile):
    ws = git_workspace(tmp_path / "ws")
    scripted_profile(ws, "one", default={"content": "Answer from one."})
    scripted_profile(ws, "two", default={"content": "Answer from two."})
    app = make_app(ws, profile="one")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready)
        first_pid = app.session.connection.handle.record.pid
        await send(pilot, "question one")
        await wait_for(pilot, lambda: "Answer from one." in screen_text(app))
        await send(pilot, "/profile two")
        await wait_for(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("y")
        await wait_for(pilot, lambda: app.ready and app.session.profile.name == "two", timeout=30)
        assert not alive(first_pid)  # the server this session started was stopped
        assert "two" in str(app.query_one("#title").render())
        await send(pilot, "question two")
        await wait_for(pilot, lambda: "Answer from two." in screen_text(app))
        assert any("question one" in str(m.get("content")) for m in app.session.agent.messages)
        await quit_and_stop(pilot)


@pytest.mark.slow
async def test_profile_switch_declined_changes_nothing(tmp_path, scripted_profile):
    ws = git_workspace(tmp_path / "ws")
    scripted_profile(ws, "one")
    scripted_profile(ws, "two")
    app = make_app(ws, profile="one")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ready)
        pid = app.session.connection.handle.record.pid
        await send(pilot, "/profile two")
        await wait_for(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("n")
        await pilot.pause()
        assert app.session.profile.name == "one" and alive(pid)
        await quit_and_stop(pilot)
