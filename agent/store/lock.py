"""One agent per workspace, and per session: an advisory lock held for as long as the agent works.

Two agents in one folder would edit the same files and undo each other's work, and two agents
appending to one transcript would interleave it. So `agent run` and the TUI take an exclusive
`flock` on a lock file in the state dir (`locks/`, never in the workspace, so nothing appears in the
user's repository) before they start a server or touch a file, and the second one is refused with a
message naming the first: its session, pid, command and start time.

The kernel drops a `flock` when its holder dies, kill -9 included, so there is never a stale lock to
clear by hand. The lock file's descriptor is not inherited (Python opens files close-on-exec), so a
llama-server or a command the agent started cannot keep the lock alive after the agent is gone.
What the holder writes into the file (one JSON object) is read only when the lock is refused.

Within one process the lock is shared: one process is one agent, and what it opens one after another
(the TUI's sessions across /resume and /profile, a test's apps) does not lock itself out, even when
an earlier holder was dropped without being released. Other processes are refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from agent.errors import AgentError, ExitCode

BUSY_EXIT = ExitCode.BUSY  # (tests/faults/test_agent_faults.py's name)


class WorkspaceBusy(AgentError):
    """Another agent works in this workspace (or has this session open)."""

    exit_code = ExitCode.BUSY

    def __init__(self, what: str, why: str, fix: str, holder: dict[str, Any]) -> None:
        super().__init__(what, why, fix)
        self.holder = holder


# This process's open lock files: path -> [the file, how many AgentLock objects share it].
_HELD: dict[Path, list[Any]] = {}
_HELD_LOCK = threading.Lock()


def locks_dir(state_dir: Path) -> Path:
    return state_dir / "locks"


def _lock_path(state_dir: Path, kind: str, key: str) -> Path:
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    label = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(key).name if kind == "workspace" else key)[:40]
    return locks_dir(state_dir) / f"{kind}-{label}-{digest}.lock"


class AgentLock:
    """An exclusive, non-blocking flock on one lock file, with who holds it written inside."""

    def __init__(self, path: Path, kind: str, subject: str) -> None:
        self.path, self.kind, self.subject = path, kind, subject
        self._file: Any = None
        self.info: dict[str, Any] = {}

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self, info: dict[str, Any]) -> None:
        """Take the lock or raise WorkspaceBusy naming its holder. Taking a lock already held is a no-op
        (only the information is brought up to date)."""
        if self.held:
            self.update(**info)
            return
        with _HELD_LOCK:
            shared = _HELD.get(self.path)
            if shared is not None:  # this process holds it already
                shared[1] += 1
                file = shared[0]
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                file = self.path.open("a+", encoding="utf-8")
                try:
                    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    file.close()
                    raise self._busy(read_holder(self.path)) from None
                except BaseException:
                    file.close()
                    raise
                _HELD[self.path] = [file, 1]
            self._file = file
            self.info = {"pid": os.getpid(), "started": round(time.time(), 3), **info}
            self._write()

    def update(self, **changes: Any) -> None:
        """New facts about the holder (the session id, once it is known)."""
        if not self.held:
            return
        self.info.update(changes)
        self._write()

    def _write(self) -> None:
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps(self.info, ensure_ascii=False) + "\n")
        self._file.flush()

    def release(self) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        with _HELD_LOCK:
            shared = _HELD.get(self.path)
            if shared is not None and shared[0] is file:
                shared[1] -= 1
                if shared[1] > 0:
                    return  # another holder in this process still has it
                del _HELD[self.path]
            with contextlib.suppress(OSError):
                file.seek(0)
                file.truncate()  # what is left says nothing about a holder that is gone
            file.close()  # closing the last descriptor drops the flock

    def __enter__(self) -> AgentLock:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def _busy(self, holder: dict[str, Any]) -> WorkspaceBusy:
        who = describe_holder(holder)
        if self.kind == "workspace":
            what = f"another agent is already working in {self.subject}"
            why = (
                f"It is {who}. Two agents in one folder would edit the same files and undo each other's work."
            )
        else:
            what = f"session {self.subject} is already open in another agent"
            why = f"It is {who}. Two agents appending to one transcript would interleave it."
        pid = holder.get("pid")
        fix = "Wait until it has finished" + (f", or stop it (kill {pid})" if pid else "")
        fix += ", or give this agent another folder (--workdir)." if self.kind == "workspace" else "."
        return WorkspaceBusy(what, why, fix, holder)


def read_holder(path: Path, wait: float = 1.0) -> dict[str, Any]:
    """What the holder wrote. It writes right after taking the lock: a reader that comes in between
    sees an empty or half-written file for a moment, so it reads again for up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            text = path.read_text(encoding="utf-8")
            holder = json.loads(text) if text.strip() else {}
        except (OSError, ValueError):
            holder = {}
        if holder.get("pid") or time.monotonic() >= deadline:
            return holder if isinstance(holder, dict) else {}
        time.sleep(0.02)


