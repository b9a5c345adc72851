"""The model client: OpenAI-client streaming, tool-call assembly, timings, typed errors and retries.

`ModelClient.stream()` yields `TextDelta` and `ReasoningDelta` as they arrive and ends with one
`Completion`: the text, the assembled tool calls and the turn's `TurnStats`. Failures become a few
error types the loop can act on. Retries (tenacity) cover only a request that has streamed nothing
yet; once text has reached the user, a broken stream is reported, never silently re-sent.
What the client asks of the server beside the chat itself (the model's name, /metrics counters, the
server's log) is its `server`'s, an agent/server/admin.py `ServerAdmin`.

A server that stops answering (hung, SIGSTOPped, swapping) is a `ServerStalled` error, never a hang:
once an answer has begun, `stall_timeout` seconds without a byte end it (AGENT_STALL_TIMEOUT, default
120 s); before the first token, prefill can legitimately take minutes on a CPU, so the read timeout
(600 s) applies there. A timed-out request is not sent again: the server would only be asked to do
the same work twice.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from agent.core.prompt_cache import CacheWatch, ServerSide
from agent.errors import (
    BadRequest,
    ContextOverflow,
    LLMError,
    ServerFailure,
    ServerGone,
    ServerLoading,
    ServerStalled,
)
from agent.events import ReasoningDelta, TextDelta
from agent.server.admin import ServerAdmin
from agent.server.endpoint import Endpoint
from agent.store.telemetry import TurnStats, tokens_between

# ---------------------------------------------------------------------------------------------- errors


def _error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    try:
        data = exc.response.json()
    except ValueError:
        return {"message": exc.response.text[:500] or exc.message}
    error = data.get("error", data) if isinstance(data, dict) else {"message": str(data)}
    return error if isinstance(error, dict) else {"message": str(error)}


def map_error(exc: Exception, partial: bool = False, opened: bool = False) -> LLMError:
    """One of our types for an openai/httpx2 exception. `opened`: the stream had begun (the server took
    the request), `partial`: text had arrived too."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        body = _error_body(exc)
        message = str(body.get("message") or exc.message)
        status = exc.status_code
        if body.get("type") == "exceed_context_size_error" or "exceeds the available context size" in message:
            return ContextOverflow(
                message, body.get("n_prompt_tokens"), body.get("n_ctx"), status=status, body=body
            )
        if status == 503:
            return ServerLoading(message, status=status, body=body)
        if 400 <= status < 500:
            return BadRequest(f"HTTP {status}: {message}", status=status, body=body)
        if "Invalid input batch" in message:  # BeeLlama 0.1 with a draft that is not a DFlash model
            message += " (the server's draft is not a DFlash model it can use: `agent server check PROFILE`)"
        return ServerFailure(f"HTTP {status}: {message}", status=status, body=body)
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError | ConnectionError):
        cause = exc.__cause__ or exc
        if isinstance(cause, httpx2.TimeoutException) and not isinstance(cause, httpx2.ConnectTimeout):
            return ServerStalled(
                f"the model server stopped answering: nothing arrived for {_timeout_of(cause)} "
                f"{'in the middle of its answer' if partial else 'after the request was sent'} "
                "(it is hung, stopped or overloaded)",
                partial=partial,
            )
        if partial or opened:
            where = "in the middle of its answer" if partial else "before its answer began"
            return ServerGone(
                f"the connection to the model server broke {where} ({type(cause).__name__}: {cause})",
                partial=partial,
            )
        return ServerGone(f"the model server is unreachable ({type(cause).__name__}: {cause})")
    if isinstance(exc, openai.APIError):
        return ServerFailure(str(exc))
    return ServerFailure(f"{type(exc).__name__}: {exc}")


def _timeout_of(exc: BaseException) -> str:
    """The read timeout that ran out, from the request httpx was making ("600 s"), when it says."""
    try:
        seconds = exc.request.extensions["timeout"]["read"]  # type: ignore[attr-defined]
    except (AttributeError, KeyError, RuntimeError, TypeError):
        return "the read timeout"
    return f"{seconds:.0f} s" if seconds else "the read timeout"


# ---------------------------------------------------------------------------------------------- client

STALL_TIMEOUT = 120.0  # seconds without a byte once an answer has begun: the server stopped answering


def stall_timeout_from_env() -> float:
    """AGENT_STALL_TIMEOUT, in seconds, else STALL_TIMEOUT; a value that is not a positive number is ignored."""
    try:
        value = float(os.environ.get("AGENT_STALL_TIMEOUT", ""))
    except ValueError:
        return STALL_TIMEOUT
    return value if value > 0 else STALL_TIMEOUT


DEFAULT_MAX_TOKENS = 4096  # when neither the profile nor the request says: no answer runs forever
REPEAT_SPAN = 800  # characters that must repeat one unit, at the end of a stream, to cut it
REPEAT_CHECK_EVERY = 200


