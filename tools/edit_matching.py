"""Where an edit's old text is in a file, and what the file reads once it is replaced: text in, text
out, nothing read or written.

Edits match in passes, each needing exactly one place: exact, then whole lines ignoring indentation
(the replacement is re-indented alike), then both again without line numbers echoed from read_file.
Two places in a pass stop the search. A failed edit tells the model where the nearest text is
(aider's best idea): small models often get the old text almost right.

Separate from the edit tools (tools/files.py), which load, check and write the file around it.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Indel

from tools.base import ToolError
from tools.text_files import leading_space


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _voted_windows(lines: list[str], want: list[str], count: int) -> list[int]:
    """The starts of the `count` windows most lines of `want` point at: each wanted line votes, weighted
    by its length and likeness, for the start its nearest file lines (rapidfuzz) would give the window.

    Linear in the file (rapidfuzz compares each chosen wanted line with each distinct file line), and
    it finds a window whose every line has a typo, a renamed name say.
    """
    at: dict[str, list[int]] = {}
    for number, line in enumerate(lines):
        if key := line.strip():
            at.setdefault(key, []).append(number)
    offsets: dict[str, list[int]] = {}
    for j, line in enumerate(want):
        if key := line.strip():
            offsets.setdefault(key, []).append(j)
    voters = sorted(offsets, key=len, reverse=True)[:16]  # the longest lines say the most
    keys, votes = list(at), {}
    for wanted in voters:
        for found, score, _ in process.extract(wanted, keys, scorer=fuzz.ratio, limit=16, score_cutoff=50):
            for number in at[found][:64]:
                for j in offsets[wanted]:
                    start = number - j
                    votes[start] = votes.get(start, 0.0) + score * len(wanted)
    windows = max(1, len(lines) - len(want) + 1)
    ranked = heapq.nlargest(count, votes, key=votes.__getitem__)
    return sorted({min(max(0, start), windows - 1) for start in ranked})


# Up to this many (windows x characters of old_string squared) every window is compared, ~50 ms of
# rapidfuzz here, and the best window is exact; above it, the best of the 32 windows the lines vote for.
FULL_SCAN_CELLS = 5_000_000_000


def _split_lines(text: str) -> list[str]:
    """Lines as read_file numbers them: split at "\n" only, "\r" taken off."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def nearest_lines(text: str, old: str, context: int = 1) -> str:
    """The window of the file most like `old`, with line numbers, to show the model what is there.

    Similarity is rapidfuzz's Indel ratio, 2 x the longest common subsequence / both lengths (difflib's
    ratio, exact and in C++). The difflib scan of every window it replaces took 11-14 s for a 20-line
    old_string on 3,000 lines; this takes ~10 ms (examples/bench_edits.py).
    """
    lines = _split_lines(text)
    want = _split_lines(old.strip("\n")) or [old]
    size = max(1, len(want))
    target = "\n".join(want)
    windows = max(1, len(lines) - size + 1)
    if windows * max(1, len(target)) ** 2 <= FULL_SCAN_CELLS:
        starts: list[int] | range = range(windows)
    else:
        starts = _voted_windows(lines, want, count=32)
    choices = ("\n".join(lines[i : i + size]) for i in starts)
    found = process.extractOne(target, choices, scorer=Indel.normalized_similarity)
    best, best_at = (found[1], starts[found[2]]) if found else (0.0, 0)
    lo, hi = max(0, best_at - context), min(len(lines), best_at + size + context)
    shown = "\n".join(f"{n + 1:>5}| {lines[n]}" for n in range(lo, hi))
    return f"The closest text ({best:.0%} similar) is at lines {best_at + 1}-{best_at + size}:\n{shown}"


# Line numbers a model copied from read_file ("  12| code") or from other listings into its old_string.
_NUMBERED = (
    re.compile(
        r"^[ \t]*>?[ \t]*\d+[ \t]*\|[ ]?"
    ),  # read_file, nearest_lines, a lint: "  12| code", ">12 | code"
    re.compile(r"^[ \t]*\d+:[ ]?"),  # grep -n, "12: code"
    re.compile(r"^[ \t]*\d+\t"),  # cat -n
    re.compile(r"^[ \t]*\d+  "),  # "  12  code"
)
_ONLY_A_NUMBER = re.compile(r"^[ \t]*>?[ \t]*\d+[ \t]*[|:]?[ \t]*$")  # a numbered empty line


def strip_line_numbers(text: str) -> str | None:
    """`text` without a line-number prefix on every line, or None when its lines do not all carry one."""
    lines = text.splitlines(keepends=True)
    for pattern in _NUMBERED:
        out, numbered = [], False
        for line in lines:
            body = line.rstrip("\r\n")
            end = line[len(body) :]
            if not body.strip():
                out.append(line)
            elif _ONLY_A_NUMBER.match(body):
                out.append(end)
            elif match := pattern.match(body):
                out.append(body[match.end() :] + end)
                numbered = True
            else:
                break
        else:
            if numbered:
                return "".join(out)
    return None


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    text: str


