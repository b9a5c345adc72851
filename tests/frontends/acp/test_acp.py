"""`agent acp` driven by the ACP SDK's own client side (`acp.spawn_agent_process`), as an editor drives it:
a subprocess on stdin/stdout, against the scripted model server (a test double of the model only)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import AllowedOutcome, DeniedOutcome, HttpMcpServer, McpServerStdio, RequestPermissionResponse

from agent.session.live import resumed_history
from agent.store.transcripts import load_session
from tests.frontends.test_headless import REPO, agent, call, events_of
from tests.mcp_servers import DEMO, served
from tests.scripted_server import ScriptedServer
from tools.sandbox import unavailable as sandbox_unavailable

pytestmark = pytest.mark.slow  # each test starts `agent acp` as a process (about 1 s of imports)


class RecordingClient:
    """An ACP client that keeps every update and answers permission requests from a list."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.updates: list[Any] = []
        self.permissions: list[dict[str, Any]] = []
        self.answers = list(answers or [])
        self.extensions: list[tuple[str, dict]] = []
        self.asked = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list, **meta: Any):
        self.permissions.append({"tool_call": tool_call, "options": options, "meta": meta})
        self.asked.set()
        answer = self.answers.pop(0) if self.answers else "reject"
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def ext_notification(self, method: str, params: dict) -> None:
        self.extensions.append((method, params))

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(kind))


@asynccontextmanager
async def acp_agent(
    client: RecordingClient, tmp_path: Path, *args: str
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    stderr = (tmp_path / "acp-stderr.log").open("ab")
    try:
        async with acp.spawn_agent_process(
            client, sys.executable, "-m", "agent", "acp", *args, env=os.environ.copy(), cwd=tmp_path,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, process):  # fmt: skip
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            yield conn, process
    finally:
        stderr.close()


def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir(exist_ok=True)
    return folder


def transcripts(isolated_state: Path) -> list[list[dict]]:
    return [events_of(p) for p in sorted((isolated_state / "sessions").glob("*.jsonl"))]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def assert_whole(state: Path, session_id: str) -> None:
    """The recorded session, as a resume sends it (agent/session/live.py), gives every tool call its
    result, as the server requires of a request."""
    history = resumed_history(load_session(state, session_id))
    calls = {c["id"] for m in history if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    results = {m["tool_call_id"] for m in history if m["role"] == "tool"}
    assert calls and calls == results


def run(coro, timeout: float = 120) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_initialize_names_the_agent_and_its_capabilities(tmp_path):
    async def main():
        client = RecordingClient()
        async with acp.spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "agent",
            "acp",
            "--base-url",
            "http://127.0.0.1:9",
            env=os.environ.copy(),
        ) as (conn, _process):
            return await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)

    reply = run(main())
    assert reply.protocol_version == acp.PROTOCOL_VERSION
    assert reply.agent_info.name == "spec-agent" and reply.agent_info.version
    caps = reply.agent_capabilities
    assert caps.load_session and caps.mcp_capabilities.http and caps.prompt_capabilities.embedded_context
    sessions = caps.session_capabilities  # session/list, /resume and /close (tests: test_acp_sessions.py)
    assert sessions.list is not None and sessions.resume is not None and sessions.close is not None


