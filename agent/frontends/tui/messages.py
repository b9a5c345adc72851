"""What reaches the app from outside its widgets: the agent's events, the server's start, approvals.

The session posts these; the app routes them to widgets. Nothing here touches a widget.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from textual.message import Message

from agent.errors import AgentError
from agent.events import ApprovalRequested, Event


@dataclass
class AgentEvent(Message):
    event: Event


@dataclass
class Deltas(Message):
    """Text and reasoning deltas that arrived since the last message was handled, in order. One
    message per batch, not per token: the screen keeps up however fast the model streams."""

    events: list[Event]


@dataclass
class ServerProgress(Message):
    elapsed: float
    phase: str
    log_line: str


@dataclass
class ServerReady(Message):
    pass


@dataclass
class ServerFailed(Message):
    error: AgentError


@dataclass
class ApprovalNeeded(Message):
    request: ApprovalRequested
    answer: asyncio.Future


@dataclass
class ApprovalWithdrawn(Message):
    """The work that asked was interrupted before anyone answered."""

    call_id: str
