"""File tools: read, write, exact edits, listing and search, all inside the workspace boundary.

A failed edit changes nothing and tells the model where the nearest text is (aider's best idea):
small models often get the old text almost right. Edits match in passes, each needing exactly one
place: exact, then whole lines ignoring indentation (the replacement is re-indented alike), then
both again without line numbers echoed from read_file. Two places in a pass stop the search.

What the tools promise about the user's files:
- A write is atomic: a temp file in the same folder, fsync, rename, fsync of the folder; the file's mode
  is kept. A crash or kill -9 at any point leaves the old file or the new one, never a mix.
- A file keeps its conventions through edits: CRLF line endings (matched and written back as CRLF)
  and a missing final newline. write_file keeps them too when it replaces a file.
- Only UTF-8 text is changed. Binary files and files in another encoding are refused by every tool
  that writes (changing them as text would rewrite bytes the change does not touch); read_file shows
  them as such.
- read_file pages through a file of any size without loading it; edits load at most MAX_EDIT_BYTES.
- A file changed on disk after the model read it with read_file is not edited or replaced: the model
  is asked to read it again (per-session read stamps in ToolContext.state).
- Nothing inside .git is written, in any mode: git's hooks and config would run as the user later,
  outside any sandbox, unseen by `git diff` and `agent undo` (tools/protected.py). The model is told
  to use git commands instead. Other places that run code later ask first (tools/permissions.py).
- The work runs in a thread (asyncio.to_thread) or a child process, never on the event loop, so Esc
  and Ctrl+C are answered at once whatever a tool is doing.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import difflib
import errno
import fnmatch
import heapq
import os
import re
import secrets
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import ClassVar

from pydantic import BaseModel, Field
from rapidfuzz import fuzz, process
from rapidfuzz.distance import Indel

from tools import protected
from tools.base import ToolContext, ToolError, ToolResult
from tools.git import NO_HOOKS_ARGS
from tools.workspace import OutsideWorkspace, Workspace

MAX_READ_BYTES = 256 * 1024  # what one read_file shows at most
MAX_LINE_CHARS = 16_000  # a longer line is shown cut (minified code, data on one line)
MAX_EDIT_BYTES = 16 * 1024 * 1024  # edits and diffs load the whole file; bash (sed) can do bigger ones
CHUNK = 1024 * 1024  # what paging and scanning read at a time
READ_STAMPS = "files.read_stamps"  # ToolContext.state key: real path -> stamp of the file read_file saw
# ToolContext.state key: real path -> stamp of the version the model was shown whole (read_file of all of
# it, `cat FILE`, the task message, or a file it wrote itself). Only those may be rewritten whole.
SHOWN_WHOLE = "files.shown_whole"
NOT_SHOWN = "you have not been shown all of it"  # in the refusal; the blocks protocol reads it back
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


def _resolve_to_change(ctx: ToolContext, path: str) -> Path:
    """`_resolve` for the tools that change a file. They never write inside .git, whatever the mode
    (tools/protected.py): judged on the path as written and on the file its links lead to."""
    real = _resolve(ctx, path)
    raw = Path(os.path.expanduser(path))
    written = PurePosixPath(os.path.normpath(raw if raw.is_absolute() else ctx.workspace.root / raw))
    place = protected.for_files([written, PurePosixPath(real)], ctx.workspace.root)
    if place is not None and place.files == "refuse":
        shown = ctx.workspace.relative(real)
        if not protected.places_for(PurePosixPath(real), ctx.workspace.root):
            shown = protected.relative_path(written, ctx.workspace.root)
        raise ToolError(protected.refusal(shown))
    return real


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _file_stat(path: Path, rel: str) -> os.stat_result | None:
    """The stat of an existing regular file; None when there is none; ToolError for what is not a file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"{rel} cannot be used: {exc.strerror}.") from exc
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{rel} is a directory; use list_files to see what it holds.")
    if not stat.S_ISREG(st.st_mode):
        # a FIFO would block a read forever, a device is not the model's to write
        raise ToolError(
            f"{rel} is not a regular file (a FIFO, socket or device); the file tools leave it alone."
        )
    return st


def _existing(path: Path, rel: str) -> os.stat_result:
    st = _file_stat(path, rel)
    if st is None:
        raise ToolError(f"{rel} does not exist.")
    return st


# ---------------------------------------------------------------------------------------------- read stamps


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_mtime_ns, st.st_size, st.st_ino)  # an editor that saves by rename changes the inode


