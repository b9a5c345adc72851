"""The message history kept for the model: every assistant turn as it goes in, and the repair that makes
a history safe to resend (cut-off tool-call arguments closed, interrupted calls answered).

llama-server fails every later request on a history whose tool-call arguments are not a JSON object
(FACTS.md), and a resumed or interrupted session can hold one; both protocols and the context window
go through here.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.core.llm import ToolCall


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
    - every tool call gets a result among the tool messages right after its assistant message, so an
      interrupted turn does not leave the history half-done. (Ids are matched there, not anywhere:
      calls read from text are numbered per answer, so an interrupted `text_call_0` shares its id
      with every answered one before it.)
    """
    repairs = 0
    fixed: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        fixed.append(message)
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            safe = history_arguments(function.get("arguments") or "")
            if safe != function.get("arguments"):
                function["arguments"] = safe
                repairs += 1
        if not message.get("tool_calls"):
            continue
        answered, after = set(), index + 1
        while after < len(messages) and messages[after].get("role") == "tool":
            answered.add(messages[after].get("tool_call_id"))
            after += 1
        missing = [c for c in message["tool_calls"] if c.get("id") not in answered]
        for call in missing:
            fixed.append(
                {"role": "tool", "tool_call_id": call.get("id"), "content": "(not run: interrupted)"}
            )
            repairs += 1
    if repairs:
        messages[:] = fixed
    return repairs
