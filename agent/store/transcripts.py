"""Sessions: an append-only JSONL transcript per session, written and flushed event by event.

The transcript is enough to rebuild the model's history, so a session continues exactly where it
stopped, after a crash or a kill -9 too: a torn last line is skipped, a tool call that never got its
result is marked interrupted. Text deltas are not written: the assistant.message that ends each
stream holds the whole text. Secrets are redacted on the way out (agent/store/redact.py), so a resumed
session sees `[REDACTED]` where the live one saw a key.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.events import Event, ReasoningDelta, TextDelta
from agent.store.redact import redact_record
from tools.base import with_followup

SKIPPED = (TextDelta, ReasoningDelta)
INTERRUPTED_WHILE_RUNNING = (
    "(interrupted while it ran: the agent was stopped before {name} finished, so it may have taken effect "
    "in full, in part or not at all; check before running it again)"
)


def sessions_dir(state_dir: Path) -> Path:
    return state_dir / "sessions"


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


class Transcript:
    """Appends events to sessions/<id>.jsonl as they happen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_line(path)
        self._file = path.open("a", encoding="utf-8")

    @property
    def session_id(self) -> str:
        return self.path.stem

    def write(self, event: Event) -> None:
        if isinstance(event, SKIPPED) or self._file.closed:
            return
        record = redact_record({"time": round(time.time(), 3), **event.to_json()})
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


