"""A failed check's output made readable for a small model: the same traceback printed three times is
said once, and the lines of the project that the output points at are shown, numbered, where they are.

On one run of the small suite the 1.5B re-sent its files unchanged after 11 of 12 failed checks: it was
shown whole files and asked for whole files. The tracebacks mostly named one line
(`intervals.py:27: TypeError`); pointing at that line and asking for a SEARCH/REPLACE there is what
this module makes possible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent.core.code_finder import is_test_file

# `File "x.py", line 27, in f` (Python tracebacks), `x.py:27: TypeError` / `x.py:27: in f` (pytest),
# `x.go:27:5: undefined: y` (compilers and linters).
_PYTHON_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')
_PATH_LINE = re.compile(r"(?:^|[\s(])(?P<path>[\w./\\-]+\.\w+):(?P<line>\d+)(?::\d+)?:")
REPEAT_MIN = 4  # lines: a repeated run shorter than this is not worth a "same as above"
WINDOW = 4  # lines shown before and after a located line
MAX_LOCATIONS = 2


@dataclass(frozen=True)
class Location:
    path: str  # relative to the workspace, POSIX
    line: int

    @property
    def in_tests(self) -> bool:
        return is_test_file(self.path)


@dataclass
class CheckFailure:
    """What the model is told after a failed check: the verdict and output (`head`), the located lines
    (`where`), what to do (`tail`); and the places and the error itself, for a protocol that shows the
    files whole with the error written on its line (the blocks protocol)."""

    head: str
    where: str
    tail: str
    locations: list[Location]
    error: str = ""  # the exception line of the output, e.g. "TypeError: 'tuple' object does not ..."

    @property
    def message(self) -> str:
        return "".join([self.head, self.where, self.tail])


# Written at the end of a located line of a file shown to the model (and taken off what it writes back,
# by `marks_off`): a small model copies whole files, so the error goes where it copies.
MARK = "<- the check failed here"
_COMMENT = {".py": "#", ".sh": "#", ".rb": "#", ".toml": "#", ".yaml": "#", ".yml": "#", ".js": "//",
            ".jsx": "//", ".ts": "//", ".tsx": "//", ".go": "//", ".rs": "//", ".c": "//", ".h": "//",
            ".cpp": "//", ".java": "//", ".kt": "//", ".swift": "//"}  # fmt: skip
LINT_MARK = "<- the lint found a problem here"
_MARKED = re.compile(r"[ \t]*(?:#|//) (?:" + re.escape(MARK) + "|" + re.escape(LINT_MARK) + r").*$", re.M)
_ERROR_LINE = re.compile(r"^(?:E\s+)?((?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Failure)\b.*)$", re.M)


def error_line(output: str) -> str:
    """The last exception line of a check's output ('' when there is none)."""
    found = _ERROR_LINE.findall(output)
    return found[-1].strip()[:200] if found else ""


def marked(path: str, text: str, notes: dict[int, str], mark: str = MARK) -> str | None:
    """`text` with `mark` and the line's note as a comment at the end of each line of `notes` ({line:
    note}); None for a language whose comments are not known here."""
    comment = _COMMENT.get(PurePosixPath(path).suffix)
    if comment is None:
        return None
    out = text.splitlines()
    for number, note in notes.items():
        if 1 <= number <= len(out):
            out[number - 1] = f"{out[number - 1]}  {comment} {mark}{': ' + note if note else ''}"
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def marks_off(text: str) -> str:
    """`text` without the marks `marked` wrote (the model copies them back with the file)."""
    return _MARKED.sub("", text) if MARK in text or LINT_MARK in text else text


def condense(output: str) -> str:
    """`output` with each run of at least REPEAT_MIN lines that already appeared above replaced by one
    line saying so (pytest prints the same traceback once per failing test)."""
    lines = output.splitlines()
    if len(lines) < 2 * REPEAT_MIN:
        return output
    first_seen: dict[tuple[str, ...], int] = {}
    out: list[str] = []
    i = 0
    while i < len(lines):
        key = tuple(lines[i : i + REPEAT_MIN])
        earlier = first_seen.get(key) if len(key) == REPEAT_MIN and any(s.strip() for s in key) else None
        if earlier is not None and earlier + REPEAT_MIN <= i:
            n = REPEAT_MIN  # extend the run while it goes on matching the earlier one
            while i + n < len(lines) and earlier + n < i and lines[i + n] == lines[earlier + n]:
                n += 1
            out.append(f"[... the same {n} lines as above ...]")
            i += n
            continue
        if len(key) == REPEAT_MIN:
            first_seen.setdefault(key, i)
        out.append(lines[i])
        i += 1
    return "\n".join(out) + ("\n" if output.endswith("\n") else "")


