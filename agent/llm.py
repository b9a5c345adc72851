"""The model client: OpenAI-client streaming, tool-call assembly, timings, typed errors and retries.

`ModelClient.stream()` yields `TextDelta` and `ReasoningDelta` as they arrive and ends with one
`Completion`: the text, the assembled tool calls and the turn's `TurnStats`. Failures become a few
error types the loop can act on. Retries (tenacity) cover only a request that has streamed nothing
yet; once text has reached the user, a broken stream is reported, never silently re-sent.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from agent.events import ReasoningDelta, TextDelta
from agent.telemetry import TurnStats, parse_draft_counters

# ---------------------------------------------------------------------------------------------- errors


class LLMError(Exception):
    """A model request failed. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ContextOverflow(LLMError):
    """The prompt does not fit the server's context: compact and retry."""

    def __init__(self, message: str, n_prompt_tokens: int | None, n_ctx: int | None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.n_prompt_tokens = n_prompt_tokens
        self.n_ctx = n_ctx


class ServerLoading(LLMError):
    """503 while the model loads: wait and retry."""


class ServerGone(LLMError):
    """Connection refused or reset, before or during the stream. `partial`: text had already arrived."""

    def __init__(self, message: str, partial: bool = False, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.partial = partial


class BadRequest(LLMError):
    """The server refused the request (4xx): shown to the user, not retried."""


class ServerFailure(LLMError):
    """Anything else: a 5xx, an unreadable answer."""


def _error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    try:
        data = exc.response.json()
    except ValueError:
        return {"message": exc.response.text[:500] or exc.message}
    error = data.get("error", data) if isinstance(data, dict) else {"message": str(data)}
    return error if isinstance(error, dict) else {"message": str(error)}


def map_error(exc: Exception, partial: bool = False) -> LLMError:
    """One of our types for an openai/httpx2 exception."""
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
        return ServerFailure(f"HTTP {status}: {message}", status=status, body=body)
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError | ConnectionError):
        cause = exc.__cause__ or exc
        return ServerGone(
            f"the model server is unreachable ({type(cause).__name__}: {cause})", partial=partial
        )
    if isinstance(exc, openai.APIError):
        return ServerFailure(str(exc))
    return ServerFailure(f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------- client

DEFAULT_MAX_TOKENS = 4096  # when neither the profile nor the request says: no answer runs forever
REPEAT_SPAN = 800  # characters that must repeat one unit, at the end of a stream, to cut it
REPEAT_CHECK_EVERY = 200


def repeating_tail(text: str, span: int = REPEAT_SPAN, max_unit: int = 200) -> int | None:
    """The length of the unit that the end of `text` repeats over the last `span` characters, if any.

    Small models fall into loops (one assert written until the time limit, FACTS.md). A unit of at most
    `max_unit` characters repeated over `span` characters (4+ times) is such a loop, not code.
    """
    if len(text) < span + 1:
        return None
    tail = text[-(span + max_unit) :]
    for unit in range(1, min(max_unit, span // 4) + 1):
        if tail[-span:] == tail[-span - unit : -unit]:
            return unit
    return None


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it; parsing (and its errors) is the caller's


@dataclass
class Completion:
    content: str
    reasoning: str
    tool_calls: list[ToolCall]
    stats: TurnStats
    complete: bool = True  # False: the stream ended without a finish reason (cut off)
    repetition: int | None = None  # the stream was cut because it repeated a unit of this many chars


@dataclass
class Endpoint:
    """Where and how to ask a model: one per session."""

    base_url: str  # the OpenAI base, ending in /v1
    api_key: str | None = None
    model: str | None = None  # asked of /v1/models when None
    profile: str = "attach"
    spec_mode: str = "none"
    sampling: dict[str, Any] = field(default_factory=dict)  # OpenAI params; extra_body for llama.cpp's
    extra_body: dict[str, Any] = field(default_factory=dict)  # sent with every request
    metrics_url: str | None = None  # Prometheus /metrics, for draft counters


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
    ) -> None:
        self.endpoint = endpoint
        self.loading_wait = loading_wait
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "not-needed",  # the SDK insists on a key; llama.cpp ignores it
            max_retries=0,  # tenacity owns the retries
            timeout=httpx2.Timeout(read_timeout, connect=connect_timeout),
        )
        self._metrics_ok = endpoint.metrics_url is not None
        self._http = httpx2.AsyncClient(timeout=5.0)

    async def close(self) -> None:
        await self._client.close()
        await self._http.aclose()

    async def model_name(self) -> str:
        if self.endpoint.model:
            return self.endpoint.model
        try:
            models = await self._client.models.list()
            ids = [m.id for m in models.data]
        except Exception as exc:  # a server without /v1/models still answers chat requests
            ids = []
            if isinstance(exc, openai.APIConnectionError):
                raise map_error(exc) from exc
        self.endpoint.model = ids[0] if ids else "default"
        return self.endpoint.model

    async def server_context_size(self) -> int | None:
        """n_ctx from llama-server's /props, or None for servers without it."""
        root = self.endpoint.base_url.removesuffix("/v1")
        try:
            response = await self._http.get(root + "/props")
            props = response.json()
            settings = props.get("default_generation_settings", {})
            return int(settings.get("n_ctx") or props.get("n_ctx"))
        except (httpx2.HTTPError, ValueError, TypeError, AttributeError):
            return None

    async def _draft_counters(self) -> dict[str, float] | None:
        if not self._metrics_ok:
            return None
        try:
            response = await self._http.get(self.endpoint.metrics_url)
            if response.status_code != 200:
                self._metrics_ok = False
                return None
            return parse_draft_counters(response.text)
        except (httpx2.HTTPError, ValueError):
            self._metrics_ok = False
            return None

    def _request(self, messages: list[dict], tools: list[dict], tool_choice: str, overrides: dict) -> dict:
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
            "extra_body": extra,
            **{k: v for k, v in params.items() if v is not None},
        }
        if tools:
            request["tools"] = tools
            request["tool_choice"] = tool_choice
        return request

    async def stream(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        tool_choice: str = "auto",
        **overrides: Any,
    ) -> AsyncIterator[TextDelta | ReasoningDelta | Completion]:
        """Stream one completion. Yields deltas, then exactly one Completion (or raises an LLMError)."""
        model = await self.model_name()
        request = self._request(messages, tools or [], tool_choice, overrides)
        before = await self._draft_counters()
        started = time.monotonic()
        stream = await self._open(model, request)
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, _Assembling] = {}
        timings: dict[str, Any] | None = None
        usage: Any = None
        finish: str | None = None
        first = last = None
        streamed = False
        looped: int | None = None
        checked_at = 0
        size = 0
        try:
            async for chunk in stream:
                extra = chunk.model_extra or {}
                timings = extra.get("timings") or timings
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    delta = choice.delta
                    finish = choice.finish_reason or finish
                    got_token = False
                    if delta.content:
                        text.append(delta.content)
                        got_token = streamed = True
                        size += len(delta.content)
                        yield TextDelta(delta.content)
                        if size - checked_at >= REPEAT_CHECK_EVERY:
                            checked_at = size
                            looped = repeating_tail("".join(text[-400:]))
                    thought = (delta.model_extra or {}).get("reasoning_content")
                    if thought:
                        reasoning.append(thought)
                        got_token = streamed = True
                        yield ReasoningDelta(thought)
                    for part in delta.tool_calls or []:
                        slot = calls.setdefault(part.index, _Assembling())
                        if part.id:
                            slot.id = part.id
                        if part.function and part.function.name:
                            slot.name += part.function.name
                        if part.function and part.function.arguments:
                            slot.arguments.append(part.function.arguments)
                        got_token = True
                    if got_token:
                        now = time.monotonic()
                        first = first or now
                        last = now
                if looped:
                    break  # closing the stream below makes llama-server stop generating
        except Exception as exc:
            raise map_error(exc, partial=streamed) from exc
        finally:
            await stream.close()
        wall = time.monotonic() - started
        stats = TurnStats.from_timings(
            timings,
            ttft_s=(first - started) if first else None,
            wall_s=wall,
            finish_reason=finish,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        )
        n_out = stats.output_tokens
        if last and n_out:
            if stats.prompt_ms is not None and last - started > stats.prompt_ms / 1000:
                # Generation as the client lived it: from the end of the server's prefill to the last
                # token received, the same span as the server's predicted_ms plus transport. (Counting
                # from the first visible token would flatter the client: the server holds back tokens
                # that might open a tool call or a reasoning block.)
                stats.client_tokens_per_second = n_out / (last - started - stats.prompt_ms / 1000)
            elif first and n_out > 1 and last > first:
                stats.client_tokens_per_second = (n_out - 1) / (last - first)
        after = await self._draft_counters() if before is not None else None
        if before is not None and after is not None and stats.draft_n is None:
            drafted = after.get("drafted", 0) - before.get("drafted", 0)
            if drafted > 0:
                stats.metrics_draft_n = int(drafted)
                stats.metrics_draft_accepted = int(after.get("accepted", 0) - before.get("accepted", 0))
        tool_calls = [
            ToolCall(id=slot.id or f"call_{index}", name=slot.name, arguments="".join(slot.arguments))
            for index, slot in sorted(calls.items())
        ]
        content = "".join(text)
        if looped:
            finish = None  # cut by us: what it was writing is unfinished
            while content[-looped:] == content[-2 * looped : -looped]:  # keep one copy of the loop
                content = content[:-looped]
        yield Completion(
            content, "".join(reasoning), tool_calls, stats, complete=finish is not None, repetition=looped
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
                    return await self._client.chat.completions.create(model=model, **request)
                except Exception as exc:
                    raise map_error(exc) from exc
        raise AssertionError("unreachable")  # AsyncRetrying either returns or re-raises
