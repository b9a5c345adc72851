"""The embedded profiles on the native build and on PyPI's prebuilt `xllamacpp`, side by side.

For each built-in profile whose binary is the embedded build (tiny, tiny-ngram, coder, coder-draft,
coder-ngram), this writes a twin `xl-NAME` into a scratch AGENT_CONFIG_DIR: the same TOML with
`binary` pointed at a two-line shell script that runs examples/xllamacpp_server.py (llama-server's
command line on xllamacpp) with the Python of a separate virtualenv, and the port + 10000. Both are
started the agent's own way (`agent server start`, so the flags are the profile's, after the dialect
check and the preflight) and stopped after use.

    python3 -m venv /var/tmp/xllama-venv && /var/tmp/xllama-venv/bin/pip install xllamacpp
    python examples/compare_xllamacpp.py --xllama-python /var/tmp/xllama-venv/bin/python check
    python examples/compare_xllamacpp.py --xllama-python /var/tmp/xllama-venv/bin/python \
        pairs tiny coder --pairs 40 --max-tokens 128

`check`: per profile and server, what the agent relies on: the flags accepted, /health, /props,
a streamed chat completion with tools (`tool_choice: required`) and `timings`, drafting (`draft_n` in
`timings` on a prompt that asks to copy code) and the draft counters of /metrics, and the HTTP 400 of
a prompt over the context. One row per server, as a Markdown table.

`pairs` (what docs/benchmarks.md reports): both servers of a profile loaded at once, one request to
each in turn (the order swapped every pair; the seed's three prompts, or --prompt-file's, temperature
0, no prompt cache). Each request records the server's rates from `timings` and its `cpu_share`: its
CPU seconds over the wall time over its thread count, near 1.0 when nothing else ran. Prints the
medians and the median of the per-pair ratios, over all pairs and over the pairs in which both servers
had their cores (`--min-share`), plus the ratios per CPU-second. On a shared 2-core box this is what
gives figures: llama.cpp's threads spin while they wait for each other, so a busy machine slows it far
more than its share, and unevenly.

`speed`: `agent bench NATIVE xl-NATIVE --runs 1 --temperature 0 --json` per round, the order swapped
every round, `--max-load` to wait for a quiet machine first; per round the ratio of the two medians.
Fine on a machine of one's own; on a shared one, rounds of a minute caught different loads.

Run it from the checkout with the project's venv active (`agent` on PATH). It never touches the
cache: the native build and the embedded models must be there already (`agent server install`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).resolve().parent
PROFILES = HERE.parent / "server_profiles"
PORT_OFFSET = 10000
THREADS: int | None = None  # --threads of `pairs`: what a server's cpu_share is a share of
COPY_PROMPT = (
    "Repeat this Python code exactly, with no comment:\n\n```python\n"
    + "\n".join(f"def f{i}(x):\n    return x * {i} + {i * 7} - len(str(x))\n" for i in range(12))
    + "```"
)
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def embedded_profiles() -> list[str]:
    """The built-in profiles that run the embedded build (a profile names no binary: it is embedded)."""
    return [
        path.stem
        for path in sorted(PROFILES.glob("*.toml"))
        if tomllib.loads(path.read_text(encoding="utf-8")).get("binary", "embedded") == "embedded"
        and "base_url" not in tomllib.loads(path.read_text(encoding="utf-8"))
    ]


def scratch_config(xllama_python: Path, root: Path, extra_args: list[str]) -> dict[str, str]:
    """The environment in which `xl-NAME` profiles exist (and no other state is touched). With
    `extra_args`, both NAME (overriding the built-in one) and xl-NAME get them after their own."""
    shim = root / "llama-server-xllamacpp"
    shim.write_text(
        f'#!/bin/sh\nexec {xllama_python} {HERE / "xllamacpp_server.py"} "$@"\n', encoding="utf-8"
    )
    shim.chmod(0o755)
    (root / "config" / "profiles").mkdir(parents=True, exist_ok=True)
    for name in embedded_profiles():
        text = (PROFILES / f"{name}.toml").read_text(encoding="utf-8")
        port = tomllib.loads(text)["port"]
        if extra_args:
            extra = "".join(f'"{a}", ' for a in extra_args)
            text = text.replace("args = [", f"args = [{extra}", 1)
            (root / "config" / "profiles" / f"{name}.toml").write_text(text, encoding="utf-8")
        xl = text.replace('binary = "embedded"', f'binary = "{shim}"').replace(
            f"port = {port}", f"port = {port + PORT_OFFSET}"
        )
        (root / "config" / "profiles" / f"xl-{name}.toml").write_text(xl, encoding="utf-8")
    return {**os.environ, "AGENT_CONFIG_DIR": str(root / "config"), "AGENT_STATE_DIR": str(root / "state")}


def api_root(base_url: str) -> str:
    url = base_url.rstrip("/")
    return url.removesuffix("/v1")


def agent(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["agent", *args], env=env, capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------------------------------------ check


def metrics(url: str) -> dict[str, float]:
    text = httpx2.get(url + "/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:spec_decode_num_") and "{" not in line:
            name, value = line.split()
            out[name.removeprefix("llamacpp:spec_decode_num_")] = float(value)
    return out


def chat(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """A streamed chat completion, read as the agent reads one: content, tool-call deltas, timings."""
    content, tools, timings, finish = [], {}, None, None
    with httpx2.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=300) as r:
        if r.status_code != 200:
            return {"status": r.status_code, "error": r.read().decode()[:300]}
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            timings = chunk.get("timings") or timings
            for choice in chunk.get("choices", []):
                finish = choice.get("finish_reason") or finish
                delta = choice.get("delta") or {}
                content.append(delta.get("content") or "")
                for call in delta.get("tool_calls") or []:
                    slot = tools.setdefault(call["index"], {"name": "", "arguments": ""})
                    fn = call.get("function") or {}
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
    return {"status": 200, "content": "".join(content), "tool_calls": list(tools.values()),
            "timings": timings, "finish": finish}  # fmt: skip


def probe(name: str, env: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"profile": name}
    began = time.monotonic()
    started = agent(env, "server", "start", name)
    row["start"] = "ok" if started.returncode == 0 else (started.stderr or started.stdout).strip()[-300:]
    if started.returncode != 0:
        return row
    row["ready_s"] = round(time.monotonic() - began, 1)
    try:
        status = json.loads(agent(env, "server", "status", "--json").stdout or "[]")
        url = next(s["base_url"] for s in status if s["profile"] == name)
        url = api_root(url)
        h = httpx2.get(url + "/health", timeout=10)
        row["health"] = f"{h.status_code} {h.text.strip()}"
        props = httpx2.get(url + "/props", timeout=10).json()
        row["props"] = f"n_ctx {props['default_generation_settings']['n_ctx']}, slots {props['total_slots']}"
        tools = chat(url, {"messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                           "tools": [WEATHER_TOOL], "tool_choice": "required", "max_tokens": 64,
                           "temperature": 0})  # fmt: skip
        row["tool_calls"] = len(tools.get("tool_calls") or [])
        row["tools_finish"] = tools.get("finish")
        row["timings_keys"] = sorted((tools.get("timings") or {}).keys())
        before = metrics(url)
        copy = chat(url, {"messages": [{"role": "user", "content": COPY_PROMPT}], "max_tokens": 200,
                          "temperature": 0})  # fmt: skip
        after = metrics(url)
        t = copy.get("timings") or {}
        row["draft_timings"] = f"{t.get('draft_n_accepted')}/{t.get('draft_n')}" if "draft_n" in t else "-"
        row["gen_tok_s"] = round(t.get("predicted_per_second") or 0, 1)
        row["metrics"] = {k: after[k] - before.get(k, 0) for k in after} if after else "absent"
        n_ctx = props["default_generation_settings"]["n_ctx"]
        over = httpx2.post(url + "/v1/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": "hello " * (n_ctx + 100)}], "max_tokens": 4})  # fmt: skip
        row["overflow"] = f"{over.status_code} {over.json().get('error', {}).get('type')}"
    finally:
        agent(env, "server", "stop", name)
    return row


def cmd_check(args: argparse.Namespace, env: dict[str, str]) -> None:
    rows = []
    for name in args.profiles or embedded_profiles():
        for server in (name, f"xl-{name}"):
            row = probe(server, env)
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "check.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    table(rows)


def table(rows: list[dict[str, Any]]) -> None:
    print(
        "| profile | starts, s to ready | /health | /props | tool_choice required: tool_calls, finish | "
        "`timings` fields | copy prompt: accepted/drafted in `timings` | /metrics: drafts, drafted, accepted "
        "(delta) | prompt over n_ctx |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["start"] != "ok":
            print(f"| {r['profile']} | no: {r['start']} | | | | | | | |")
            continue
        m = r["metrics"]
        counters = f"{m['drafts_total']:g}, {m['draft_tokens_total']:g}, {m['accepted_tokens_total']:g}"
        draft_fields = {"draft_n", "draft_n_accepted"} & set(r["timings_keys"])
        fields = f"{len(r['timings_keys'])}" + (
            f" ({', '.join(sorted(draft_fields))})" if draft_fields else ""
        )
        print(
            f"| {r['profile']} | yes, {r['ready_s']} | {r['health'].split()[0]} | {r['props']} | "
            f"{r['tool_calls']}, {r['tools_finish']} | {fields} | {r['draft_timings']} | {counters} | "
            f"{r['overflow']} |"
        )


# ------------------------------------------------------------------------------------------------ speed


def medians(doc: dict[str, Any], profile: str) -> dict[str, float | None]:
    stats = [r["stats"] for r in doc["requests"] if r["profile"] == profile]

    def med(key: str) -> float | None:
        values = [s[key] for s in stats if s.get(key)]
        return statistics.median(values) if values else None

    return {"gen": med("predicted_per_second"), "prefill": med("prompt_per_second"),
            "ready_s": doc["profiles"][profile].get("ready_s")}  # fmt: skip


def spread(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def server_at(env: dict[str, str], name: str) -> tuple[str, int]:
    status = json.loads(agent(env, "server", "status", "--json").stdout or "[]")
    record = next(s for s in status if s["profile"] == name)
    return api_root(record["base_url"]), record["pid"]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def timed(url: str, pid: int, prompt: str, max_tokens: int) -> dict[str, float]:
    """One request's server-side rates, and the share of the machine's cores the server got meanwhile
    (its CPU seconds over the wall time, over the core count): near 1.0 when nothing else ran."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "cache_prompt": False}  # fmt: skip
    cpu, wall = cpu_seconds(pid), time.monotonic()
    t = httpx2.post(url + "/v1/chat/completions", json=body, timeout=600).json()["timings"]
    share = (cpu_seconds(pid) - cpu) / (time.monotonic() - wall) / (THREADS or os.cpu_count() or 1)
    return {"gen": t["predicted_per_second"], "prefill": t["prompt_per_second"], "prompt_n": t["prompt_n"],
            "predicted_n": t["predicted_n"], "draft_n": t.get("draft_n"), "draft_n_accepted": t.get("draft_n_accepted"),
            "cpu_share": round(share, 3)}  # fmt: skip


