"""What a request through the proxy asked and what its answer said, read from the bytes as they pass.

Three APIs reach llama-server's port: OpenAI chat completions (`/v1/chat/completions`), Anthropic
messages (`/v1/messages`) and OpenAI responses (`/v1/responses`). Each is read for the same figures: the
conversation (to tell clients apart and explain cache breaks), the answer's text, its `timings` when the
server sent them (chat completions and responses do; messages does not, so its usage stands in), and
when the first and last tokens passed. The bytes themselves are never changed: a reader only looks.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
RECORDED_PATHS = (CHAT, MESSAGES, RESPONSES, "/chat/completions", "/messages", "/responses")
# A non-streamed answer is read whole; past this size (a runaway answer) its text is not recorded.
MAX_BODY = 8 * 1024 * 1024


def api_of(path: str) -> str | None:
    """Which API a request path is (one of CHAT, MESSAGES, RESPONSES), or None for any other path."""
    for api in (CHAT, MESSAGES, RESPONSES):
        if path == api or path == api.removeprefix("/v1"):
            return api
    return None


@dataclass
class Asked:
    """A request's body, read for what the figures need; `messages` in one shape for every API (system
    first, as chat completions has it), `tools` as sent."""

    api: str
    model: str
    stream: bool
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    client_id: str = ""  # the client's own conversation id, when it sends one

    @classmethod
    def read(cls, api: str, body: bytes, headers: dict[str, str]) -> Asked | None:
        """None when the body is not a JSON object (the server answers that itself)."""
        try:
            data = json.loads(body)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        if api == RESPONSES:
            given = data.get("input")
            messages = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
            if data.get("instructions"):
                messages.insert(0, {"role": "system", "content": data["instructions"]})
        else:
            messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
            if api == MESSAGES and data.get("system"):
                messages.insert(0, {"role": "system", "content": data["system"]})
        metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        client_id = (
            headers.get("x-session-id")
            or headers.get("x-conversation-id")
            or str(metadata.get("user_id") or metadata.get("session_id") or data.get("user") or "")
        )
        return cls(
            api=api,
            model=str(data.get("model") or ""),
            stream=bool(data.get("stream")),
            messages=messages,
            tools=[t for t in data.get("tools") or [] if isinstance(t, dict)],
            client_id=client_id,
        )

    def first_user_text(self) -> str:
        for message in self.messages:
            if message.get("role") == "user":
                return text_of(message.get("content"))
        return ""


def text_of(content: Any) -> str:
    """A message's text, whether a string or a list of parts (OpenAI's and Anthropic's)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@dataclass
