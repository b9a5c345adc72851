"""Throughput summed over a server's parallel slots: what `agent run --attempts N` can get from one
server. For each profile, the server is started as attempts start it (`connect(..., slots=N)`: `-np N`,
each slot with the profile's context), then 1, 2, ... requests are sent at once, each of a fixed
length (`ignore_eos`), and the summed tok/s, the time against one request, and each request's draft
figures (speculation stays on with several slots, or not) are printed.

    python examples/bench_slots.py coder coder-ngram --slots 4 --concurrency 1 2 4 --max-tokens 200
    python examples/bench_slots.py --base-url http://127.0.0.1:8080/v1 --label q32   # a running server

The measuring needs only the standard library (a GPU machine without the agent's dependencies runs
it against a llama-server started by hand); the agent is imported only to start profiles.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROMPT = (
    "Write a Python module with a class `TaskStore` that keeps tasks (id, title, done) in a dict, with "
    "add, complete, remove and list methods, each with a docstring, then pytest tests for each method."
)


def one_request(url: str, api_key: str | None, max_tokens: int) -> dict:
    body = {
        "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens, "temperature": 0,
        "ignore_eos": True, "cache_prompt": False,
    }  # fmt: skip
    headers = {
        "Content-Type": "application/json",
        **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
    }
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read()).get("timings", {})


def burst(base_url: str, api_key: str | None, concurrency: int, max_tokens: int) -> dict:
    """`concurrency` requests at once; their summed tokens over the wall time of the burst."""
    url = base_url.rstrip("/") + "/chat/completions"
    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        timings = list(pool.map(lambda _: one_request(url, api_key, max_tokens), range(concurrency)))
    wall = time.monotonic() - started
    tokens = sum(t.get("predicted_n", 0) for t in timings)
    drafted = sum(t.get("draft_n", 0) for t in timings)
    return {
        "concurrency": concurrency, "wall_s": round(wall, 2), "tokens": tokens,
        "summed_tok_s": round(tokens / wall, 1) if wall else None,
        "per_request_tok_s": [round(t.get("predicted_per_second", 0), 1) for t in timings],
        "drafted": drafted, "accepted": sum(t.get("draft_n_accepted", 0) for t in timings),
        "requests_drafting": sum(1 for t in timings if t.get("draft_n")),
    }  # fmt: skip


def measure(label: str, base_url: str, api_key: str | None, slots: int, args) -> list[dict]:
    burst(base_url, api_key, 1, 8)  # warm-up: the first request's one-off costs
    rows, single = [], None
    for concurrency in args.concurrency:
        row = {"profile": label, "slots": slots, **burst(base_url, api_key, concurrency, args.max_tokens)}
        single = single or row["wall_s"]
        row["time_vs_one"] = round(row["wall_s"] / single, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="*")
    parser.add_argument("--base-url", help="measure this running server (its /v1 URL) instead")
    parser.add_argument("--label", default="server", help="with --base-url: the name in the table")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--out", type=Path, help="write the rows as JSON lines there too")
    args = parser.parse_args()
    rows = []
    if args.base_url:
        rows += measure(args.label, args.base_url, None, args.slots, args)
    for name in args.profiles:
        from agent.server.profiles import get_profile
        from agent.session.connect import connect
        from agent.settings.config import Settings

        with connect(Settings(), get_profile(name), slots=args.slots) as connection:
            rows += measure(name, connection.endpoint.base_url, connection.endpoint.api_key, args.slots, args)
    print(
        f"\n{'profile':<18} {'n':>2} {'wall s':>7} {'x one':>6} {'summed tok/s':>13} {'drafting':>9} {'accepted':>9}"
    )
    for r in rows:
        rate = f"{r['accepted'] / r['drafted']:.0%}" if r["drafted"] else "-"
        print(f"{r['profile']:<18} {r['concurrency']:>2} {r['wall_s']:>7} {r['time_vs_one']:>6} "
              f"{r['summed_tok_s']:>13} {r['requests_drafting']:>4}/{r['concurrency']:<4} {rate:>9}")  # fmt: skip
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
