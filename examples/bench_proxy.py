"""What `agent proxy` costs a streaming client: tok/s through the proxy against direct, side by side.

Three processes, as a user has them: the server, `agent proxy --base-url` in front of it, and this
script as the client (the OpenAI SDK's async client). The same streamed request is sent --runs times
direct and --runs times through the proxy, alternating. Each run's client tok/s is (chunks - 1) / (last
chunk - first chunk), the rate at which tokens reach the client; the ratio is the median through the
proxy over the median direct. Apart, the proxy's reading of each chunk (Answer.feed) is timed on one
recorded answer, in this process.

By default the server is the scripted one (tests/scripted_server.py) sending chunks on a fixed schedule
(--chunks-per-s), so the model costs nothing and the difference is the proxy's. --base-url measures a
real server instead, such as a llama-server on a GPU at 1,000 tok/s and more.

    python examples/bench_proxy.py [--runs 9] [--chunks-per-s 2000] [--tokens 2000]
    python examples/bench_proxy.py --base-url http://127.0.0.1:8080 --tokens 2000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.frontends.proxy.command import free_port  # noqa: E402
from agent.session.api_answer import CHAT, Answer  # noqa: E402

PROMPT = "Write the numbers from 1 to 2000, one per line."


async def stream_rate(base_url: str, tokens: int) -> float:
    async with openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": PROMPT}], stream=True, max_tokens=tokens,
            temperature=0, extra_body={"ignore_eos": True},
        )  # fmt: skip
        times = [
            time.perf_counter() async for chunk in stream if chunk.choices and chunk.choices[0].delta.content
        ]
    return (len(times) - 1) / (times[-1] - times[0])


@contextlib.contextmanager
def process(argv: list[str], url: str, env: dict[str, str] | None = None) -> Iterator[None]:
    """A process serving `url` (its /health answering) until the block ends."""
    proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"{argv[0]} did not serve {url}")
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def compare(root: str, proxy: str, runs: int, tokens: int) -> tuple[list[float], list[float]]:
    await stream_rate(root + "/v1", 16)  # warm both paths
    await stream_rate(proxy + "/v1", 16)
    direct, proxied = [], []
    for _ in range(runs):
        direct.append(await stream_rate(root + "/v1", tokens))
        proxied.append(await stream_rate(proxy + "/v1", tokens))
    return direct, proxied


def feed_time(root: str, tokens: int) -> float:
    """The proxy's reading of one chunk, in seconds (median): a recorded answer fed as it arrived."""
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": tokens, "ignore_eos": True}  # fmt: skip
    with httpx2.stream("POST", root + "/v1/chat/completions", json=body, timeout=120) as reply:
        chunks = list(reply.iter_raw())
    answer, spent = Answer(CHAT, streamed=True), []
    for chunk in chunks:
        started = time.perf_counter()
        answer.feed(chunk)
        spent.append(time.perf_counter() - started)
    return statistics.median(spent)


def measure(root: str, runs: int, tokens: int) -> dict:
    port = free_port()
    proxy = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "agent", "proxy", "--base-url", root, "--port", str(port)]
    with process(
        argv, proxy, {"AGENT_STATE_DIR": str(Path(os.environ.get("TMPDIR", "/tmp")) / "bench-proxy")}
    ):
        direct, proxied = asyncio.run(compare(root, proxy, runs, tokens))
    return {"direct": direct, "proxied": proxied, "feed_s": feed_time(root, tokens)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--chunks-per-s", type=int, default=2000)
    parser.add_argument("--base-url", help="a real server's root URL instead of the scripted one")
    args = parser.parse_args()
    if args.base_url:
        result = measure(args.base_url.rstrip("/").removesuffix("/v1"), args.runs, args.tokens)
        what = f"{args.base_url}"
    else:
        port = free_port()
        root = f"http://127.0.0.1:{port}"
        reply = {"content": "x\n" * args.tokens, "chunks_per_s": args.chunks_per_s}
        argv = [sys.executable, "-m", "tests.scripted_server", "--as-llama-server", "--port", str(port)]
        with process(argv, root, {"SCRIPTED_DEFAULT": json.dumps(reply)}):
            result = measure(root, args.runs, args.tokens)
        what = f"scripted server, {args.chunks_per_s} chunks/s"
    direct, proxied = statistics.median(result["direct"]), statistics.median(result["proxied"])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"`python examples/bench_proxy.py {' '.join(sys.argv[1:])}`: {what}, {args.runs} runs of {args.tokens} "
          f"tokens each way, {commit}, {time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()} "
          f"({os.cpu_count()} cores), load {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print("| | client tok/s (median) | min-max |\n|---|---|---|")
    print(f"| direct | {direct:.0f} | {min(result['direct']):.0f}-{max(result['direct']):.0f} |")
    print(
        f"| through `agent proxy` | {proxied:.0f} | {min(result['proxied']):.0f}-{max(result['proxied']):.0f} |"
    )
    print(
        f"\nratio {proxied / direct:.3f}; the proxy's reading per chunk: {result['feed_s'] * 1e6:.0f} µs (median)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
