"""Replay a model's recorded writes through today's file tools, on a fresh start of its task, then run
the task's check: what a change of the harness would have made of the same answers, without a model.

    python examples/replay_write.py SESSION.jsonl examples/tasks/TASK [--calls N]

SESSION.jsonl is a recorded session (~/.local/state/spec-agent/sessions/). Its first N write_file and
edit_file calls (all by default) run in order, as in full-auto with the task's text known, in a
workdir prepared as `agent bench --tasks` prepares it (a real task's sdist comes from the cache). The
files the task message showed whole are marked shown, as the session had them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
from pathlib import Path

from agent.core.context import ContextWindow
from agent.core.task_message import task_message
from agent.core.workbench import Workbench
from agent.frontends.measure.suite import prepare_workdir
from agent.protocols.registry import make_actions
from agent.session.taskfile import load_task
from tools.base import ToolContext, ToolError
from tools.files import EditArgs, EditFile, WriteArgs, WriteFile
from tools.workspace import Workspace

TOOLS = {"write_file": (WriteFile(), WriteArgs), "edit_file": (EditFile(), EditArgs)}


async def replay(session: Path, task_dir: Path, calls: int | None) -> None:
    events = [json.loads(line) for line in session.read_text().splitlines()]
    recorded = [e for e in events if e["type"] == "tool.call" and e["name"] in TOOLS][:calls]
    task = load_task(task_dir / "task.md")
    with tempfile.TemporaryDirectory() as scratch:
        work = prepare_workdir(task_dir, Path(scratch))
        workbench = Workbench(work)
        # The task message as the blocks protocol builds it: it marks what it shows whole, or in part.
        task_message(workbench, task.body, make_actions("blocks", work), ContextWindow(16384, 2048))
        ctx = ToolContext(Workspace(work), state=workbench.tool_state)
        for call in recorded:
            tool, args = TOOLS[call["name"]]
            try:
                result = await tool.run(args(**call["arguments"]), ctx)
                said = result.output
            except ToolError as exc:
                said = f"Error: {exc}"
            print(f"--- {call['name']} {call['arguments'].get('path')}\n{said[-600:]}\n")
        if task.spec.check:
            check = subprocess.run(["bash", "-c", task.spec.check], cwd=work, capture_output=True, text=True)
            print(f"--- the check exits {check.returncode}\n{(check.stdout + check.stderr)[-1500:]}")
        diff = subprocess.run(["git", "diff", "--stat"], cwd=work, capture_output=True, text=True)
        print(f"--- git diff --stat\n{diff.stdout}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session", type=Path)
    parser.add_argument("task_dir", type=Path)
    parser.add_argument("--calls", type=int, default=None, help="replay only the first N calls")
    args = parser.parse_args()
    asyncio.run(replay(args.session, args.task_dir, args.calls))


if __name__ == "__main__":
    main()
