"""The agent loop: ask the model, run the tool calls it makes, append the results, repeat.

It stops when the model answers without a tool call, when a limit is hit, or when the task running it
is cancelled. Everything it does leaves as events through `emit`; approvals come back through the
`approve` awaitable. It knows nothing of terminals, Textual or argparse.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent.core.context import ContextWindow
from agent.core.guards import RepeatGuard, StopTask
from agent.core.llm import Completion, ModelClient, ToolCall
from agent.core.prompt_cache import COMPACTION, RESUMED
from agent.core.protocol import ActionProtocol, ReadAnswer
from agent.errors import ContextOverflow, LLMError
from agent.events import (
    ApprovalAnswer,
    ApprovalRequested,
    AssistantMessage,
    ErrorEvent,
    Event,
    Notice,
    PermissionDecided,
    ToolCallStarted,
    ToolFinished,
    TurnCompleted,
    TurnStarted,
    UserMessage,
)
from tools.base import ToolContext, ToolError, ToolRegistry, ToolResult
from tools.permissions import Permissions, Verdict

Approver = Callable[[ApprovalRequested], Awaitable[ApprovalAnswer]]
# Given a failed request, put things right (restart the server without its failing draft) and say
# whether the same request may be sent again (agent/session/connect.py:draft_recovery).
Recovery = Callable[[LLMError], Awaitable[bool]]


@dataclass
class Limits:
    max_turns: int = 40  # model requests per task
    max_seconds: float | None = None
    max_output_tokens: int | None = None


@dataclass
class Outcome:
    status: str  # completed | limit | error | repeated
    final: str
    turns: int
    error: str = ""


@dataclass
class Agent:
    client: ModelClient
    tools: ToolRegistry
    ctx: ToolContext
    permissions: Permissions
    system_prompt: str
    emit: Callable[[Event], None]
    actions: ActionProtocol  # how the model acts: built by the session layer, handed in ready
    approve: Approver | None = None  # None: nobody can answer (headless); what asks is refused
    limits: Limits = field(default_factory=Limits)
    context: ContextWindow | None = None
    checkpoint: Callable[[str], str | None] | None = None  # snapshot before the first change of a task
    tool_choice: str = "auto"
    request_overrides: dict[str, Any] = field(default_factory=dict)
    recover: Recovery | None = None  # one more try of a request that failed, once it is put right
    messages: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0  # model requests in this session
    changes: int = 0  # tool calls that may have changed the workspace (edits, commands) and succeeded

    def __post_init__(self) -> None:
        # Why the next request's prompt differs from the last one on purpose (agent/core/prompt_cache.py).
        self._cache_note = RESUMED if len(self.messages) > 1 else ""
        if not self.messages:
            self.messages.append({"role": "system", "content": self.system_prompt})

    async def run(
        self, task: str | None, typed: str = "", *, followup: bool = False, warmer: bool = False
    ) -> Outcome:
        """Work on `task` until done. With None, continue the history as it stands (a resumed session).
        `typed`: the person's own words, when `task` wraps them in context. `followup`: `task` is more
        of the same task (a failed check's output): the repeat guard carries on, so an answer repeated
        across check rounds is sampled warmer. `warmer`: sample the first request warmer anyway."""
        if task is not None:
            self._say(task, typed)
        if not followup:
            self.actions.new_task(typed or task or "")
            self._changed = False
            self._guard = RepeatGuard()
        if warmer:
            self._guard.warm()
        started, first_turn, produced = time.monotonic(), self.turn, 0
        final = ""
        try:
            while True:
                if self.turn - first_turn >= self.limits.max_turns:
                    raise StopTask("limit", f"reached the limit of {self.limits.max_turns} model requests")
                if self.limits.max_seconds and time.monotonic() - started > self.limits.max_seconds:
                    raise StopTask("limit", f"reached the time limit of {self.limits.max_seconds:.0f} s")
                completion = await self._ask()
                produced += completion.stats.output_tokens or 0
                final = completion.content or final
                answer = await self._record(completion)
                tools_started = time.monotonic()
                try:
                    # (inside: a stopped turn still reports its figures) An answer with problems and
                    # nothing to run was refused whole; a plan or a "done" neither acts nor is refused.
                    neither = answer.followup or not (answer.calls or answer.problems)
                    self._guard.answer(answer.content, None if neither else not answer.calls)
                    await self._execute(answer)
                finally:  # the turn's figures are reported even when a tool stops the task
                    self._turn_done(completion, time.monotonic() - tools_started if answer.calls else 0.0)
                if not answer.calls and not answer.problems and not answer.followup:
                    return Outcome("completed", completion.content, self.turn - first_turn)
                if self.limits.max_output_tokens and produced >= self.limits.max_output_tokens:
                    raise StopTask(
                        "limit", f"reached the limit of {self.limits.max_output_tokens} output tokens"
                    )
        except StopTask as stop:
            self.emit(ErrorEvent(stop.status, str(stop)))
            return Outcome(stop.status, final, self.turn - first_turn, str(stop))
        except LLMError as exc:
            kind = type(exc).__name__
            self.emit(ErrorEvent(_snake(kind), str(exc)))
            return Outcome("error", final, self.turn - first_turn, f"{kind}: {exc}")

    def _append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def _say(self, text: str, typed: str = "") -> None:
        """A user message: the task, or feedback on the model's last answer."""
        self._append({"role": "user", "content": text})
        self.emit(UserMessage(text, typed))

    async def _ask(self) -> Completion:
        self.turn += 1
        self.emit(TurnStarted(self.turn))
        # Up to two compactions on overflow: the first summarises older turns, the second the newest
        # one too; each shrinks the history or raises ContextTooSmall, so this cannot loop.
        for attempt in range(3):
            if self.context:
                compactions = self.context.compactions
                await self.context.fit(self.messages)
                if self.context.compactions != compactions:
                    self._cache_note = COMPACTION
            try:
                completion = await self._stream()
                self._cache_note = ""
                return completion
            except ContextOverflow as overflow:
                if attempt == 2 or not self.context:
                    raise
                await self.context.compact(
                    self.messages, reason=f"the server said: {overflow}", overflow=overflow
                )
                self._cache_note = COMPACTION
            except LLMError as failure:
                if attempt or self.recover is None or not await self.recover(failure):
                    raise
        raise AssertionError("unreachable")

    async def _stream(self) -> Completion:
        completion = None
        async for item in self.client.stream(
            self.messages,
            self.actions.request_tools(self.tools),
            self.tool_choice,
            stop=lambda text: self.actions.stream_stop(text, self.ctx),
            cache_note=self._cache_note,
            prefix=self.actions.answer_prefix(),
            **{**self.request_overrides, **self.actions.request_overrides(), **self._guard.nudge},
        ):
            if isinstance(item, Completion):
                completion = item
            else:
                self.emit(item)
        assert completion is not None
        if completion.stopped:
            self.emit(Notice(completion.stopped))
        elif completion.repetition:
            self.emit(Notice("the model's answer kept repeating itself; it was cut, and the loop kept once"))
        elif not completion.complete:
            self.emit(
                Notice("the model's answer ended without a finish reason (cut off); using what arrived")
            )
        return completion

    async def _record(self, completion: Completion) -> ReadAnswer:
        """Append the assistant's message as the protocol keeps it; return the answer, read."""
        answer = self.actions.read(completion, self.tools)
        if answer.notice:
            self.emit(Notice(answer.notice))
        # A loop with nothing in it to act on is not an answer: say so, rather than end the task on it.
        # One whose kept copy holds actions is not a failure: the model's next message is their results
        # (told "fix what failed" instead, the 1.5B wrote the same files again until the turn limit).
        if completion.repetition and not answer.calls:
            answer.problems.append(
                "Your answer kept repeating the same text, so it was cut. Write each thing once, then go on."
            )
        message = self.actions.history_message(answer)
        self._append(message)
        if self.context:
            self.context.observe(
                self.messages, completion.stats.prompt_tokens, completion.stats.completion_tokens
            )
        self.emit(
            AssistantMessage(self.turn, answer.content, completion.reasoning, message.get("tool_calls", []))
        )
        return answer

    def _turn_done(self, completion: Completion, tool_seconds: float) -> None:
        completion.stats.tool_s = tool_seconds
        self.emit(TurnCompleted(self.turn, completion.stats))

    async def _execute(self, answer: ReadAnswer) -> None:
        results: list[tuple[ToolCall, ToolResult]] = []
        try:
            for call in answer.calls:
                result = await self._run_one(call)
                results.append((call, result))
                self._guard.result(call, result)
                # What the result proposes (the rest of a rename) runs next, as the model's calls run:
                # asked for, shown and recorded.
                for followup in _proposed(call, result):
                    results.append((followup, await self._run_one(followup)))
        finally:
            # Interrupted or stopped mid-way: every call still gets a result, so the history stays whole.
            done = {call.id for call, _ in results}
            results += [
                (c, ToolResult(False, "(not run: interrupted)")) for c in answer.calls if c.id not in done
            ]
            if answer.calls or answer.problems or answer.followup:
                for message in self.actions.results(answer, results):
                    if message["role"] == "user":
                        self._say(message["content"])
                    else:
                        self._append(message)

    async def _run_one(self, call: ToolCall) -> ToolResult:
        parsed = self.tools.parse(call.name, call.arguments)
        tool = parsed.tool
        summary = tool.summary(parsed.args) if tool and parsed.args else ""
        self.emit(
            ToolCallStarted(self.turn, call.id, call.name, parsed.raw_arguments, summary, call.proposed_by)
        )
        began = time.monotonic()
        if parsed.error or tool is None or parsed.args is None:
            result = ToolResult(False, f"Error: {parsed.error}")
        elif not (
            reason := await self._permitted(
                call,
                tool.effect,
                summary,
                _risk(tool, parsed.args, self.ctx),
                await _files(tool, parsed.args, self.ctx),
            )
        ):
            result = await self._invoke(tool, parsed.args, call)
            if result.ok and tool.effect != "read":
                self.changes += 1
        else:
            result = ToolResult(False, f"Not run: {reason}")
        if self.context:  # what the model reads and what the transcript keeps are the same text
            result.output = self.context.cap(result.output)
        self.emit(
            ToolFinished(
                self.turn,
                call.id,
                call.name,
                result.ok,
                result.output,
                time.monotonic() - began,
                result.display,
            )
        )
        return result

    async def _permitted(
        self,
        call: ToolCall,
        effect: str,
        subject: str,
        risk: str | None = None,
        files: list[str] | None = None,
    ) -> str:
        """'' when the call may run, else why not (written for the model). A call with a `risk` (a
        rewrite deleting most of a file) asks in every mode, full-auto included. A call changing several
        `files` (a rename) is judged file by file too."""
        verdict = (
            self.permissions.check_files(call.name, effect, subject, files)
            if files
            else self.permissions.check(call.name, effect, subject)
        )
        if risk and verdict.decision == "allow":
            verdict = Verdict("ask", f"dangerous: {risk}")
        decision, reason = verdict.decision, verdict.reason
        if decision == "ask":
            if self.approve is None:
                decision, reason = "deny", f"it needs approval ({reason}) and nobody can approve in this run"
            else:
                request = ApprovalRequested(call.id, call.name, subject, reason, verdict.rule)
                self.emit(request)
                answer = await self.approve(request)
                if answer.decision == "always":
                    self.permissions.allow_always(call.name, verdict.rule)
                decision = "allow" if answer.decision in ("yes", "always") else "deny"
                reason = (
                    "approved by the user"
                    if decision == "allow"
                    else (f"the user declined: {answer.message}" if answer.message else "the user declined")
                )
        self.emit(PermissionDecided(call.id, call.name, decision, reason))
        return "" if decision == "allow" else reason

    async def _invoke(self, tool: Any, args: Any, call: ToolCall) -> ToolResult:
        if tool.effect != "read" and not self._changed:
            self._changed = True
            if self.checkpoint:
                note = self.checkpoint(f"before {call.name}: {tool.summary(args)[:80]}")
                if note:
                    self.emit(Notice(note))
        try:
            return await tool.run(args, self.ctx)
        except ToolError as exc:
            return ToolResult(False, f"Error: {exc}")
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug in a tool must not end the session; the model hears of it
            return ToolResult(False, f"Error: the tool failed unexpectedly: {type(exc).__name__}: {exc}")


async def _files(tool: Any, args: Any, ctx: ToolContext) -> list[str] | None:
    """The files a tool that changes several says it would change (`changes`), else None."""
    changes = getattr(tool, "changes", None)
    return await changes(args, ctx) if changes is not None else None


def _proposed(call: ToolCall, result: ToolResult) -> list[ToolCall]:
    """The calls `result` proposes, each with an id of its own that names the call it follows."""
    return [
        ToolCall(f"{call.id}-{n}", proposed.name, json.dumps(proposed.arguments), proposed_by=call.id)
        for n, proposed in enumerate(result.followups, 1)
    ]


def _risk(tool: Any, args: Any, ctx: ToolContext) -> str | None:
    """What makes this call dangerous whatever the approval mode (tools that can tell: write_file)."""
    judge = getattr(tool, "risk", None)
    return judge(args, ctx) if judge is not None else None


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
