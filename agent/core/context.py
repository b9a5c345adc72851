"""The context window: the token budget, compaction, and repair of the history before it is resent.

The budget is the server's real context size (/props). Before each request the history is repaired
(agent.core.history.repair_history) and, when the next request would come near the limit, compacted: old tool
outputs are pruned first; if that is not enough, the older turns are summarised by the model itself.
The system prompt (the cached prefix) is never touched, and the summary request reuses the same
prefix and history, so the server only processes the new instruction.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from agent.core.history import repair_history
from agent.core.llm import Completion, ModelClient
from agent.errors import ContextOverflow, LLMError
from agent.events import Compacted, Event

# Messages and a token limit in, the model's text out; raises ContextOverflow when they do not fit.
Summarise = Callable[[list[dict[str, Any]], int], Awaitable[str]]

CHARS_PER_TOKEN = 3.0  # deliberately pessimistic for code; the server's own count replaces it when known
SUMMARY_INSTRUCTION = (
    "The conversation is about to be shortened. Write a summary of it for yourself to continue from: the "
    "task, what you found, every file you changed and how, commands that worked or failed, and what is "
    "left to do. Be concise and concrete. Do not call tools."
)


class ContextTooSmall(LLMError):
    """Even the prompt prefix and the newest message do not fit: no compaction can help."""


def _chars(message: dict[str, Any]) -> int:
    size = len(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        size += len(json.dumps(call))
    return size + 16  # role and template markup


def summariser(client: ModelClient, tool_schemas: Callable[[], list[dict]]) -> Summarise:
    """The model asked for text alone, with the session's own tools listed (so the cached prefix holds)."""

    async def summarise(messages: list[dict[str, Any]], max_tokens: int) -> str:
        completion: Completion | None = None
        async for item in client.stream(messages, tool_schemas(), "none", max_tokens=max_tokens):
            if isinstance(item, Completion):
                completion = item
        return completion.content.strip() if completion else ""

    return summarise


