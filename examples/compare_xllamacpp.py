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
        speed tiny coder --rounds 4 --max-tokens 400

`check`: per profile and server, what the agent relies on: the flags accepted, /health, /props,
a streamed chat completion with tools (`tool_choice: required`) and `timings`, drafting (`draft_n` in
`timings` on a prompt that asks to copy code) and the draft counters of /metrics, and the HTTP 400 of
a prompt over the context. One row per server, as a Markdown table.

`speed`: `agent bench NATIVE xl-NATIVE --runs 1 --temperature 0 --json` per round, the order swapped
every round (native first, then xllamacpp first, ...) so that a load from elsewhere on the machine
falls on both; per round the ratio of the two medians (generation tok/s over the seed's 3 prompts;
prefill tok/s too, or over --prompt-file's prompts). Prints the per-round figures and the median and
range of each, and with --out writes every bench JSON there.

Run it from the checkout with the project's venv active (`agent` on PATH). It never touches the
cache: the native build and the embedded models must be there already (`agent server install`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from agent.server.lifecycle import api_root
from agent.server.profiles import EMBEDDED, builtin_profiles_dir, load_profile_file

HERE = Path(__file__).resolve().parent
PORT_OFFSET = 10000
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
    return [
        p.stem
        for p in sorted(builtin_profiles_dir().glob("*.toml"))
        if load_profile_file(p).binary == EMBEDDED
    ]


def scratch_config(xllama_python: Path, root: Path) -> dict[str, str]:
    """The environment in which `xl-NAME` profiles exist (and no other state is touched)."""
    shim = root / "llama-server-xllamacpp"
    shim.write_text(
        f'#!/bin/sh\nexec {xllama_python} {HERE / "xllamacpp_server.py"} "$@"\n', encoding="utf-8"
    )
    shim.chmod(0o755)
    (root / "config" / "profiles").mkdir(parents=True, exist_ok=True)
    for name in embedded_profiles():
        profile = load_profile_file(builtin_profiles_dir() / f"{name}.toml")
        lines = []
        for line in (builtin_profiles_dir() / f"{name}.toml").read_text(encoding="utf-8").splitlines():
            if line.startswith("binary ="):
                line = f'binary = "{shim}"'
            elif line.startswith("port ="):
                line = f"port = {profile.port + PORT_OFFSET}"
            lines.append(line)
        (root / "config" / "profiles" / f"xl-{name}.toml").write_text(
            "\n".join(lines) + "\n", encoding="utf-8"
        )
    return {**os.environ, "AGENT_CONFIG_DIR": str(root / "config"), "AGENT_STATE_DIR": str(root / "state")}


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
    print(
        "| profile | starts (s to ready) | /health | /props | tools (required): calls, finish | "
        "`timings` keys | drafted (accepted/drafted) | /metrics draft counters (delta) | over context |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["start"] != "ok":
            print(f"| {r['profile']} | no: {r['start']} | | | | | | | |")
            continue
        m = r["metrics"]
        counters = ", ".join(f"{k} {v:g}" for k, v in m.items()) if isinstance(m, dict) else m
        print(
            f"| {r['profile']} | yes ({r['ready_s']}) | {r['health']} | {r['props']} | {r['tool_calls']}, "
            f"{r['tools_finish']} | {len(r['timings_keys'])}: {' '.join(r['timings_keys'])} | "
            f"{r['draft_timings']} | {counters} | {r['overflow']} |"
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


def cmd_speed(args: argparse.Namespace, env: dict[str, str]) -> None:
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    for name in args.profiles or ["tiny", "coder"]:
        native, xl = name, f"xl-{name}"
        rounds = []
        for i in range(args.rounds):
            order = [native, xl] if i % 2 == 0 else [xl, native]
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
            row = {"round": i + 1, "order": order, "native": a, "xllamacpp": b,
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
    speed.add_argument("--prompt-file", help="agent bench --prompt-file (e.g. one long prompt for prefill)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compare-xllamacpp-") as tmp:
        env = scratch_config(args.xllama_python.expanduser().absolute(), Path(tmp))
        {"check": cmd_check, "speed": cmd_speed}[args.command](args, env)


if __name__ == "__main__":
    main()