def _remember_read(ctx: ToolContext, path: Path, st: os.stat_result) -> None:
    ctx.state.setdefault(READ_STAMPS, {})[str(path)] = _stamp(st)


def _refresh_stamp(ctx: ToolContext, path: Path) -> None:
    """After our own write: the model knows what it wrote, so a stamp it had stays valid."""
    for key in (READ_STAMPS, SHOWN_WHOLE):
        stamps = ctx.state.get(key, {})
        if str(path) in stamps:
            stamps[str(path)] = _stamp(path.stat())


def mark_shown_whole(state: dict, path: Path) -> None:
    """The model has seen all of `path` as it is now: it may write it whole."""
    with contextlib.suppress(OSError):
        state.setdefault(SHOWN_WHOLE, {})[str(path)] = _stamp(path.stat())


CAT_COMMAND = re.compile(r"""^\s*cat\s+(['"]?)([^\s'"|;&<>$`*?(){}]+)\1\s*$""")


def note_shown_by_command(command: str, cwd: Path, ctx: ToolContext, output: str) -> None:
    """`cat FILE` that printed all of FILE showed it whole, as read_file does (the blocks protocol
    tells small models to ask for a file that way)."""
    match = CAT_COMMAND.match(command)
    if not match or not _fits_shown(ctx, output):
        return
    try:
        path = ctx.workspace.resolve(str(cwd / match.group(2)))
    except OutsideWorkspace:
        return
    if path.is_file():
        mark_shown_whole(ctx.state, path)


def _fits_shown(ctx: ToolContext, output: str) -> bool:
    """Whether an output this long reaches the model uncut (the context caps long tool outputs)."""
    return ctx.shown_limit is None or len(output) <= ctx.shown_limit


def _check_shown_whole(ctx: ToolContext, path: Path, rel: str, st: os.stat_result | None) -> None:
    """Refuse a whole-file rewrite of an existing file the model was not shown whole in this session.

    A small model shown one file wrote another of the same name whole from it, and 1,143 lines of a
    library it had never read were gone (FACTS.md). An empty file has nothing to lose.
    """
    if st is None or st.st_size == 0:
        return
    if ctx.state.get(SHOWN_WHOLE, {}).get(str(path)) == _stamp(st):
        return
    size = f"{st.st_size:,} bytes"
    with contextlib.suppress(OSError):
        if lines := path.read_bytes().count(b"\n"):
            size = f"{lines:,} lines"
    seen = str(path) in ctx.state.get(SHOWN_WHOLE, {})
    why = "it changed since you were shown it" if seen else f"{NOT_SHOWN} in this session"
    raise ToolError(
        f"Not written: {rel} already exists ({size}) and {why}, so writing it whole would replace code "
        f"you have not read. Change only the part you mean with a SEARCH/REPLACE edit (edit_file), or "
        f"read the whole file first (read_file, or `cat {rel}`) and then write it whole."
    )


def _check_fresh(ctx: ToolContext, path: Path, rel: str, st: os.stat_result | None) -> None:
    """Refuse to change a file that changed on disk since the model read it with read_file.

    Only files read with read_file carry a stamp: a file the model never read (blocks mode, which has
    no read_file, or a file seen through bash) is not judged.
    """
    seen = ctx.state.get(READ_STAMPS, {}).get(str(path))
    if seen is None or st is None or _stamp(st) == seen:
        return
    raise ToolError(
        f"{rel} changed on disk since you last read it (now {st.st_size} bytes; another program, a "
        "command or the user changed it). It is unchanged: read it again with read_file, then make "
        "your change against what it holds now."
    )


# ---------------------------------------------------------------------------------------------- text files


def _not_utf8(data: bytes, error: UnicodeDecodeError) -> str:
    line = data.count(b"\n", 0, error.start) + 1
    byte = data[error.start : error.start + 1].hex().upper()
    return f"byte 0x{byte} on line {line} is not UTF-8; it may be Latin-1 or another legacy encoding"


@dataclass
class _TextFile:
    """A UTF-8 text file as the edit tools see it: CRLF turned into LF, and how to write it back."""

    text: str  # with LF line endings when the file is CRLF
    crlf: bool
    final_newline: bool

    def keep_conventions(self, new: str) -> str:
        """`new` (LF) without a final newline when the file had none; the caller encodes it."""
        if self.text and not self.final_newline and new.endswith("\n"):
            return new[:-1]
        return new

    def encode(self, text: str, rel: str) -> bytes:
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        return _encode(text, rel)


