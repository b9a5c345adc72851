"""`agent acp` as an editor sees it. Printed as Markdown for docs/benchmarks.md, with the load average.

Default: through the ACP SDK's client, on the scripted server (a separate thread; the model costs
nothing here, so what is measured is the agent's own time); each figure is the median of --runs fresh
`agent acp` processes, with min-max.

1. Spawn to initialize: the process started until its initialize answer.
2. new_session on --base-url (attach, MCP none): the request until its answer.
3. First chunk: a prompt sent until the first agent_message_chunk arrives.
4. Cancel mid-stream: session/cancel sent until the prompt's answer (stop reason cancelled).
5. Cancel mid-command: session/cancel sent during `sleep 300` until the prompt's answer, and until the
   sleep's process is gone.

--profile NAME: the time from `session/new` to the first streamed token on a real server, the profile's
(from server_profiles/, on a free port), through the SDK's client. Each run is a fresh `agent acp`, so
its first session starts the server (the model file warm in the page cache); the prompt is sent as soon
as new_session answers and cancelled at its first token (a message or thought chunk). A second session
in another folder of the same process then reuses the running server (an editor's "new thread"). The
prompt is the README's hello task for a `coder*` profile, "Say hello." otherwise.

--turns: the agent's own time per request in ACP against the headless run, on the same turns: one
scripted conversation (tool calls answered by the real tools, in full-auto: no permission requests),
run --runs times each through `agent run` and through `agent acp` driven by acpx (alternating). The
scripted server stamps each request's arrival and the end of each answer; the agent's own time is the
gap from an answer's end to the next request (tool time included: the same tools run both ways).

    python examples/bench_acp.py [--runs 5]
    python examples/bench_acp.py --profile tiny --runs 5
    python examples/bench_acp.py --turns --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("AGENT_STATE_DIR", tempfile.mkdtemp(prefix="bench-acp-state-"))
os.environ.setdefault("AGENT_CONFIG_DIR", tempfile.mkdtemp(prefix="bench-acp-config-"))

import acp  # noqa: E402

from agent.session.taskfile import load_task  # noqa: E402
from tests.conftest import free_port  # noqa: E402
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


class TimedClient(RecordingClient):
    """Notes when each update arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[float] = []

    async def session_update(self, session_id: str, update, **meta) -> None:
        self.arrivals.append(time.monotonic())
        await super().session_update(session_id, update, **meta)

    def first_token(self, after: int) -> float | None:
        for update, at in zip(self.updates[after:], self.arrivals[after:], strict=True):
            if update.session_update in ("agent_message_chunk", "agent_thought_chunk"):
                return at
        return None


def real_profile(name: str) -> str:
    """The built-in profile on a free port, as a user profile of the same name (it replaces it)."""
    text = (REPO / "server_profiles" / f"{name}.toml").read_text()
    lines = [f"port = {free_port()}" if line.startswith("port = ") else line for line in text.splitlines()]
    folder = Path(os.environ["AGENT_CONFIG_DIR"]) / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text("\n".join(lines) + "\n")
    return name


async def to_first_token(conn, client: TimedClient, ws: Path, prompt: str) -> tuple[float, float]:
    """(new_session's answer, the first token), in seconds from new_session sent; the prompt is
    cancelled once the first token is in."""
    began = time.monotonic()
    session = await conn.new_session(cwd=str(ws), mcp_servers=[])
    opened = time.monotonic()
    seen = len(client.updates)
    running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[acp.text_block(prompt)]))
    while (first := client.first_token(seen)) is None:
        assert not running.done(), "the prompt ended without a token"
        await asyncio.sleep(0.005)
    await conn.cancel(session_id=session.session_id)
    await running
    token = next(u for u in client.updates[seen:] if u.session_update.endswith("_chunk"))
    print(f"  ({ws.name}: first {token.session_update}: {token.content.text[:60]!r})", file=sys.stderr)
    return opened - began, first - began


