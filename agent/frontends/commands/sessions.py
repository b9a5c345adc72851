"""`agent sessions`: the recorded sessions, newest last."""

from __future__ import annotations

import json
import time
from argparse import Namespace

from agent.errors import AgentError
from agent.frontends import console
from agent.settings.config import Settings, state_dir
from agent.store.transcripts import list_session_paths, load_session


def cmd_sessions(args: Namespace, settings: Settings) -> int:
    rows = []
    for path in list_session_paths(state_dir())[-args.limit :]:
        try:
            record = load_session(state_dir(), path.stem)
        except AgentError as exc:
            rows.append({"id": path.stem, "task": f"(unreadable: {exc.what})", "outcome": "corrupt"})
            continue
        started, finished = record.started, record.finished
        rows.append({
            "id": record.session_id,
            "time": started.get("time"),
            "task": (started.get("task") or "").strip().splitlines()[0][:60] if started.get("task") else "",
            "profile": started.get("profile", ""),
            "turns": record.turns,
            "outcome": finished["outcome"] if finished else "unfinished",
        })  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        console.out.print("no sessions yet (`agent run TASK.md` starts one)")
        return 0
    table = console.table("started", "session", "task", "profile", "turns", "outcome")
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["time"])) if row.get("time") else ""
        table.add_row(
            when,
            row["id"],
            row.get("task", ""),
            row.get("profile", ""),
            str(row.get("turns", "")),
            row["outcome"],
        )
    console.out.print(table)
    return 0