def _encode(text: str, rel: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: JSON allows "\ud800", UTF-8 does not
        raise ToolError(
            f"The text for {rel} holds {text[exc.start]!r} at position {exc.start}, half of a UTF-16 "
            "surrogate pair, which is not text; the file is unchanged. Send the character itself."
        ) from exc


def _binary(rel: str, size: int, tool: str) -> ToolError:
    return ToolError(
        f"{rel} is a binary file ({size} bytes); it is unchanged: {tool} changes text files only. "
        "Use bash for binary files (to replace it with text, remove it first)."
    )


def _load_text(path: Path, rel: str, st: os.stat_result, tool: str) -> _TextFile:
    """The file as text for `tool` to change; ToolError when it is too big, binary or not UTF-8."""
    if st.st_size > MAX_EDIT_BYTES:
        raise ToolError(
            f"{rel} is {st.st_size} bytes, more than {tool} loads ({MAX_EDIT_BYTES} bytes); it is "
            "unchanged. Change it with bash (sed -i, or a short script)."
        )
    data = path.read_bytes()
    if _is_binary(data):
        raise _binary(rel, len(data), tool)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{rel} is not UTF-8 text ({_not_utf8(data, exc)}). It is unchanged: changing it as text "
            "would rewrite bytes the change does not touch. Use bash on it (sed -i keeps the other "
            f"bytes as they are), or convert it to UTF-8 first: iconv -f latin1 -t utf-8 {rel} > "
            f"{rel}.utf8 && mv {rel}.utf8 {rel}"
        ) from exc
    newlines = text.count("\n")
    crlf = newlines > 0 and text.count("\r\n") == newlines  # mixed endings are left as they are
    if crlf:
        text = text.replace("\r\n", "\n")
    return _TextFile(text, crlf, not text or text.endswith("\n"))


def _clear_stale_temps(path: Path) -> None:
    """Remove temp files of this path left by a writer that was killed (its pid is in the name)."""
    prefix = f".{path.name[:200]}."
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) :].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its writer is alive (or the pid was reused): not ours to remove
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        (path.parent / name).unlink(missing_ok=True)


