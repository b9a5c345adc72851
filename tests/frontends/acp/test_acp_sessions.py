"""Sessions over ACP (stabilized in 2026, and what Zed's history panel uses): `session/list` lists a
folder's recorded sessions whichever front end recorded them, `session/resume` reopens one without
replaying it, `session/close` ends one and stops the server it started; driven by the SDK's own client
and by acpx's named sessions."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import acp
import pytest

from agent.server.registry import ServerRegistry
from tests.frontends.acp.test_acp import RecordingClient, alive, transcripts
from tests.frontends.acp.test_acp_acpx import _runs, messages, updates
from tests.frontends.acp.test_acp_commands import Wire, acp_agent, first_prompt, git_folder, is_commands, run
from tests.frontends.test_headless import agent, call, task_file
from tests.frontends.tui.conftest import scripted_profile  # noqa: F401 (a fixture: workspace profiles)
from tests.scripted_server import ScriptedServer
from tests.session.check_scenario import session_events

pytestmark = pytest.mark.slow  # each test starts `agent acp` as a process

ACPX = pytest.mark.skipif(
    shutil.which("acpx") is None, reason="acpx is not installed: npm install -g acpx@0.19"
)


def agent_run(tmp_path: Path, folder: Path, body: str, url: str) -> None:
    """A session recorded by another front end: `agent run` in `folder`."""
    home = tmp_path / f"task-{folder.name}"
    home.mkdir()
    result = agent(
        "run",
        str(task_file(home, body)),
        "--workdir",
        str(folder),
        "--base-url",
        url,
        "--approval",
        "full-auto",
    )
    assert result.returncode == 0, result.stderr


def test_list_names_every_front_ends_sessions_of_the_folder_and_resume_goes_on_without_a_replay(
    tmp_path, isolated_state
):
    ws, elsewhere = git_folder(tmp_path / "ws"), git_folder(tmp_path / "elsewhere")
    script = [
        {"content": "Counted: one file."},  # agent run, here
        {"content": "Done elsewhere."},  # agent run, elsewhere
        {"tool_calls": [call("read_file", path="app.py")]},
        {"content": "I will remember 7."},
        {"content": "You said 7."},  # after session/resume, in another `agent acp`
        {"content": "The task was to count the files."},  # the `agent run` session, resumed over ACP
    ]

    async def first(url: str):
        client, wire = RecordingClient(), Wire()
        async with acp_agent(client, tmp_path, wire, "--base-url", url) as conn:
            sid = await first_prompt(conn, ws, "Remember 7.")
            here = await conn.list_sessions(cwd=str(ws))
            everywhere = await conn.list_sessions()
        return sid, here, everywhere

    async def second(url: str, sid: str, ran: str):
        client, wire = RecordingClient(), Wire()
        async with acp_agent(client, tmp_path, wire, "--base-url", url) as conn:
            resumed = await conn.resume_session(cwd=str(ws), session_id=sid, mcp_servers=[])
            reply = await conn.prompt(session_id=sid, prompt=[acp.text_block("Which number?")])
            other = await conn.resume_session(cwd=str(ws), session_id=ran, mcp_servers=[])
            await conn.prompt(session_id=ran, prompt=[acp.text_block("What was the task?")])
            with pytest.raises(acp.RequestError) as missing:
                await conn.resume_session(cwd=str(ws), session_id="no-such-session", mcp_servers=[])
        return client, wire, resumed, reply, other, missing.value

    with ScriptedServer(script) as server:
        agent_run(tmp_path, ws, "Count the files.", server.url)
        agent_run(tmp_path, elsewhere, "Elsewhere.", server.url)
        [ran] = [events[0] for events in transcripts(isolated_state) if events[0]["workspace"] == str(ws)]
        sid, here, everywhere = run(first(server.url))
        client, wire, resumed, reply, other, missing = run(second(server.url, sid, ran["session_id"]))
        requests = server.requests

    # session/list: the folder's two sessions, newest first, the ACP one and `agent run`'s, with titles.
    assert [(s.session_id, s.cwd, s.title) for s in here.sessions] == [
        (sid, str(ws), "Remember 7."), (ran["session_id"], str(ws), "Count the files."),
    ]  # fmt: skip
    assert here.sessions[0].updated_at.endswith("+00:00") and here.next_cursor is None
    assert {s.cwd for s in everywhere.sessions} == {str(ws), str(elsewhere)} and len(everywhere.sessions) == 3
    # session/resume: no replay (the client keeps what it showed), the answer's modes and pickers, then
    # the commands after it on the wire; the conversation goes on where it was.
    assert [u.session_update for u in client.updates][:1] == ["available_commands_update"]
    assert not client.of("user_message_chunk") and "I will remember 7." not in client.text()
    resume_id = next(m["id"] for m in wire.read if "result" in m and "configOptions" in m["result"])
    assert resume_id is not None and wire.index(lambda m: m.get("id") == resume_id) < wire.index(is_commands)
    assert resumed.modes.current_mode_id == "ask" and reply.stop_reason == "end_turn"
    assert {o.id: o.current_value for o in resumed.config_options}["profile"] == "attach"
    assert any(
        m["role"] == "assistant" and m["content"] == "I will remember 7." for m in requests[4]["messages"]
    )
    # `agent run`'s session resumed over ACP: its task is in the history the model gets.
    assert other.modes is not None and "Count the files." in str(requests[5]["messages"])
    assert missing.code == -32002
    events = next(e for e in transcripts(isolated_state) if e[0]["session_id"] == sid)
    assert [e["resumed"] for e in events if e["type"] == "session.started"] == [False, True]


def test_close_ends_the_session_and_stops_the_server_it_started(tmp_path, isolated_state, scripted_profile):  # noqa: F811
    ws = git_folder(tmp_path / "ws")
    scripted_profile(ws, "one", default={"content": "Answer from one."})
    registry = ServerRegistry(isolated_state)

    async def main():
        client, wire = RecordingClient(), Wire()
        async with acp_agent(client, tmp_path, wire, "-p", "one") as conn:
            sid = await first_prompt(conn, ws)
            [server] = registry.running()
            closed = await conn.close_session(session_id=sid)
            after = registry.running()
            with pytest.raises(acp.RequestError) as again:
                await conn.prompt(session_id=sid, prompt=[acp.text_block("Still there?")])
            with pytest.raises(acp.RequestError) as unknown:
                await conn.close_session(session_id=sid)
            # The agent goes on serving: a new session starts the server again.
            sid2 = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
            restarted = registry.running()
        return sid, server, closed, after, again.value, unknown.value, sid2, restarted

    sid, server, closed, after, again, unknown, sid2, restarted = run(main(), timeout=180)
    assert closed is not None and after == [] and not alive(server.pid)
    assert again.code == -32602 and unknown.code == -32002
    assert sid2 != sid and [r.profile for r in restarted] == ["one"]
    events = next(e for e in transcripts(isolated_state) if e[0]["session_id"] == sid)
    assert events[-2]["message"] == "the client closed the session (session/close)"
    assert events[-1]["type"] == "session.finished" and events[-1]["outcome"] == "completed"


@ACPX
def test_acpx_named_sessions_resume_in_a_new_agent_process_list_and_close(tmp_path, isolated_state):
    ws = git_folder(tmp_path / "ws")
    script = [{"content": "I will remember 7."}, {"content": "You said 7."}]
    env = {**os.environ, "HOME": str(tmp_path / "home")}  # acpx keeps its sessions under ~/.acpx

    with ScriptedServer(script) as server:
        command = shlex.join([sys.executable, "-m", "agent", "acp", "--base-url", server.url])

        def acpx(*args: str, ttl: str = "30") -> subprocess.CompletedProcess:
            return subprocess.run(["acpx", "--agent", command, "--ttl", ttl, "--format", "json", *args],
                                  capture_output=True, text=True, timeout=120, cwd=ws, env=env)  # fmt: skip

        def agents() -> list[Path]:
            return [p for p in Path("/proc").glob("[0-9]*") if _runs(p, command)]

        steps = [acpx("sessions", "new", "--name", "work", ttl="1")]
        steps.append(acpx("prompt", "-s", "work", "Remember 7.", ttl="1"))
        deadline = time.monotonic() + 30
        while agents():  # the queue owner's time runs out: the agent process ends, its session whole
            assert time.monotonic() < deadline
            time.sleep(0.2)
        steps.append(acpx("prompt", "-s", "work", "Which number?"))  # a new agent: session/resume
        steps.append(acpx("sessions", "list"))
        steps.append(acpx("set", "-s", "work", "actions", "blocks"))  # a picker, on the live agent
        kept = agents()
        steps.append(acpx("sessions", "close", "work"))
        second_request = server.requests[1]["messages"]
    assert [s.returncode for s in steps] == [0] * 6, [s.stderr for s in steps]
    resumed = messages(steps[2])
    assert [m["method"] for m in resumed if m.get("method", "").startswith("session/") and "id" in m] == [
        "session/resume", "session/prompt",
    ]  # fmt: skip
    said = "".join(u["content"]["text"] for u in updates(resumed, "agent_message_chunk"))
    assert "You said 7." in said and "I will remember 7." not in said  # not replayed
    assert any(m["role"] == "assistant" and m["content"] == "I will remember 7." for m in second_request)
    [events] = transcripts(isolated_state)  # one session, across agent processes (each owner's ttl: 1 s)
    sid = events[0]["session_id"]
    opened = [e["resumed"] for e in events if e["type"] == "session.started"]
    assert opened[0] is False and len(opened) >= 2 and all(opened[1:])
    assert sid in steps[3].stdout and "Remember 7." in steps[3].stdout  # listed by the agent, titled
    assert len(kept) == 1 and not agents()
    [picked] = [m for m in messages(steps[4]) if m.get("action") == "config_set"]
    assert {o["id"]: o["currentValue"] for o in picked["configOptions"]}["actions"] == "blocks"
    assert [e["options"].get("actions") for e in events if e["type"] == "session.started"][-1] == "blocks"
    assert events[-2]["message"] == "the client closed the session (session/close)"
    assert events[-1]["type"] == "session.finished"
    assert session_events(isolated_state, ws)[0]["session_id"] == sid
