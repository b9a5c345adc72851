"""`agent acp` as an editor sees it, through the ACP SDK's client, on the scripted server (a separate
thread; the model costs nothing here, so what is measured is the agent's own time). Printed as Markdown
for docs/benchmarks.md; each figure is the median of --runs fresh `agent acp` processes, with min-max.

1. Spawn to initialize: the process started until its initialize answer.
2. new_session on --base-url (attach, MCP none): the request until its answer.
3. First chunk: a prompt sent until the first agent_message_chunk arrives.
4. Cancel mid-stream: session/cancel sent until the prompt's answer (stop reason cancelled).
5. Cancel mid-command: session/cancel sent during `sleep 300` until the prompt's answer, and until the
   sleep's process is gone.

    python examples/bench_acp.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("AGENT_STATE_DIR", tempfile.mkdtemp(prefix="bench-acp-state-"))
os.environ.setdefault("AGENT_CONFIG_DIR", tempfile.mkdtemp(prefix="bench-acp-config-"))

import acp  # noqa: E402

from tests.frontends.acp.test_acp import RecordingClient, alive  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402

SLEEP = {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 300 & echo $! > pid.txt; wait"}}]}


async def one_run(url: str, ws: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    client = RecordingClient()
    began = time.monotonic()
    async with acp.spawn_agent_process(
        client, sys.executable, "-m", "agent", "acp", "--base-url", url, env=os.environ.copy(), cwd=ws,
        transport_kwargs={"stderr": open(os.devnull, "wb").fileno()},
    ) as (conn, _process):  # fmt: skip
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        figures["spawn to initialize"] = time.monotonic() - began
        began = time.monotonic()
        session = await conn.new_session(cwd=str(ws), mcp_servers=[])
        figures["new_session (attach)"] = time.monotonic() - began
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="full-auto")
        began = time.monotonic()
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("talk")]))
        while not [u for u in client.of("agent_message_chunk") if "word" in u.content.text]:
            await asyncio.sleep(0.001)
        figures["prompt to first chunk"] = time.monotonic() - began
        began = time.monotonic()
        await conn.cancel(session_id=sid)
        assert (await running).stop_reason == "cancelled"
        figures["cancel mid-stream"] = time.monotonic() - began
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("wait")]))
        pid_file = ws / "pid.txt"
        while not pid_file.exists() or not pid_file.read_text().strip():
            await asyncio.sleep(0.01)
        pid = int(pid_file.read_text())
        pid_file.unlink()
        began = time.monotonic()
        await conn.cancel(session_id=sid)
        assert (await running).stop_reason == "cancelled"
        figures["cancel mid-command (answer)"] = time.monotonic() - began
        while alive(pid):
            await asyncio.sleep(0.005)
        figures["cancel mid-command (process gone)"] = time.monotonic() - began
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        script = [{"content": "word " * 4000, "chunk_delay": 0.01}, SLEEP]
        with ScriptedServer(script) as server, tempfile.TemporaryDirectory() as folder:
            runs.append(asyncio.run(one_run(server.url, Path(folder))))
    print(f"| `agent acp` ({args.runs} runs) | median | min-max |\n|---|---|---|")
    for name in runs[0]:
        values = [r[name] * 1000 for r in runs]
        print(f"| {name} | {statistics.median(values):.0f} ms | {min(values):.0f}-{max(values):.0f} ms |")


if __name__ == "__main__":
    main()
