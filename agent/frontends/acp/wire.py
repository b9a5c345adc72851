"""`agent acp`'s command and its wire: the protocol on stdin/stdout, with JSON-RPC's answers to bad input.

stdout is the protocol's alone: the real stdout is kept for it and file descriptor 1 is pointed at stderr
before the first message is read, so a stray print, or a child process that writes to its inherited stdout,
cannot corrupt the stream. Logs go to stderr (editors keep an agent's stderr in their logs).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from argparse import Namespace
from typing import Any

import acp
from acp._transport import NdjsonTransport  # the SDK's line framing; pinned <0.13 in pyproject
from acp.task import MessageSender, TaskSupervisor

from agent.errors import ExitCode
from agent.frontends.acp.agent import SpecAgent
from agent.settings.config import Settings


class StrictNdjson(NdjsonTransport):
    """The SDK's framing, with JSON-RPC's answers to bad input. The SDK only logs a line that does not
    parse (the client never hears of it), and its receive loop fails on JSON that is not an object."""

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                await self.send(_error(None, -32700, "Parse error", str(exc)))
                continue
            if not isinstance(message, dict) or not isinstance(message.get("method", ""), str):
                ident = message.get("id") if isinstance(message, dict) else None
                await self.send(_error(ident, -32600, "Invalid request", "a JSON-RPC message is an object"))
                continue
            return message


def _error(ident: Any, code: int, message: str, details: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "error": {"code": code, "message": message, "data": {"details": details}},
    }


async def serve(agent: SpecAgent) -> bool:
    """Serve until the client goes (stdin closed: False) or SIGTERM comes (True)."""
    loop = asyncio.get_running_loop()
    # The protocol's stdout: the real one, kept aside; fd 1 becomes stderr for everything else.
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, protocol_out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    supervisor = TaskSupervisor(source="agent acp")
    wire = StrictNdjson(reader, MessageSender(writer, supervisor))
    # Clients end an agent with SIGTERM shortly after closing its stdin (acpx after 100 ms, the SDK's
    # client after 2 s): it ends the session as a closed stdin does, servers stopped and transcripts whole.
    # The observer is told of each message once written: the agent's commands follow the response that
    # opened their session (agent.py). session/resume and session/close are stable in the protocol since
    # 2026, but the SDK (0.12) still routes them only with `use_unstable_protocol`.
    serving = asyncio.ensure_future(
        acp.run_agent(agent, wire, observers=[agent.observe], use_unstable_protocol=True)
    )
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        serving.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        await serving
    except asyncio.CancelledError:
        if not terminated:
            raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await agent.shutdown()
        await supervisor.shutdown()
    return terminated


def cmd_acp(args: Namespace, _settings: Settings) -> int:
    agent = SpecAgent(args.profile, args.base_url, figures_line=not args.no_figures)
    try:
        terminated = asyncio.run(serve(agent))
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    return ExitCode.TERMINATED if terminated else ExitCode.SUCCESS