class Answer:
    """What an answer said, gathered as its bytes pass (`feed`) and read out at the end."""

    api: str
    streamed: bool
    started: float = field(default_factory=time.monotonic)
    first: float | None = None  # when the first token passed
    last: float | None = None
    text: list[str] = field(default_factory=list)
    tool_calls: list[str] = field(default_factory=list)  # their names
    timings: dict[str, Any] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    finish: str | None = None
    error: str = ""  # the server's error message, when it answered one
    ended: bool = False  # the API's last event passed: a client may hang up then and lose nothing
    _pending: bytes = b""
    _body: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            if len(self._body) + len(chunk) <= MAX_BODY:
                self._body += chunk
            return
        self._pending += chunk
        while True:
            cut = _event_end(self._pending)
            if cut is None:
                return
            event, self._pending = self._pending[: cut[0]], self._pending[cut[1] :]
            for line in event.split(b"\n"):
                line = line.rstrip(b"\r")
                if line.startswith(b"data:"):
                    self._data(line[5:].strip())

    def finish_reading(self) -> None:
        """After the last byte: a whole (non-streamed) body is read now."""
        if self.streamed:
            if self._pending.strip():
                self.feed(b"\n\n")
            return
        try:
            data = json.loads(bytes(self._body))
        except ValueError:
            return
        if isinstance(data, dict):
            self._whole(data)

    def _data(self, raw: bytes) -> None:
        if raw == b"[DONE]":
            self.ended = True
        if raw == b"[DONE]" or not raw:
            return
        try:
            data = json.loads(raw)
        except ValueError:
            return
        if isinstance(data, dict):
            self._chunk(data)

    def _token(self, text: str = "") -> None:
        now = time.monotonic()
        self.first = self.first or now
        self.last = now
        if text:
            self.text.append(text)

    def _chunk(self, data: dict[str, Any]) -> None:
        """One streamed event of any of the three APIs."""
        if "error" in data and isinstance(data["error"], dict):
            self.error = str(data["error"].get("message") or data["error"])
        self.timings = data.get("timings") or self.timings
        kind = data.get("type", "")
        if self.api == CHAT:
            self.usage = data.get("usage") or self.usage
            for choice in data.get("choices") or ():
                delta = choice.get("delta") or {}
                self.finish = choice.get("finish_reason") or self.finish
                if delta.get("content") or delta.get("reasoning_content"):
                    self._token(delta.get("content") or "")
                for call in delta.get("tool_calls") or ():
                    self._token()
                    name = (call.get("function") or {}).get("name")
                    if name:
                        self.tool_calls.append(name)
        elif self.api == MESSAGES:
            if kind == "message_start":
                self.usage.update((data.get("message") or {}).get("usage") or {})
            elif kind == "content_block_start":
                block = data.get("content_block") or {}
                if block.get("type") == "tool_use":
                    self._token()
                    self.tool_calls.append(str(block.get("name", "")))
            elif kind == "content_block_delta":
                delta = data.get("delta") or {}
                self._token(delta.get("text") or "")
            elif kind == "message_delta":
                self.usage.update(data.get("usage") or {})
                self.finish = (data.get("delta") or {}).get("stop_reason") or self.finish
            elif kind == "message_stop":
                self.ended = True
        elif self.api == RESPONSES:
            if kind == "response.output_text.delta":
                self._token(str(data.get("delta") or ""))
            elif (
                kind == "response.output_item.added"
                and (data.get("item") or {}).get("type") == "function_call"
            ):
                self._token()
                self.tool_calls.append(str(data["item"].get("name", "")))
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                response = data.get("response") or {}
                self.usage = response.get("usage") or self.usage
                self.finish = response.get("status") or self.finish
                self.ended = True

    def _whole(self, data: dict[str, Any]) -> None:
        """A non-streamed answer of any of the three APIs."""
        if isinstance(data.get("error"), dict):
            self.error = str(data["error"].get("message") or data["error"])
            return
        self.timings = data.get("timings")
        self.usage = data.get("usage") or {}
        self.last = time.monotonic()  # no first token: a whole answer has no time to it
        if self.api == CHAT:
            for choice in data.get("choices") or ():
                message = choice.get("message") or {}
                self.text.append(text_of(message.get("content")))
                self.tool_calls += [
                    (c.get("function") or {}).get("name", "") for c in message.get("tool_calls") or ()
                ]
                self.finish = choice.get("finish_reason") or self.finish
        elif self.api == MESSAGES:
            for block in data.get("content") or ():
                if block.get("type") == "tool_use":
                    self.tool_calls.append(str(block.get("name", "")))
                else:
                    self.text.append(str(block.get("text", "")))
            self.finish = data.get("stop_reason")
        else:
            for item in data.get("output") or ():
                if item.get("type") == "function_call":
                    self.tool_calls.append(str(item.get("name", "")))
                for part in item.get("content") or ():
                    self.text.append(str(part.get("text", "")))
            self.finish = data.get("status")

    def cache_and_prompt(self) -> tuple[int | None, int | None]:
        """(tokens served from the cache, tokens processed) of the prompt: the server's timings, else the
        usage that Anthropic's API reports them in."""
        if self.timings and "cache_n" in self.timings:
            return self.timings.get("cache_n"), self.timings.get("prompt_n")
        if "cache_read_input_tokens" in self.usage:
            return self.usage.get("cache_read_input_tokens"), self.usage.get("input_tokens")
        return None, None

    def output_tokens(self) -> int | None:
        usage = self.usage
        return usage.get("completion_tokens", usage.get("output_tokens"))


def _event_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the first whole server-sent event in `buffer` ends, and where the next begins."""
    ends = [(i, i + len(sep)) for sep in (b"\n\n", b"\r\n\r\n") if (i := buffer.find(sep)) >= 0]
    return min(ends) if ends else None
