"""Slash commands over ACP, driven by the SDK's own client and by acpx: advertised in an
`available_commands_update` that comes after the session/new (and session/load) response on the wire
(Zed drops updates before it, zed#60199), and run when a prompt starts with one, as the TUI runs them;
/profile switches servers within the client's session."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.connection import StreamDirection, StreamEvent

from agent.core.context import SUMMARY_INSTRUCTION
from agent.server.registry import ServerRegistry
from tests.frontends.acp.test_acp import RecordingClient
from tests.frontends.acp.test_acp_acpx import messages, updates
from tests.frontends.test_headless import call
from tests.frontends.tui.conftest import scripted_profile  # noqa: F401 (a fixture: workspace profiles)
from tests.scripted_server import ScriptedServer
from tests.session.check_scenario import session_events

pytestmark = pytest.mark.slow  # each test starts `agent acp` as a process


class Wire:
    """The messages the client read, in the order they came (the SDK's stream observer)."""

    def __init__(self) -> None:
        self.read: list[dict[str, Any]] = []

    def __call__(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING:
            self.read.append(event.message)

    def index(self, test) -> int:
        return next(i for i, m in enumerate(self.read) if test(m))


@asynccontextmanager
async def acp_agent(client: RecordingClient, tmp_path: Path, wire: Wire, *args: str) -> AsyncIterator[Any]:
    stderr = (tmp_path / "acp-stderr.log").open("ab")
    try:
        async with acp.spawn_agent_process(
            client, sys.executable, "-m", "agent", "acp", *args, env=os.environ.copy(), cwd=tmp_path,
            transport_kwargs={"stderr": stderr.fileno()}, observers=[wire],
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            yield conn
    finally:
        stderr.close()


def git_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "app.py").write_text("x = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=path, check=True)
    return path


async def first_prompt(conn: Any, ws: Path, text: str = "Question one.") -> str:
    """A new session in `ws`, and its first prompt answered: the session's id."""
    sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
    await conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
    return sid


def is_commands(message: dict) -> bool:
    update = (message.get("params") or {}).get("update") or {}
    return update.get("sessionUpdate") == "available_commands_update"


def run(coro, timeout: float = 120) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_the_commands_are_advertised_after_the_new_and_the_load_response(tmp_path, isolated_state):
    ws = git_folder(tmp_path / "ws")

    async def main(url: str):
        client, wire = RecordingClient(), Wire()
        async with acp_agent(client, tmp_path, wire, "--base-url", url) as conn:
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Hi.")])
            await conn.load_session(cwd=str(ws), session_id=session.session_id, mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Hi again.")])
        return client, wire

    with ScriptedServer() as server:
        client, wire = run(main(server.url))
    # On the wire: the session/new response (the first message with a sessionId result), then the commands.
    new_response = wire.index(lambda m: "sessionId" in (m.get("result") or {}))
    [first, second] = [i for i, m in enumerate(wire.read) if is_commands(m)]
    assert new_response < first
    load_id = next(m["id"] for m in wire.read[first:] if "result" in m and "sessionId" not in m["result"]
                   and "stopReason" not in m["result"])  # fmt: skip
    assert wire.index(lambda m: m.get("id") == load_id and "result" in m) < second
    [advertised, _again] = client.of("available_commands_update")
    commands = {c.name: c for c in advertised.available_commands}
    assert {"compact", "undo", "diff", "stats", "clear", "profile"} <= set(commands)
    assert all(c.description for c in commands.values())
    assert commands["profile"].input.root.hint == "a profile name (none: list them)"
    assert commands["diff"].input is None  # it takes no argument


def test_diff_undo_compact_stats_and_clear_run_over_acp(tmp_path, isolated_state):
    ws = git_folder(tmp_path / "ws")
    script = [
        {"tool_calls": [call("edit_file", path="app.py", old_string="x = 1", new_string="x = 2")]},
        {"content": "x is 2 now."},
        {"content": "Nothing else to do."},
        {"content": "The user had x set to 2 in app.py."},  # the summary /compact asks for
        {"content": "Hello afresh."},
    ]

    async def main(url: str):
        client, wire = RecordingClient(), Wire()
        async with acp_agent(client, tmp_path, wire, "--base-url", url) as conn:
            sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id="auto-edit")
            said = {}

            async def ask(text: str) -> str:
                before = len(client.text())
                reply = await conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
                assert reply.stop_reason == "end_turn", text
                return client.text()[before:]

            await ask("Make x two.")
            said["diff"] = await ask("/diff")
            await ask("Anything else?")
            said["stats"] = await ask("/stats")
            said["compact"] = await ask("/compact")
            said["undo"] = await ask("/undo")
            said["diff after undo"] = await ask("/diff")
            said["clear"] = await ask("/clear")
            said["after clear"] = await ask("Hello?")
            said["profile"] = await ask("/profile")
            said["no command"] = await ask("/usr/bin/env is missing, why?")  # a path, not a command
        return said, sid

    with ScriptedServer(script, default={"content": "It is not."}) as server:
        said, sid = run(main(server.url))
        requests = server.requests
    assert "```diff" in said["diff"] and "-x = 1" in said["diff"] and "+x = 2" in said["diff"]
    assert f"session {sid}: 3 turns" in said["stats"]
    assert said["compact"].startswith("compacted the conversation")
    assert requests[3]["messages"][-1]["content"] == SUMMARY_INSTRUCTION  # /compact asked the model
    assert "restored the checkpoint taken" in said["undo"] and "app.py" in said["undo"]
    assert (ws / "app.py").read_text() == "x = 1\n"
    assert said["diff after undo"].strip() == "no changes since the last checkpoint"
    assert said["clear"].startswith("Cleared the conversation")
    assert [m["role"] for m in requests[4]["messages"]] == ["system", "user"]  # afresh after /clear
    assert "Hello afresh." in said["after clear"]
    assert said["profile"].startswith("profile: attach. Available: ")
    assert "It is not." in said["no command"] and len(requests) == 6  # only prompts and /compact ask it
    events = session_events(isolated_state, ws)
    reasons = [e["reason"] for e in events if e["type"] == "compaction"]
    assert reasons[0].startswith("asked for with /compact") and reasons[1] == "cleared with /clear"


@pytest.mark.skipif(shutil.which("acpx") is None, reason="acpx is not installed: npm install -g acpx@0.19")
def test_acpx_gets_the_commands_after_the_session_new_response_and_runs_diff_and_compact(
    tmp_path, isolated_state
):
    ws = git_folder(tmp_path / "ws")
    (ws / "app.py").write_text("x = 2\n")  # the user's own change: not the agent's, so not in /diff

    def acpx(url: str, prompt: str) -> list[dict]:
        command = shlex.join([sys.executable, "-m", "agent", "acp", "--base-url", url])
        result = subprocess.run(
            ["acpx", "--agent", command, "--cwd", str(ws), "--approve-all", "--format", "json",
             "--timeout", "60", "exec", prompt],
            capture_output=True, text=True, timeout=120, cwd=ws, env=os.environ.copy(),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return messages(result)

    with ScriptedServer() as server:
        diff, compact = acpx(server.url, "/diff"), acpx(server.url, "/compact")
        assert server.requests == []  # commands, not prompts: the model was never asked
    for lines in (diff, compact):
        new_id = next(m["id"] for m in lines if m.get("method") == "session/new")
        response = next(i for i, m in enumerate(lines) if m.get("id") == new_id and "result" in m)
        [advertised] = [i for i, m in enumerate(lines) if is_commands(m)]
        assert response < advertised
        names = [c["name"] for c in lines[advertised]["params"]["update"]["availableCommands"]]
        assert {"compact", "undo", "diff", "stats", "clear", "profile"} <= set(names)
        assert any(m.get("result", {}).get("stopReason") == "end_turn" for m in lines)
    said = [
        "".join(u["content"]["text"] for u in updates(lines, "agent_message_chunk"))
        for lines in (diff, compact)
    ]
    assert said == ["no changes since the last checkpoint\n", "nothing to compact yet\n"]


def test_profile_switches_the_server_keeps_the_session_and_stops_the_one_it_left(
    tmp_path,
    isolated_state,
    scripted_profile,  # noqa: F811 (the fixture imported above)
):
    ws = git_folder(tmp_path / "ws")
    scripted_profile(ws, "one", default={"content": "Answer from one."})
    wrote = {"tool_calls": [call("bash", command="echo two > two.txt")]}  # full-auto: runs unasked
    scripted_profile(ws, "two", replies=[wrote], default={"content": "Answer from two."})
    registry = ServerRegistry(isolated_state)

    async def main():
        client, wire = RecordingClient(), Wire()
        async with acp_agent(client, tmp_path, wire, "-p", "one") as conn:
            sid = await first_prompt(conn, ws)
            [first] = registry.running()
            await conn.set_session_mode(session_id=sid, mode_id="full-auto")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/profile nine")])
            unknown = client.text()
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/profile two")])
            switched = client.text()[len(unknown) :]
            running = [(r.profile, r.pid) for r in registry.running()]
            reply = await conn.prompt(session_id=sid, prompt=[acp.text_block("Question two.")])
        return client, first, unknown, switched, running, reply, sid

    client, first, unknown, switched, running, reply, sid = run(main(), timeout=180)
    assert "unknown profile 'nine'" in unknown
    assert switched.startswith("Switched to the profile two") and reply.stop_reason == "end_turn"
    assert running == [("two", running[0][1])] and running[0][1] != first.pid  # one stopped, two runs
    assert "Answer from two." in client.text()
    events = session_events(isolated_state, ws)  # the same session, continued on the other server
    started = [e for e in events if e["type"] == "session.started"]
    assert [(e["session_id"], e["profile"], e["resumed"]) for e in started] == [
        (sid, "one", False), (sid, "two", True),
    ]  # fmt: skip
    # The conversation carried over, and the client's approval mode with it.
    assert client.permissions == [] and (ws / "two.txt").read_text() == "two\n"
    prompts = [e["typed"] or e["content"] for e in events if e["type"] == "user.message"]
    assert prompts[0] == "Question one." and prompts[-1] == "Question two."
    assert events[-1]["type"] == "session.finished"
