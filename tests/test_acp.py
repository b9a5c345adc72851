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
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from tests.scripted_server import ScriptedServer
from tests.test_headless import agent, call, events_of

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


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


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
    assert events[-1]["type"] == "session.finished"
    listed = json.loads(agent("sessions", "--json").stdout)
    assert [(s["id"], s["turns"], s["outcome"]) for s in listed] == [(session.session_id, 2, "completed")]
    assert agent("stats", session.session_id).returncode == 0
