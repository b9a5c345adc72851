"""Tool calls as local models really write them.

Native `tool_calls` come first. When there are none, calls written as text are accepted as a
fallback: `<tool_call>{...}</tool_call>` (Hermes/Qwen style) and fenced JSON naming a known tool.
Arguments that are not a valid JSON object (often cut off at max_tokens) never go back into the
history as written: llama-server answers every later request with HTTP 500 when they do (FACTS.md).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.llm import ToolCall

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(\{.*?\})\s*```", re.S)


def _as_call(data: Any, known: set[str], index: int) -> ToolCall | None:
    if not isinstance(data, dict):
        return None
    name = data.get("name") or (data.get("function") or {}).get("name")
    if name not in known:
        return None
    args = data.get("arguments", data.get("parameters", (data.get("function") or {}).get("arguments", {})))
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return ToolCall(id=f"text_call_{index}", name=name, arguments=args)


def calls_from_text(content: str, known: set[str]) -> tuple[list[ToolCall], str]:
    """Tool calls written in the text, and the text without them."""
    calls: list[ToolCall] = []
    remaining = content
    for pattern in (_TAGGED, _FENCED):
        for match in pattern.finditer(content):
            try:
                data = json.loads(match.group(1))
            except json.JSONDecodeError:
                continue
            call = _as_call(data, known, len(calls))
            if call:
                calls.append(call)
                remaining = remaining.replace(match.group(0), "")
        if calls:
            break
    return calls, remaining.strip()


def close_json(text: str) -> str | None:
    """Arguments cut off mid-way, closed into a JSON object: '{"a": "x' becomes '{"a": "x"}'.

    What the model wrote is kept as a prefix, so the re-rendered prompt still matches the tokens the
    server generated and has in its cache. None when no object can be made of it.
    """
    text = text.strip()
    if not text.startswith("{"):
        return None
    closers: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            closers.append("}" if ch == "{" else "]")
        elif ch in "}]" and closers:
            closers.pop()
    candidate = text[:-1] if escaped else text
    if in_string:
        candidate += '"'
    candidates = [candidate + "".join(reversed(closers))]
    # A value cut before it began ('{"a":' or '{"a": 1,'): drop the dangling key or comma.
    trimmed = re.sub(r',?\s*("(?:[^"\\]|\\.)*"\s*:?)?\s*$', "", candidate.rstrip(",: \n"))
    candidates.append(trimmed + "".join(reversed(closers)))
    for attempt in candidates:
        try:
            if isinstance(json.loads(attempt), dict):
                return attempt
        except json.JSONDecodeError:
            continue
    return None


def history_arguments(raw: str) -> str:
    """The arguments to keep in the history, always a JSON object: as written when valid, closed when
    cut off (FACTS.md: otherwise llama-server fails every later request), else "{}"."""
    try:
        if raw.strip() and isinstance(json.loads(raw), dict):
            return raw
    except json.JSONDecodeError:
        pass
    return close_json(raw or "") or "{}"


def assistant_message(content: str, calls: list[ToolCall]) -> dict[str, Any]:
    """The assistant's turn as it goes into the history: its text and history-safe tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": history_arguments(c.arguments)},
            }
            for c in calls
        ]
    return message


def repair_history(messages: list[dict[str, Any]]) -> int:
    """Make a history safe to resend (e.g. one resumed from an older session). Returns repairs made.

    - tool-call arguments that are not a JSON object become "{}";
    - every tool call gets a result, so an interrupted turn does not leave the history half-done.
    """
    repairs = 0
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    fixed: list[dict[str, Any]] = []
    for message in messages:
        fixed.append(message)
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            safe = history_arguments(function.get("arguments", ""))
            if safe != function.get("arguments"):
                function["arguments"] = safe
                repairs += 1
        missing = [c for c in message.get("tool_calls") or [] if c.get("id") not in answered]
        for call in missing:
            fixed.append(
                {"role": "tool", "tool_call_id": call.get("id"), "content": "(not run: interrupted)"}
            )
            repairs += 1
    if repairs:
        messages[:] = fixed
    return repairs
