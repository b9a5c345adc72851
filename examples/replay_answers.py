"""Read a run's recorded answers again with today's blocks reader, without a model: what the answers
that were refused for a block without a path would become now.

    python examples/replay_answers.py SESSION.jsonl... [--write [--check]]

Each SESSION.jsonl is a recorded session (~/.local/state/spec-agent/sessions/, or a GPU bench's
sessions.tgz) of a task of examples/planted or examples/tasks, found by its workspace's name. Every
answer that was told "a ```python block without a file path was not applied" is read on a fresh
start of its task, as the first request left it: the files the task message showed, nothing changed
since. It prints how many now become calls, and which; with --write, the write_file calls run
as in full-auto and say what they did.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from agent.core.context import ContextWindow
from agent.core.llm import Completion, TurnStats
from agent.core.task_message import task_message
from agent.core.workbench import Workbench
from agent.frontends.measure.suite import prepare_workdir
from agent.protocols.registry import make_actions
from agent.session.taskfile import load_task
from tools.base import ToolContext, ToolError
from tools.files import WriteArgs, WriteFile
from tools.workspace import Workspace

REFUSED = "block without a file path"
TASK_DIRS = (Path("examples/planted"), Path("examples/tasks"))


def refused_answers(events: list[dict]) -> list[dict]:
    """The answers the next user message refused for a block without a path."""
    answers, last = [], None
    for event in events:
        if event["type"] == "assistant.message":
            last = event
        elif event["type"] == "user.message" and REFUSED in event.get("content", "") and last is not None:
            answers.append(last)
    return answers


def reread(session: Path, write: bool, check: bool = False) -> list[tuple[str, int, list[str]]]:
    events = [json.loads(line) for line in session.read_text().splitlines()]
    name = os.path.basename(events[0]["workspace"])
    task_dir = next((d / name for d in TASK_DIRS if (d / name / "task.md").exists()), None)
    answers = refused_answers(events)
    if task_dir is None or not answers:
        return []
    task = load_task(task_dir / "task.md")
    found = []
    with tempfile.TemporaryDirectory() as scratch:
        work = prepare_workdir(task_dir, Path(scratch))
        workbench = Workbench(work)
        protocol = make_actions("blocks", work)
        protocol.new_task(task.body)
        task_message(workbench, task.body, protocol, ContextWindow(16384, 2048))
        ctx = ToolContext(Workspace(work), state=workbench.tool_state)
        for answer in answers:
            protocol.plan.awaited = False  # each read as an answer of blocks, not as a plan
            read = protocol.read(Completion(answer["content"], "", [], TurnStats()), None)
            said = []
            for call in read.calls:
                args = json.loads(call.arguments)
                said.append(f"{call.name} {args.get('path', '')}".rstrip())
                if write and call.name == "write_file":
                    said[-1] += ": " + _written(WriteArgs(**args), ctx)
            if check and any(": Changed" in s or ": Replaced" in s or ": Created" in s for s in said):
                ran = subprocess.run(["bash", "-c", task.spec.check], cwd=work, capture_output=True)
                said.append("the check passes" if ran.returncode == 0 else "the check fails")
            found.append((name, answer.get("turn", 0), said))
    return found


def _written(args: WriteArgs, ctx: ToolContext) -> str:
    """What the write did, as a headless run in full-auto has it: a rewrite the guard asks about is
    not run there."""
    tool = WriteFile()
    if (risk := tool.risk(args, ctx)) is not None:
        return "needs approval: " + risk[:120]
    try:
        return asyncio.run(tool.run(args, ctx)).output[:120]
    except ToolError as exc:
        return "refused: " + str(exc)[:120]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="+", type=Path)
    parser.add_argument("--write", action="store_true", help="run the write_file calls and say what they did")
    parser.add_argument("--check", action="store_true", help="with --write: run the check after each change")
    args = parser.parse_args()
    counts: Counter[str] = Counter()
    for session in sorted(args.sessions):
        for name, turn, said in reread(session, args.write, args.check):
            counts["become calls" if said else "still refused"] += 1
            counts["pass the check"] += "the check passes" in said
            if said:
                print(f"{name} turn {turn}: " + "; ".join(said))
    refused = counts["become calls"] + counts["still refused"]
    print(
        f"answers refused for a block without a path: {refused}; become calls: {counts['become calls']}, "
        f"of which pass the check: {counts['pass the check']}; still refused: {counts['still refused']}"
    )


if __name__ == "__main__":
    main()