def test_a_prompt_streams_reasoning_a_tool_call_and_the_answer_and_is_recorded(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    (ws / "notes.txt").write_text("the answer is 42\n")
    script = [
        {"reasoning": "I should read the notes.", "tool_calls": [call("read_file", path="notes.txt")]},
        {"content": "The notes say the answer is 42."},
    ]

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            reply = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("What do the notes say?")]
            )
        return client, session, reply

    with ScriptedServer(script) as server:
        client, session, reply = run(main(server.url))
        resumed = agent("run", "--resume", session.session_id, "--base-url", server.url)  # as any session
    assert resumed.returncode == 0, resumed.stderr
    assert reply.stop_reason == "end_turn"
    assert "The notes say the answer is 42." in client.text()
    assert "not a git repository" in client.text("agent_thought_chunk")  # the opening notice
    assert client.text("agent_thought_chunk").endswith("I should read the notes.")
    [start] = client.of("tool_call")
    assert start.kind == "read" and start.title == "Read notes.txt" and start.status == "pending"
    assert start.locations[0].path == str(ws / "notes.txt")
    statuses = [u.status for u in client.of("tool_call_update") if u.tool_call_id == start.tool_call_id]
    assert statuses == ["in_progress", "completed"]
    [done] = [u for u in client.of("tool_call_update") if u.status == "completed"]
    assert "the answer is 42" in done.content[0].content.text
    # The speed after each turn: a usage update with the figures in its _meta, and one text line.
    usage = client.of("usage_update")
    assert len(usage) == 2 and usage[-1].size == 32768 and 0 < usage[-1].used <= usage[-1].size
    figures = usage[-1].field_meta["spec-agent/figures"]
    assert figures["generation_tokens_per_second"] == 100.0 and figures["prefill_tokens_per_second"] == 500.0
    assert "cache_reuse" in figures and "draft_acceptance" in figures
    assert "*turn 2 · " in client.text() and "tok/s gen" in client.text()
    # Recorded like any other session: agent sessions and agent stats see it.
    [events] = transcripts(isolated_state)
    assert events[0]["session_id"] == session.session_id and events[0]["workspace"] == str(ws)
    assert [e["type"] for e in events].count("session.finished") == 2  # the ACP session, then the resume
    listed = json.loads(agent("sessions", "--json").stdout)
    assert [(s["id"], s["turns"], s["outcome"]) for s in listed] == [(session.session_id, 3, "completed")]
    assert agent("stats", session.session_id).returncode == 0


def test_permission_requests_are_answered_each_way_and_recorded(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    (ws / "notes.txt").write_text("v1\n")
    script = [
        {"tool_calls": [call("read_file", path="notes.txt")]},  # only a file read whole is written whole
        {"tool_calls": [call("write_file", path="notes.txt", content="v2\n")]},  # allowed once
        {"tool_calls": [call("write_file", path="notes.txt", content="v3\n")]},  # rejected
        {"tool_calls": [call("write_file", path="other.txt", content="x\n")]},  # allowed always
        {"tool_calls": [call("write_file", path="other.txt", content="y\n")]},  # not asked again
        {"content": "Done."},
    ]

    async def main(url: str):
        client = RecordingClient(["allow_once", "reject", "allow_always"])
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            assert session.modes.current_mode_id == "ask"
            reply = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("Edit the notes.")]
            )
        return client, reply

    with ScriptedServer(script) as server:
        client, reply = run(main(server.url))
    assert reply.stop_reason == "end_turn"
    assert (ws / "notes.txt").read_text() == "v2\n" and (ws / "other.txt").read_text() == "y\n"
    assert len(client.permissions) == 3
    first = client.permissions[0]
    assert [o.kind for o in first["options"]] == ["allow_once", "allow_always", "reject_once"]
    assert first["tool_call"].title == "Write notes.txt" and first["tool_call"].kind == "edit"
    assert (
        first["meta"]["rule"] == "*" and "edits" in first["meta"]["reason"]
    )  # the rule that matched, and why
    starts = client.of("tool_call")
    finished = {
        u.tool_call_id: u for u in client.of("tool_call_update") if u.status in ("completed", "failed")
    }
    allowed, rejected = finished[starts[1].tool_call_id], finished[starts[2].tool_call_id]  # [0]: the read
    [diff] = allowed.content  # an edit carries its diff: the old text and the new
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
        "diff",
        str(ws / "notes.txt"),
        "v1\n",
        "v2\n",
    )
    assert rejected.status == "failed" and "declined" in rejected.content[0].content.text
    [events] = transcripts(isolated_state)
    decided = [e["decision"] for e in events if e["type"] == "permission.decided"]
    assert decided == ["allow", "allow", "deny", "allow", "allow"]  # the read, then the four writes
    answers = [
        e["message"] for e in events if e["type"] == "notice" and "the client answered" in e["message"]
    ]
    assert [a.split()[3] for a in answers] == ["allow_once", "reject", "allow_always"]