def locate(output: str, workdir: Path) -> list[Location]:
    """The places in the workspace's own files that `output` points at, the most telling first: the
    innermost frame of each traceback (where the error was raised), then code before tests. Files
    outside the workspace (the standard library, site-packages, a virtualenv) are left out."""
    root = workdir.resolve()
    found: list[tuple[int, int, Location]] = []  # (rank, order, location)
    lines = output.splitlines()
    for number, text in enumerate(lines):
        for pattern in (_PYTHON_FRAME, _PATH_LINE):
            for match in pattern.finditer(text):
                location = _in_workspace(match["path"], int(match["line"]), root)
                if location is None:
                    continue
                innermost = pattern is _PATH_LINE or _last_frame(lines, number)
                rank = (0 if innermost else 2) + (1 if location.in_tests else 0)
                found.append((rank, number, location))
    ordered: list[Location] = []
    for _, _, location in sorted(found, key=lambda f: (f[0], f[1])):
        if location not in ordered:
            ordered.append(location)
    return ordered


def window(text: str, line: int, around: int = WINDOW) -> str:
    """Lines `line - around` to `line + around` of `text`, numbered as read_file numbers them (so that
    a SEARCH block copied with its numbers still matches: tools/edit_matching.py strips them)."""
    lines = text.splitlines()
    lo, hi = max(1, line - around), min(len(lines), line + around)
    width = len(str(hi))
    return "\n".join(f"{n:>{width}}| {lines[n - 1]}" for n in range(lo, hi + 1))


def where_it_failed(locations: list[Location], workdir: Path) -> str:
    """The located lines as the model should read them: each file and line, then the lines around it."""
    parts = []
    for location in locations[:MAX_LOCATIONS]:
        try:
            text = (workdir / location.path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if location.line > len(text.splitlines()):
            continue
        test = " (a test: the fix usually belongs in the code it tests)" if location.in_tests else ""
        parts.append(f"{location.path}, line {location.line}{test}:\n{window(text, location.line)}")
    return "\n\n".join(parts)


def _last_frame(lines: list[str], number: int) -> bool:
    """Whether the `File "..."` frame on line `number` is the last of its traceback (the next frame
    line, if any, comes after the exception line)."""
    for text in lines[number + 1 : number + 40]:
        if _PYTHON_FRAME.search(text):
            return False
        if text and not text.startswith((" ", "\t")):
            return True  # the exception line ends the traceback
    return True


def _in_workspace(path: str, line: int, root: Path) -> Location | None:
    if line < 1:
        return None
    candidate = Path(path)
    full = (candidate if candidate.is_absolute() else root / candidate).resolve()
    try:
        rel = full.relative_to(root)
    except ValueError:
        return None
    if any(part.startswith(".") or part in ("site-packages", "node_modules") for part in rel.parts):
        return None  # .venv, .git, a tool's cache: not the project's code
    return Location(rel.as_posix(), line) if full.is_file() else None


# The task's own words for what failed. The 1.5B, told `AssertionError: python3 fizzbuzz.py printed ''`,
# sent fizzbuzz.py back without its `__main__` block four rounds running; the task's sentence "Running
# `python3 fizzbuzz.py` prints ..." was 20 turns behind it (fizzbuzz, csv-totals' "rounded to 2
# decimals"). Sentences are matched to the error by the words they share, compared by
# their first five letters (`printed` and `prints`), a word the rarer in the task the more telling.
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_COMMON = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "not",
        "was",
        "are",
        "has",
        "have",
        "its",
        "into",
        "than",
        "then",
        "when",
        "what",
        "which",
        "should",
        "must",
        "does",
        "did",
        "each",
        "one",
        "all",
        "any",
        "but",
        "can",
        "will",
        "would",
        "expected",
        "assert",
        "assertion",
        "assertionerror",
        "error",
        "true",
        "false",
        "none",
        "got",
        "value",
        "values",
        "returns",
        "return",
        "file",
        "line",
        "test",
        "tests",
    ]
)
MAX_ASKED = 2  # sentences quoted at most


def _stems(text: str) -> set[str]:
    return {word.lower()[:5] for word in _WORD.findall(text) if word.lower() not in _COMMON}


def task_sentences(task: str, error: str) -> list[str]:
    """The sentences of `task` that the error is about, in the task's order; [] when none is. A shared
    word counts the more, the fewer sentences have it (`books`, in the one sentence with the output's
    example, is worth more than `fizzbuzz`, in every one); a sentence is quoted from a score of 1,
    at most MAX_ASKED of them, the best first."""
    wanted = _stems(error)
    if not wanted or not task:
        return []
    sentences = [
        " ".join(s.split())
        for s in re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+|\n\s*[-*]\s+|\n\s*\n", task)
        if s.strip()
    ]
    stems = [_stems(sentence) & wanted for sentence in sentences]
    weight = {stem: 1 / sum(stem in found for found in stems) for found in stems for stem in found}
    scored = [(sum(weight[stem] for stem in found), i) for i, found in enumerate(stems)]
    best = sorted((item for item in scored if item[0] >= 1), reverse=True)[:MAX_ASKED]
    return [sentences[i] for _, i in sorted(best, key=lambda item: item[1])]
