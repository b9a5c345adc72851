"""The events every front end consumes. They are the only way anything leaves the core.

Each is a plain dataclass with a `kind`; `to_json()` gives the record written to the session
transcript and to `agent run --json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass
class Event:
    kind: ClassVar[str] = "event"
    # Which attempt of a run with several (`agent run --attempts N`) the event belongs to; None: the
    # run has one. Keyword-only, so that every event keeps its own fields' order.
    attempt: int | None = field(default=None, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if data["attempt"] is None:
            del data["attempt"]
        for key, value in list(data.items()):
            if hasattr(value, "to_dict"):
                data[key] = value.to_dict()
        stats = getattr(self, "stats", None)
        if stats is not None:
            data["stats"] = stats.to_dict()
        return {"type": self.kind, **data}


@dataclass
class SessionStarted(Event):
    kind: ClassVar[str] = "session.started"
    session_id: str
    profile: str
    model: str
    workspace: str
    task: str = ""
    resumed: bool = False
    options: dict[str, Any] = field(default_factory=dict)  # the task's front matter, for a resume
    base_url: str = ""  # the server attached to by --base-url, so that a resume reconnects to it


@dataclass
class UserMessage(Event):
    """A task or a follow-up, as sent to the model (with its environment note)."""

    kind: ClassVar[str] = "user.message"
    content: str
    typed: str = ""  # what the person typed, when `content` wraps it in context (files, environment)


@dataclass
class TurnStarted(Event):
    kind: ClassVar[str] = "turn.started"
    turn: int


@dataclass
class TextDelta(Event):
    kind: ClassVar[str] = "text.delta"
    text: str


@dataclass
class ReasoningDelta(Event):
    kind: ClassVar[str] = "reasoning.delta"
    text: str


@dataclass
class AssistantMessage(Event):
    """The model's whole text for one request, once its stream has ended."""

    kind: ClassVar[str] = "assistant.message"
    turn: int
    content: str
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # as kept in the history


@dataclass
class ToolCallStarted(Event):
    kind: ClassVar[str] = "tool.call"
    turn: int
    call_id: str
    name: str
    arguments: Any  # the parsed arguments, or the raw text when they did not parse
    summary: str = ""  # the argument that matters, for a one-line display
    proposed_by: str = (
        ""  # the call whose result proposed this one (the loop ran it next); "" for the model's
    )


@dataclass
class ApprovalRequested(Event):
    kind: ClassVar[str] = "approval.requested"
    call_id: str
    name: str
    summary: str
    reason: str
    suggested_rule: str = ""


@dataclass
class ApprovalAnswer:
    """The user's answer to an ApprovalRequested: not an event, the reply a front end gives."""

    decision: str  # yes | no | always
    message: str = ""  # for "no": what to tell the model instead


@dataclass
class PermissionDecided(Event):
    kind: ClassVar[str] = "permission.decided"
    call_id: str
    name: str
    decision: str  # allow | deny
    reason: str


@dataclass
class ToolFinished(Event):
    kind: ClassVar[str] = "tool.result"
    turn: int
    call_id: str
    name: str
    ok: bool
    output: str
    seconds: float
    display: dict[str, Any] = field(default_factory=dict)  # diff, exit code...: for front ends only


@dataclass
class TurnCompleted(Event):
    kind: ClassVar[str] = "turn.completed"
    turn: int
    stats: Any  # TurnStats


@dataclass
class Compacted(Event):
    kind: ClassVar[str] = "compaction"
    tokens_before: int
    tokens_after: int
    messages_summarised: int
    reason: str
    history: list[dict[str, Any]] = field(default_factory=list)  # the new history after the system prompt


@dataclass
class Notice(Event):
    """Something the user should know that is not an error (not a git repo, a dialect translation)."""

    kind: ClassVar[str] = "notice"
    message: str


@dataclass
class DraftOff(Event):
    """The profile's draft failed (preflight, load or first request): the server runs the same target
    without it. Recorded so that the transcript, `agent stats` and the TUI's status say "draft off"."""

    kind: ClassVar[str] = "draft.off"
    reason: str
    profile: str
    message: str  # what the user reads: the reason, what runs instead, how to refuse instead


@dataclass
class ErrorEvent(Event):
    kind: ClassVar[str] = "error"
    error: str  # a short type: context_overflow, server_gone, bad_request, limit, interrupted, ...
    message: str
    fatal: bool = True


@dataclass
class CheckStarted(Event):
    """The task's check starts (the model said it was done), for front ends to show it running.
    `rounds_left`: how many more times a failure of this check is fed back to the model (0: the last)."""

    kind: ClassVar[str] = "check.started"
    round: int
    command: str
    rounds_left: int = 0


@dataclass
class CheckFinished(Event):
    """The task's check ran (after the model said it was done); round 1 is the first try."""

    kind: ClassVar[str] = "check.result"
    round: int
    command: str
    passed: bool
    exit_code: int | None  # None: timed out
    output: str
    seconds: float


@dataclass
class SessionFinished(Event):
    kind: ClassVar[str] = "session.finished"
    outcome: str  # completed | failed | limit | error | interrupted | cancelled (an attempt another beat)
    turns: int
    final: str = ""
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class AttemptsFinished(Event):
    """A run of several attempts ended: which one won (its change is in the workspace), and each one's
    check, lines changed and figures; a losing attempt that changed something is kept as a branch."""

    kind: ClassVar[str] = "attempts.finished"
    winner: int | None  # the attempt whose check passed first; None: none passed
    attempts: list[dict[str, Any]]
    changes: list[dict[str, Any]] = field(default_factory=list)  # what the winner's change applied
    seconds: float = 0.0  # from the first attempt's start to the last one's end
    output_tokens: int = 0  # summed over the attempts
    tokens_per_second: float | None = None  # the server's throughput summed across its slots