def cmd_pairs(args: argparse.Namespace, env: dict[str, str]) -> None:
    global THREADS
    THREADS = args.threads
    try:  # the seed's three code prompts, where `agent bench` keeps them
        from agent.frontends.measure.bench_prompts import SEED_PROMPTS
    except ImportError:
        from agent.bench import SEED_PROMPTS

    prompts = list(SEED_PROMPTS.values())
    if args.prompt_file:
        text = Path(args.prompt_file).read_text(encoding="utf-8")
        prompts = [p.strip() for p in text.split("\n---\n") if p.strip()]
    out = Path(args.out) if args.out else None
    for name in args.profiles or ["tiny", "coder"]:
        servers = [name, f"xl-{name}"]
        try:
            for server in servers:
                started = agent(env, "server", "start", server)
                if started.returncode != 0:
                    sys.exit(f"{server} did not start:\n{started.stderr[-2000:]}")
            at = {server: server_at(env, server) for server in servers}
            for server in servers:
                timed(*at[server], "Hello", 8)  # warm-up
            pairs = []
            for i in range(args.pairs):
                order = servers if i % 2 == 0 else servers[::-1]
                prompt = prompts[i % len(prompts)]
                got = {server: timed(*at[server], prompt, args.max_tokens) for server in order}
                pair = {"pair": i + 1, "order": order, "load": os.getloadavg()[0], **got}
                pairs.append(pair)
                print(json.dumps(pair), file=sys.stderr, flush=True)
        finally:
            for server in servers:
                agent(env, "server", "stop", server)
        if out:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"pairs-{name}.json").write_text(json.dumps(pairs, indent=2) + "\n", encoding="utf-8")
        report(name, servers, pairs, args)


