"""`agent watch`: the turns going through `agent proxy`, live, in another terminal.

It reads what the proxy writes (one telemetry record per turn, agent/store/telemetry.py) rather than
talking to it, so it works with any number of proxies, starts before or after them, and loses nothing
when it is closed. Each turn is one line as it ends, the figures line of the TUI; each new session is
announced with its client and first request; Ctrl+C prints every watched session's totals.
"""

from __future__ import annotations

import time
from argparse import Namespace
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.frontends import console
from agent.frontends.proxy.command import turn_line
from agent.session.proxy_sessions import VIA
from agent.settings.config import Settings, state_dir
from agent.store.telemetry import TurnStats, read_jsonl, summarise_turns, summary_line

POLL_S = 0.25


@dataclass
class Watched:
    """One session's telemetry file, read up to `read` records, `size` bytes long when last read."""

    read: int = 0
    size: int = -1
    stats: list[TurnStats] = field(default_factory=list)
    client: str = ""


def watched_line(record: dict[str, Any]) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(record.get("time", time.time())))
    return f"{when} {turn_line(record['session'], record['turn'], TurnStats.from_dict(record['stats']))}"


class Watcher:
    """The proxy's sessions in the state folder, and what each has added since the last look."""

    def __init__(self, folder: Path, since: float) -> None:
        self.folder, self.since = folder, since
        self.sessions: dict[str, Watched] = {}

    def new_records(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted(self.folder.glob("*.jsonl")) if self.folder.is_dir() else []:
            stat = path.stat()
            watched = self.sessions.get(path.stem)
            if watched is None:
                if stat.st_mtime < self.since:
                    continue
                watched = self.sessions[path.stem] = Watched()
            if stat.st_size == watched.size:
                continue  # nothing appended since the last look: not read again
            watched.size = stat.st_size
            records = read_jsonl(path)
            fresh, watched.read = records[watched.read :], len(records)
            for record in fresh:
                if record.get("via") != VIA:
                    continue
                watched.client = record.get("client", "")
                watched.stats.append(TurnStats.from_dict(record["stats"]))
                found.append(record)
        return sorted(found, key=lambda r: r.get("time", 0))

    def totals(self) -> list[str]:
        return [
            f"{sid}{f' ({w.client})' if w.client else ''}: {summary_line(summarise_turns(w.stats))}"
            for sid, w in self.sessions.items()
            if w.stats
        ]


def cmd_watch(args: Namespace, settings: Settings) -> int:
    since = 0.0 if args.all else time.time() - 60 * args.minutes
    watcher = Watcher(state_dir() / "telemetry", since)
    if not args.once:
        console.note("watching the turns through `agent proxy` (Ctrl+C stops)")
    announced: set[str] = set()
    try:
        while True:
            for record in watcher.new_records():
                if record["session"] not in announced:
                    announced.add(record["session"])
                    client = f" from {record['client']}" if record.get("client") else ""
                    console.out.print(f"session {record['session']}{client}", highlight=False)
                console.out.print(watched_line(record), highlight=False)
            if args.once:
                break
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        pass
    lines = watcher.totals()
    if lines:
        console.out.print("totals\n  " + "\n  ".join(lines), highlight=False)
    elif args.once:
        console.note("no turns through `agent proxy` yet (`agent proxy` starts one; --all for older ones)")
    return 0
