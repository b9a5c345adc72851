"""What the embedded coder is shown of each real-repository task, and whether its first request fits.

For each `examples/tasks/real-*` task (or each task of `--tasks DIR`): prepare its workdir as `agent
bench --tasks` does (the pinned sdist, cached), build the task message exactly as the blocks protocol
does for the `coder` profile (16,384-token context, 2,048 kept for the answer), and print its size
against the context, the files shown whole or in part, the time it took to build, and whether the
definition that the task's solution.patch changes was shown whole (`found`): the first request holds
the code to change, or the model has to find it.

    python examples/bench_repo_view.py [--tasks DIR] [--n-ctx 16384] [--reserve 2048] [TASK_GLOB]

With `--generated N`: a repository of N files generated from `--seed` (tests/big_repo.py: nested
packages of Python modules, tests, docs, data and a few large files, committed to git), with its task
(a function's dotted name, the call, what it returns and should; no path). Each of `--runs` runs is a
fresh process, as `agent run` is: the task message built alone (its imports not counted), then the
real `agent run` on the scripted model server, timed from its start to the first request reaching
the server (the agent's own time: the server answers its other requests in about a millisecond); the
same on a repository of 40 files says what any run costs. Printed: the first (cold) run and the
median, the first request's size against the context, and whether the function's body is in it.

    python examples/bench_repo_view.py --generated 10000 [--seed 1] [--runs 5]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.core.context import CHARS_PER_TOKEN, ContextWindow
from agent.core.prompt import system_prompt
from agent.core.repomap import repository_view
from agent.core.task_message import files_budget, recent_files, task_message
from agent.core.workbench import Workbench
from agent.frontends.measure.suite import discover, prepare_workdir
from agent.protocols.registry import make_actions
from agent.session.taskfile import load_task
from tools.outline import fence_for, outline, qualname

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "examples" / "tasks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("glob", nargs="?", default="*")
    parser.add_argument(
        "--tasks", type=Path, default=None, help="a task folder (default: examples/tasks, real-*)"
    )
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--reserve", type=int, default=2048)
    parser.add_argument(
        "--generated", type=int, default=0, metavar="N", help="a generated repository of N files"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--build-once", nargs=2, metavar=("ROOT", "TASK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_once:
        print(json.dumps(build_once(Path(args.build_once[0]), args.build_once[1], args.n_ctx, args.reserve)))
        return
    if args.generated:
        generated(args)
        return
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder, glob = (
            (args.tasks, args.glob) if args.tasks else (TASKS, "real-*" if args.glob == "*" else args.glob)
        )
        for task_dir in [t for t in discover(folder) if fnmatch.fnmatch(t.name, glob)]:
            workdir = prepare_workdir(task_dir, Path(scratch))
            body = load_task(task_dir / "task.md").body
            context = ContextWindow(args.n_ctx, args.reserve)
            workbench = Workbench(workdir)
            started = time.perf_counter()
            blocks = make_actions("blocks", workdir)
            message = task_message(workbench, body, blocks, context)
            seconds = time.perf_counter() - started
            budget = files_budget(body, context, len(system_prompt(workdir, blocks.system_prompt)))
            view = repository_view(workdir, body, budget, fence_for, recent_files(workbench))
            first = len(system_prompt(workdir, blocks.system_prompt)) + len(message)
            files = sum(1 for p in workdir.rglob("*") if p.is_file() and ".git" not in p.parts)
            changed = changed_definitions(task_dir / "solution.patch", workdir)
            found = bool(changed) and all(shown(view, rel, name) for rel, name in changed)
            rows.append({
                "task": task_dir.name, "files": files, "message_chars": len(message),
                "first_request_tokens_est": int(first / CHARS_PER_TOKEN), "budget_tokens": context.budget,
                "whole": view.whole, "partly": view.partly, "build_s": round(seconds, 2),
                "changed": [f"{rel}:{name}" for rel, name in changed], "found": found,
            })  # fmt: skip
    for row in rows:
        print(json.dumps(row))
    print(
        f"the changed definition shown whole in the first request: {sum(r['found'] for r in rows)}/{len(rows)}"
    )
    print(
        f"largest first request: {max(r['first_request_tokens_est'] for r in rows)} tokens (estimate, 3 chars "
        f"a token) of a {args.n_ctx}-token context; budget {rows[0]['budget_tokens']}"
    )


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def changed_definitions(patch: Path, workdir: Path) -> list[tuple[str, str]]:
    """(file, `Class.method` or name) of the innermost definition holding each line the patch changes,
    read against the starting files; [] without a patch."""
    if not patch.is_file():
        return []
    found: list[tuple[str, str]] = []
    rel, line = "", 0
    for text in patch.read_text(encoding="utf-8").splitlines():
        if text.startswith("--- "):
            rel = text[4:].strip().removeprefix("a/").removeprefix("b/")
        elif match := HUNK.match(text):
            line = int(match.group(1))
        elif text.startswith(("-", "+")) and not text.startswith(("---", "+++")) and rel:
            source = workdir / rel
            defs = outline(rel, source.read_text(encoding="utf-8")) if source.is_file() else []
            at = line - 1 if text.startswith("+") else line  # an insertion goes after the line before
            holding = [d for d in defs if d.start <= at <= d.end]
            if holding:
                name = qualname(max(holding, key=lambda d: d.start), defs)
                if (rel, name) not in found:
                    found.append((rel, name))
            line += text.startswith("-")
        elif text.startswith(" "):
            line += 1
    return found


def shown(view, rel: str, name: str) -> bool:
    """Whether the view showed `name` of `rel` whole: the file whole, the definition, or its class."""
    names = view.definitions.get(rel, [])
    return rel in view.whole or name in names or name.split(".")[0] in names


# ------------------------------------------------------------------------------------- a generated repo


BODY = "    share = amount * days // period_days"  # a line of the planted function's body


def build_once(root: Path, task: str, n_ctx: int, reserve: int) -> dict:
    """The task message as `agent run` builds it for the blocks protocol, timed alone, in this process."""
    context, workbench = ContextWindow(n_ctx, reserve), Workbench(root)
    blocks = make_actions("blocks", root)
    prompt = system_prompt(root, blocks.system_prompt)
    started = time.perf_counter()
    message = task_message(workbench, task, blocks, context, prefix=prompt)
    seconds = time.perf_counter() - started
    first = len(prompt) + len(message)
    return {
        "build_s": round(seconds, 3), "first_request_tokens_est": int(first / CHARS_PER_TOKEN),
        "budget_tokens": context.budget, "body_shown": BODY in message,
    }  # fmt: skip


def first_request(root: Path, task_path: Path, n_ctx: int) -> tuple[float, dict]:
    """(seconds from `agent run`'s start to its first request at the scripted server, that request)."""
    from tests.scripted_server import ScriptedServer

    with (
        tempfile.TemporaryDirectory() as state,
        ScriptedServer([{"content": "Nothing to do."}], n_ctx) as server,
    ):
        env = {**os.environ, "AGENT_STATE_DIR": f"{state}/state", "AGENT_CONFIG_DIR": f"{state}/config"}
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "agent", "run", str(task_path), "--base-url", server.url, "--workdir", str(root),
             "--json"],
            cwd=REPO, env=env, capture_output=True, check=True, timeout=600,
        )  # fmt: skip
        return server.model.timeline[0][0] - started, server.requests[0]


