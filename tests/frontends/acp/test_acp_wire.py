"""`agent acp` fed bad input on the wire, as a broken or hostile client would: raw JSON-RPC lines, no SDK.
Each gets the protocol's error, or a clean exit, with nothing left running and the transcript whole."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.frontends.acp.test_acp import alive, assert_whole, transcripts
from tests.frontends.test_headless import call
from tests.scripted_server import ScriptedServer

pytestmark = pytest.mark.slow  # each test starts `agent acp` as a process


class Wire:
    """`agent acp` as a subprocess, spoken to line by line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.seen: list[dict[str, Any]] = []

    async def write(self, line: str) -> None:
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def request(self, ident: int, method: str, params: dict) -> None:
        await self.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}))

    async def reply(self, ident: Any) -> dict[str, Any]:
        """The response to `ident`; what else arrives (every line must be JSON-RPC) is kept in `seen`."""
        while True:
            for message in self.seen:
                if "method" not in message and message.get("id") == ident:
                    self.seen.remove(message)
                    return message
            line = await asyncio.wait_for(self.process.stdout.readline(), 30)
            assert line, "agent acp closed its stdout"
            message = json.loads(line)  # stdout carries protocol messages only
            assert message["jsonrpc"] == "2.0"
            self.seen.append(message)

    async def wait_for(self, predicate) -> None:
        while not any(predicate(m) for m in self.seen):
            line = await asyncio.wait_for(self.process.stdout.readline(), 30)
            assert line, "agent acp closed its stdout"
            self.seen.append(json.loads(line))


async def start(tmp_path: Path, url: str) -> Wire:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent", "acp", "--base-url", url,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=(tmp_path / "acp-stderr.log").open("ab"), env=os.environ.copy(), cwd=tmp_path,
    )  # fmt: skip
    wire = Wire(process)
    await wire.request(0, "initialize", {"protocolVersion": 1})
    assert (await wire.reply(0))["result"]["protocolVersion"] == 1
    return wire


def test_malformed_lines_unknown_methods_and_unknown_sessions_get_the_protocols_errors(tmp_path):
    async def main(url: str) -> list[dict]:
        wire = await start(tmp_path, url)
        await wire.write("this is not JSON {")
        parse = await wire.reply(None)
        await wire.write("[1, 2, 3]")
        not_object = await wire.reply(None)
        await wire.request(1, "session/frobnicate", {})
        unknown = await wire.request(
            2, "session/prompt", {"sessionId": "nope", "prompt": []}
        ) or await wire.reply(1)
        missing = await wire.reply(2)
        await wire.request(3, "session/new", {"cwd": "relative/path", "mcpServers": []})
        relative = await wire.reply(3)
        wire.process.stdin.close()
        assert await asyncio.wait_for(wire.process.wait(), 30) == 0
        return [parse, not_object, unknown, missing, relative]

    with ScriptedServer() as server:
        replies = asyncio.run(main(server.url))
    assert [r["error"]["code"] for r in replies] == [-32700, -32600, -32601, -32602, -32602]
    assert "no such session" in replies[3]["error"]["data"]["message"]
    assert (tmp_path / "acp-stderr.log").read_text().count("Traceback") == 0


def test_a_second_prompt_while_one_runs_is_refused_and_closing_stdin_mid_turn_exits_cleanly(
    tmp_path, isolated_state
):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = [{"tool_calls": [call("bash", command="sleep 300 & echo $! > pid.txt; wait")]}]

    async def main(url: str) -> tuple[dict, int, int]:
        wire = await start(tmp_path, url)
        await wire.request(1, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = (await wire.reply(1))["result"]["sessionId"]
        await wire.request(2, "session/set_mode", {"sessionId": sid, "modeId": "full-auto"})
        await wire.reply(2)
        await wire.request(
            3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}
        )
        while not (ws / "pid.txt").exists() or not (ws / "pid.txt").read_text().strip():
            await asyncio.sleep(0.05)
        await wire.request(
            4, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}
        )
        second = await wire.reply(4)
        pid = int((ws / "pid.txt").read_text())
        wire.process.stdin.close()  # the editor went away mid-turn
        code = await asyncio.wait_for(wire.process.wait(), 30)
        return second, pid, code

    with ScriptedServer(script) as server:
        second, pid, code = asyncio.run(main(server.url))
    assert second["error"]["code"] == -32600 and "already running" in second["error"]["data"]["message"]
    assert code == 0 and not alive(pid)
    [events] = transcripts(isolated_state)
    assert events[-1]["type"] == "session.finished" and events[-1]["outcome"] == "interrupted"
    assert_whole(isolated_state, events[0]["session_id"])
