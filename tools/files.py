"""File tools: read, write, exact edits, listing and search, all inside the workspace boundary.

A failed edit changes nothing and tells the model where the nearest text is (aider's best idea):
small models often get the old text almost right. Edits match in passes, each needing exactly one
place: exact, then whole lines ignoring indentation (the replacement is re-indented alike), then
both again without line numbers echoed from read_file. Two places in a pass stop the search.
"""

from __future__ import annotations

import difflib
import fnmatch
import heapq
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from tools.base import ToolContext, ToolError, ToolResult
from tools.workspace import OutsideWorkspace, Workspace

MAX_READ_BYTES = 256 * 1024
ALWAYS_SKIPPED = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
}


def _resolve(ctx: ToolContext, path: str) -> Path:
    try:
        return ctx.workspace.resolve(path)
    except OutsideWorkspace as exc:
        raise ToolError(str(exc)) from exc


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _read_text(path: Path, rel: str) -> str:
    if not path.exists():
        raise ToolError(f"{rel} does not exist.")
    if path.is_dir():
        raise ToolError(f"{rel} is a directory; use list_files to see what it holds.")
    data = path.read_bytes()
    if _is_binary(data):
        raise ToolError(f"{rel} is a binary file ({len(data)} bytes); it cannot be shown as text.")
    return data.decode("utf-8", errors="replace")