def _drop_torn_line(path: Path) -> None:
    """A resumed transcript whose writer died mid-line (kill -9) loses that half line before anything
    is appended: glued to the next record it would become a corrupt line in the middle, and the session
    could not be resumed again. (Reading skips it as well: it was never a whole event.) A last line
    that is whole JSON and only lacks its newline gets the newline."""
    try:
        with path.open("rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if not size:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            keep, end = 0, size  # after the last newline: found block by block from the end
            while end > 0:
                start = max(0, end - 65536)
                f.seek(start)
                at = f.read(end - start).rfind(b"\n")
                if at >= 0:
                    keep = start + at + 1
                    break
                end = start
            f.seek(keep)
            try:
                json.loads(f.read())
            except ValueError:
                f.truncate(keep)
            else:  # a whole record that only lacks its newline (written by hand): kept
                f.seek(0, os.SEEK_END)
                f.write(b"\n")
    except FileNotFoundError:
        return


@dataclass
class SessionRecord:
    """What a transcript says, for resuming it and for `agent sessions`."""

    session_id: str
    path: Path
    events: list[dict[str, Any]]

    @property
    def started(self) -> dict[str, Any]:
        return next((e for e in self.events if e["type"] == "session.started"), {})

    @property
    def latest_started(self) -> dict[str, Any]:
        """What a resume continues from: the first session.started brought up to date by each later
        run's, so that a later --base-url, --workdir, profile or task front matter wins over the first
        run's. What a run left empty (the TUI records no front matter or URL) is kept from before."""
        merged: dict[str, Any] = {}
        for event in self.events:
            if event["type"] != "session.started":
                continue
            for key, value in event.items():
                if value or key not in merged:
                    merged[key] = value
            if event.get("profile") not in (None, "", "attach"):
                merged["base_url"] = ""  # a run on a named profile: its URL is the profile's own
        return merged

    @property
    def finished(self) -> dict[str, Any] | None:
        ends = [e for e in self.events if e["type"] == "session.finished"]
        return ends[-1] if ends else None

    @property
    def turns(self) -> int:
        return sum(1 for e in self.events if e["type"] == "turn.completed")

    def history(self) -> list[dict[str, Any]]:
        """The model's messages after the system prompt, rebuilt event by event.

        A call that was allowed to run but has no result was stopped while it ran (kill -9, SIGTERM):
        the model is told it may have taken effect, not that it never ran, since a write in a thread
        or a command may have finished (or half finished) before the agent died. A call that never got
        to run is left to the history repair ("not run: interrupted", agent.core.history.repair_history, which
        the session core applies: agent/session/live.py's `resumed_history`)."""
        messages: list[dict[str, Any]] = []
        calls: set[str] = set()  # ids of native tool calls in the history; block actions have none
        followups: set[str] = set()  # ids of calls the loop ran after one of those, proposed by its result
        running: dict[str, str] = {}  # allowed to run, no result yet: call id -> tool name

        def stopped_while_running() -> None:
            for call_id, name in running.items():
                messages.append({"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED_WHILE_RUNNING.format(name=name)})  # fmt: skip
            running.clear()

        for event in self.events:
            kind = event["type"]
            if kind in ("session.started", "user.message", "assistant.message", "compaction"):
                stopped_while_running()  # (what follows a kill: the resumed run)
            if (
                kind == "permission.decided"
                and event.get("decision") == "allow"
                and event.get("call_id") in calls
            ):
                running[event["call_id"]] = event.get("name", "the tool")
            elif kind == "tool.result":
                running.pop(event.get("call_id"), None)
            if kind == "user.message":
                messages.append({"role": "user", "content": event["content"]})
            elif kind == "assistant.message":
                message: dict[str, Any] = {"role": "assistant", "content": event["content"]}
                if event.get("tool_calls"):
                    message["tool_calls"] = event["tool_calls"]
                    calls.update(c.get("id") for c in event["tool_calls"])
                messages.append(message)
            elif kind == "tool.call" and event.get("proposed_by") in calls:
                followups.add(event["call_id"])
            elif kind == "tool.result" and event["call_id"] in followups and messages[-1]["role"] == "tool":
                # told inside the result of the call that proposed it, as the model was told
                messages[-1]["content"] = with_followup(
                    messages[-1]["content"], event["name"], event["output"]
                )
            elif kind == "tool.result" and event["call_id"] in calls:
                # (a block action's result reached the model inside the user message that follows)
                messages.append(
                    {"role": "tool", "tool_call_id": event["call_id"], "content": event["output"]}
                )
            elif kind == "compaction":
                messages = [dict(m) for m in event.get("history", [])]
        stopped_while_running()
        return messages


def load_session(state_dir: Path, session_id: str) -> SessionRecord:
    folder = sessions_dir(state_dir)
    path = folder / f"{session_id}.jsonl"
    if not path.is_file():
        matches = sorted(folder.glob(f"{session_id}*.jsonl")) if folder.is_dir() else []
        if len(matches) != 1:
            recent = ", ".join(p.stem for p in list_session_paths(state_dir)[-5:]) or "none"
            raise AgentError(
                f"no session '{session_id}'"
                if not matches
                else f"'{session_id}' matches {len(matches)} sessions",
                f"Recent sessions: {recent}.",
                "`agent sessions` lists them.",
            )
        path = matches[0]
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    events = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break  # the agent died while writing its last line: everything before it holds
            raise AgentError(
                f"session {path.stem} is corrupt at line {number} of {path}",
                str(exc),
                "A transcript is only ever appended to; this one was edited or damaged. Start a new session.",
            ) from exc
    if not events or events[0].get("type") != "session.started":
        raise AgentError(f"{path} is not a session transcript", "It does not begin with session.started.")
    return SessionRecord(path.stem, path, events)


def list_session_paths(state_dir: Path) -> list[Path]:
    folder = sessions_dir(state_dir)
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


@dataclass
class SessionSummary:
    """What a list of sessions shows of one, read from the head of its transcript only (a long
    session's transcript runs to megabytes)."""

    session_id: str
    path: Path
    workspace: str
    started: float  # seconds since the epoch
    title: str  # the task's first line, or the first prompt's as typed; "" before any

    @property
    def updated(self) -> float:
        """When the transcript was last written to."""
        try:
            return self.path.stat().st_mtime
        except OSError:
            return self.started


def recorded_sessions(state_dir: Path, workspace: Path | None = None) -> Iterator[SessionSummary]:
    """The recorded sessions, newest first; with `workspace`, only those that worked there, whichever
    front end recorded them (`agent run`, the TUI, an editor over ACP). A transcript that does not
    read is left out (`agent sessions` names it)."""
    where = str(workspace.resolve()) if workspace is not None else None
    for path in reversed(list_session_paths(state_dir)):
        summary = _summary(path)
        if summary is not None and (where is None or summary.workspace == where):
            yield summary


def _summary(path: Path, lines: int = 500) -> SessionSummary | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            first = json.loads(file.readline() or "{}")
            if not isinstance(first, dict) or first.get("type") != "session.started":
                return None
            title = _first_line(first.get("task") or "")
            for line in itertools.islice(file, lines):  # the first prompt comes early
                if title:
                    break
                if '"user.message"' in line:
                    event = json.loads(line)
                    # (before `typed` was recorded, the person's words came last, after the note)
                    title = _first_line(event.get("typed") or "") or _first_line(
                        event.get("content") or "", last=True
                    )
    except (OSError, ValueError):
        return None
    return SessionSummary(path.stem, path, first.get("workspace") or "", first.get("time") or 0.0, title)


def _first_line(text: str, last: bool = False) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if last else lines[0]).lstrip("# ")[:100] if lines else ""
