"""What the embedded coder is shown of each real-repository task, and whether its first request fits.

For each `examples/tasks/real-*` task (or each task of `--tasks DIR`): prepare its workdir as `agent
bench --tasks` does (the pinned sdist, cached), build the task message exactly as the blocks protocol
does for the `coder` profile (16,384-token context, 2,048 kept for the answer), and print its size
against the context, the files shown whole or in part, the time it took to build, and whether the
definition that the task's solution.patch changes was shown whole (`found`): the first request holds
the code to change, or the model has to find it.

    python examples/bench_repo_view.py [--tasks DIR] [--n-ctx 16384] [--reserve 2048] [TASK_GLOB]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import tempfile
import time
from pathlib import Path

from agent.core.context import CHARS_PER_TOKEN, ContextWindow
from agent.core.prompt import system_prompt
from agent.core.repomap import repository_view
from agent.core.task_message import files_budget, recent_files, task_message
from agent.core.workbench import Workbench
from agent.frontends.measure.suite import discover, prepare_workdir
from agent.protocols.registry import make_actions
from agent.session.taskfile import load_task
from tools.outline import fence_for, outline, qualname

TASKS = Path(__file__).resolve().parents[1] / "examples" / "tasks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("glob", nargs="?", default="*")
    parser.add_argument(
        "--tasks", type=Path, default=None, help="a task folder (default: examples/tasks, real-*)"
    )
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--reserve", type=int, default=2048)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
