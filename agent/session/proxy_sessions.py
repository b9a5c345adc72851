"""The conversations of other agents through `agent proxy`, recorded as this project's own sessions are.

A request is given to the conversation it continues: the one with the client's own id when it sends
one (Claude Code's `metadata.user_id`, an `x-session-id` header, OpenAI's `user`), else the one whose
last request its messages repeat (at least the system prompt and the first message, or all of the last
request). Anything else opens a new session. Each session has a transcript and telemetry under the
state folder like any other (`agent sessions`, `agent stats`, `agent watch`), marked `via: proxy`, and
each turn's cache reuse is explained against the same conversation's previous request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.prompt_cache import CacheWatch, ServerSide, serialize
from agent.events import (
    AssistantMessage,
    ErrorEvent,
    SessionFinished,
    SessionStarted,
    TurnCompleted,
    TurnStarted,
)
from agent.session.api_answer import Answer, Asked
from agent.store.recorder import SessionRecorder
from agent.store.telemetry import TurnStats, tokens_between
from agent.store.transcripts import new_session_id

VIA = "proxy"
# Fewer messages in common than this (the system prompt alone, say) is another conversation.
MIN_SHARED_MESSAGES = 2


@dataclass
class Conversation:
    session_id: str
    recorder: SessionRecorder
    client_id: str = ""
    cache: CacheWatch = field(default_factory=CacheWatch)
    sent: tuple[str, ...] = ()  # the last request's messages, serialized
    turns: int = 0
    errors: int = 0
    counters_after: dict[str, float] | None = None
    last_used: float = field(default_factory=time.monotonic)

    def shared(self, sent: tuple[str, ...]) -> int:
        """How many leading messages `sent` shares with this conversation's last request."""
        count = 0
        for old, new in zip(self.sent, sent, strict=False):
            if old != new:
                break
            count += 1
        return count


@dataclass
class Turn:
    """One request in flight: whose it is, and what the server's counters said before it."""

    conversation: Conversation
    number: int
    asked: Asked
    counters_before: dict[str, float] | None = None
    overlapped: bool = False  # another request ran at the same time: the counters' deltas are mixed
    sent: tuple[str, ...] = ()  # its messages, serialized once (prompt_cache.serialize)


TurnReport = Callable[[Conversation, int, "TurnStats | None", str], None]


