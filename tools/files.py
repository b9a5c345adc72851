"""File tools: read_file, write_file, edit_file and multi_edit, all inside the workspace boundary.

A failed edit changes nothing and tells the model where the nearest text is (how an edit's old text is
found, in passes from exact to loose: tools/edit_matching.py). Listing and search: tools/search.py.

What the tools promise about the user's files:
- A write is atomic: a temp file in the same folder, fsync, rename, fsync of the folder; the file's mode
  is kept. A crash or kill -9 at any point leaves the old file or the new one, never a mix
  (tools/text_files.py, which also loads a file as text with its conventions).
- A file keeps its conventions through edits: CRLF line endings (matched and written back as CRLF)
  and a missing final newline. write_file keeps them too when it replaces a file.
- Only UTF-8 text is changed. Binary files and files in another encoding are refused by every tool
  that writes (changing them as text would rewrite bytes the change does not touch); read_file shows
  them as such.
- read_file pages through a file of any size without loading it; edits load at most MAX_EDIT_BYTES.
- A file changed on disk after the model read it with read_file is not edited or replaced: the model
  is asked to read it again (per-session read stamps in ToolContext.state, tools/shown.py).
- Nothing inside .git is written, in any mode: git's hooks and config would run as the user later,
  outside any sandbox, unseen by `git diff` and `agent undo` (tools/protected.py). The model is told
  to use git commands instead. Other places that run code later ask first (tools/permissions.py).
- The work runs in a thread (asyncio.to_thread) or a child process, never on the event loop, so Esc
  and Ctrl+C are answered at once whatever a tool is doing.
"""

from __future__ import annotations

import asyncio
import codecs
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel, Field

from tools.base import TASK_TEXT, ToolContext, ToolError, ToolResult
from tools.definition_edit import definitions_change
from tools.edit_lint import add_missing_imports, imports_note, lint_baseline, report_lint
from tools.edit_matching import apply_edit
from tools.file_paths import existing_stat, file_stat, resolve_path, resolve_to_change
from tools.shown import (
    check_fresh,
    check_shown_whole,
    file_stamp,
    fits_shown,
    mark_shown_whole,
    refresh_stamp,
    refuse_unseen,
    remember_read,
    shown_definitions,
)
from tools.text_files import (
    MAX_EDIT_BYTES,
    binary_refusal,
    encode_text,
    is_binary,
    load_text,
    short_diff,
    write_atomically,
)

MAX_READ_BYTES = 256 * 1024  # what one read_file shows at most
MAX_LINE_CHARS = 16_000  # a longer line is shown cut (minified code, data on one line)
CHUNK = 1024 * 1024  # what paging and scanning read at a time


# ---------------------------------------------------------------------------------------------- read


class ReadArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root.")
    offset: int = Field(1, ge=1, description="First line to show (1-based).")
    limit: int = Field(400, ge=1, le=2000, description="How many lines to show.")


@dataclass
class _Page:
    lines: list[str] = field(default_factory=list)  # the shown lines, "\n" and "\r" taken off
    total: int = 0  # lines in the whole file
    bad_line: int | None = None  # the first shown line that is not UTF-8
    stopped_at: int | None = None  # the line the byte cap stopped at


def _read_page(f, offset: int, limit: int) -> _Page:
    """Lines offset.. of an open binary file, reading it in chunks: memory stays near CHUNK + what is
    shown, whatever the file's size. Lines are split at "\n" only, as grep and editors count them."""
    page = _Page()
    newlines, last = 0, b""
    while newlines < offset - 1:  # skip whole chunks to the first wanted line
        at = f.tell()
        chunk = f.read(CHUNK)
        if not chunk:
            break
        last = chunk[-1:]
        count = chunk.count(b"\n")
        if newlines + count < offset - 1:
            newlines += count
            continue
        index = -1
        for _ in range(offset - 1 - newlines):
            index = chunk.index(b"\n", index + 1)
        newlines = offset - 1
        f.seek(at + index + 1)
    size = 0
    while newlines == offset - 1 + len(page.lines) and len(page.lines) < limit:
        raw = f.readline(MAX_LINE_CHARS * 4)  # a line longer than that is cut, its rest skipped
        if not raw:
            break
        last = raw[-1:]
        cut = not raw.endswith(b"\n")
        extra = 0
        while cut:
            rest = f.readline(CHUNK)
            if not rest:
                break
            extra += len(rest)
            last = rest[-1:]
            cut = not rest.endswith(b"\n")
        ends_line = last == b"\n"
        decoder = codecs.getincrementaldecoder("utf-8")()
        body = raw.rstrip(b"\n").rstrip(b"\r") if not extra else raw
        try:
            line = decoder.decode(body, final=not extra)
        except UnicodeDecodeError:
            page.bad_line = page.bad_line or offset + len(page.lines)
            line = body.decode("utf-8", "replace")
        if len(line) > MAX_LINE_CHARS or extra:
            line = line[:MAX_LINE_CHARS] + f" ... (line cut: {len(raw) + extra} bytes in all)"
        size += len(line)
        if size > MAX_READ_BYTES and page.lines:
            page.stopped_at = offset + len(page.lines)
            f.seek(f.tell() - len(raw) - extra)  # that line is counted below with the rest
            last = b""
            break
        page.lines.append(line)
        newlines += 1 if ends_line else 0
    while chunk := f.read(CHUNK):  # the rest is only counted
        newlines += chunk.count(b"\n")
        last = chunk[-1:]
    page.total = newlines + (1 if last and last != b"\n" else 0)
    return page