def describe_holder(holder: dict[str, Any]) -> str:
    """'session 20260101-120000-ab12 (`agent run`, pid 1234, started 2026-01-01 12:00:00, 5 s ago)'."""
    if not holder.get("pid"):
        return "an agent that did not say who it is (it is still starting)"
    parts = []
    if holder.get("command"):
        parts.append(f"`{holder['command']}`")
    parts.append(f"pid {holder['pid']}")
    started = holder.get("started")
    if isinstance(started, int | float):
        ago = max(0, time.time() - started)
        ago_text = (
            f"{ago:.0f} s" if ago < 120 else (f"{ago / 60:.0f} min" if ago < 7200 else f"{ago / 3600:.1f} h")
        )
        parts.append(f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}, {ago_text} ago")
    session = holder.get("session")
    who = f"session {session}" if session else "a session that has not started yet"
    return f"{who} ({', '.join(parts)})"


def workspace_lock(state_dir: Path, workspace: Path) -> AgentLock:
    where = str(workspace.resolve())
    return AgentLock(_lock_path(state_dir, "workspace", where), "workspace", where)


def session_lock(state_dir: Path, session_id: str) -> AgentLock:
    return AgentLock(_lock_path(state_dir, "session", session_id), "session", session_id)


class AgentLocks:
    """The workspace's lock and the session's, taken together (workspace first) and let go together."""

    def __init__(self, state_dir: Path, workspace: Path, command: str) -> None:
        self.state_dir, self.command = state_dir, command
        self.workspace = workspace_lock(state_dir, workspace)
        self.session: AgentLock | None = None

    def acquire(self, session_id: str = "") -> None:
        """Hold the workspace, and the session when its id is known; refuse with WorkspaceBusy."""
        info = {"command": self.command, "workspace": self.workspace.subject, "session": session_id}
        had = self.workspace.held
        self.workspace.acquire(info)
        if session_id:
            try:
                self.hold_session(session_id)
            except BaseException:
                if not had:  # refused as a whole: the workspace is not kept either
                    self.workspace.release()
                raise

    def holding(self, session_id: str = "") -> AgentLocks:
        """Acquire now, for a `with` block that lets go at its end: `with locks.holding(id): ...`."""
        self.acquire(session_id)
        return self

    def hold_session(self, session_id: str) -> None:
        """Move the session lock to `session_id` (a new session, /resume, /clear)."""
        if self.session is not None and self.session.subject == session_id and self.session.held:
            return
        lock = session_lock(self.state_dir, session_id)
        info = {"command": self.command, "workspace": self.workspace.subject, "session": session_id}
        lock.acquire(info)  # raises before the old one is let go: a refused move changes nothing
        if self.session is not None:
            self.session.release()
        self.session = lock
        self.workspace.update(session=session_id)

    @property
    def held(self) -> bool:
        return self.workspace.held

    def release(self) -> None:
        if self.session is not None:
            self.session.release()
            self.session = None
        self.workspace.release()

    def __enter__(self) -> AgentLocks:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()