def test_modes_are_the_approval_modes_and_the_client_switches_them(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    script = [
        {"tool_calls": [call("write_file", path="a.txt", content="a\n")]},  # read-only: refused, not asked
        {"content": "I may not write."},
        {"tool_calls": [call("bash", command="echo ran > b.txt")]},  # full-auto: runs, not asked
        {"content": "Ran it."},
    ]

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            sid = session.session_id
            modes = [m.id for m in session.modes.available_modes]
            await conn.set_session_mode(session_id=sid, mode_id="read-only")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("Write a.")])
            await conn.set_session_mode(session_id=sid, mode_id="full-auto")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("Run it.")])
            with pytest.raises(acp.RequestError) as bad:
                await conn.set_session_mode(session_id=sid, mode_id="yolo")
        return client, modes, bad.value

    with ScriptedServer(script) as server:
        client, modes, bad = run(main(server.url))
    assert modes == ["ask", "auto-edit", "full-auto", "read-only"]
    assert [u.current_mode_id for u in client.of("current_mode_update")] == ["read-only", "full-auto"]
    assert client.permissions == [] and not (ws / "a.txt").exists() and (ws / "b.txt").read_text() == "ran\n"
    assert bad.code == -32602
    [events] = transcripts(isolated_state)
    assert [e["decision"] for e in events if e["type"] == "permission.decided"] == ["deny", "allow"]


def test_cancel_during_a_stream_stops_it_and_the_session_goes_on(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    script = [{"content": "word " * 2000, "chunk_delay": 0.02}, {"content": "Still here."}]

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            sid = session.session_id
            running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("Talk.")]))
            while not client.of("agent_message_chunk"):
                await asyncio.sleep(0.02)
            cancelled_at = time.monotonic()
            await conn.cancel(session_id=sid)
            reply = await running
            took = time.monotonic() - cancelled_at
            after = await conn.prompt(session_id=sid, prompt=[acp.text_block("Are you there?")])
        return client, reply, took, after

    with ScriptedServer(script) as server:
        client, reply, took, after = run(main(server.url))
    assert reply.stop_reason == "cancelled" and after.stop_reason == "end_turn"
    assert took < 10, took  # (the figure itself: docs/benchmarks.md; a loaded box must not fail this)
    assert "Still here." in client.text() and len(client.text()) < len("word " * 2000)
    [events] = transcripts(isolated_state)
    kinds = [e["type"] for e in events]
    assert [e["error"] for e in events if e["type"] == "error"] == ["interrupted"]
    assert kinds[-1] == "session.finished" and kinds.count("user.message") == 2


def test_cancel_during_a_long_command_ends_its_process_group(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    script = [
        {"tool_calls": [call("bash", command="sleep 300 & echo $! > pid.txt; wait")]},
        {"content": "unreachable"},
    ]

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            sid = session.session_id
            await conn.set_session_mode(session_id=sid, mode_id="full-auto")
            running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("Wait.")]))
            while not (ws / "pid.txt").exists() or not (ws / "pid.txt").read_text().strip():
                await asyncio.sleep(0.05)
            pid = int((ws / "pid.txt").read_text())
            assert alive(pid)
            cancelled_at = time.monotonic()
            await conn.cancel(session_id=sid)
            reply = await running
            took = time.monotonic() - cancelled_at
            gone = not alive(pid)  # before the agent exits: the cancel ended it, not the shutdown
        return client, reply, took, gone

    with ScriptedServer(script) as server:
        client, reply, took, gone = run(main(server.url))
    assert reply.stop_reason == "cancelled" and gone and took < 10, took
    [start] = client.of("tool_call")
    assert start.kind == "execute" and start.title == "Run `sleep 300 & echo $! > pid.txt; wait`"
    assert client.of("tool_call_update")[-1].status == "failed"  # not left running in the client
    [events] = transcripts(isolated_state)
    assert events[-1]["type"] == "session.finished" and events[-1]["outcome"] == "interrupted"
    assert_whole(
        isolated_state, events[0]["session_id"]
    )  # a resume can send it: the cancelled call has its result


