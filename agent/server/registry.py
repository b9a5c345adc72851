"""The servers we started, recorded in a small state file so that another terminal can see and stop them.

An entry holds the pid and the process's start time: a pid the kernel has since given to another
program is never signalled. Entries whose process is gone are dropped whenever the file is read.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class ServerRecord:
    profile: str
    pid: int
    host: str
    port: int
    base_url: str
    log_path: str
    binary: str
    argv: list[str] = field(default_factory=list)
    started_at: float = 0.0
    proc_start: str = ""
    # The agent process that started this server for one run and will stop it (None: detached, from
    # `agent server start`). A server whose owner died (kill -9) is adopted by the next run using it.
    owner_pid: int | None = None
    owner_start: str = ""
    # Why this server runs its profile without the draft (the fallback, agent/session/connect.py); "" otherwise.
    draft_off: str = ""

    def is_alive(self) -> bool:
        return process_start_time(self.pid) == self.proc_start and self.proc_start != ""

    def is_orphaned(self) -> bool:
        return self.owner_pid is not None and process_start_time(self.owner_pid) != self.owner_start


def process_start_time(pid: int) -> str:
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat), or "" if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return ""
        return "unknown"  # no /proc (macOS): the pid exists, which is the best we can know
    # The command name (field 2) may hold spaces and parentheses; the fields after it do not.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie has exited; only its parent has not reaped it yet
        return ""
    return fields[19]


class ServerRegistry:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "servers.json"

    @contextmanager
    def _locked(self) -> Iterator[list[ServerRecord]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with (self.path.with_suffix(".lock")).open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            records = self._read()
            before = [asdict(r) for r in records]
            alive = [r for r in records if r.is_alive()]
            yield alive
            after = [asdict(r) for r in alive]
            if after != before:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(after, indent=2) + "\n", encoding="utf-8")
                tmp.replace(self.path)

    def _read(self) -> list[ServerRecord]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return [ServerRecord(**item) for item in data]
        except FileNotFoundError:
            return []
        except (ValueError, TypeError):
            return []  # a damaged state file holds nothing we can trust; it is rewritten on the next change

    def running(self) -> list[ServerRecord]:
        with self._locked() as records:
            return list(records)

    def add(self, record: ServerRecord) -> None:
        with self._locked() as records:
            records[:] = [r for r in records if (r.host, r.port) != (record.host, record.port)]
            records.append(record)

    def remove(self, pid: int) -> None:
        with self._locked() as records:
            records[:] = [r for r in records if r.pid != pid]

    def adopt(self, pid: int) -> None:
        """This process takes over stopping the server (its previous owner is gone)."""
        with self._locked() as records:
            for record in records:
                if record.pid == pid:
                    record.owner_pid, record.owner_start = os.getpid(), process_start_time(os.getpid())

    def at(self, host: str, port: int) -> ServerRecord | None:
        return next((r for r in self.running() if r.port == port and _same_host(r.host, host)), None)


def _same_host(a: str, b: str) -> bool:
    loopback = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
    return a == b or (a in loopback and b in loopback)