class ReadFile:
    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = "Read a text file, with line numbers. Use offset and limit for long files."
    Args: ClassVar[type[BaseModel]] = ReadArgs
    effect: ClassVar[str] = "read"

    def summary(self, args: ReadArgs) -> str:
        return f"{args.path} ({args.offset}-{args.offset + args.limit - 1})"

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._read, args, ctx)

    def _read(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_path(ctx, args.path)
        rel = ctx.workspace.relative(path)
        existing_stat(path, rel)
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())  # the version read is the version stamped
            if is_binary(f.read(8192)):
                raise ToolError(
                    f"{rel} is a binary file ({st.st_size} bytes); it cannot be shown as text "
                    "(UTF-16 text counts as binary here)."
                )
            f.seek(0)
            page = _read_page(f, args.offset, args.limit)
        remember_read(ctx, path, st)
        if not page.lines and page.total:
            raise ToolError(f"{rel} has {page.total} lines; offset {args.offset} is past the end.")
        start = args.offset - 1
        width = len(str(start + len(page.lines)))
        body = [f"{number:>{width}}| {line}" for number, line in enumerate(page.lines, args.offset)]
        if page.stopped_at:
            body.append(f"... (stopped at {MAX_READ_BYTES} bytes; continue with offset={page.stopped_at})")
        shown_to = start + len(page.lines)
        tail = (
            f"\n({page.total} lines in all; more from offset={shown_to + 1})" if shown_to < page.total else ""
        )
        if page.bad_line:
            tail += (
                f"\n(Not UTF-8 text: line {page.bad_line} has bytes that are not, shown as \ufffd. The "
                "edit tools refuse this file so that those bytes are not lost; change it with bash.)"
            )
        text = "\n".join(body) if body else "(empty file)"
        whole = args.offset == 1 and shown_to >= page.total and not page.stopped_at and not page.bad_line
        if whole and fits_shown(ctx, text + tail) and file_stamp(path.stat()) == file_stamp(st):
            mark_shown_whole(ctx.state, path)
        return ToolResult(True, text + tail, {"path": rel, "lines": [args.offset, shown_to]})


# ---------------------------------------------------------------------------------------------- write


class WriteArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root. Folders are created.")
    content: str = Field(description="The whole new content of the file.")


