"""What every front end does with the events besides showing them: the transcript and the telemetry.

One `SessionRecorder` per session writes each event to the transcript as it happens and, when a
turn completes, one telemetry record with its TurnStats and the timings of the tools it ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.events import DraftOff, Event, ToolFinished, TurnCompleted, TurnStarted
from agent.store.telemetry import TelemetryLog, TurnStats, summarise_turns
from agent.store.transcripts import Transcript


class SessionRecorder:
    def __init__(self, state_dir: Path, session_id: str, profile: str, model: str, spec_mode: str) -> None:
        self.transcript = Transcript(state_dir / "sessions" / f"{session_id}.jsonl")
        self.telemetry = TelemetryLog(state_dir / "telemetry" / f"{session_id}.jsonl")
        self.meta = {"session": session_id, "profile": profile, "model": model, "spec_mode": spec_mode}
        self.turn_tools: list[dict[str, Any]] = []
        self.stats: list[TurnStats] = []

    def __call__(self, event: Event) -> None:
        self.transcript.write(event)
        if isinstance(event, DraftOff):
            # Every turn after this ran without the draft: its telemetry says so, and `agent stats`.
            self.meta.update(spec_mode="none", draft_off=event.reason)
        elif isinstance(event, TurnStarted):
            self.turn_tools = []
        elif isinstance(event, ToolFinished):
            self.turn_tools.append({"name": event.name, "ok": event.ok, "seconds": round(event.seconds, 3)})
        elif isinstance(event, TurnCompleted):
            self.stats.append(event.stats)
            self.telemetry.append(
                {**self.meta, "turn": event.turn, "stats": event.stats.to_dict(), "tools": self.turn_tools}
            )

    def summary(self) -> dict[str, Any]:
        summary = summarise_turns(self.stats)
        if self.meta.get("draft_off"):
            summary["draft_off"] = self.meta["draft_off"]
        return summary

    def close(self) -> None:
        self.transcript.close()
