"""What kind of answer a model request got: one that copies what the model was shown, or new text.

N-gram drafting proposes the tokens that followed the same few tokens earlier in the context, so it
pays where the answer repeats the prompt (an edit block's SEARCH part, a file re-sent whole after a
failed check) and costs where it does not (issue 32 measured 82% acceptance on the first, 2-27% on new
code). The server takes no per-request draft settings (upstream's server-schema.cpp has them under
`#if 0`), so the agent cannot switch per turn; the replay says instead which setup wins on each kind.
"""

from __future__ import annotations

from typing import Any

# Lines shorter than this (a lone brace, a fence, `else:`) are in every prompt: they say nothing.
MIN_LINE = 8
# An answer whose lines are mostly in the prompt already is a copy.
COPY_SHARE = 0.5
KINDS = ("copies", "new")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if len(line.strip()) >= MIN_LINE]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    calls = message.get("tool_calls") or []
    return "\n".join([content, *(str(c.get("function", {}).get("arguments", "")) for c in calls)])


def copy_share(answer: str, messages: list[dict[str, Any]]) -> float | None:
    """The share of the answer's lines that the prompt holds already; None for an answer of no lines."""
    lines = _lines(answer)
    if not lines:
        return None
    shown = {line for message in messages for line in _lines(_text(message))}
    return sum(line in shown for line in lines) / len(lines)


def turn_kind(answer: str, messages: list[dict[str, Any]]) -> str:
    share = copy_share(answer, messages)
    return "copies" if share is not None and share >= COPY_SHARE else "new"
