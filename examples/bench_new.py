"""How often `agent new` gets a template to a passing check on a profile: a few small descriptions,
each a real `agent new` in a fresh folder, with the exit code, the check, turns, time and speed.

    python examples/bench_new.py -p coder -t python-cli        # the three descriptions below
    python examples/bench_new.py -p coder -t python-cli --describe "A command that ..."

Prints one row per description and a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DESCRIPTIONS = [
    "A command that takes integers as arguments and prints their sum.",
    "A command that prints how many words, lines and characters a text file has, given its path.",
    "A command that converts a temperature given in Celsius (a number argument) to Fahrenheit and prints it.",
]


def run_one(folder: Path, description: str, args: argparse.Namespace) -> dict:
    argv = [sys.executable, "-m", "agent", "new", str(folder), description, "-t", args.template, "--json"]
    argv += ["-p", args.profile] if args.profile else []
    argv += ["--max-turns", str(args.max_turns)]
    began = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
    seconds = time.monotonic() - began
    summary: dict = {}
    for line in proc.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "session.finished":
            summary = event.get("summary") or {}
    commits = subprocess.run(["git", "-C", str(folder), "log", "--format=%s"], capture_output=True, text=True)
    return {
        "description": description,
        "exit_code": proc.returncode,
        "check_passed": bool((summary.get("check") or {}).get("passed")),
        "turns": summary.get("turns"),
        "seconds": round(seconds),
        "gen_tok_s": summary.get("median_gen_tok_s"),
        "commits": len(commits.stdout.splitlines()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--profile", default="coder")
    parser.add_argument("-t", "--template", default="python-cli")
    parser.add_argument("--describe", action="append", help="descriptions to use instead of the three")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-new-") as scratch:
        for i, description in enumerate(args.describe or DESCRIPTIONS, 1):
            row = run_one(Path(scratch) / f"project{i}", description, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
    passed = sum(r["check_passed"] for r in rows)
    print(f"\n{passed}/{len(rows)} reached a passing check ({args.template}, profile {args.profile})\n")
    print("| description | exit | check | turns | time | gen tok/s | commits |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        gen = f"{r['gen_tok_s']:.1f}" if r["gen_tok_s"] else "-"
        print(f"| {r['description']} | {r['exit_code']} | {'passed' if r['check_passed'] else 'failed'} | "
              f"{r['turns']} | {r['seconds']} s | {gen} | {r['commits']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