def report(name: str, servers: list[str], pairs: list[dict], args: argparse.Namespace) -> None:
    """All pairs, then only those in which both servers had the cores to themselves (cpu_share at
    least --min-share): a busy machine slows llama.cpp far more than its share, and not evenly."""
    quiet = [p for p in pairs if min(p[s]["cpu_share"] for s in servers) >= args.min_share]
    for label, chosen in (("all pairs", pairs), (f"pairs with cpu_share >= {args.min_share}", quiet)):
        if len(chosen) < 2:
            print(f"\n{name}, {label}: {len(chosen)}, too few to summarise")
            continue
        summary(name, servers, chosen, label, args)


def summary(name: str, servers: list[str], pairs: list[dict], label: str, args: argparse.Namespace) -> None:
    n = {s: statistics.median(p[s]["prompt_n"] for p in pairs) for s in servers}
    print(f"\n{name}, {label}: {len(pairs)} of {args.pairs} (max_tokens {args.max_tokens}, temperature 0, "
          f"no prompt cache, median prompt {n[name]:g} tokens), order swapped each pair")  # fmt: skip
    print("| server | gen tok/s, median (range) | prefill tok/s, median (range) | accepted/drafted |")
    print("|---|---|---|---|")
    for server in servers:
        drafted = sum(p[server].get("draft_n") or 0 for p in pairs)
        accepted = sum(p[server].get("draft_n_accepted") or 0 for p in pairs)
        print(f"| {server} | {spread([p[server]['gen'] for p in pairs])} | "
              f"{spread([p[server]['prefill'] for p in pairs])} | {f'{accepted}/{drafted}' if drafted else '-'} |")  # fmt: skip
    xl = servers[1]
    for key in ("gen", "prefill"):
        plain = [p[xl][key] / p[name][key] for p in pairs]
        # Per CPU-second too: each rate over the share of its threads' cores that it got meanwhile, i.e.
        # what the kernels do with the time they are given, less sensitive to the rest of the machine.
        per_cpu = [r * p[name]["cpu_share"] / p[xl]["cpu_share"] for r, p in zip(plain, pairs, strict=True)]
        for label, ratios in ((key, sorted(plain)), (f"{key} per CPU-second", sorted(per_cpu))):
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            print(f"xllamacpp / native, {label}: median of pair ratios {statistics.median(ratios):.2f} "
                  f"(IQR {q1:.2f}-{q3:.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f})")  # fmt: skip