async def one_real_run(profile: str, prompt: str, folder: Path) -> dict[str, float]:
    client = TimedClient()
    first_ws, second_ws = folder / "first", folder / "second"
    for ws in (first_ws, second_ws):
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)  # (no "not a git repository" notice)
    log = folder / "acp-stderr.log"
    # The SDK sends SIGTERM 2 s after closing the agent's stdin; on a loaded box stopping the server
    # can take longer, and `agent acp` killed mid-shutdown leaves it running: wait for a clean exit.
    with log.open("wb") as stderr:
        try:
            async with acp.spawn_agent_process(
                client, sys.executable, "-m", "agent", "acp", "-p", profile, env=os.environ.copy(),
                cwd=folder, transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 60},
            ) as (conn, _process):  # fmt: skip
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                opened, first = await to_first_token(conn, client, first_ws, prompt)
                again_opened, again_first = await to_first_token(conn, client, second_ws, prompt)
        except Exception:
            sys.stderr.write(log.read_text(errors="replace")[-4000:])
            raise
    return {
        "server started: new_session answered": opened,
        "server started: new_session to first token": first,
        "server running: new_session answered": again_opened,
        "server running: new_session to first token": again_first,
    }


def bench_profile(name: str, runs: int) -> None:
    profile = real_profile(name)
    if name.startswith("coder"):
        prompt = load_task(REPO / "examples" / "tasks" / "hello" / "task.md").body
    else:
        prompt = "Say hello."
    results = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            results.append(asyncio.run(one_real_run(profile, prompt, Path(folder))))
    print(f"| `agent acp -p {name}` ({runs} runs) | median | min-max |\n|---|---|---|")
    for key in results[0]:
        values = [r[key] for r in results]
        print(f"| {key} | {statistics.median(values):.2f} s | {min(values):.2f}-{max(values):.2f} s |")


# ---------------------------------------------------------------------------------- --turns
def _call(name: str, say: str, **arguments) -> dict:
    return {"content": say, "tool_calls": [{"name": name, "arguments": arguments}]}


TURNS = [
    _call("list_files", "I'll look around first.", path="."),
    _call("read_file", "Reading the app.", path="app.py"),
    _call("read_file", "And the notes.", path="notes.txt"),
    _call("grep", "Where is the greeting?", pattern="Hello"),
    _call("edit_file", "Changing the greeting.", path="app.py", old_string="Hello", new_string="Bonjour"),
    _call("write_file", "Updating the notes.", path="notes.txt", content="v2: the greeting is French\n"),
    _call("bash", "Running it.", command="python3 app.py"),
    _call("read_file", "Reading the result once more.", path="app.py"),
    _call("bash", "Listing what changed.", command="ls -l"),
    {
        "content": "Done. `greet` in app.py now returns `Bonjour, {name}!` instead of `Hello, {name}!`, and "
        "running `python3 app.py` prints `Bonjour, Ann!`. notes.txt says v2 and why: the greeting is "
        "French now. Nothing else changed: the listing shows app.py and notes.txt only, no stray files. "
        "If other code compares the greeting with the English text, search for `Hello` first; the only "
        "match before this change was in app.py, so no test or caller should break."
    },
]
TASK = "Make the app greet in French and note it in notes.txt."


