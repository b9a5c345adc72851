"""`agent undo [SESSION]`: put the newest checkpoint of a workspace back into its working tree, from
any terminal (the TUI's /undo does the same). It shows what will change first and asks; `--yes` skips
the question, and without a terminal nothing is restored unless `--yes` says so (exit 2).

SESSION narrows it to the checkpoints that session took. A checkpoint commit does not name its session,
but the session's transcript records a `checkpoint NNNNN taken (LABEL)` notice for each, with its time:
a checkpoint is the session's when its ref number, message and commit time (within a few seconds)
match one. Restoring one of the session's checkpoints that is not the newest also drops the newer
ones, whoever took them: the list shown first includes their changes.
"""

from __future__ import annotations

import re
import sys
from argparse import Namespace
from pathlib import Path

from agent.errors import AgentError
from agent.frontends import console
from agent.settings.config import Settings, state_dir
from agent.store.transcripts import load_session
from tools.git import Checkpoint, Checkpoints, open_repo

# The label sits between "taken (" and the last "); " (a label may hold parentheses itself).
CHECKPOINT_NOTICE = re.compile(r"checkpoint (\d+) taken \((.*)\); ", re.DOTALL)
CLOCK_SLACK_S = 10  # between a checkpoint's commit time and its notice in the transcript
WHAT_HAPPENED = {"A": "new", "M": "modified", "D": "deleted", "T": "type changed"}
WHAT_UNDO_DOES = {"A": "(removed by undo)", "D": "(brought back by undo)"}


def cmd_undo(args: Namespace, settings: Settings) -> int:
    workspace = Path(args.workdir or ".").expanduser().resolve()
    repo = open_repo(workspace)
    if repo is None:
        raise AgentError(
            f"{workspace} is not in a git repository",
            "Checkpoints are kept in git, so there are none to restore here.",
        )
    checkpoints = Checkpoints(repo)
    existing = checkpoints.list()
    mine = _taken_in(args.session, checkpoints, existing) if args.session else existing
    if not mine:
        raise AgentError(
            f"nothing to undo in {checkpoints.root}"
            + (f" from session {args.session}" if args.session else ""),
            "There is no checkpoint" + (" of that session left." if args.session else "."),
            "A checkpoint is taken before the agent's first change of each task.",
        )
    target = mine[-1]
    newer = existing[existing.index(target) + 1 :]
    _show_plan(checkpoints, target, newer)

    if not args.yes:
        if not sys.stdin.isatty():
            raise AgentError(
                "nothing restored: nobody confirmed",
                "stdin is not a terminal, so `agent undo` cannot ask.",
                "Pass --yes to restore the checkpoint.",
            )
        if console.out.input("Restore it? [y/N] ", markup=False).strip().lower() not in ("y", "yes"):
            console.out.print("nothing changed")
            return 1
    restored, changed = checkpoints.undo(target)
    console.out.print(f"restored checkpoint {_number(restored)} ({restored.message}):", markup=False)
    console.out.print("\n".join(f"  {name}" for name in changed) or "  (no file differed)", markup=False)
    return 0


def _show_plan(checkpoints: Checkpoints, target: Checkpoint, newer: list[Checkpoint]) -> None:
    when = checkpoints.repo.commit(target.sha).committed_date
    out = console.out
    age = console.format_age(when)
    out.print(f"checkpoint {_number(target)} ({target.message}), taken {age} ago", markup=False)
    fields = checkpoints.diff_since(target.sha, "--name-status", "--no-renames", "-z").split("\0")
    changes = list(zip(fields[0::2], fields[1::2], strict=False))
    if not changes:
        out.print("the working tree already matches it: undo only drops the checkpoint")
    else:
        out.print("changed since, and put back as it was by undo:")
        for status, name in changes:
            line = f"  {WHAT_HAPPENED.get(status, status):<9} {name} {WHAT_UNDO_DOES.get(status, '')}"
            out.print(line.rstrip(), markup=False)
        out.print(checkpoints.diff_since(target.sha, "--stat").rstrip(), markup=False)
    if newer:
        plural = "s" if len(newer) != 1 else ""
        out.print(f"{len(newer)} newer checkpoint{plural} (not this session's) will be dropped too")


def _taken_in(session: str, checkpoints: Checkpoints, existing: list[Checkpoint]) -> list[Checkpoint]:
    """The checkpoints that `session` took, matched through its transcript's notices."""
    record = load_session(state_dir(), session)
    workdir = Path(record.started.get("workspace") or "/").resolve()
    if not workdir.is_relative_to(checkpoints.root):
        raise AgentError(
            f"session {record.session_id} worked in {workdir}, not in {checkpoints.root}",
            "Its checkpoints belong to that repository.",
            f"Run `agent undo --workdir {workdir} {record.session_id}`.",
        )
    taken = []
    for event in record.events:
        found = event["type"] == "notice" and CHECKPOINT_NOTICE.match(event.get("message", ""))
        if found:
            taken.append((int(found[1]), found[2], event.get("time", 0)))
    return [
        c
        for c in existing
        if any(
            number == int(_number(c))
            and label.strip() == c.message
            and abs(checkpoints.repo.commit(c.sha).committed_date - at) <= CLOCK_SLACK_S
            for number, label, at in taken
        )
    ]


def _number(checkpoint: Checkpoint) -> str:
    return checkpoint.ref.rsplit("/", 1)[1]
