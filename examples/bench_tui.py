"""The TUI's three benchmarks (issue: the interactive TUI), printed as Markdown for docs/benchmarks.md.

1. Token to screen (tests/frontends/tui/stream_lag.py): the scripted server (a separate process)
   streams a long Markdown answer, --rate deltas a second on a fixed schedule (--rate 0: --chunk-delay
   apart). For each delta: the time from its arrival in the app (the event) to the first screen update
   after it is in the answer's widget. Median and p99, early and late in the answer (a growing lag
   shows as late >> early), how far the stream fell behind the server's schedule, and CPU per delta.
2. A 200-turn session: resumed from its transcript; the time to show it, to scroll to the top and
   back, and the process's memory.
3. Start to typing: `agent -p PROFILE` in tmux with that profile's server already running, until a
   typed character shows in the input.

    python examples/bench_tui.py [--tokens 20000] [--rate 2000] [--turns 200] [--profile tiny] [--skip-start]
    python examples/bench_tui.py --tokens 20000 --rate 2000 --stream-only
    python examples/bench_tui.py --real tiny-ngram --stream-only    # a real server (the GPU's rate)
    python examples/bench_tui.py --client-only    # what the OpenAI client and ModelClient.stream cost alone
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# Folders of its own, unless given, and gone when it ends (atexit runs after the app and its server).
for _variable, _prefix in (
    ("AGENT_STATE_DIR", "bench-tui-state-"),
    ("AGENT_CONFIG_DIR", "bench-tui-config-"),
):
    if _variable not in os.environ:
        os.environ[_variable] = tempfile.mkdtemp(prefix=_prefix)
        atexit.register(shutil.rmtree, os.environ[_variable], True)

from tests.frontends.tui.helpers import git_workspace, make_app, send, wait_for  # noqa: E402
from tests.frontends.tui.stream_lag import SECTION, scripted_server, token_to_screen  # noqa: E402


def long_session(turns: int, path: Path, workspace: Path) -> str:
    session_id = f"bench-{uuid.uuid4().hex[:6]}"
    stats = {"cache_n": 1200, "prompt_n": 80, "prompt_per_second": 1900.0, "predicted_n": 120,
             "predicted_per_second": 130.0, "draft_n": 100, "draft_n_accepted": 80, "ttft_s": 0.1, "wall_s": 1.0}  # fmt: skip
    events = [{"type": "session.started", "session_id": session_id, "profile": "attach", "model": "m",
               "workspace": str(workspace), "task": "", "resumed": False, "options": {}}]  # fmt: skip
    for t in range(1, turns + 1):
        events += [
            {"type": "user.message", "content": f"Prompt {t}: add check {t}."},
            {"type": "assistant.message", "turn": t, "content": SECTION.format(i=t), "tool_calls": []},
            {"type": "tool.call", "turn": t, "call_id": f"c{t}", "name": "bash", "arguments": {}, "summary": "pytest -q"},
            {"type": "tool.result", "turn": t, "call_id": f"c{t}", "name": "bash", "ok": True, "output": "ok", "seconds": 1.0,
             "display": {"command": "pytest -q", "exit_code": 0}},
            {"type": "turn.completed", "turn": t, "stats": stats},
        ]  # fmt: skip
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{session_id}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return session_id


async def many_turns(turns: int) -> dict:
    from agent.settings.config import state_dir

    ws = git_workspace(Path(tempfile.mkdtemp(prefix="bench-tui-ws-")))
    session_id = long_session(turns, state_dir() / "sessions", ws)
    proc, url = scripted_server([{"content": "Still here."}])
    try:
        began = time.perf_counter()
        app = make_app(ws, base_url=url, resume=session_id)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: app.ready, timeout=300)
            shown_s = time.perf_counter() - began
            scroll = app.conversation
            t0 = time.perf_counter()
            scroll.scroll_home(animate=False, immediate=True)
            await pilot.pause()
            scroll.scroll_end(animate=False, immediate=True)
            await pilot.pause()
            scroll_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            await send(pilot, "one more")
            await wait_for(pilot, lambda: len(app.status.turns) >= turns + 1, timeout=60)
            answer_s = time.perf_counter() - t0
            widgets = len(app.conversation.query("*"))
    finally:
        proc.kill()
        proc.wait()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"turns": turns, "shown_s": shown_s, "scroll_top_and_back_ms": scroll_s * 1000,
            "prompt_to_answer_s": answer_s, "widgets": widgets, "max_rss_mb": rss_mb}  # fmt: skip


def _input_line(screen: str) -> str | None:
    """The input's text on a captured screen, once the app has drawn itself (else None)."""
    lines = screen.splitlines()
    status = next((i for i in range(len(lines) - 1, -1, -1) if "^P speed" in lines[i]), None)
    if status is None:
        return None
    top = max((i for i in range(status) if lines[i].strip().startswith("──")), default=None)
    if top is None:
        return None
    return "\n".join(lines[top + 1 : status])


