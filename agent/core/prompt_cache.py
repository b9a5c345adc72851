"""Why the server's prompt cache served less than it could, named per request.

llama-server reuses the longest prefix that a new prompt shares with what its slot holds (FACTS.md).
While the agent only appends to the conversation, the previous prompt is that prefix, and the server
should process only the new messages. When it processes more, users see their speed drop and nobody
says why. So each request is set against the one before it: where the agent's own prompt changed
(which message, which part), a compaction or a resumed session (the agent says so), another client
using the server between turns (its /metrics counters moved), the model's sliding-window layers (the
server's log says it re-processed everything), or the server's own reason (BeeLlama's `cache_reason`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# A full-reuse turn still re-processes a few tokens (the last one always; a template may render the
# previous answer's end differently from how it was generated). Losses up to this are not a break.
SLACK_TOKENS = 64
SLACK_SHARE = 0.03
# Notes the agent gives for a request whose prompt it changed on purpose.
COMPACTION = "compaction"
RESUMED = "resumed"


@dataclass(frozen=True)
class SentPrompt:
    """One request's prompt as sent, in a form that is cheap to keep and compare."""

    messages: tuple[str, ...]  # each message serialized as it went out
    roles: tuple[str, ...]
    tools: str
    tokens: int  # the prompt's length as the server counted it (cache_n + prompt_n)

    @classmethod
    def of(
        cls,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tokens: int,
        serialized: tuple[str, ...] | None = None,
    ) -> SentPrompt:
        """`serialized`: the messages as `serialize` gives them, where the caller has them already."""
        return cls(
            serialized if serialized is not None else serialize(messages),
            tuple(str(m.get("role", "?")) for m in messages),
            json.dumps(tools, sort_keys=True, ensure_ascii=False),
            tokens,
        )

    def tokens_before(self, index: int) -> int:
        """About how many of the prompt's tokens come before message `index` (by its characters)."""
        sizes = [len(self.tools)] + [len(m) for m in self.messages]
        return int(self.tokens * sum(sizes[: index + 1]) / max(1, sum(sizes)))


def serialize(messages: list[dict[str, Any]]) -> tuple[str, ...]:
    """Each message as one string, equal exactly when the messages are."""
    return tuple(json.dumps(m, sort_keys=True, ensure_ascii=False) for m in messages)


def first_change(before: SentPrompt, now: SentPrompt) -> int | None:
    """The first message of `before` that `now` does not repeat (-1: the tool list); None when `now`
    only appends to it."""
    if before.tools != now.tools:
        return -1
    for index, (old, new) in enumerate(zip(before.messages, now.messages, strict=False)):
        if old != new:
            return index
    return len(now.messages) if len(now.messages) < len(before.messages) else None


def _changed(index: int, before: SentPrompt, now: SentPrompt) -> str:
    if index == -1:
        return "the agent changed the tool list"
    if index >= len(now.messages):
        return f"the agent removed messages {index + 1}-{len(before.messages)}"
    part = "the system prompt" if index == 0 else f"message {index + 1} ({now.roles[index]})"
    return f"the agent changed {part}"


@dataclass
class ServerSide:
    """What the server showed about the time since the previous request."""

    foreign_tokens: int = 0  # tokens it processed for other requests between ours (/metrics)
    full_reprocess_logged: bool = False  # its log says it re-processed a whole prompt
    reason: str = ""  # its own account (BeeLlama's `cache_reason`), when it gives one


class CacheWatch:
    """Remembers the previous request of one client and explains the next one's cache reuse."""

    def __init__(self) -> None:
        self.previous: SentPrompt | None = None

    def explain(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        cache_n: int | None,
        prompt_n: int | None,
        note: str = "",
        server: ServerSide | None = None,
        serialized: tuple[str, ...] | None = None,
    ) -> str | None:
        """The cause of this request's lost reuse, or None when the cache held (or there is nothing to
        compare: no timings, the first request of a fresh session). `serialized`: the messages as
        `serialize` gives them, where the caller has them already."""
        if cache_n is None or prompt_n is None:
            self.previous = None
            return None
        now = SentPrompt.of(messages, tools, cache_n + prompt_n, serialized)
        before, self.previous = self.previous, now
        server = server or ServerSide()
        if before is None:
            if note == RESUMED and cache_n < now.tokens // 2:
                return f"{now.tokens - cache_n:,} tokens lost: a resumed session, not cached on this server"
            return None
        expected = min(before.tokens, now.tokens)
        lost = expected - cache_n
        if lost <= max(SLACK_TOKENS, SLACK_SHARE * expected):
            return None
        causes = []
        change = first_change(before, now)
        if note == COMPACTION:
            causes.append("a compaction summarised the history")
        elif change is not None:
            causes.append(_changed(change, before, now))
        if server.reason:
            causes.append(f"the server: {server.reason}")
        if server.foreign_tokens > 0:
            causes.append(f"another client used the server ({server.foreign_tokens:,} tokens)")
        if server.full_reprocess_logged:
            causes.append("the model's sliding-window or hybrid layers forced a full re-process (server log)")
        elif change is None and len(causes) == 0:
            causes.append("the server's slot no longer held the prompt (reused or evicted)")
        elif change is not None and change > 0 and len(causes) == 1:
            # The server could have kept everything before the change; keeping far less is its own
            # doing. (Far: what came before is estimated from its characters.)
            unchanged = before.tokens_before(change)
            if cache_n < unchanged / 2 and unchanged - cache_n > SLACK_TOKENS:
                causes.append(
                    f"the server kept only {cache_n:,} of the ~{unchanged:,} tokens before that change "
                    "(a sliding-window or hybrid model rolls back only to a checkpoint; or the slot was evicted)"
                )
        return f"{lost:,} tokens lost: " + "; ".join(causes)
