"""JSON as small models write it, and the reading of it without scanning any stretch twice.

`loads` reads JSON, else almost-JSON made JSON (`_normalise`: Python triple-quoted and single-quoted
strings, invalid escapes, trailing commas, True/False/None). `scan_value` finds where a bracketed
value ends in an `Answer`, which remembers what each bracket and triple quote was found to match.
The tool-call formats (call_formats.py) read their JSON through these.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any

# A Python triple-quoted value ends at the quotes that JSON goes on after (',', '}' or ']'): quotes
# that open or close a docstring inside the code are followed by more code.
_TRIPLE_END = {q: re.compile(q * 3 + r"(?=\s*(?:[,}\]]|$))") for q in "\"'"}
_STRING_STOP = {'"': re.compile(r'[\\"]'), "'": re.compile(r"[\\']")}
_ESCAPE = re.compile(r'\\(.)|"', re.S)
_WORD = re.compile(r"[^\W\d]\w*")  # a word of any script: "[À]" is prose, not a crash
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}


def loads(text: str) -> Any:
    """JSON, else JSON after `_normalise`; ValueError when neither reads. Raw newlines and tabs in
    strings are taken as they are (strict=False)."""
    try:
        try:
            return json.loads(text, strict=False)
        except json.JSONDecodeError:
            return json.loads(_normalise(text), strict=False)
    except RecursionError as exc:  # thousands of nested brackets: a degenerate answer, not a call
        raise ValueError("nested too deeply") from exc


def _normalise(text: str) -> str:
    """Almost-JSON made JSON, token by token: Python strings (triple-quoted, single-quoted) become
    JSON strings, invalid escapes ("\\d" in a regex) keep their backslash, trailing commas go,
    True/False/None become JSON. No guessing beyond that: what does not parse then is not a call.

    We do not use json-repair: FACTS.md saw it turn a triple-quoted file into an empty string.
    """
    text = as_answer(text)
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            end = _string_end(text, i)
            if end is None:
                raise ValueError("unterminated string")
            out.append(_json_string(text[i:end]))
            i = end
        elif ch == ",":
            j = skip(text, i + 1)
            if j >= n or text[j] not in "}]":
                out.append(ch)
            i = j
        elif ch.isalpha() or ch == "_":
            word = _WORD.match(text, i)
            assert word is not None
            out.append(_PYTHON_LITERALS.get(word.group(), word.group()))
            i = word.end()
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _json_string(token: str) -> str:
    quote = token[0]
    if token.startswith(quote * 3):
        # Verbatim, no escape processing: the model writes the file's text between the quotes, and
        # a "\n" in that code must stay a backslash and an n.
        return json.dumps(token[3:-3], ensure_ascii=False)

    def escape(match: re.Match[str]) -> str:
        char = match.group(1)
        if char is None:
            return '\\"'  # a bare " inside a single-quoted string
        if char == "'":
            return "'"
        return match.group() if char in '"\\/bfnrtu' else "\\\\" + char

    return '"' + _ESCAPE.sub(escape, token[1:-1]) + '"'


class Answer(str):
    """The answer being read, remembering what its brackets and triple quotes were found to match,
    so that no stretch of a long answer is scanned again for each bracket that opens in it."""

    brackets: dict[int, tuple[int, bool] | None]  # where a bracket's value ends, as scan_value says
    triple_ends: dict[str, list[int]]  # per quote: the ends of the closing triple quotes, in order


def as_answer(text: str) -> Answer:
    if isinstance(text, Answer):
        return text
    answer = Answer(text)
    answer.brackets, answer.triple_ends = {}, {}
    return answer


def scan_value(text: Answer, i: int) -> tuple[int, bool] | None:
    """The end of the bracketed value at text[i], respecting strings of every kind above.
    (end, True) when it closes; (len(text), False) when the text ends first; None on a mismatched
    bracket.

    Every bracket opened on the way is answered too: its value is the same characters, read from the
    same state (outside strings), so it closes where it closed here, or meets the same end of text or
    the same wrong closer. Lines of unclosed "{" would otherwise cost a scan to the end each.
    """
    memo = text.brackets
    if i in memo:
        return memo[i]
    opened: list[int] = []
    n = len(text)
    j = i
    while j < n:
        ch = text[j]
        if ch in "\"'":
            end = _string_end(text, j)
            if end is None:
                break
            j = end
            continue
        if ch in "{[":
            opened.append(j)
        elif ch in "}]":
            if ("}" if text[opened[-1]] == "{" else "]") != ch:
                memo.update(dict.fromkeys(opened))
                return None
            memo[opened.pop()] = (j + 1, True)
            if not opened:
                return j + 1, True
        j += 1
    memo.update(dict.fromkeys(opened, (n, False)))
    return n, False


def _string_end(text: Answer, i: int) -> int | None:
    """The end of the string opened at text[i]; a tripled quote opens a Python triple-quoted one
    (in JSON three quotes in a row never start a value), closed by the quotes that JSON goes on after."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        if quote not in text.triple_ends:  # found once per answer, so each string costs a bisection
            text.triple_ends[quote] = [m.end() for m in _TRIPLE_END[quote].finditer(text)]
        ends = text.triple_ends[quote]
        at = bisect.bisect_left(ends, i + 6)  # the closing quotes begin after the opening ones
        if at < len(ends):
            return ends[at]
        first = text.find(quote * 3, i + 3)
        return None if first < 0 else first + 3
    stop = _STRING_STOP[quote]
    j = i + 1
    while match := stop.search(text, j):
        if match.group() == quote:
            return match.end()
        j = match.end() + 1  # skip the escaped character
    return None


def skip(text: str, i: int, also: str = "") -> int:
    """The first index at or after i that is not whitespace (nor one of `also`)."""
    n = len(text)
    while i < n and (text[i].isspace() or text[i] in also):
        i += 1
    return i