def start_to_typing(profile: str) -> dict:
    agent = [sys.executable, "-m", "agent"]
    subprocess.run([*agent, "server", "start", profile], check=True, capture_output=True)
    ws = git_workspace(Path(tempfile.mkdtemp(prefix="bench-tui-ws-")))
    sock = f"bench-{uuid.uuid4().hex[:6]}"
    typed_at = ready_at = None
    try:
        began = time.perf_counter()
        command = f"cd '{ws}' && {' '.join(agent)} -p {profile}; sleep 30"
        subprocess.run(
            ["tmux", "-L", sock, "new-session", "-d", "-s", "b", "-x", "120", "-y", "36", command], check=True
        )
        while time.perf_counter() - began < 120 and ready_at is None:
            screen = subprocess.run(
                ["tmux", "-L", sock, "capture-pane", "-p", "-t", "b"], capture_output=True, text=True
            ).stdout
            line = _input_line(screen)
            now = time.perf_counter() - began
            if typed_at is None and line is not None and "Q" in line:
                typed_at = now
            if typed_at is not None and "● ready" in screen:
                ready_at = now
            if typed_at is None:
                subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "b", "-l", "Q"], check=True)
            time.sleep(0.01)
    finally:
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "b", "C-c"], capture_output=True)
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "b", "C-c"], capture_output=True)
        time.sleep(1)
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        subprocess.run([*agent, "server", "stop", profile], capture_output=True)
    return {"profile": profile, "to_typing_s": typed_at, "to_ready_s": ready_at}


async def client_cost(deltas: int, rate: float) -> dict:
    """The part of the app's CPU per delta that is the client's: the same stream, read by
    `ModelClient.stream` alone."""
    from agent.core.llm import ModelClient
    from agent.server.endpoint import Endpoint
    from tests.frontends.tui.stream_lag import CHARS_PER_DELTA, answer_text

    proc, url = scripted_server([{"content": answer_text(deltas * CHARS_PER_DELTA), "chunks_per_s": rate}])
    try:
        client = ModelClient(Endpoint(base_url=url + "/v1"))
        events, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
        async for _ in client.stream([{"role": "user", "content": "explain the tests"}]):
            events += 1
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        await client.close()
    finally:
        proc.kill()
        proc.wait()
    return {
        "events": events,
        "cpu_ms_per_delta": round(cpu / events * 1000, 3),
        "cpu_share": round(cpu / wall, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--chunk-delay", type=float, default=0.001, help="with --rate 0: seconds slept after each delta"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=2000,
        help="deltas a second on the server's fixed schedule (issue 25: 2000)",
    )
    parser.add_argument("--stream-only", action="store_true", help="only the token-to-screen measure")
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--skip-start", action="store_true", help="skip the tmux start-to-typing measure")
    parser.add_argument(
        "--real",
        metavar="PROFILE",
        help="token to screen from this profile's real server, which the app starts (its max_tokens "
        "sets the length; a GPU's own rate) instead of the scripted one",
    )
    parser.add_argument(
        "--client-only",
        action="store_true",
        help="only the model client: CPU per delta of ModelClient.stream over the same stream, no app",
    )
    args = parser.parse_args()
    if args.client_only:
        print(json.dumps(asyncio.run(client_cost(args.tokens, args.rate)), indent=1))
        return
    stream = asyncio.run(token_to_screen(args.tokens, args.rate or None, args.chunk_delay, profile=args.real))
    print("| token to screen | value |\n|---|---|")
    for key, value in stream.items():
        print(f"| {key} | {value:.3f} |" if isinstance(value, float) else f"| {key} | {value} |")
    if args.stream_only:
        return
    session = asyncio.run(many_turns(args.turns))
    print("\n| long session | value |\n|---|---|")
    for key, value in session.items():
        print(f"| {key} | {value:.3f} |" if isinstance(value, float) else f"| {key} | {value} |")
    if not args.skip_start and shutil.which("tmux"):
        start = start_to_typing(args.profile)
        print("\n| start to typing | value |\n|---|---|")
        for key, value in start.items():
            print(f"| {key} | {value if not isinstance(value, float) else f'{value:.2f}'} |")


if __name__ == "__main__":
    main()