def write_atomically(path: Path, content: str | bytes) -> None:
    """Write through a temp file in the same folder, fsync and a rename, then fsync the folder.

    A crash or kill -9 at any moment leaves the old file or the new one, never a mix; the file keeps its
    mode and, where we may set it, its owner (a new one gets the umask's mode). Like an editor's safe
    save, it is a new inode: a hard link elsewhere keeps the old content. A str is written as UTF-8.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    path.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_temps(path)
    try:
        old: os.stat_result | None = path.stat()
    except FileNotFoundError:
        old = None
    mode = stat.S_IMODE(old.st_mode) if old else None
    tmp = path.parent / f".{path.name[:200]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    # a new file: 0o666 less the umask, as any program's new file; an old one gets its mode below
    fd = os.open(tmp, flags, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                    with contextlib.suppress(PermissionError):
                        os.fchown(f.fileno(), old.st_uid, old.st_gid)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        folder = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # a folder that cannot be opened cannot be synced either; the rename is done
    try:
        os.fsync(folder)
    except OSError:
        pass  # some file systems refuse fsync on a folder
    finally:
        os.close(folder)


def short_diff(before: str, after: str, rel: str, max_lines: int = 60) -> str:
    """A unified diff, cut to `max_lines`; the lines both share at the ends are left out before difflib
    sees them, so a small change to a big file costs what the change does."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    context = 2
    skip = max(0, head - context)
    a_mid, b_mid = a[skip : len(a) - max(0, tail - context)], b[skip : len(b) - max(0, tail - context)]
    lines = list(difflib.unified_diff(a_mid, b_mid, f"a/{rel}", f"b/{rel}", n=context))
    if skip:
        lines = [_shift_hunk(line, skip) for line in lines]
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more diff lines)\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _shift_hunk(line: str, by: int) -> str:
    match = _HUNK.match(line)
    if not match:
        return line
    a, a_len, b, b_len = match.groups()
    return f"@@ -{int(a) + by}{a_len} +{int(b) + by}{b_len} @@" + line[match.end() :]


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
        path = _resolve(ctx, args.path)
        rel = ctx.workspace.relative(path)
        _existing(path, rel)
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())  # the version read is the version stamped
            if _is_binary(f.read(8192)):
                raise ToolError(
                    f"{rel} is a binary file ({st.st_size} bytes); it cannot be shown as text "
                    "(UTF-16 text counts as binary here)."
                )
            f.seek(0)
            page = _read_page(f, args.offset, args.limit)
        _remember_read(ctx, path, st)
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
        if whole and _fits_shown(ctx, text + tail) and _stamp(path.stat()) == _stamp(st):
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
            path = _resolve(ctx, args.path)
            if not path.is_file() or path.stat().st_size > MAX_EDIT_BYTES:
                return None
            old = path.read_text(encoding="utf-8")
            _check_shown_whole(ctx, path, ctx.workspace.relative(path), path.stat())
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
        path = _resolve_to_change(ctx, args.path)
        rel = ctx.workspace.relative(path)
        st = _file_stat(path, rel)
        _check_fresh(ctx, path, rel, st)
        content, notes, before = args.content, [], ""
        if st is None:
            data = _encode(content, rel)
        elif st.st_size > MAX_EDIT_BYTES:  # replaced without a diff; only a binary file is refused
            with open(path, "rb") as f:
                if _is_binary(f.read(8192)):
                    raise _binary(rel, st.st_size, self.name)
            _check_shown_whole(ctx, path, rel, st)
            data, before = _encode(content, rel), None
        else:
            old = _load_text(path, rel, st, self.name)  # binary or not UTF-8: refused first, as such
            _check_shown_whole(ctx, path, rel, st)
            before = old.text
            given = content.replace("\r\n", "\n") if old.crlf else content
            if old.crlf and given == content and "\n" in content:
                notes.append("kept its CRLF line endings")
            content = old.keep_conventions(given)
            if content != given:
                notes.append("kept it without a final newline")
            data = old.encode(content, rel)
        write_atomically(path, data)
        _refresh_stamp(ctx, path)
        mark_shown_whole(ctx.state, path)  # the model knows all of what it wrote
        diff = short_diff(before, content, rel) if before is not None else ""
        verb = "Replaced" if st is not None else "Created"
        lines = len(content.splitlines())
        said = f"{verb} {rel} ({lines} lines{'; ' + ', '.join(notes) if notes else ''})."
        if before is None:
            said += " The old content was too big to diff."
        return ToolResult(True, said, {"path": rel, "diff": diff})


TASK_TEXT = "task.text"  # ToolContext.state key: the task as the user gave it (front ends set it)
TOP_LEVEL_DEFINITION = re.compile(r"^(?:async[ \t]+)?(?:def|class|function|func|fn)[ \t]+(\w+)", re.M)


