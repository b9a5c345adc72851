"""A UTF-8 text file as the file tools change it: loaded with its conventions (CRLF line endings, a
missing final newline) and refused when it is binary, too big or not UTF-8; written back atomically;
and the short diff of a change.

Separate from the tools because it is the layer under all of them that touches the user's bytes:
what it promises (atomic writes that keep the mode, no byte changed that a change does not touch) is
stated in tools/files.py and held here.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from tools.base import ToolError

MAX_EDIT_BYTES = 16 * 1024 * 1024  # edits and diffs load the whole file; bash (sed) can do bigger ones


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _not_utf8(data: bytes, error: UnicodeDecodeError) -> str:
    line = data.count(b"\n", 0, error.start) + 1
    byte = data[error.start : error.start + 1].hex().upper()
    return f"byte 0x{byte} on line {line} is not UTF-8; it may be Latin-1 or another legacy encoding"


@dataclass
class TextFile:
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
        return encode_text(text, rel)


def encode_text(text: str, rel: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: JSON allows "\ud800", UTF-8 does not
        raise ToolError(
            f"The text for {rel} holds {text[exc.start]!r} at position {exc.start}, half of a UTF-16 "
            "surrogate pair, which is not text; the file is unchanged. Send the character itself."
        ) from exc


def binary_refusal(rel: str, size: int, tool: str) -> ToolError:
    return ToolError(
        f"{rel} is a binary file ({size} bytes); it is unchanged: {tool} changes text files only. "
        "Use bash for binary files (to replace it with text, remove it first)."
    )


def load_text(path: Path, rel: str, st: os.stat_result, tool: str) -> TextFile:
    """The file as text for `tool` to change; ToolError when it is too big, binary or not UTF-8."""
    if st.st_size > MAX_EDIT_BYTES:
        raise ToolError(
            f"{rel} is {st.st_size} bytes, more than {tool} loads ({MAX_EDIT_BYTES} bytes); it is "
            "unchanged. Change it with bash (sed -i, or a short script)."
        )
    data = path.read_bytes()
    if is_binary(data):
        raise binary_refusal(rel, len(data), tool)
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
    return TextFile(text, crlf, not text or text.endswith("\n"))


def _clear_stale_temps(path: Path) -> None:
    """Remove temp files of this path left by a writer that was killed (its pid is in the name)."""
    prefix = f".{path.name[:200]}."
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) :].split(".", 1)[0]
        # A live writer (or a reused pid) keeps its file: not ours to remove.
        if pid.isdigit() and int(pid) != os.getpid() and pid_gone(int(pid)):
            (path.parent / name).unlink(missing_ok=True)


def pid_gone(pid: int) -> bool:
    """Whether no process has this pid: what a file named for its writer's pid was left by, when so.
    Another user's process counts as there."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


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


def leading_space(line: str) -> str:
    """The spaces and tabs `line` starts with: its indent, as written."""
    return line[: len(line) - len(line.lstrip())]


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
