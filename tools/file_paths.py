"""Which file a file tool's path argument names: one inside the workspace (a ToolError the model can act
on otherwise), never one inside .git for a tool that changes it (tools/protected.py), and a regular file.

Separate from the tools so that reading, writing, editing (tools/files.py) and listing and searching
(tools/search.py) resolve a path one way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from tools import protected
from tools.base import ToolContext, ToolError
from tools.workspace import OutsideWorkspace


def resolve_path(ctx: ToolContext, path: str) -> Path:
    try:
        return ctx.workspace.resolve(path)
    except OutsideWorkspace as exc:
        raise ToolError(str(exc)) from exc


def resolve_to_change(ctx: ToolContext, path: str) -> Path:
    """`resolve_path` for the tools that change a file. They never write inside .git, whatever the mode
    (tools/protected.py): judged on the path as written and on the file its links lead to."""
    real = resolve_path(ctx, path)
    raw = Path(os.path.expanduser(path))
    written = PurePosixPath(os.path.normpath(raw if raw.is_absolute() else ctx.workspace.root / raw))
    place = protected.for_files([written, PurePosixPath(real)], ctx.workspace.root)
    if place is not None and place.files == "refuse":
        shown = ctx.workspace.relative(real)
        if not protected.places_for(PurePosixPath(real), ctx.workspace.root):
            shown = protected.relative_path(written, ctx.workspace.root)
        raise ToolError(protected.refusal(shown))
    return real


def file_stat(path: Path, rel: str) -> os.stat_result | None:
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


def existing_stat(path: Path, rel: str) -> os.stat_result:
    st = file_stat(path, rel)
    if st is None:
        raise ToolError(f"{rel} does not exist.")
    return st