def generated(args: argparse.Namespace) -> None:
    from tests.big_repo import generate

    with tempfile.TemporaryDirectory() as scratch:
        big = generate(Path(scratch) / "big", files=args.generated, seed=args.seed)
        small = generate(Path(scratch) / "small", files=40, seed=args.seed)
        size = sum(p.stat().st_size for p in big.root.rglob("*") if p.is_file() and ".git" not in p.parts)
        print(f"{big.files} files, {size / 1e6:.0f} MB, task: {big.task}")
        task_path = Path(scratch) / "task.md"
        task_path.write_text(f'---\nactions: "blocks"\nmax_turns: 1\nfresh_starts: 0\n---\n{big.task}\n')
        builds, runs, small_runs = [], [], []
        for _ in range(args.runs):
            once = [sys.executable, __file__, "--build-once", str(big.root), big.task, "--n-ctx", str(args.n_ctx),
                    "--reserve", str(args.reserve)]  # fmt: skip
            builds.append(json.loads(subprocess.run(once, capture_output=True, text=True, check=True).stdout))
            runs.append(first_request(big.root, task_path, args.n_ctx))
            small_runs.append(first_request(small.root, task_path, args.n_ctx)[0])
    seconds = [s for s, _ in runs]
    _, request = runs[-1]
    chars = sum(len(m["content"]) for m in request["messages"])
    row = {
        "files": big.files, "runs": args.runs,
        "task_message_first_s": builds[0]["build_s"],
        "task_message_median_s": statistics.median(b["build_s"] for b in builds),
        "agent_run_to_first_request_first_s": round(seconds[0], 2),
        "agent_run_to_first_request_median_s": round(statistics.median(seconds), 2),
        "same_for_40_files_median_s": round(statistics.median(small_runs), 2),
        "first_request_tokens_est": int(chars / CHARS_PER_TOKEN), "n_ctx": args.n_ctx,
        "task_message_tokens_est": builds[0]["first_request_tokens_est"],
        "task_message_budget_tokens": builds[0]["budget_tokens"],
        "body_shown": all(b["body_shown"] for b in builds) and BODY in request["messages"][-1]["content"],
    }  # fmt: skip
    print(json.dumps(row))


if __name__ == "__main__":
    main()
