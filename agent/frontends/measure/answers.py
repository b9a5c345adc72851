"""One answer's code checked (does its Python parse?) and two answers compared (where they first
differ, how alike they are): the `code` of each bench request and the identity report are made of them."""

from __future__ import annotations

import ast
import difflib
import re
from typing import Any

_FENCE = re.compile(r"^```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON = {"python", "py", "python3", ""}


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block; a block cut off by max_tokens runs to the end."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def code_check(text: str, prompt: str = "", finish_reason: str | None = None) -> dict[str, Any] | None:
    """Whether the answer's Python parses (`ast`): its python (or unlabelled) fenced blocks, or, with no
    fence at all and a prompt that asks for Python, the whole answer. None: the answer holds no code."""
    blocks = [code for lang, code in code_blocks(text) if lang in _PYTHON]
    whole = False
    if not blocks:
        if any(lang for lang, _ in code_blocks(text)) or "python" not in prompt.lower() or not text.strip():
            return None
        blocks, whole = [text], True
    errors = []
    for i, code in enumerate(blocks, 1):
        try:
            ast.parse(code)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            errors.append(f"block {i}, line {line}: {getattr(exc, 'msg', str(exc))}")
    return {
        "blocks": len(blocks),
        "whole_answer": whole,
        "parses": not errors,
        "errors": errors,
        "cut_off": finish_reason == "length",
    }


def first_difference(a: str, b: str) -> int | None:
    """The index of the first character where the texts differ (the shorter one's length when one
    is a prefix of the other); None when they are equal."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _excerpt(text: str, at: int, width: int = 40) -> str:
    return text[max(0, at - width) : at + width]


def compare_texts(baseline: str, other: str) -> dict[str, Any]:
    """Identical or not; if not, where they first differ (character, line, column, both sides around it)
    and how similar they are: difflib's ratio over lines (the share of lines in common)."""
    at = first_difference(baseline, other)
    if at is None:
        return {"identical": True, "first_difference": None, "similarity": 1.0}
    line = baseline.count("\n", 0, at) + 1
    column = at - (baseline.rfind("\n", 0, at) + 1) + 1
    similarity = difflib.SequenceMatcher(
        None, baseline.splitlines(), other.splitlines(), autojunk=False
    ).ratio()
    return {
        "identical": False,
        "first_difference": {
            "char": at,
            "line": line,
            "column": column,
            "baseline": _excerpt(baseline, at),
            "other": _excerpt(other, at),
        },
        "similarity": round(similarity, 4),
    }