def repeating_tail(
    text: str, span: int = REPEAT_SPAN, max_unit: int = 200, max_block: int = 12_000, probe: int = 200
) -> int | None:
    """The length of the unit that the end of `text` repeats, if it is in a loop.

    Small models fall into loops (FACTS.md): one assert written until the time limit, or whole files
    written again and again in one answer (the 1.5B in `agent new`, 2048 tokens a turn). A loop is
    - a unit of at most `max_unit` characters repeated over the last `span` characters (4+ times), or
    - a longer unit, up to `max_block`, written twice in a row: the last 2 x unit characters are one
      text twice. Code that repeats a long passage does so elsewhere (a moved function: once in the
      SEARCH, once in the new file, with other text between), not back to back.
    """
    if len(text) > span:
        tail = text[-(span + max_unit) :]
        for unit in range(1, min(max_unit, span // 4) + 1):
            if tail[-span:] == tail[-span - unit : -unit]:
                return unit
    if len(text) < 2 * (max_unit + 1):
        return None
    # Candidate units are the distances back to earlier copies of the last `probe` characters.
    key, end = text[-probe:], len(text)
    at = text.rfind(key, 0, end - 1)
    while at != -1:
        unit = end - probe - at
        if unit > max_block or 2 * unit > end:
            break
        if text[-unit:] == text[-2 * unit : -unit]:
            # A short unit twice is no loop yet: the rule above waits for 4 copies of it.
            return unit if unit > max_unit else None
        at = text.rfind(key, 0, at + probe - 1)
    return None


# A count that runs on: one unit repeated with its numbers changed (`store.set("user:139", ...)`, or
# `another_file70.py` written 70 times: the 1.5B until its tokens ran out, kv-report).
# Read with each number as 0, over a longer span than a plain loop: a table of numbers is real work more
# often than a repeated line is. Only short units: two long functions that differ in a number are code.
COUNT_SPAN = 1600
_NUMBER = re.compile(r"\d+")


def counting_tail(text: str) -> int | None:
    """The length of the unit that the end of `text` repeats with only its numbers changed (in `text`
    with each number written 0)."""
    tail = text[-2 * (COUNT_SPAN + 200) :]  # enough for a short unit's loop, numbers and all
    return repeating_tail(_NUMBER.sub("0", tail), span=COUNT_SPAN, max_block=0)


def one_count(text: str, unit: int) -> str:
    """`text` cut after the first unit of the count it ends in (`one_copy`, numbers aside)."""
    cut, shift = len(one_copy(_NUMBER.sub("0", text), unit)), 0
    for number in _NUMBER.finditer(text):  # from the cut in the text with each number as 0 to the text
        if number.start() - shift >= cut:
            break
        shift += len(number.group()) - 1
    return text[: cut + shift]


def one_copy(text: str, unit: int) -> str:
    """`text` cut after the first copy of the loop it ends in: where the repetition begins, plus one
    unit (no half-written copy is kept, so an edit block the loop repeats stays whole; the copy may
    lose trailing characters, such as a blank line, that it shares with the text before it)."""
    start = len(text) - unit
    while start > 0 and text[start - 1] == text[start - 1 + unit]:
        start -= 1
    return text[: start + unit]


def continued(prefix: str, text: str) -> str:
    """The answer so far, `text` being what the server wrote after `prefix`, the beginning it was
    given. The 1.5B, given a path line, a fence and a signature, wrote all three once more before the
    body: that copy is not kept twice. Text that may still be such a copy reads as the prefix alone, so
    that the answer only grows as it streams (the stream stop follows it by position). An answer begun
    anew from the prefix's path line (or by a server that started a new answer) is the text alone."""
    if not prefix:
        return text
    written = text.lstrip()
    if prefix.startswith(written):
        return prefix
    if written.startswith(prefix):
        return prefix + written[len(prefix) :]
    head = prefix.split("\n", 1)[0].strip()
    return text if head and written.startswith(head + "\n") else prefix + text


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it; parsing (and its errors) is the caller's
    proposed_by: str = ""  # the id of the call whose result proposed this one; "" for the model's own


@dataclass
class Completion:
    content: str
    reasoning: str
    tool_calls: list[ToolCall]
    stats: TurnStats
    complete: bool = True  # False: the stream ended without a finish reason (cut off)
    repetition: int | None = None  # the stream was cut because it repeated a unit of this many chars
    stopped: str = ""  # why `stop` ended the stream early (its content is what `stop` kept)


# Given the answer so far, (the text to keep, why) when the rest is not worth generating: the action
# protocol's `stream_stop` (a whole-file block for a file whose write would be refused).
StreamStop = Callable[[str], "tuple[str, str] | None"]
# Awaited with each request's body before it is sent: the attempts' shared prefill holds their first
# requests there until one prefill is copied to every slot (agent/session/shared_prefill.py).
RequestGate = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class _Assembling:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ModelClient:
    def __init__(
        self,
        endpoint: Endpoint,
        connect_timeout: float = 10.0,
        read_timeout: float = 600.0,
        loading_wait: float = 120.0,
        stall_timeout: float | None = None,
        cut_repeats: bool = True,
        request_gate: RequestGate | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.server = ServerAdmin(endpoint, connect_timeout=connect_timeout, read_timeout=read_timeout)
        # False: an answer that keeps repeating itself is read whole, never cut (`repeating_tail`,
        # `counting_tail`): a benchmark's requests, which must be measured as the server gave them.
        self.cut_repeats = cut_repeats
        self.loading_wait = loading_wait
        self.stall_timeout = stall_timeout or stall_timeout_from_env()
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "not-needed",  # the SDK insists on a key; llama.cpp ignores it
            max_retries=0,  # tenacity owns the retries
            timeout=httpx2.Timeout(read_timeout, connect=connect_timeout),
        )
        self.request_gate = request_gate
        self.cache_watch = CacheWatch()
        self._counters_after: dict[str, float] | None = None  # the server's, after our last request

    async def close(self) -> None:
        await self._client.close()
        await self.server.close()

    async def model_name(self) -> str:
        """The model the requests ask for (the server's `model_name`); nothing answering is ServerGone."""
        try:
            return await self.server.model_name()
        except httpx2.TransportError as exc:
            raise map_error(exc) from exc

    def _request(self, messages: list[dict], tools: list[dict], tool_choice: str, overrides: dict) -> dict:
        """The request's JSON body: the OpenAI fields, then llama.cpp's own (`extra_body`) beside them."""
        params: dict[str, Any] = {"temperature": None}
        params.update(self.endpoint.sampling)
        params.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        extra = {**params.pop("extra_body", {}), **self.endpoint.extra_body}
        for key, value in overrides.items():
            if key in ("temperature", "top_p", "max_tokens", "seed", "stop"):
                params[key] = value
            else:
                extra[key] = value
        # llama.cpp reads tool_choice as a string only; an object silently means "auto" (FACTS.md).
        tool_choice = str(extra.pop("tool_choice", tool_choice))
        extra.setdefault("cache_prompt", True)
        request = {
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            **{k: v for k, v in params.items() if v is not None},
        }
        if tools:
            request["tools"] = tools
            request["tool_choice"] = tool_choice
        return {**request, **extra}

    async def stream(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        tool_choice: str = "auto",
        stop: StreamStop | None = None,
        cache_note: str = "",
        prefix: str = "",
        **overrides: Any,
    ) -> AsyncIterator[TextDelta | ReasoningDelta | Completion]:
        """Stream one completion. Yields deltas, then exactly one Completion (or raises an LLMError).
        `stop` is asked at each new line of text whether to end the answer there. `cache_note`: why the
        prompt changed on purpose since the last request (prompt_cache.COMPACTION, .RESUMED).
        `prefix`: the answer's beginning, written for the model, which the server continues (an
        assistant message last, `continue_final_message`: llama-server and vLLM); the Completion's
        content starts with it."""
        model = await self.model_name()
        if prefix:
            messages = [*messages, {"role": "assistant", "content": prefix}]
            overrides = {**overrides, "continue_final_message": True, "add_generation_prompt": False}
        request = self._request(messages, tools or [], tool_choice, overrides)
        if self.request_gate is not None:
            await self.request_gate({"model": model, **request})
        before = await self.server.counters()
        server_side = ServerSide(foreign_tokens=tokens_between(self._counters_after, before))
        started = time.monotonic()
        stream = await self._open(model, request)
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, _Assembling] = {}
        timings: dict[str, Any] | None = None
        usage: dict | None = None
        finish: str | None = None
        first = last = None
        streamed = False
        looped: int | None = None
        counted: int | None = None  # an answer that counts on (counting_tail)
        stopped: tuple[str, str] | None = None
        checked_at = 0
        size = 0
        if prefix:
            yield TextDelta(prefix)
            # The stream stop follows the prefix as if the model had written it, line by line.
            ends = [i + 1 for i, c in enumerate(prefix) if c == "\n"]
            stopped = next((s for end in ends if stop and (s := stop(prefix[:end]))), None)
        chunks = stream.__aiter__()
        try:
            while True:
                # Once tokens flow, silence means the server stopped answering: a hung or SIGSTOPped
                # server would otherwise hold the stream open until the read timeout, 600 s.
                try:
                    async with asyncio.timeout(self.stall_timeout if first else None):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise ServerStalled(
                        f"the model server stopped answering: nothing arrived for {self.stall_timeout:g} s "
                        "in the middle of its answer (it is hung, stopped or overloaded; "
                        "AGENT_STALL_TIMEOUT sets how long to wait)",
                        partial=True,
                    ) from None
                # Chunks are the server's JSON as is: a typed chunk object per token cost the client more
                # than the screen did at 2,000 tokens a second (docs/benchmarks.md).
                if not isinstance(chunk, dict):
                    continue  # no chunk (the client raises on the error events)
                timings = chunk.get("timings") or timings
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    finish = choice.get("finish_reason") or finish
                    got_token = False
                    piece = delta.get("content")
                    if piece:
                        text.append(piece)
                        got_token = streamed = True
                        size += len(piece)
                        yield TextDelta(piece)
                        if self.cut_repeats and size - checked_at >= REPEAT_CHECK_EVERY:
                            checked_at = size
                            so_far = "".join(text)
                            looped = repeating_tail(so_far)
                            counted = None if looped else counting_tail(so_far)
                        if stop is not None and "\n" in piece:
                            stopped = stop(continued(prefix, "".join(text)))
                    thought = delta.get("reasoning_content")
                    if thought:
                        reasoning.append(thought)
                        got_token = streamed = True
                        yield ReasoningDelta(thought)
                    for part in delta.get("tool_calls") or ():
                        slot = calls.setdefault(part.get("index", 0), _Assembling())
                        function = part.get("function") or {}
                        if part.get("id"):
                            slot.id = part["id"]
                        if function.get("name"):
                            slot.name += function["name"]
                        if function.get("arguments"):
                            slot.arguments.append(function["arguments"])
                        got_token = True
                    if got_token:
                        now = time.monotonic()
                        first = first or now
                        last = now
                if looped or counted or stopped:
                    break  # closing the stream below makes llama-server stop generating
        except Exception as exc:
            raise map_error(exc, partial=streamed, opened=True) from exc
        finally:
            await stream.close()
        wall = time.monotonic() - started
        stats = TurnStats.from_timings(
            timings,
            ttft_s=(first - started) if first else None,
            wall_s=wall,
            finish_reason=finish,
            prompt_tokens=(usage or {}).get("prompt_tokens"),
            completion_tokens=(usage or {}).get("completion_tokens"),
        )
        stats.add_client_speed(started, first, last)
        after = await self.server.counters() if before is not None else None
        self._counters_after = after
        server_side.full_reprocess_logged = self.server.log_says_full_reprocess()
        server_side.reason = str(stats.timings_extra.get("cache_reason") or "")
        stats.cache_break = self.cache_watch.explain(
            messages, tools or [], stats.cache_n, stats.prompt_n, cache_note, server_side
        )
        stats.add_counter_deltas(before, after)
        tool_calls = [
            ToolCall(id=slot.id or f"call_{index}", name=slot.name, arguments="".join(slot.arguments))
            for index, slot in sorted(calls.items())
        ]
        content = continued(prefix, "".join(text))
        why = ""
        if stopped:
            content, why = stopped  # what `stop` kept is whole: read as a finished answer
            finish = finish or "stop"
        elif looped:
            finish = None  # cut by us: what it was writing is unfinished
            content = one_copy(content, looped)
        elif counted:
            finish = None
            looped, content = counted, one_count(content, counted)
        yield Completion(
            content,
            "".join(reasoning),
            tool_calls,
            stats,
            complete=finish is not None,
            repetition=None if stopped else looped,
            stopped=why,
        )

    async def _open(self, model: str, request: dict) -> Any:
        """Open the stream, retrying what is worth retrying: a loading server, a refused connection."""

        def worth_retrying(exc: BaseException) -> bool:
            return isinstance(exc, ServerLoading) or (isinstance(exc, ServerGone) and not exc.partial)

        def give_up(state: RetryCallState) -> bool:
            # A loading model is worth two minutes; a refused connection only a few quick tries, so that a
            # dead server is reported within a second or two.
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, ServerGone):
                return state.attempt_number >= 3
            return (state.seconds_since_start or 0) > self.loading_wait

        async for attempt in AsyncRetrying(
            retry=retry_if_exception(worth_retrying),
            stop=give_up,
            wait=wait_exponential(multiplier=0.2, max=5),
            reraise=True,
        ):
            with attempt:
                try:
                    # The client's own POST, kept as JSON (`cast_to=object`): its retries, errors and
                    # event parsing, without building a typed object for every token.
                    return await self._client.post(
                        "/chat/completions",
                        body={"model": model, **request},
                        cast_to=object,
                        stream=True,
                        stream_cls=openai.AsyncStream[object],
                    )
                except Exception as exc:
                    raise map_error(exc) from exc
        raise AssertionError("unreachable")  # AsyncRetrying either returns or re-raises