class ProxySessions:
    """Every conversation the proxy has seen since it started, and the requests in flight."""

    def __init__(
        self,
        state_dir: Path,
        profile: str,
        spec_mode: str,
        on_turn: TurnReport | None = None,
        single: bool = False,
    ) -> None:
        """`single`: every request is one session's (`agent launch`: one agent run, whose side requests
        for titles, summaries and commit messages belong to it too)."""
        self.state_dir, self.profile, self.spec_mode = state_dir, profile, spec_mode
        self.on_turn, self.single = on_turn, single
        self.conversations: list[Conversation] = []
        self.in_flight: list[Turn] = []

    def begin(self, asked: Asked, client: str, counters: dict[str, float] | None) -> Turn:
        sent = serialize(asked.messages)
        conversation = self._match(asked, sent) or self._open(asked, client)
        conversation.sent, conversation.last_used = sent, time.monotonic()
        conversation.turns += 1
        turn = Turn(conversation, conversation.turns, asked, counters, bool(self.in_flight), sent)
        for other in self.in_flight:
            other.overlapped = True
        self.in_flight.append(turn)
        conversation.recorder(TurnStarted(turn.number))
        return turn

    def end(
        self,
        turn: Turn,
        answer: Answer,
        status: int,
        failure: str,
        counters: dict[str, float] | None,
        reprocessed: bool = False,
    ) -> TurnStats | None:
        """Record how the request ended: its figures when the server answered, else what went wrong
        (`failure`: the server's error, the server gone mid-answer, the client gone). `reprocessed`: the
        server's log said it re-processed a whole prompt meanwhile."""
        self.in_flight.remove(turn)
        conversation, recorder = turn.conversation, turn.conversation.recorder
        error = failure or answer.error or (f"HTTP {status}" if status >= 400 else "")
        text = "".join(answer.text)
        calls = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
            for i, name in enumerate(answer.tool_calls)
        ]
        if text or calls:
            recorder(AssistantMessage(turn.number, text, tool_calls=calls))
        if error:  # no whole answer, so no figures: what it sent before it broke is kept above
            conversation.errors += 1
            recorder(ErrorEvent("proxied_request", f"turn {turn.number}: {error}", fatal=False))
            self._report(conversation, turn.number, None, error)
            return None
        stats = self._stats(turn, answer, counters, reprocessed)
        recorder(TurnCompleted(turn.number, stats))
        self._report(conversation, turn.number, stats, error)
        return stats

    def close(self) -> None:
        for conversation in self.conversations:
            outcome = "completed" if conversation.turns > conversation.errors else "error"
            conversation.recorder(
                SessionFinished(outcome, conversation.turns, summary=conversation.recorder.summary())
            )
            conversation.recorder.close()
        self.conversations = []

    def _stats(
        self, turn: Turn, answer: Answer, counters: dict[str, float] | None, reprocessed: bool
    ) -> TurnStats:
        usage = answer.usage
        stats = TurnStats.from_timings(
            answer.timings,
            ttft_s=(answer.first - answer.started) if answer.first else None,
            wall_s=(answer.last or time.monotonic()) - answer.started,
            finish_reason=answer.finish,
            prompt_tokens=usage.get("prompt_tokens", usage.get("input_tokens")),
            completion_tokens=answer.output_tokens(),
        )
        if stats.cache_n is None:
            stats.cache_n, stats.prompt_n = answer.cache_and_prompt()
        stats.add_client_speed(answer.started, answer.first, answer.last)
        conversation = turn.conversation
        server = ServerSide(reason=str(stats.timings_extra.get("cache_reason") or ""))
        if not turn.overlapped:  # what the counters and the log say is this request's alone
            server.full_reprocess_logged = reprocessed
            stats.add_counter_deltas(turn.counters_before, counters)
            server.foreign_tokens = tokens_between(conversation.counters_after, turn.counters_before)
        conversation.counters_after = counters
        stats.cache_break = conversation.cache.explain(
            turn.asked.messages,
            turn.asked.tools,
            stats.cache_n,
            stats.prompt_n,
            server=server,
            serialized=turn.sent,
        )
        return stats

    def _match(self, asked: Asked, sent: tuple[str, ...]) -> Conversation | None:
        if self.single:
            return self.conversations[0] if self.conversations else None
        if asked.client_id:
            return next((c for c in self.conversations if c.client_id == asked.client_id), None)
        best, best_shared = None, 0
        for conversation in self.conversations:
            if conversation.client_id:
                continue
            shared = conversation.shared(sent)
            whole = shared == len(conversation.sent) and shared > 0
            if (shared >= MIN_SHARED_MESSAGES or whole) and shared > best_shared:
                best, best_shared = conversation, shared
        return best

    def _open(self, asked: Asked, client: str) -> Conversation:
        session_id = new_session_id()
        while any(c.session_id == session_id for c in self.conversations):
            session_id = new_session_id()
        recorder = SessionRecorder(self.state_dir, session_id, self.profile, asked.model, self.spec_mode)
        recorder.meta.update(via=VIA, client=client)
        recorder(
            SessionStarted(
                session_id,
                self.profile,
                asked.model,
                workspace="",
                task=asked.first_user_text()[:2000],
                options={"via": VIA, "client": client, "api": asked.api},
            )
        )
        conversation = Conversation(session_id, recorder, client_id=asked.client_id)
        self.conversations.append(conversation)
        return conversation

    def _report(self, conversation: Conversation, turn: int, stats: TurnStats | None, error: str) -> None:
        if self.on_turn is not None:
            self.on_turn(conversation, turn, stats, error)


def proxied_summary(conversations: list[Conversation]) -> list[dict[str, Any]]:
    """Per session, its figures (summarise_turns) and how many requests failed: what `agent launch`
    prints at exit."""
    return [
        {"session": c.session_id, "errors": c.errors, **c.recorder.summary()}
        for c in conversations
        if c.turns
    ]