def test_hitting_the_turn_limit_ends_the_prompt_with_max_turn_requests(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    config = isolated_state.parent / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('max_turns = 2\napproval = "full-auto"\n')

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            assert session.modes.current_mode_id == "full-auto"  # the settings' approval mode
            return await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Loop.")])

    with ScriptedServer(default={"tool_calls": [call("list_files")]}) as server:
        reply = run(main(server.url))
        assert len(server.requests) == 2
    assert reply.stop_reason == "max_turn_requests"


def test_load_session_replays_the_history_and_the_conversation_continues(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    script = [
        {"tool_calls": [call("list_files")]},
        {"content": "I will remember 7."},
        {"content": "You said 7."},
    ]

    async def first(url: str) -> str:
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Remember 7.")])
            return session.session_id

    async def second(url: str, sid: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            loaded = await conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[])
            replayed = list(client.updates)
            reply = await conn.prompt(session_id=sid, prompt=[acp.text_block("Which number?")])
            with pytest.raises(acp.RequestError) as missing:
                await conn.load_session(cwd=str(ws), session_id="no-such-session", mcp_servers=[])
        return loaded, replayed, reply, missing.value

    with ScriptedServer(script) as server:
        sid = run(first(server.url))
        loaded, replayed, reply, missing = run(second(server.url, sid))
        last_request = server.requests[-1]["messages"]
    assert loaded.modes.current_mode_id == "ask" and reply.stop_reason == "end_turn"
    kinds = [u.session_update for u in replayed]
    assert kinds[:4] == ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
    assert replayed[0].content.text == "Remember 7." and replayed[3].content.text == "I will remember 7."
    assert any(m["role"] == "assistant" and m["content"] == "I will remember 7." for m in last_request)
    assert missing.code == -32002
    [events] = transcripts(isolated_state)  # one transcript, continued
    assert [e["type"] for e in events].count("session.started") == 2


def test_an_attached_file_reaches_the_model(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    attachment = acp.resource_block(
        acp.embedded_text_resource(f"file://{ws}/spec.md", "The spec: print 42.", mime_type="text/markdown")
    )

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("Read this."), attachment]
            )

    with ScriptedServer([{"content": "ok"}]) as server:
        run(main(server.url))
        sent = server.requests[0]["messages"][-1]["content"]
    assert "Read this." in sent and f"{ws}/spec.md" in sent and "The spec: print 42." in sent
    [events] = transcripts(isolated_state)
    [said] = [e for e in events if e["type"] == "user.message"]
    assert said["typed"] == "Read this."


def test_the_clients_mcp_servers_stdio_and_http_start_beside_the_users_own(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    demo = str(REPO / "tests" / "mcp_servers" / "demo.py")
    config = isolated_state.parent / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        f'[mcp_servers.mine]\ncommand = "{sys.executable}"\nargs = ["{demo}"]\n'
    )
    script = [
        {"tool_calls": [
            call("mcp__demo__add", a=2, b=3), call("mcp__web__shout", text="web"), call("mcp__mine__shout", text="hi"),
        ]},
        {"content": "5, WEB and HI."},
    ]  # fmt: skip

    async def main(url: str, web: str):
        client = RecordingClient(["allow_once"] * 3)
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            servers = [
                McpServerStdio(name="demo", command=sys.executable, args=[demo], env=[]),
                HttpMcpServer(type="http", name="web", url=web, headers=[]),
            ]
            session = await conn.new_session(cwd=str(ws), mcp_servers=servers)
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Add and shout.")])
        return client

    with ScriptedServer(script) as server, served(DEMO) as web:
        client = run(main(server.url, web))
        tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"mcp__demo__add", "mcp__web__shout", "mcp__mine__shout"} <= tools
    assert [u.kind for u in client.of("tool_call")] == ["fetch", "fetch", "fetch"]
    outputs = [u.content[0].content.text for u in client.of("tool_call_update") if u.status == "completed"]
    assert outputs == ["5", "WEB", "HI"]


