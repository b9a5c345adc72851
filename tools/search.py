"""Listing and searching the workspace: list_files and grep, and workspace_files, the walk that
honours .gitignore (git's own rules inside a repository) which the prompt's file completion and the
repository map use too.

Separate from the tools that read and change one file (tools/files.py): these walk many files and
never write.
"""

from __future__ import annotations

import asyncio
import errno
import fnmatch
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from tools.base import ToolContext, ToolError, ToolResult
from tools.file_paths import resolve_path
from tools.git import NO_HOOKS_ARGS
from tools.text_files import is_binary
from tools.workspace import Workspace

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
    names = _git_names(base, dead_links)
    if names is not None:
        return [base / name for name in names]
    return _walked(ws, base, dead_links)


def workspace_names(ws: Workspace, base: Path) -> list[str]:
    """workspace_files as paths from `base` (`src/pkg/a.py`), in the same order, for a caller that
    wants names: in git, no Path is made for each file (a tenth of a second in 10,000 files)."""
    names = _git_names(base, None)
    if names is not None:
        return names
    return [path.relative_to(base).as_posix() for path in _walked(ws, base, None)]


def _git_names(base: Path, dead_links: list[Path] | None) -> list[str] | None:
    """The files under `base` by git's rules, as paths from it, sorted as Paths sort; None outside a
    repository or without git."""
    if not (_in_git_repo(base) and shutil.which("git")):
        return None
    result = subprocess.run(
        ["git", *NO_HOOKS_ARGS, "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=base,
        capture_output=True,
        timeout=30,
    )
    if result.returncode != 0:
        return None
    root = os.fspath(base)
    found = []
    for name in result.stdout.decode("utf-8", "replace").split("\0"):
        if not name:
            continue
        full = os.path.join(root, name)
        if os.path.isfile(full):
            found.append(name)
        elif dead_links is not None and _dead_link(Path(full)):
            dead_links.append(Path(full))
    found.sort(key=lambda name: name.split("/"))
    return found


def _walked(ws: Workspace, base: Path, dead_links: list[Path] | None) -> list[Path]:
    """The files under `base` outside git, in the walk's order."""
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
        base = resolve_path(ctx, args.path)
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
        base = await asyncio.to_thread(resolve_path, ctx, args.path)
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
                    if is_binary(f.read(8192)):
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
