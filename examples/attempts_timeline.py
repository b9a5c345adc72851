"""How the attempts of a bench run spent their time, read from their recorded sessions: for each task,
each attempt's answers, when its first answer came, the checks it ran and how its line ended; then,
over the run, the attempts that answered at all, the median wait for a first answer, and the
server's generation rate per request.

    python examples/attempts_timeline.py SINCE [UNTIL]

SINCE and UNTIL are session-name prefixes (YYYYMMDD-HHMM...): the sessions started in that window
(~/.local/state/spec-agent/sessions/) that ran in an attempt's worktree (state_dir/attempts/RUN/N)
count; a run's attempts are told apart by RUN. A first answer is the first assistant message,
timed from the session's start (the shared prefill included). Generation rates are llama-server's
own (`predicted_per_second`), over requests that produced 50 tokens or more.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict

from agent.settings.config import state_dir

MIN_TOKENS = 50  # a shorter answer's rate is mostly its first token's wait


def attempt_sessions(since: str, until: str) -> dict[str, list[tuple[int, list[dict]]]]:
    """{run id: [(attempt number, session rows)]} for the attempt sessions started in the window."""
    runs: dict[str, list[tuple[int, list[dict]]]] = defaultdict(list)
    for path in sorted((state_dir() / "sessions").glob("*.jsonl")):
        if not since <= path.name < until:
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        workspace = rows[0].get("workspace", "") if rows else ""
        if "/attempts/" not in workspace:
            continue
        run, number = workspace.split("/attempts/")[1].split("/")[:2]
        runs[run].append((int(number), rows))
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("since")
    parser.add_argument("until", nargs="?", default="99999999")
    args = parser.parse_args()
    runs = attempt_sessions(args.since, args.until)
    firsts: list[float] = []
    rates: list[float] = []
    attempts = 0
    for run, sessions in sorted(runs.items()):
        print(f"{run}: {sessions[0][1][0].get('task', '')[:70].splitlines()[0]}")
        for number, rows in sorted(sessions):
            attempts += 1
            answers = [r for r in rows if r["type"] == "assistant.message"]
            first = answers[0]["time"] - rows[0]["time"] if answers else None
            if first is not None:
                firsts.append(first)
            rates += [
                r["stats"]["predicted_per_second"]
                for r in rows
                if r["type"] == "turn.completed" and (r["stats"].get("predicted_n") or 0) >= MIN_TOKENS
            ]
            checks = sum(r["type"] == "check.result" for r in rows)
            ended = [r.get("message", "") for r in rows if r["type"] == "error"][-1:]
            print(f"  attempt {number}: {len(answers)} answers, first after "
                  f"{'-' if first is None else f'{first:.0f} s'}, {checks} checks"
                  + (f"; {ended[0][:80]}" if ended else ""))  # fmt: skip
    if not firsts:
        print("no attempt answered in that window")
        return 1
    print(f"\n{len(firsts)} of {attempts} attempts answered; first answer after a median of "
          f"{statistics.median(firsts):.0f} s ({min(firsts):.0f}-{max(firsts):.0f})")  # fmt: skip
    if len(rates) >= 2:
        low, _, high = statistics.quantiles(rates, n=4)
        print(f"generation, {len(rates)} requests of {MIN_TOKENS}+ tokens: median {statistics.median(rates):.1f} "
              f"tok/s (quartiles {low:.1f} and {high:.1f}; {min(rates):.2f}-{max(rates):.1f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