def _exact_spans(text: str, old: str, new: str) -> list[_Span]:
    spans, at = [], 0
    while (at := text.find(old, at)) != -1:
        end = at + len(old)
        span = _Span(at, end, new)
        line_start = text.rfind("\n", 0, at) + 1
        if old.endswith("\n") and at > line_start and not text[line_start:at].strip():
            # Whole lines found from inside their indentation: lines written without it, as
            # SEARCH/REPLACE blocks often are. Deleting takes the indentation too, and one line
            # replaced by several indents them all like the line it replaces.
            if not new:
                span = _Span(line_start, end, "")
            elif "\n" not in old[:-1] and len(loose := _loose_spans(text[line_start:end], old, new)) == 1:
                span = _Span(line_start + loose[0].start, line_start + loose[0].end, loose[0].text)
        spans.append(span)
        at = end
    return spans


def _loose_spans(text: str, old: str, new: str) -> list[_Span]:
    """Whole lines equal to old's but for leading (and trailing) whitespace, shifted by one uniform indent.

    The replacement gets the same shift (aider's replace_part_with_missing_leading_whitespace) and the
    file's own line ending, so CRLF files and a missing final newline are matched too.
    """
    old_lines, new_lines = old.splitlines(), new.splitlines()
    filled = [line for line in old_lines + new_lines if line.strip()]
    if not any(line.strip() for line in old_lines):
        return []
    common = min(len(leading_space(line)) for line in filled)  # both outdented as far as they go together
    old_lines = [line[common:].rstrip() for line in old_lines]
    new_lines = [line[common:].rstrip() for line in new_lines]
    key = [line.lstrip() for line in old_lines]
    file_lines = text.splitlines(keepends=True)
    bare = [line.rstrip() for line in file_lines]
    starts = [0]
    for line in file_lines:
        starts.append(starts[-1] + len(line))
    size, spans, i = len(key), [], 0
    while i <= len(file_lines) - size:
        if bare[i].lstrip() == key[0] and [b.lstrip() for b in bare[i : i + size]] == key:
            shift = _uniform_shift(bare[i : i + size], old_lines)
            if shift is not None:
                first, last = file_lines[i], file_lines[i + size - 1]
                eol = first[len(first.rstrip("\r\n")) :] or "\n"
                ends = last[len(last.rstrip("\r\n")) :]
                body = eol.join(shift + line if line else "" for line in new_lines)
                spans.append(_Span(starts[i], starts[i + size], body + ends if new_lines else ""))
                i += size
                continue
        i += 1
    return spans


def _uniform_shift(found: list[str], wanted: list[str]) -> str | None:
    """The indentation the file adds to every non-blank wanted line, when it is one and the same."""
    shifts = {f[: len(f) - len(w)] for f, w in zip(found, wanted, strict=True) if w}
    if len(shifts) != 1:
        return None
    shift = shifts.pop()
    return shift if all(f.endswith(w) for f, w in zip(found, wanted, strict=True) if w) else None


def _matches(text: str, old: str, new: str) -> Iterator[tuple[str, list[_Span]]]:
    """The passes, loosest last, each with what it found; the caller stops at the first that found any."""
    yield "", _exact_spans(text, old, new)
    yield "ignoring indentation", _loose_spans(text, old, new)
    plain_old = strip_line_numbers(old)
    if plain_old is not None and plain_old.strip():
        plain_new = strip_line_numbers(new)
        plain_new = new if plain_new is None else plain_new
        yield "without the line numbers", _exact_spans(text, plain_old, plain_new)
        yield "without the line numbers, ignoring indentation", _loose_spans(text, plain_old, plain_new)


def apply_edit(text: str, old: str, new: str, replace_all: bool, rel: str) -> tuple[str, str, int]:
    """`text` with one edit made: (the new text, how it matched, how many places). ToolError, naming
    what to fix, when it cannot be made; the caller has written nothing yet."""
    if not old:
        raise ToolError("old_string is empty. To create or overwrite a whole file use write_file.")
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing would change.")
    # Exact first, then looser passes; a pass that finds two places stops the search, since a
    # looser one would only guess between them.
    for how, spans in _matches(text, old, new):
        if len(spans) > 1 and not replace_all:
            at = [str(_line_of(text, span.start)) for span in spans]
            listed = ", ".join(at[:10]) + (", ..." if len(at) > 10 else "")
            raise ToolError(
                f"old_string matches {len(spans)} places in {rel}{' ' + how if how else ''} "
                f"(lines {listed}); the file is unchanged. Include more surrounding lines so it "
                "matches exactly one, or set replace_all to true."
            )
        if spans:
            break
    else:
        hint = ""
        stripped = [line.strip() for line in old.splitlines()]
        if stripped and all(s in text for s in stripped if s):
            hint = " Every line exists in the file, but with different indentation or line breaks."
        raise ToolError(
            f"old_string was not found in {rel}; the file is unchanged.{hint}\n" + nearest_lines(text, old)
        )
    pieces, at = [], 0
    for span in spans:
        pieces += [text[at : span.start], span.text]
        at = span.end
    after = "".join([*pieces, text[at:]])
    if after == text:
        raise ToolError(f"This edit leaves {rel} as it is ({how or 'exact match'}); nothing changed.")
    return after, how, len(spans)