def wait_for_quiet(max_load: float | None) -> None:
    """On a shared machine, start a round only once the 1-minute load average is under `max_load`:
    llama.cpp's threads spin while they wait for each other, so a busy core slows it far more than
    its share (the tiny model fell from 60 to 3-25 tok/s at a load of 6-9 on 2 cores)."""
    while max_load is not None and os.getloadavg()[0] >= max_load:
        time.sleep(15)


def cmd_speed(args: argparse.Namespace, env: dict[str, str]) -> None:
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    for name in args.profiles or ["tiny", "coder"]:
        native, xl = name, f"xl-{name}"
        rounds = []
        for i in range(args.rounds):
            order = [native, xl] if i % 2 == 0 else [xl, native]
            wait_for_quiet(args.max_load)
            cmd = ["bench", *order, "--runs", "1", "--temperature", "0", "--json"]
            cmd += ["--max-tokens", str(args.max_tokens)]
            if args.prompt_file:
                cmd += ["--prompt-file", args.prompt_file]
            done = agent(env, *cmd, timeout=3600)
            if done.returncode != 0:
                sys.exit(f"agent {' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
            doc = json.loads(done.stdout)
            if out:
                (out / f"{name}-round{i + 1}.json").write_text(done.stdout, encoding="utf-8")
            a, b = medians(doc, native), medians(doc, xl)
            load = [doc["profiles"][p]["load_average"]["before"] for p in order]
            row = {"round": i + 1, "order": order, "load_before": load, "native": a, "xllamacpp": b,
                   "gen_ratio": b["gen"] / a["gen"] if a["gen"] and b["gen"] else None,
                   "prefill_ratio": b["prefill"] / a["prefill"] if a["prefill"] and b["prefill"] else None}  # fmt: skip
            rounds.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        print(f"\n{name}: agent {' '.join(cmd)}  ({args.rounds} rounds, order swapped each round)")
        print("| server | gen tok/s, median of rounds (range) | prefill tok/s | ready s |")
        print("|---|---|---|---|")
        for key, label in (("native", name), ("xllamacpp", f"xl-{name}")):
            print(
                f"| {label} | {spread([r[key]['gen'] for r in rounds])} | "
                f"{spread([r[key]['prefill'] for r in rounds])} | {spread([r[key]['ready_s'] for r in rounds])} |"
            )
        print(
            f"| xllamacpp / native | {spread([r['gen_ratio'] for r in rounds])} | "
            f"{spread([r['prefill_ratio'] for r in rounds])} | |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xllama-python", required=True, type=Path, help="python of a venv with xllamacpp")
    parser.add_argument("--out", help="a folder for the raw results (JSON)")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="what each profile's server answers, native and xllamacpp")
    check.add_argument("profiles", nargs="*", help="default: every embedded profile")
    speed = sub.add_parser("speed", help="agent bench, native against xllamacpp, alternating")
    speed.add_argument("profiles", nargs="*", help="default: tiny coder")
    speed.add_argument("--rounds", type=int, default=4)
    speed.add_argument("--max-tokens", type=int, default=400)
    speed.add_argument("--max-load", type=float, help="start each round only under this 1-minute load")
    speed.add_argument("--prompt-file", help="agent bench --prompt-file (e.g. one long prompt for prefill)")
    pairs = sub.add_parser("pairs", help="both servers up, requests alternated one by one: ratios per pair")
    pairs.add_argument("profiles", nargs="*", help="default: tiny coder")
    pairs.add_argument("--pairs", type=int, default=30)
    pairs.add_argument("--max-tokens", type=int, default=128)
    pairs.add_argument("--min-share", type=float, default=0.9, help="a quiet pair: both servers' cpu_share")
    pairs.add_argument(
        "--threads", type=int, help="--threads for both servers (default: llama.cpp's, one per core here)"
    )
    pairs.add_argument("--prompt-file", help="prompts separated by lines of --- (default: the seed's three)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: servers stopped, scratch removed
    with tempfile.TemporaryDirectory(prefix="compare-xllamacpp-") as tmp:
        extra = ["--threads", str(args.threads)] if getattr(args, "threads", None) else []
        env = scratch_config(args.xllama_python.expanduser().absolute(), Path(tmp), extra)
        {"check": cmd_check, "speed": cmd_speed, "pairs": cmd_pairs}[args.command](args, env)


if __name__ == "__main__":
    main()