class ContextWindow:
    """The budget of one session's history. It is given what compaction needs (a way to ask the model
    for a summary, and where its `Compacted` event goes), not the agent whose history it holds."""

    def __init__(
        self,
        n_ctx: int,
        reserve: int,
        tools_chars: int = 0,
        threshold: float = 0.85,
        keep_turns: int = 2,
        prune_after: int = 2,
        summarise: Summarise | None = None,
        emit: Callable[[Event], None] | None = None,
    ) -> None:
        self.summarise = summarise
        self.emit = emit or (lambda _event: None)
        self.n_ctx = n_ctx
        self.reserve = min(reserve, n_ctx // 3)  # tokens kept free for the answer (max_tokens)
        self.tools_chars = tools_chars
        self.threshold = threshold
        self.keep_turns = keep_turns  # assistant turns kept verbatim by a summary
        self.prune_after = prune_after  # tool outputs older than this many assistant turns may be pruned
        self.known: tuple[int, int] | None = None  # (messages counted, prompt tokens the server reported)
        self.prefix_tokens: int | None = None  # system prompt + tools, as the server counted them
        self.compactions = 0  # how many times the history was compacted (each one breaks the cache)

    @property
    def budget(self) -> int:
        return int(self.n_ctx * self.threshold) - self.reserve

    @property
    def target(self) -> int:
        """Where compaction aims: well under the budget, so that it is not needed again next turn
        (each compaction costs one cache miss after the prefix)."""
        return int(self.budget * 0.6)

    def cap_limit(self, share: float = 0.3) -> int:
        """The characters of one tool output that `cap` keeps."""
        return int(max(self.budget, 256) * share * CHARS_PER_TOKEN)

    def cap(self, output: str, share: float = 0.3) -> str:
        """A tool output cut to a share of the budget (head and tail kept): one huge file or log must
        not crowd out the conversation."""
        limit = self.cap_limit(share)
        if len(output) <= limit:
            return output
        half = limit // 2
        dropped = len(output) - 2 * half
        return f"{output[:half]}\n[... {dropped} characters left out to fit the context; read less at a time ...]\n{output[-half:]}"

    def observe(
        self, messages: list[dict[str, Any]], prompt_tokens: int | None, completion_tokens: int | None
    ) -> None:
        """After a request: the server's exact count for the prompt it just processed."""
        if not prompt_tokens:
            return
        # The prompt was every message but the assistant answer just appended; the answer is exact too.
        self.known = (len(messages), prompt_tokens + (completion_tokens or 0))
        if self.prefix_tokens is None:
            rest = sum(_chars(m) for m in messages[1:-1]) / CHARS_PER_TOKEN
            self.prefix_tokens = max(1, int(prompt_tokens - rest))

    def estimate(self, messages: list[dict[str, Any]]) -> int:
        if self.known and self.known[0] <= len(messages):
            counted, tokens = self.known
            return tokens + int(sum(_chars(m) for m in messages[counted:]) / CHARS_PER_TOKEN)
        body = sum(_chars(m) for m in messages[1:]) / CHARS_PER_TOKEN
        if self.prefix_tokens is not None:
            return int(self.prefix_tokens + body)
        return int((self.tools_chars + _chars(messages[0])) / CHARS_PER_TOKEN + body)

    async def fit(self, messages: list[dict[str, Any]]) -> None:
        repair_history(messages)
        if self.estimate(messages) > self.budget:
            await self.compact(messages, reason="the next request would not fit the context")

    async def compact(
        self,
        messages: list[dict[str, Any]],
        reason: str,
        overflow: ContextOverflow | None = None,
        force: bool = False,
    ) -> bool:
        """Shrink the history after the system prompt, in place: prune old tool outputs, then summarise
        older turns (keeping fewer verbatim if needed), then cut what is left of big outputs. `force`
        (the user's /compact): summarise the older turns even when they fit, keeping at least the newest
        turn verbatim. Returns whether anything changed."""
        before = (
            overflow.n_prompt_tokens if overflow and overflow.n_prompt_tokens else self.estimate(messages)
        )
        if overflow and overflow.n_prompt_tokens:
            # The server's count is exact: scale our estimate of the body to it.
            self.prefix_tokens = max(
                1, int(overflow.n_prompt_tokens - sum(_chars(m) for m in messages[1:]) / CHARS_PER_TOKEN)
            )
        self.known = None  # counts are stale once the history changes
        body_before = sum(_chars(m) for m in messages[1:])
        summarised = self._prune(messages)
        steps = ["old tool outputs pruned"] if summarised else []
        must_shrink = overflow is not None or force  # the server's word (or the user's) beats our estimate
        # Only when the server says so is the newest turn summarised too (keep 0): the model then goes on
        # from the summary and the task alone, which beats stopping with the context full.
        for keep in (self.keep_turns, 1) if force and overflow is None else (self.keep_turns, 1, 0):
            if not must_shrink and (keep == 0 or self.estimate(messages) <= self.target):
                break
            cut = self._tail_start(messages, keep)
            if cut <= 2:
                continue  # at most one message before the tail: a summary of it would save nothing
            replaced = int(sum(_chars(m) for m in messages[1:cut]) / CHARS_PER_TOKEN)
            summary = await self._summarise(messages[:cut], max_tokens=max(32, replaced // 2))
            latest_user = next((m for m in reversed(messages[1:cut]) if m.get("role") == "user"), None)
            content = (
                f"<summary of the earlier conversation>\n{summary}\n</summary of the earlier conversation>"
            )
            if latest_user is not None and not any(m.get("role") == "user" for m in messages[cut:]):
                task = latest_user["content"]
                task = task.split("</summary of the earlier conversation>")[-1].strip()
                content += f"\n\nThe current task, as the user gave it:\n{task}"
            summarised += cut - 1
            messages[1:cut] = [{"role": "user", "content": content}]
            steps.append(f"{cut - 1} messages summarised")
            must_shrink = False
        if self.estimate(messages) > self.budget:
            shortened = 0
            for message in messages[1:]:
                if message.get("role") == "tool":
                    content = message.get("content") or ""
                    message["content"] = self.cap(content, share=0.1)
                    shortened += message["content"] != content
            if shortened:
                steps.append(f"{shortened} tool outputs shortened")
        if overflow is not None and not steps:
            raise ContextTooSmall(self._too_small(messages, overflow))
        if steps:
            self.compactions += 1
            # After = before less what was taken out: one basis for both numbers (a fresh estimate of
            # the whole, more pessimistic than the server's count, could show a shrink as a growth).
            body_after = sum(_chars(m) for m in messages[1:])
            after = max(0, before - int((body_before - body_after) / CHARS_PER_TOKEN))
            history = [dict(m) for m in messages[1:]]
            self.emit(Compacted(before, after, summarised, f"{reason} ({', '.join(steps)})", history))
        return bool(steps)

    def _prune(self, messages: list[dict[str, Any]]) -> int:
        assistant_indices = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if len(assistant_indices) <= self.prune_after:
            return 0
        limit = assistant_indices[-self.prune_after]
        count = 0
        for message in messages[:limit]:
            content = message.get("content") or ""
            if message.get("role") == "tool" and len(content) > 300 and not content.startswith("[pruned"):
                message["content"] = (
                    f"[pruned: {len(content)} characters of old tool output]\n{content[:120]}"
                )
                count += 1
        return count

    def _tail_start(self, messages: list[dict[str, Any]], keep: int) -> int:
        """Where the verbatim tail begins: the keep-th last assistant message (0 when there is none
        after the first message; the end when none is kept)."""
        if keep == 0:
            return len(messages)
        assistant_indices = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 1]
        return assistant_indices[-keep] if len(assistant_indices) >= keep else 0

    def _too_small(self, messages: list[dict[str, Any]], overflow: ContextOverflow) -> str:
        needed = overflow.n_prompt_tokens or self.estimate(messages)
        n_ctx = overflow.n_ctx or self.n_ctx
        return (
            f"the server's context ({n_ctx} tokens) is too small: the prompt prefix, the tools and the "
            f"newest messages alone take {needed} tokens and nothing older is left to summarise. Start "
            "the server with a larger context (--ctx-size, or ctx_size in the profile)."
        )

    async def _summarise(self, head: list[dict[str, Any]], max_tokens: int) -> str:
        """Ask the model, with the same prefix and history (so the cache holds), for a summary no
        longer than half of what it replaces."""
        request = [*head, {"role": "user", "content": SUMMARY_INSTRUCTION}]
        limit = max(32, min(600, self.target // 4, max_tokens))
        if self.summarise is None:
            raise AssertionError("a context window that compacts needs a way to summarise")
        try:
            text = await self.summarise(request, limit)
        except ContextOverflow:
            # The older part alone is too big to summarise: keep what the user asked and say the rest went.
            asks = [m["content"] for m in head if m.get("role") == "user"]
            return (
                "The earlier conversation was too long to summarise and was dropped. The user had asked:\n"
                + "\n---\n".join(a[:1000] for a in asks[-2:])
            )
        return text[: int(limit * CHARS_PER_TOKEN)] or "(the model gave no summary)"