def test_cancel_while_the_client_is_asked_ends_the_prompt_and_runs_nothing(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    script = [{"tool_calls": [call("bash", command="echo ran > ran.txt")]}, {"content": "unreachable"}]

    class SlowClient(RecordingClient):
        async def request_permission(self, session_id, tool_call, options, **meta):
            self.asked.set()
            await self.release.wait()  # the person has not answered yet; ACP says a cancel answers it so
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def main(url: str):
        client = SlowClient()
        client.release = asyncio.Event()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            sid = session.session_id
            running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("Run it.")]))
            await client.asked.wait()
            await conn.cancel(session_id=sid)
            client.release.set()
            return await running

    with ScriptedServer(script) as server:
        reply = run(main(server.url))
        assert len(server.requests) == 1
    assert reply.stop_reason == "cancelled" and not (ws / "ran.txt").exists()
    [events] = transcripts(isolated_state)
    assert_whole(isolated_state, events[0]["session_id"])


def test_a_model_server_that_dies_mid_answer_ends_the_prompt_as_a_refusal_with_the_reason(tmp_path):
    ws = workspace(tmp_path)

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Talk.")])
        return client, reply

    with ScriptedServer(default={"content": "x" * 400, "die_after_chunks": 3}) as server:
        client, reply = run(main(server.url))
    assert reply.stop_reason == "refusal"
    assert "**Stopped:**" in client.text()  # why, in the answer


def test_a_second_session_in_the_same_folder_finishes_the_first(tmp_path, isolated_state):
    ws = workspace(tmp_path)

    async def main(url: str):
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            first = await conn.new_session(cwd=str(ws), mcp_servers=[])
            second = await conn.new_session(cwd=str(ws), mcp_servers=[])  # Zed's "new thread"
            reply = await conn.prompt(session_id=second.session_id, prompt=[acp.text_block("Hi.")])
            with pytest.raises(acp.RequestError):
                await conn.prompt(session_id=first.session_id, prompt=[acp.text_block("Hi.")])
        return first.session_id, second.session_id, reply

    with ScriptedServer() as server:
        first, second, reply = run(main(server.url))
    assert reply.stop_reason == "end_turn" and first != second
    ended = {events[0]["session_id"]: events[-1]["type"] for events in transcripts(isolated_state)}
    assert ended == {first: "session.finished", second: "session.finished"}


@pytest.mark.skipif(bool(sandbox_unavailable()), reason=f"no sandbox here: {sandbox_unavailable()}")
def test_deny_rules_and_the_sandbox_hold_in_full_auto(tmp_path, isolated_state):
    ws = workspace(tmp_path)
    (ws / "notes.txt").write_text("keep\n")
    outside = tmp_path / "outside.txt"
    config = isolated_state.parent / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('approval = "full-auto"\n[permissions.deny]\nbash = ["rm *"]\n')
    script = [
        {"tool_calls": [call("bash", command="rm notes.txt")]},  # denied by the rule, not asked
        {"tool_calls": [call("bash", command=f"echo escaped > {outside}")]},  # runs, sandboxed
        {"content": "Done."},
    ]

    async def main(url: str):
        client = RecordingClient(["allow_once", "allow_once"])
        async with acp_agent(client, tmp_path, "--base-url", url) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Clean up.")])
        return client

    with ScriptedServer(script) as server:
        client = run(main(server.url))
    assert client.permissions == [] and (ws / "notes.txt").read_text() == "keep\n" and not outside.exists()
    [denied, sandboxed] = [u for u in client.of("tool_call_update") if u.status in ("completed", "failed")]
    assert denied.status == "failed" and "rm *" in denied.content[0].content.text
    assert sandboxed.raw_output["sandboxed"] is True
