"""The session host (agent/session/host.py), as the TUI and ACP use it: connections kept per profile, a
profile switch that keeps the conversation, a reopening into a new transcript, and slash commands through
the one table and dispatch. On scripted model servers (attached profiles), in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.events import Event
from agent.session.host import CARRIED_OVER, HostedSession, SessionHost
from agent.session.live import SessionSetup
from agent.session.parts import Workbench
from agent.session.slash_commands import Reply
from agent.settings.config import load_settings, state_dir
from agent.settings.trust import trust
from agent.store.transcripts import load_session
from tests.scripted_server import ScriptedServer
from tests.session.check_scenario import project


def attach_profiles(workspace: Path, **urls: str) -> None:
    """Project profiles attached to running servers (a trusted folder's own profiles count)."""
    folder = workspace / ".agent" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    for name, url in urls.items():
        (folder / f"{name}.toml").write_text(f'base_url = "{url}"\n')
    trust(workspace)


async def open_on(host: SessionHost, workspace: Path, name: str, events: list[Event]) -> HostedSession:
    from agent.server.profiles import get_profile

    settings = load_settings(workspace)
    profile = get_profile(name, workspace)
    connection = await host.connection(settings, profile)
    setup = SessionSetup(settings, workspace, profile, "a test", mcp_servers={}, connection=connection)
    return await host.open(setup, events.append)


def user_words(request: dict) -> str:
    return " ".join(str(m.get("content")) for m in request["messages"] if m["role"] == "user")


@pytest.mark.slow  # (a second or more on a 2-core box)
async def test_switching_profile_keeps_the_conversation_in_the_same_transcript(tmp_path):
    ws = project(tmp_path / "ws", check=None)
    events: list[Event] = []
    with (
        ScriptedServer(default={"content": "From one."}) as one,
        ScriptedServer(default={"content": "From two."}) as two,
    ):
        attach_profiles(ws, one=one.url, two=two.url)
        host = SessionHost()
        hosted = await open_on(host, ws, "one", events)
        first_id = hosted.session_id
        await hosted.live.prompt("question one")

        said = await host.switch_profile(hosted, "two")
        assert said.startswith("Switched to the profile two"), said
        await hosted.live.prompt("question two")
        assert hosted.live.profile.name == "two" and hosted.session_id == first_id
        assert "question one" in user_words(two.requests[-1])  # the other server got the conversation
        assert [c.profile.name for c in host.connections.values()] == ["two"]  # one is left: unused
        await host.shutdown()
    recorded = load_session(state_dir(), first_id)
    assert [s["profile"] for s in recorded.events if s["type"] == "session.started"] == ["one", "two"]


async def test_a_switch_to_an_unknown_profile_says_so_and_changes_nothing(tmp_path):
    ws = project(tmp_path / "ws", check=None)
    with ScriptedServer(default={"content": "Here."}) as one:
        attach_profiles(ws, one=one.url)
        host = SessionHost()
        hosted = await open_on(host, ws, "one", [])
        live = hosted.live
        said = await host.switch_profile(hosted, "nope")
        assert "nope" in said and "one" in said  # the unknown name, and those there are
        assert hosted.live is live and not hosted.closed
        await host.shutdown()


@pytest.mark.slow  # (a second or more on a 2-core box)
async def test_reopening_into_a_new_transcript_carries_the_conversation_over(tmp_path):
    ws = project(tmp_path / "ws", check=None)
    with ScriptedServer(default={"content": "Answer."}) as one:
        attach_profiles(ws, one=one.url)
        host = SessionHost()
        hosted = await open_on(host, ws, "one", [])
        first_id = hosted.session_id
        await hosted.live.prompt("remember this")
        await host.reopen(hosted, keep_transcript=False)
        assert hosted.session_id != first_id and not hosted.closed
        await hosted.live.prompt("and now?")
        assert "remember this" in user_words(one.requests[-1])
        await host.shutdown()
    carried = [e for e in load_session(state_dir(), hosted.session_id).events if e["type"] == "compaction"]
    assert carried and carried[0]["reason"] == CARRIED_OVER  # so a resume of the new one finds it


@pytest.mark.slow  # (a second or more on a 2-core box)
async def test_sessions_on_one_profile_share_its_connection_until_the_last_is_closed(tmp_path):
    first, second = project(tmp_path / "a", check=None), project(tmp_path / "b", check=None)
    with ScriptedServer(default={"content": "Hi."}) as server:
        attach_profiles(first, shared=server.url)
        attach_profiles(second, shared=server.url)
        host = SessionHost()
        a = await open_on(host, first, "shared", [])
        b = await open_on(host, second, "shared", [])
        assert a.connection is b.connection and len(host.connections) == 1
        await host.close(a)
        await host.release(a.connection)
        assert len(host.connections) == 1  # b still uses it
        await host.close(b)
        await host.release(b.connection)
        assert host.connections == {}
        await host.shutdown()


async def test_a_command_the_table_runs_replies_the_same_to_both_front_ends(tmp_path):
    """ACP hands in no commands of its own; the TUI hands in its own (here /compact, run its way): a
    command neither front end overrides gives both the same reply, through the same dispatch."""
    ws = project(tmp_path / "ws", check=None)
    (ws / "app.py").write_text("x = 2\n")
    with ScriptedServer(default={"content": "Hi."}) as server:
        attach_profiles(ws, one=server.url)
        host = SessionHost()
        hosted = await open_on(host, ws, "one", [])
        ran: list[str] = []

        async def own_compact(argument: str) -> Reply | None:
            ran.append(argument)
            return None

        tui = {"compact": own_compact}
        for line in ("/diff", "/mcp", "/stats", "/profile"):
            assert await host.run_command(line, hosted, own=tui) == await host.run_command(line, hosted)
        assert (await host.run_command("/mcp", hosted)).text.startswith("no MCP servers configured")
        assert await host.run_command("/compact", hosted, own=tui) is None and ran == [""]
        assert (await host.run_command("/compact", hosted)).text == "nothing to compact yet"
        await host.shutdown()


async def test_an_unknown_command_is_a_clear_error_and_nothing_reaches_the_model(tmp_path):
    ws = project(tmp_path / "ws", check=None)
    with ScriptedServer(default={"content": "Hi."}) as server:
        attach_profiles(ws, one=server.url)
        host = SessionHost()
        hosted = await open_on(host, ws, "one", [])
        reply = await host.run_command("/dif", hosted)
        assert reply == Reply("unknown command /dif. Did you mean /diff? /help lists them.", severity="error")
        assert server.requests == []
        await host.shutdown()


async def test_a_command_on_the_conversation_waits_for_the_server_and_for_the_model(tmp_path):
    ws = project(tmp_path / "ws", check=None)
    host = SessionHost()
    workbench = Workbench(ws)
    starting = await host.run_command("/stats", None, workbench=workbench)
    assert starting.severity == "warning" and "not ready yet" in starting.text
    assert (
        await host.run_command("/diff", None, workbench=workbench)
    ).form == "plain"  # the folder's: no wait
    with ScriptedServer(default={"content": "Hi."}) as server:
        attach_profiles(ws, one=server.url)
        hosted = await open_on(host, ws, "one", [])
        busy = await host.run_command("/undo", hosted, busy=True)
        assert busy.severity == "warning" and "waits until the model is done" in busy.text
        await host.shutdown()