class WriteFile:
    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = (
        "Create a file or replace all of its content. For small changes use edit_file. An existing "
        "file must have been read whole first."
    )
    Args: ClassVar[type[BaseModel]] = WriteArgs
    effect: ClassVar[str] = "edit"

    def __init__(self, max_deleted_share: float = 0.5, min_deleted_lines: int = 20) -> None:
        # A rewrite deleting more than this share of an existing file's lines (and at least
        # min_deleted_lines of them) asks in every approval mode: settings.rewrite_guard.
        self.max_deleted_share = max_deleted_share
        self.min_deleted_lines = min_deleted_lines

    def risk(self, args: WriteArgs, ctx: ToolContext) -> str | None:
        """Why this rewrite must be approved whatever the mode, or None: it would delete most of an
        existing file, or definitions that the task does not name."""
        try:
            path = resolve_path(ctx, args.path)
            if not path.is_file() or path.stat().st_size > MAX_EDIT_BYTES:
                return None
            old = path.read_text(encoding="utf-8")
            check_shown_whole(ctx, path, ctx.workspace.relative(path), path.stat())
        except (ToolError, OSError, UnicodeDecodeError):
            return None  # the write itself refuses, and says why (never shown whole, binary, ...)
        return rewrite_risk(
            ctx.workspace.relative(path), old, args.content, str(ctx.state.get(TASK_TEXT, "")),
            self.max_deleted_share, self.min_deleted_lines,
        )  # fmt: skip

    def summary(self, args: WriteArgs) -> str:
        return f"{args.path} ({len(args.content.splitlines())} lines)"

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._write, args, ctx)

    def _write(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_to_change(ctx, args.path)
        rel = ctx.workspace.relative(path)
        st = file_stat(path, rel)
        check_fresh(ctx, path, rel, st)
        content, notes, before = args.content, [], ""
        partly = ""  # what a block of definitions did to a file the model was not shown whole
        encode = encode_text
        if st is not None and st.st_size > MAX_EDIT_BYTES:
            # Replaced without a diff; only a binary file is refused.
            with open(path, "rb") as f:
                if is_binary(f.read(8192)):
                    raise binary_refusal(rel, st.st_size, self.name)
            check_shown_whole(ctx, path, rel, st)
            before = None
        elif st is not None:
            old = load_text(path, rel, st, self.name)  # binary or not UTF-8: refused first, as such
            try:
                check_shown_whole(ctx, path, rel, st)
            except ToolError:
                # Not read whole: only a block of definitions the model was shown may go in.
                task = str(ctx.state.get(TASK_TEXT, ""))
                changed = rel.endswith(".py") and definitions_change(
                    old.text, content.replace("\r\n", "\n"), shown_definitions(ctx.state, path), task
                )
                if not changed:
                    raise refuse_unseen(ctx, path, rel, st, content, task) from None
                content, partly = changed
                if content == old.text:
                    raise ToolError(
                        f"Not written: the definitions you wrote are exactly as they are in {rel}, so nothing "
                        "would change. Write them again with your change in them."
                    ) from None
            before = old.text
            given = content.replace("\r\n", "\n") if old.crlf else content
            if old.crlf and given == content and "\n" in content:
                notes.append("kept its CRLF line endings")
            content = old.keep_conventions(given)
            if content != given:
                notes.append("kept it without a final newline")
            encode = old.encode
        content, imported = add_missing_imports(ctx, path, rel, before if st is not None else None, content)
        data = encode(content, rel)
        baseline = lint_baseline(ctx, path, rel)
        write_atomically(path, data)
        refresh_stamp(ctx, path)
        if not partly:
            mark_shown_whole(ctx.state, path)  # the model knows all of what it wrote
        diff = short_diff(before, content, rel) if before is not None else ""
        verb = "Replaced" if st is not None else "Created"
        lines = len(content.splitlines())
        said = f"{verb} {rel} ({lines} lines{'; ' + ', '.join(notes) if notes else ''})."
        if partly:
            said = f"Changed {rel}: {partly}; its other lines are as they were ({lines} lines in all)."
        if before is None:
            said += " The old content was too big to diff."
        said += imports_note(rel, imported)
        result = ToolResult(True, said, {"path": rel, "diff": diff})
        return report_lint(ctx, result, path, rel, before if st is not None else None, content, baseline)


TOP_LEVEL_DEFINITION = re.compile(r"^(?:async[ \t]+)?(?:def|class|function|func|fn)[ \t]+(\w+)", re.M)


def rewrite_risk(
    rel: str, old: str, new: str, task: str, max_share: float = 0.5, min_lines: int = 20
) -> str | None:
    """Why rewriting `old` as `new` deletes more than a task should, or None. The share of lines counts
    from `min_lines` deleted; a definition (or a Markdown section) the task does not name counts in a
    file of any size: the 1.5B, asked to add a section to an 11-line README, wrote the section alone
    (readme-usage)."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    if len(old_lines) >= min_lines:
        matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
        deleted = sum(i2 - i1 for op, i1, i2, _, _ in matcher.get_opcodes() if op in ("delete", "replace"))
        if deleted >= min_lines and deleted > max_share * len(old_lines):
            return (
                f"writing {rel} whole would delete {deleted:,} of its {len(old_lines):,} lines "
                f"({deleted / len(old_lines):.0%}; the guard is {max_share:.0%}). Change only the part you "
                "mean with a SEARCH/REPLACE edit (edit_file)"
            )
    gone = _definitions(rel, old) - _definitions(rel, new)
    unnamed = sorted(name for name in gone if not _named(name, task))
    if unnamed:
        shown = ", ".join(unnamed[:5]) + (f" and {len(unnamed) - 5} more" if len(unnamed) > 5 else "")
        what = "sections" if rel.lower().endswith(MARKDOWN) else "definitions"
        return (
            f"writing {rel} whole would delete {what} the task does not name: {shown}. Change only "
            "the part you mean with a SEARCH/REPLACE edit (edit_file), or write the file whole with them kept"
        )
    return None


def _named(name: str, task: str) -> bool:
    """Whether the task names `name`, or a name it is built on: renaming `calc_total` renames
    `test_calc_total_applies_the_discount` too (rename-function: refused as a deletion)."""
    if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", task):
        return True
    return any(len(word) >= 4 and word in name for word in _identifiers(task))


def _identifiers(text: str) -> set[str]:
    """The code names of a text: words in backticks, snake_case and camelCase words."""
    quoted = {word for span in re.findall(r"`([^`\n]+)`", text) for word in re.findall(r"\w+", span)}
    return quoted | set(re.findall(r"\b(?:\w+_\w+|[a-z]+[A-Z]\w*)\b", text))


MARKDOWN = (".md", ".markdown")
MARKDOWN_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _definitions(rel: str, text: str) -> set[str]:
    """What a rewrite must not drop unasked: top-level definitions, and in Markdown its headings."""
    if rel.lower().endswith(MARKDOWN):
        return set(MARKDOWN_HEADING.findall(text))
    return set(TOP_LEVEL_DEFINITION.findall(text))


# ---------------------------------------------------------------------------------------------- edit


class EditArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root.")
    old_string: str = Field(description="Exact text to replace, including indentation. Must match once.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


def _edit(ctx: ToolContext, path_arg: str, edits: list[tuple[str, str, bool]], tool: str):
    """Load, apply `edits` in order, write once: all of them or, when one fails, nothing.

    Returns (rel, before, after, [(how, count)], path, the lint baseline, the imports added) with
    before and after as LF text; the file is written with its own line endings and final newline.
    """
    path = resolve_to_change(ctx, path_arg)
    rel = ctx.workspace.relative(path)
    st = existing_stat(path, rel)
    check_fresh(ctx, path, rel, st)
    file = load_text(path, rel, st, tool)
    text, done = file.text, []
    for number, (old, new, replace_all) in enumerate(edits, 1):
        if file.crlf:  # the file is matched as LF; a model may have copied the \r too
            old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
        try:
            text, how, count = apply_edit(text, old, new, replace_all, rel)
        except ToolError as exc:
            if len(edits) == 1:
                raise
            earlier = f" (line numbers as the file reads after edits 1-{number - 1})" if number > 1 else ""
            raise ToolError(
                f"Edit {number} of {len(edits)} failed, so none of them was made and {rel} is "
                f"unchanged{earlier}: {exc}\nFix edit {number} and send all {len(edits)} again."
            ) from exc
        done.append((how, count))
    text, imported = add_missing_imports(ctx, path, rel, file.text, text)
    text = file.keep_conventions(text)
    if text == file.text:
        raise ToolError(f"{rel} would be left as it is (it keeps having no final newline); nothing changed.")
    baseline = lint_baseline(ctx, path, rel)
    write_atomically(path, file.encode(text, rel))
    refresh_stamp(ctx, path)
    return rel, file.text, text, done, path, baseline, imported


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
        return await asyncio.to_thread(self._run, args, ctx)

    def _run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        edit = [(args.old_string, args.new_string, args.replace_all)]
        rel, before, after, [(how, count)], path, baseline, imported = _edit(ctx, args.path, edit, self.name)
        diff = short_diff(before, after, rel)
        done = f"Edited {rel}: {count} replacement{'s' if count > 1 else ''}"
        done += f" (matched {how})." if how else "."
        done += imports_note(rel, imported)
        result = ToolResult(True, f"{done}\n{diff}", {"path": rel, "diff": diff})
        return report_lint(ctx, result, path, rel, before, after, baseline)


class OneEdit(BaseModel):
    old_string: str = Field(description="Exact text to replace, including indentation.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


class MultiEditArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root.")
    edits: list[OneEdit] = Field(
        min_length=1,
        description="Replacements made in order, each in the text the ones before it left.",
    )


class MultiEdit:
    name: ClassVar[str] = "multi_edit"
    description: ClassVar[str] = (
        "Several exact replacements in one file, made in order, all or nothing: if any edit does not "
        "match, none is made. Each old_string must match exactly once, as in edit_file."
    )
    Args: ClassVar[type[BaseModel]] = MultiEditArgs
    effect: ClassVar[str] = "edit"

    def summary(self, args: MultiEditArgs) -> str:
        return args.path  # the path alone: permission rules match it as they match edit_file's

    async def run(self, args: MultiEditArgs, ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._run, args, ctx)

    def _run(self, args: MultiEditArgs, ctx: ToolContext) -> ToolResult:
        edits = [(e.old_string, e.new_string, e.replace_all) for e in args.edits]
        rel, before, after, done, path, baseline, imported = _edit(ctx, args.path, edits, self.name)
        diff = short_diff(before, after, rel)
        loose = [f"edit {n} matched {how}" for n, (how, _) in enumerate(done, 1) if how]
        count = sum(count for _, count in done)
        said = f"Edited {rel}: {len(done)} edit{'s' if len(done) > 1 else ''}, "
        said += f"{count} replacement{'s' if count > 1 else ''}"
        said += f" ({'; '.join(loose)})." if loose else "."
        said += imports_note(rel, imported)
        result = ToolResult(True, f"{said}\n{diff}", {"path": rel, "diff": diff})
        return report_lint(ctx, result, path, rel, before, after, baseline)