def rewrite_risk(
    rel: str, old: str, new: str, task: str, max_share: float = 0.5, min_lines: int = 20
) -> str | None:
    """Why rewriting `old` as `new` deletes more than a task should, or None."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    if len(old_lines) < min_lines:
        return None
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    deleted = sum(i2 - i1 for op, i1, i2, _, _ in matcher.get_opcodes() if op in ("delete", "replace"))
    if deleted >= min_lines and deleted > max_share * len(old_lines):
        return (
            f"writing {rel} whole would delete {deleted:,} of its {len(old_lines):,} lines "
            f"({deleted / len(old_lines):.0%}; the guard is {max_share:.0%}). Change only the part you "
            "mean with a SEARCH/REPLACE edit (edit_file)"
        )
    gone = set(TOP_LEVEL_DEFINITION.findall(old)) - set(TOP_LEVEL_DEFINITION.findall(new))
    unnamed = sorted(name for name in gone if not re.search(rf"\b{re.escape(name)}\b", task))
    if unnamed:
        shown = ", ".join(unnamed[:5]) + (f" and {len(unnamed) - 5} more" if len(unnamed) > 5 else "")
        return (
            f"writing {rel} whole would delete definitions the task does not name: {shown}. Change only "
            "the part you mean with a SEARCH/REPLACE edit (edit_file)"
        )
    return None


# ---------------------------------------------------------------------------------------------- edit


class EditArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace root.")
    old_string: str = Field(description="Exact text to replace, including indentation. Must match once.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


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


def _apply_edit(text: str, old: str, new: str, replace_all: bool, rel: str) -> tuple[str, str, int]:
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


def _edit(ctx: ToolContext, path_arg: str, edits: list[tuple[str, str, bool]], tool: str):
    """Load, apply `edits` in order, write once: all of them or, when one fails, nothing.

    Returns (rel, before, after, [(how, count)]) as LF text; the file is written with its own line
    endings and final newline.
    """
    path = _resolve_to_change(ctx, path_arg)
    rel = ctx.workspace.relative(path)
    st = _existing(path, rel)
    _check_fresh(ctx, path, rel, st)
    file = _load_text(path, rel, st, tool)
    text, done = file.text, []
    for number, (old, new, replace_all) in enumerate(edits, 1):
        if file.crlf:  # the file is matched as LF; a model may have copied the \r too
            old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
        try:
            text, how, count = _apply_edit(text, old, new, replace_all, rel)
        except ToolError as exc:
            if len(edits) == 1:
                raise
            earlier = f" (line numbers as the file reads after edits 1-{number - 1})" if number > 1 else ""
            raise ToolError(
                f"Edit {number} of {len(edits)} failed, so none of them was made and {rel} is "
                f"unchanged{earlier}: {exc}\nFix edit {number} and send all {len(edits)} again."
            ) from exc
        done.append((how, count))
    text = file.keep_conventions(text)
    if text == file.text:
        raise ToolError(f"{rel} would be left as it is (it keeps having no final newline); nothing changed.")
    write_atomically(path, file.encode(text, rel))
    _refresh_stamp(ctx, path)
    return rel, file.text, text, done


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
        rel, before, after, [(how, count)] = _edit(ctx, args.path, edit, self.name)
        diff = short_diff(before, after, rel)
        done = f"Edited {rel}: {count} replacement{'s' if count > 1 else ''}"
        done += f" (matched {how})." if how else "."
        return ToolResult(True, f"{done}\n{diff}", {"path": rel, "diff": diff})


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
        rel, before, after, done = _edit(ctx, args.path, edits, self.name)
        diff = short_diff(before, after, rel)
        loose = [f"edit {n} matched {how}" for n, (how, _) in enumerate(done, 1) if how]
        count = sum(count for _, count in done)
        said = f"Edited {rel}: {len(done)} edit{'s' if len(done) > 1 else ''}, "
        said += f"{count} replacement{'s' if count > 1 else ''}"
        said += f" ({'; '.join(loose)})." if loose else "."
        return ToolResult(True, f"{said}\n{diff}", {"path": rel, "diff": diff})


# ---------------------------------------------------------------------------------------------- list & search


def _in_git_repo(path: Path) -> bool:
    return any((p / ".git").exists() for p in (path, *path.parents))


def _dead_link(path: Path) -> str | None:
    """'a symlink loop' or 'a broken symlink' for a link that leads to no file; None otherwise."""
    if not os.path.islink(path):
        return None
    try:
        os.stat(path)
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else "a broken symlink"
    return None


def workspace_files(ws: Workspace, base: Path, dead_links: list[Path] | None = None) -> list[Path]:
    """Files under `base`, honouring .gitignore (git's own rules inside a repo, pathspec outside).

    Symlinks that lead to no file (loops, broken links) are left out, and added to `dead_links`.
    Symlinked folders are not followed, so a folder loop cannot make this walk forever.
    """
    if _in_git_repo(base) and shutil.which("git"):
        result = subprocess.run(
            ["git", *NO_HOOKS_ARGS, "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=base,
            capture_output=True,
            timeout=30,
        )
        if result.returncode == 0:
            names = [n for n in result.stdout.decode("utf-8", "replace").split("\0") if n]
            found = []
            for name in names:
                path = base / name
                if path.is_file():
                    found.append(path)
                elif dead_links is not None and _dead_link(path):
                    dead_links.append(path)
            return sorted(found)
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
        for name in sorted(files):
            if spec.match_file(str(rel / name)):
                continue
            if _dead_link(here / name):
                if dead_links is not None:
                    dead_links.append(here / name)
                continue
            found.append(here / name)
    return found


def _dead_links_note(ctx: ToolContext, dead: list[Path]) -> str:
    if not dead:
        return ""
    named = [f"{ctx.workspace.relative(p)} ({_dead_link(p) or 'gone'})" for p in dead[:10]]
    more = f" and {len(dead) - 10} more" if len(dead) > 10 else ""
    return f"\n(left out, leading to no file: {', '.join(named)}{more})"


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
        return await asyncio.to_thread(self._list, args, ctx)

    def _list(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        base = _resolve(ctx, args.path)
        if not base.is_dir():
            raise ToolError(f"{args.path} is not a folder.")
        dead: list[Path] = []
        rels = [str(p.relative_to(base)) for p in workspace_files(ctx.workspace, base, dead)]
        if args.pattern:
            pattern = args.pattern
            rels = [
                r
                for r in rels
                if fnmatch.fnmatch(r, pattern) or fnmatch.fnmatch(r, pattern.removeprefix("**/"))
            ]
        shown = rels[: args.limit]
        more = f"\n... and {len(rels) - len(shown)} more" if len(rels) > len(shown) else ""
        text = ("\n".join(shown) or "(no files)") + more + _dead_links_note(ctx, dead)
        return ToolResult(True, text, {"count": len(rels)})


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
        base = await asyncio.to_thread(_resolve, ctx, args.path)
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {args.pattern!r}: {exc}.") from exc
        found = await Grep._ripgrep(args, base, ctx) if shutil.which("rg") else None
        if found is None:
            stop = threading.Event()  # set when this task is cancelled: the thread stops within 2048 lines
            try:
                found = await asyncio.to_thread(Grep._python, regex, args, base, ctx, stop)
            finally:
                stop.set()
        hits, note = found
        shown = hits[: args.max_results]
        more = f"\n... stopped at {args.max_results} matches" if len(hits) > len(shown) else ""
        return ToolResult(True, ("\n".join(shown) or "(no matches)") + more + note, {"count": len(hits)})

    @staticmethod
    async def _ripgrep(args: GrepArgs, base: Path, ctx: ToolContext) -> tuple[list[str], str] | None:
        """rg as a child process, killed when the task is cancelled; None to let Python search instead."""
        cmd = ["rg", "--line-number", "--no-heading", "--color", "never", "--max-columns", "300"]
        # .gitignore outside a git repo too, and the folders list_files skips: as the Python search does
        cmd += ["--no-require-git", *(f"--glob=!{name}/" for name in sorted(ALWAYS_SKIPPED))]
        cmd += ["-i"] if args.ignore_case else []
        cmd += ["--glob", args.glob] if args.glob else []
        cmd += ["-e", args.pattern, str(base)]
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ctx.workspace.root,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        except TimeoutError:
            await _kill(proc)
            raise ToolError("grep ran for 60 s without finishing; search a smaller folder.") from None
        except asyncio.CancelledError:  # Esc or Ctrl+C: rg must not outlive the call
            await _kill(proc)
            raise
        root = str(ctx.workspace.root) + os.sep
        hits = [line.removeprefix(root) for line in out.decode("utf-8", "replace").splitlines()]
        if proc.returncode in (0, 1):
            return hits, ""
        if proc.returncode == 2 and hits:  # some files could not be read; the rest was searched
            problems = err.decode("utf-8", "replace").splitlines()
            problems = [p.removeprefix("rg: ").removeprefix(root) for p in problems]
            return hits, (f"\n(not searched: {'; '.join(problems[:5])})" if problems else "")
        return None

    @staticmethod
    def _python(
        regex: re.Pattern, args: GrepArgs, base: Path, ctx: ToolContext, stop: threading.Event
    ) -> tuple[list[str], str]:
        dead: list[Path] = []
        files = [base] if base.is_file() else workspace_files(ctx.workspace, base, dead)
        hits: list[str] = []
        for path in files:
            if stop.is_set():
                break
            if args.glob and not fnmatch.fnmatch(path.name, args.glob):
                continue
            try:
                with open(path, "rb") as f:
                    if _is_binary(f.read(8192)):
                        continue
                    f.seek(0)
                    rel = ctx.workspace.relative(path)
                    for number, raw in enumerate(f, 1):  # line by line: a huge file is never loaded whole
                        if number % 2048 == 0:
                            if stop.is_set():  # cancelled mid-file: a 55 MB log is not read to its end
                                return hits, _dead_links_note(ctx, dead)
                            time.sleep(0)  # hand the GIL over: the event loop must not wait on this thread
                        line = raw.decode("utf-8", "replace").rstrip("\r\n")
                        if regex.search(line):
                            hits.append(f"{rel}:{number}:{line[:300]}")
                            if len(hits) > args.max_results:
                                return hits, _dead_links_note(ctx, dead)
            except OSError:
                continue
        return hits, _dead_links_note(ctx, dead)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await asyncio.shield(proc.wait())
