"""Sessions: an append-only JSONL transcript per session, written and flushed event by event.

The transcript is enough to rebuild the model's history, so a session continues exactly where it
stopped, after a crash or a kill -9 too: a torn last line is skipped, a tool call that never got its
result is marked interrupted. Text deltas are not written: the assistant.message that ends each
stream holds the whole text.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.events import Event, ReasoningDelta, TextDelta
from agent.toolcalls import repair_history

SKIPPED = (TextDelta, ReasoningDelta)


def sessions_dir(state_dir: Path) -> Path:
    return state_dir / "sessions"


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


class Transcript:
    """Appends events to sessions/<id>.jsonl as they happen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    @property
    def session_id(self) -> str:
        return self.path.stem

    def write(self, event: Event) -> None:
        if isinstance(event, SKIPPED) or self._file.closed:
            return
        record = {"time": round(time.time(), 3), **event.to_json()}
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


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
    def finished(self) -> dict[str, Any] | None:
        ends = [e for e in self.events if e["type"] == "session.finished"]
        return ends[-1] if ends else None

    @property
    def turns(self) -> int:
        return sum(1 for e in self.events if e["type"] == "turn.completed")

    def history(self) -> list[dict[str, Any]]:
        """The model's messages after the system prompt, rebuilt event by event."""
        messages: list[dict[str, Any]] = []
        calls: set[str] = set()  # ids of native tool calls in the history; block actions have none
        for event in self.events:
            kind = event["type"]
            if kind == "user.message":
                messages.append({"role": "user", "content": event["content"]})
            elif kind == "assistant.message":
                message: dict[str, Any] = {"role": "assistant", "content": event["content"]}
                if event.get("tool_calls"):
                    message["tool_calls"] = event["tool_calls"]
                    calls.update(c.get("id") for c in event["tool_calls"])
                messages.append(message)
            elif kind == "tool.result" and event["call_id"] in calls:
                # (a block action's result reached the model inside the user message that follows)
                messages.append(
                    {"role": "tool", "tool_call_id": event["call_id"], "content": event["output"]}
                )
            elif kind == "compaction":
                messages = [dict(m) for m in event.get("history", [])]
        repair_history(messages)
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
