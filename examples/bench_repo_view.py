"""What the embedded coder is shown of each real-repository task, and whether its first request fits.

For each `examples/tasks/real-*` task: prepare its workdir as `agent bench --tasks` does (the pinned
sdist, cached), build the task message exactly as the blocks protocol does for the `coder` profile
(16,384-token context, 2,048 kept for the answer), and print its size against the context, the
named files shown whole or in part, and the time it took to build.

    python examples/bench_repo_view.py [--n-ctx 16384] [--reserve 2048] [TASK_GLOB]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import tempfile
import time
from pathlib import Path

from agent.core.context import CHARS_PER_TOKEN, ContextWindow
from agent.core.prompt import system_prompt
from agent.core.repomap import repository_view
from agent.core.task_message import files_budget, recent_files, task_message
from agent.core.workbench import Workbench
from agent.frontends.measure.suite import discover, prepare_workdir
from agent.protocols.base import fence_for
from agent.protocols.registry import make_actions
from agent.session.taskfile import load_task

TASKS = Path(__file__).resolve().parents[1] / "examples" / "tasks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("glob", nargs="?", default="real-*")
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--reserve", type=int, default=2048)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for task_dir in [t for t in discover(TASKS) if fnmatch.fnmatch(t.name, args.glob)]:
            workdir = prepare_workdir(task_dir, Path(scratch))
            body = load_task(task_dir / "task.md").body
            context = ContextWindow(args.n_ctx, args.reserve)
            workbench = Workbench(workdir)
            started = time.perf_counter()
            message = task_message(workbench, body, make_actions("blocks", workdir), context)
            seconds = time.perf_counter() - started
            budget = files_budget(body, context, len(system_prompt(workdir, "blocks")))
            view = repository_view(workdir, body, budget, fence_for, recent_files(workbench))
            first = len(system_prompt(workdir, "blocks")) + len(message)
            files = sum(1 for p in workdir.rglob("*") if p.is_file() and ".git" not in p.parts)
            rows.append({
                "task": task_dir.name, "files": files, "message_chars": len(message),
                "first_request_tokens_est": int(first / CHARS_PER_TOKEN), "budget_tokens": context.budget,
                "whole": view.whole, "partly": view.partly, "build_s": round(seconds, 2),
            })  # fmt: skip
    for row in rows:
        print(json.dumps(row))
    print(
        f"largest first request: {max(r['first_request_tokens_est'] for r in rows)} tokens (estimate, 3 chars "
        f"a token) of a {args.n_ctx}-token context; budget {rows[0]['budget_tokens']}"
    )


if __name__ == "__main__":
    main()