def write_atomically(path: Path, text: str) -> None:
    """Write through a temp file in the same folder and a rename: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def short_diff(before: str, after: str, rel: str, max_lines: int = 60) -> str:
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{rel}", f"b/{rel}", n=2
        )
    )
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more diff lines)\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# ---------------------------------------------------------------------------------------------- read


class ReadArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root.")
    offset: int = Field(1, ge=1, description="First line to show (1-based).")
    limit: int = Field(400, ge=1, le=2000, description="How many lines to show.")


class ReadFile:
    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = "Read a text file, with line numbers. Use offset and limit for long files."
    Args: ClassVar[type[BaseModel]] = ReadArgs
    effect: ClassVar[str] = "read"

    def summary(self, args: ReadArgs) -> str:
        return f"{args.path} ({args.offset}-{args.offset + args.limit - 1})"

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        path = _resolve(ctx, args.path)
        rel = ctx.workspace.relative(path)
        if path.is_file() and path.stat().st_size > 64 * MAX_READ_BYTES:
            raise ToolError(f"{rel} is {path.stat().st_size} bytes; use grep or bash (head, sed -n) on it.")
        lines = _read_text(path, rel).splitlines()
        start = args.offset - 1
        chosen = lines[start : start + args.limit]
        if not chosen and lines:
            raise ToolError(f"{rel} has {len(lines)} lines; offset {args.offset} is past the end.")
        width = len(str(start + len(chosen)))
        body, size = [], 0
        for number, line in enumerate(chosen, start + 1):
            size += len(line)
            if size > MAX_READ_BYTES:
                body.append(f"... (stopped at {MAX_READ_BYTES} bytes; continue with offset={number})")
                break
            body.append(f"{number:>{width}}| {line}")
        shown_to = start + len(body)
        tail = (
            f"\n({len(lines)} lines in all; more from offset={shown_to + 1})" if shown_to < len(lines) else ""
        )
        text = "\n".join(body) if body else "(empty file)"
        return ToolResult(True, text + tail, {"path": rel, "lines": [args.offset, shown_to]})


# ---------------------------------------------------------------------------------------------- write


class WriteArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root. Folders are created.")
    content: str = Field(description="The whole new content of the file.")


class WriteFile:
    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = (
        "Create a file or replace all of its content. For small changes use edit_file."
    )
    Args: ClassVar[type[BaseModel]] = WriteArgs
    effect: ClassVar[str] = "edit"

    def summary(self, args: WriteArgs) -> str:
        return f"{args.path} ({len(args.content.splitlines())} lines)"

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        path = _resolve(ctx, args.path)
        rel = ctx.workspace.relative(path)
        if path.is_dir():
            raise ToolError(f"{rel} is a directory.")
        before = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        existed = path.exists()
        write_atomically(path, args.content)
        diff = short_diff(before, args.content, rel)
        verb = "Replaced" if existed else "Created"
        lines = len(args.content.splitlines())
        return ToolResult(True, f"{verb} {rel} ({lines} lines).", {"path": rel, "diff": diff})


# ---------------------------------------------------------------------------------------------- edit


class EditArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root.")
    old_string: str = Field(description="Exact text to replace, including indentation. Must match once.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


_TOKEN = re.compile(r"\w+|[^\w\s]+")


def _likely_windows(lines: list[str], want: list[str], count: int) -> list[int]:
    """The starts of the `count` windows of len(want) lines sharing the most words and symbols with `want`.

    A sliding multiset overlap: linear in the file, so a full difflib ratio is left for a few windows.
    """
    size = len(want)
    windows = max(1, len(lines) - size + 1)
    wanted: dict[str, int] = {}
    for line in want:
        for token in _TOKEN.findall(line):
            wanted[token] = wanted.get(token, 0) + 1
    tokens = [_TOKEN.findall(line) for line in lines]
    have: dict[str, int] = {}
    shared = 0

    def add(line_tokens: list[str], step: int) -> int:
        change = 0
        for token in line_tokens:
            if token not in wanted:
                continue
            before = have.get(token, 0)
            have[token] = before + step
            if step > 0 and before < wanted[token]:
                change += 1
            elif step < 0 and before <= wanted[token]:
                change -= 1
        return change

    for line_tokens in tokens[:size]:
        shared += add(line_tokens, 1)
    scores = [shared]
    for i in range(1, windows):
        shared += add(tokens[i - 1], -1) + add(tokens[i + size - 1], 1)
        scores.append(shared)
    return sorted(heapq.nlargest(count, range(windows), key=scores.__getitem__))


def nearest_lines(text: str, old: str, context: int = 1) -> str:
    """The window of the file most like `old`, with line numbers, to show the model what is there."""
    lines = text.splitlines()
    want = old.strip("\n").splitlines() or [old]
    size = max(1, len(want))
    best, best_at = 0.0, 0
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(want))
    for i in _likely_windows(lines, want, count=8):
        matcher.set_seq1("\n".join(lines[i : i + size]))
        ratio = matcher.ratio()
        if ratio > best:
            best, best_at = ratio, i
    lo, hi = max(0, best_at - context), min(len(lines), best_at + size + context)
    shown = "\n".join(f"{n + 1:>5}| {lines[n]}" for n in range(lo, hi))
    return f"The closest text ({best:.0%} similar) is at lines {best_at + 1}-{best_at + size}:\n{shown}"


# Line numbers a model copied from read_file ("  12| code") or from other listings into its old_string.
_NUMBERED = (
    re.compile(r"^[ \t]*\d+[ \t]*\|[ ]?"),  # read_file, nearest_lines: "  12| code", also "12 | code"
    re.compile(r"^[ \t]*\d+:[ ]?"),  # grep -n, "12: code"
    re.compile(r"^[ \t]*\d+\t"),  # cat -n
    re.compile(r"^[ \t]*\d+  "),  # "  12  code"
)
_ONLY_A_NUMBER = re.compile(r"^[ \t]*\d+[ \t]*[|:]?[ \t]*$")  # a numbered empty line


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


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _loose_spans(text: str, old: str, new: str) -> list[_Span]:
    """Whole lines equal to old's but for leading (and trailing) whitespace, shifted by one uniform indent.

    The replacement gets the same shift (aider's replace_part_with_missing_leading_whitespace) and the
    file's own line ending, so CRLF files and a missing final newline are matched too.
    """
    old_lines, new_lines = old.splitlines(), new.splitlines()
    filled = [line for line in old_lines + new_lines if line.strip()]
    if not any(line.strip() for line in old_lines):
        return []
    common = min(_indent(line) for line in filled)  # both outdented as far as they go together
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


class EditFile:
    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = (
        "Replace exact text in a file. old_string must match the file exactly once (copy it from "
        "read_file output without the line numbers), unless replace_all is true."
    )
    Args: ClassVar[type[BaseModel]] = EditArgs
    effect: ClassVar[str] = "edit"

    def summary(self, args: EditArgs) -> str:
        return args.path

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        path = _resolve(ctx, args.path)
        rel = ctx.workspace.relative(path)
        text = _read_text(path, rel)
        if not args.old_string:
            raise ToolError("old_string is empty. To create or overwrite a whole file use write_file.")
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are the same; nothing would change.")
        # Exact first, then looser passes; a pass that finds two places stops the search, since a
        # looser one would only guess between them.
        for how, spans in _matches(text, args.old_string, args.new_string):
            if len(spans) > 1 and not args.replace_all:
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
            stripped = [line.strip() for line in args.old_string.splitlines()]
            if stripped and all(s in text for s in stripped if s):
                hint = " Every line exists in the file, but with different indentation or line breaks."
            raise ToolError(
                f"old_string was not found in {rel}; the file is unchanged.{hint}\n"
                + nearest_lines(text, args.old_string)
            )
        pieces, at = [], 0
        for span in spans:
            pieces += [text[at : span.start], span.text]
            at = span.end
        after = "".join([*pieces, text[at:]])
        if after == text:
            raise ToolError(f"This edit leaves {rel} as it is ({how or 'exact match'}); nothing changed.")
        write_atomically(path, after)
        diff = short_diff(text, after, rel)
        count = len(spans)
        done = f"Edited {rel}: {count} replacement{'s' if count > 1 else ''}"
        done += f" (matched {how})." if how else "."
        return ToolResult(True, f"{done}\n{diff}", {"path": rel, "diff": diff})


# ---------------------------------------------------------------------------------------------- list & search


def _in_git_repo(path: Path) -> bool:
    return any((p / ".git").exists() for p in (path, *path.parents))


def workspace_files(ws: Workspace, base: Path) -> list[Path]:
    """Files under `base`, honouring .gitignore (git's own rules inside a repo, pathspec outside)."""
    if _in_git_repo(base) and shutil.which("git"):
        result = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=base,
            capture_output=True,
            timeout=30,
        )
        if result.returncode == 0:
            names = [n for n in result.stdout.decode("utf-8", "replace").split("\0") if n]
            return sorted(base / n for n in names if (base / n).is_file())
    import pathspec

    # Outside git: the root's .gitignore (nested ones are not read), plus folders nobody wants listed.
    ignore = ws.root / ".gitignore"
    lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines() if ignore.is_file() else []
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    found = []
    for folder, dirs, files in os.walk(base):
        here = Path(folder)
        rel = here.relative_to(ws.root) if here.is_relative_to(ws.root) else Path(".")
        dirs[:] = sorted(d for d in dirs if d not in ALWAYS_SKIPPED and not spec.match_file(f"{rel / d}/"))
        found += [here / f for f in sorted(files) if not spec.match_file(str(rel / f))]
    return found


class ListArgs(BaseModel):
    path: str = Field(".", description="Folder to list, relative to the workspace root.")
    pattern: str | None = Field(
        None, description="Glob filter on the relative path, e.g. '**/*.py' or 'tests/*'."
    )
    limit: int = Field(300, ge=1, le=2000)


class ListFiles:
    name: ClassVar[str] = "list_files"
    description: ClassVar[str] = "List files under a folder, recursively, skipping what .gitignore ignores."
    Args: ClassVar[type[BaseModel]] = ListArgs
    effect: ClassVar[str] = "read"

    def summary(self, args: ListArgs) -> str:
        return args.path + (f" {args.pattern}" if args.pattern else "")

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        base = _resolve(ctx, args.path)
        if not base.is_dir():
            raise ToolError(f"{args.path} is not a folder.")
        rels = [str(p.relative_to(base)) for p in workspace_files(ctx.workspace, base)]
        if args.pattern:
            pattern = args.pattern
            rels = [
                r
                for r in rels
                if fnmatch.fnmatch(r, pattern) or fnmatch.fnmatch(r, pattern.removeprefix("**/"))
            ]
        shown = rels[: args.limit]
        more = f"\n... and {len(rels) - len(shown)} more" if len(rels) > len(shown) else ""
        return ToolResult(True, ("\n".join(shown) or "(no files)") + more, {"count": len(rels)})


class GrepArgs(BaseModel):
    pattern: str = Field(description="Regular expression to search for.")
    path: str = Field(".", description="File or folder to search, relative to the workspace root.")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. '*.py'.")
    ignore_case: bool = False
    max_results: int = Field(100, ge=1, le=1000)


class Grep:
    name: ClassVar[str] = "grep"
    description: ClassVar[str] = "Search file contents with a regular expression; prints path:line: text."
    Args: ClassVar[type[BaseModel]] = GrepArgs
    effect: ClassVar[str] = "read"

    def summary(self, args: GrepArgs) -> str:
        return f"{args.pattern!r} in {args.path}"

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        base = _resolve(ctx, args.path)
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {args.pattern!r}: {exc}.") from exc
        hits = self._ripgrep(args, base, ctx) if shutil.which("rg") else None
        if hits is None:
            hits = self._python(regex, args, base, ctx)
        shown = hits[: args.max_results]
        more = f"\n... stopped at {args.max_results} matches" if len(hits) > len(shown) else ""
        return ToolResult(True, ("\n".join(shown) or "(no matches)") + more, {"count": len(hits)})

    def _ripgrep(self, args: GrepArgs, base: Path, ctx: ToolContext) -> list[str] | None:
        cmd = ["rg", "--line-number", "--no-heading", "--color", "never", "--max-columns", "300"]
        cmd += ["-i"] if args.ignore_case else []
        cmd += ["--glob", args.glob] if args.glob else []
        cmd += ["-e", args.pattern, str(base)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ctx.workspace.root)
        if result.returncode not in (0, 1):
            return None
        root = str(ctx.workspace.root) + os.sep
        return [line.removeprefix(root) for line in result.stdout.splitlines()]

    def _python(self, regex: re.Pattern, args: GrepArgs, base: Path, ctx: ToolContext) -> list[str]:
        files = [base] if base.is_file() else workspace_files(ctx.workspace, base)
        hits: list[str] = []
        for path in files:
            if args.glob and not fnmatch.fnmatch(path.name, args.glob):
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if _is_binary(data):
                continue
            rel = ctx.workspace.relative(path)
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{rel}:{number}:{line[:300]}")
                    if len(hits) > args.max_results:
                        return hits
        return hits