def one_turns_run(front_end: str, folder: Path) -> tuple[list[float], list[float]]:
    """(the gaps between requests, the tool's own seconds in each), one conversation, in seconds."""
    ws = folder / "ws"
    ws.mkdir()
    (ws / "app.py").write_text('def greet(name):\n    return f"Hello, {name}!"\n\nprint(greet("Ann"))\n')
    (ws / "notes.txt").write_text("v1\n")
    with ScriptedServer(list(TURNS)) as server:
        if front_end == "headless":
            (folder / "task.md").write_text(TASK + "\n")
            argv = [sys.executable, "-m", "agent", "run", str(folder / "task.md"), "--base-url", server.url,
                    "--workdir", str(ws)]  # fmt: skip
        else:
            agent = shlex.join([sys.executable, "-m", "agent", "acp", "--base-url", server.url])
            argv = ["acpx", "--agent", agent, "--cwd", str(ws), "--approve-all", "--format", "quiet",
                    "--timeout", "120", "exec", TASK]  # fmt: skip
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=180, cwd=ws, env=os.environ.copy()
        )
        timeline = sorted(server.model.timeline)
    assert done.returncode == 0, (front_end, done.stderr[-2000:])
    assert len(timeline) == len(TURNS), (front_end, len(timeline))  # the same turns, all of them
    assert "Bonjour" in (ws / "app.py").read_text() and (ws / "notes.txt").read_text().startswith("v2")
    sessions = Path(os.environ["AGENT_STATE_DIR"]) / "sessions"
    newest = max(sessions.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    events = [json.loads(line) for line in newest.read_text().splitlines()]
    tools = [e["seconds"] for e in events if e["type"] == "tool.result"]
    assert len(tools) == len(TURNS) - 1, (front_end, newest)
    return [nxt[0] - end for (_, end), nxt in itertools.pairwise(timeline)], tools


def bench_turns(runs: int) -> None:
    if shutil.which("acpx") is None:
        sys.exit("--turns drives `agent acp` with acpx: npm install -g acpx@0.19")
    config = Path(os.environ["AGENT_CONFIG_DIR"])
    (config / "config.toml").write_text('approval = "full-auto"\nmax_turns = 20\n')
    gaps: dict[str, list[list[float]]] = {"headless": [], "acp": []}
    tools: dict[str, list[list[float]]] = {"headless": [], "acp": []}
    for _ in range(runs):
        for front_end in gaps:  # alternating, so that both see the same load
            with tempfile.TemporaryDirectory() as folder:
                run_gaps, run_tools = one_turns_run(front_end, Path(folder))
            gaps[front_end].append(run_gaps)
            tools[front_end].append(run_tools)

    def ms(values) -> str:
        return f"{statistics.median(values) * 1000:.1f}"

    print(f"| request → next ({runs} runs each, medians, ms) | `agent run` | of it the tool | "
          "`agent acp` via acpx | of it the tool |\n|---|---|---|---|---|")  # fmt: skip
    for i, turn in enumerate(TURNS[:-1]):
        cells = [ms(r[i] for r in table[k]) for k in ("headless", "acp") for table in (gaps, tools)]
        print(f"| {i + 1} → {i + 2} (after {turn['tool_calls'][0]['name']}) | {' | '.join(cells)} |")
    flat = {k: [g for r in v for g in r] for k, v in gaps.items()}
    bare = {k: [g - t for rg, rt in zip(gaps[k], tools[k], strict=True) for g, t in zip(rg, rt, strict=True)]
            for k in gaps}  # fmt: skip
    print()
    for k in gaps:
        print(f"- {k}: all {len(flat[k])} gaps median {ms(flat[k])} ms, max {max(flat[k]) * 1000:.1f} ms; "
              f"without the tool's own time median {ms(bare[k])} ms")  # fmt: skip
    ratio = statistics.median(flat["acp"]) / statistics.median(flat["headless"])
    print(f"- ACP / headless, medians: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", help="a real server's profile: new_session to the first token")
    parser.add_argument("--turns", action="store_true", help="the agent's own time per request, vs headless")
    args = parser.parse_args()
    load = os.getloadavg()
    if args.profile:
        bench_profile(args.profile, args.runs)
    elif args.turns:
        bench_turns(args.runs)
    else:
        bench_scripted(args.runs)
    print(f"\nload average (1, 5, 15 min): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start, "
          "{:.1f} {:.1f} {:.1f} at the end".format(*os.getloadavg()))  # fmt: skip


def bench_scripted(runs: int) -> None:
    results = []
    for _ in range(runs):
        script = [{"content": "word " * 4000, "chunk_delay": 0.01}, SLEEP]
        with ScriptedServer(script) as server, tempfile.TemporaryDirectory() as folder:
            results.append(asyncio.run(one_run(server.url, Path(folder))))
    print(f"| `agent acp` ({runs} runs) | median | min-max |\n|---|---|---|")
    for name in results[0]:
        values = [r[name] * 1000 for r in results]
        print(f"| {name} | {statistics.median(values):.0f} ms | {min(values):.0f}-{max(values):.0f} ms |")


if __name__ == "__main__":
    main()
