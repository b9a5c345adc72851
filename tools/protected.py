"""Places where a file written now runs as code later: as the user, outside any sandbox (issue #26).

A hook in .git/hooks runs at the user's next `git commit`; `core.fsmonitor` in .git/config at their
next `git status`; direnv runs .envrc when they enter the folder; an IDE runs its tasks. The sandbox
keeps a command from writing outside the workspace, but these places are inside it, so each one is
named in PLACES, read by the file tools (tools/file_paths.py), the permissions (tools/permissions.py,
tools/command_danger.py) and the sandbox (tools/sandbox.py). One row per place; add a row (and its
test) to guard another.

- `files`: what edit_file, multi_edit and write_file do, in every approval mode, full-auto included.
  "refuse" for git's own folder: nothing in .git shows in `git diff` or is undone by `agent undo`,
  and git commands are the way to change it. "ask" for the others: they belong to the project (the
  user sees them in a diff), but nobody should get one without being asked.
- `commands`: what a bash command that writes there meets. "read-only": the sandbox mounts it
  read-only, and without a sandbox (bwrap missing, `ask` mode) the command counts as dangerous and
  asks in every mode. "ask": it is dangerous, sandbox or not (the sandbox does not cover it).
  "free": git's objects, refs, index and logs, which `git add`, `git commit`, branches and stashes
  write.

Where rows overlap the strictest wins: the file tools refuse a submodule's hooks (inside .git) although
its row says "ask"; a command without a sandbox is asked about them.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

FileRule = Literal["refuse", "ask"]
CommandRule = Literal["read-only", "ask", "free"]
HOOKS_PATH = "(core.hooksPath)/"  # the pattern of the row for the folder git's config names for hooks


@dataclass(frozen=True)
class Place:
    """Paths matching `pattern`: '/'-separated globs on whole path components, matched anywhere in
    the path from the workspace root (so a nested repository's .git counts too); `**` stands for any
    number of components; a trailing '/' covers the folder and everything in it."""

    pattern: str
    files: FileRule
    commands: CommandRule
    why: str  # what runs it later: told to the model and shown to the user who is asked


GIT_WHY = "git's own folder: what is written there shows in no `git diff` and is not undone by `agent undo`"
HOOKS_WHY = "git runs its hooks as the user at their next commit, checkout, merge or push"
CONFIG_WHY = (
    "git's config can name commands git runs as the user (core.fsmonitor at every `git status`, "
    "core.sshCommand, core.pager, aliases)"
)
INFO_WHY = "git reads info/ at every command (attributes that pick filters, excludes that hide files)"
POINTER_WHY = "it tells git where its config and hooks are: rewritten, it points git at planted ones"
# Inside every git directory: the names the sandbox mounts read-only (what git runs or reads config
# from). The rest, objects, refs, the index, logs, stays writable for git commands.
GIT_CONTROL = {"hooks/": HOOKS_WHY, "config": CONFIG_WHY, "info/": INFO_WHY,
               "config.worktree": CONFIG_WHY, "commondir": POINTER_WHY}  # fmt: skip

PLACES: tuple[Place, ...] = (
    Place(".git/", "refuse", "free", GIT_WHY),
    # the entry itself: a worktree's or submodule's .git file names its git directory
    Place(".git", "refuse", "read-only", POINTER_WHY),
    *(
        Place(f"{git_dir}/{name}", "refuse", "read-only", why)
        for git_dir in (".git", ".git/worktrees/*")
        for name, why in GIT_CONTROL.items()
    ),
    # a submodule's git directory, and its submodules' (issue #26 asks for its hooks; its config and
    # info/ run code just as the top repository's do)
    Place(".git/modules/**/hooks/", "ask", "read-only", "a submodule's hooks: " + HOOKS_WHY),
    Place(".git/modules/**/config", "ask", "read-only", "a submodule's config: " + CONFIG_WHY),
    Place(".git/modules/**/info/", "ask", "read-only", "a submodule's info/: " + INFO_WHY),
    Place(HOOKS_PATH, "ask", "read-only", "the folder core.hooksPath names: " + HOOKS_WHY),
    Place(".envrc", "ask", "ask", "direnv runs it in the user's shell when they enter the folder"),
    Place(".vscode/tasks.json", "ask", "ask", "VS Code runs its tasks, some as soon as the folder opens"),
    Place(
        ".vscode/settings.json",
        "ask",
        "ask",
        "VS Code settings name programs VS Code runs (terminal profiles, linters, interpreters)",
    ),
    Place(".idea/", "ask", "ask", "JetBrains IDEs run the run configurations and external tools in it"),
)


def _regex(pattern: str) -> re.Pattern[str]:
    folder = pattern.endswith("/")
    body = ""
    for part in pattern.strip("/").split("/"):
        if part == "**":
            body += r"(?:[^/]+/)*"
        else:
            body += re.escape(part).replace(r"\*", "[^/]*").replace(r"\?", "[^/]") + "/"
    return re.compile(r"(?:^|/)" + body.rstrip("/") + (r"(?:/.*)?$" if folder else "$"))


_PATTERNS = {place.pattern: _regex(place.pattern) for place in PLACES if place.pattern != HOOKS_PATH}
_STRICTNESS = {"refuse": 2, "read-only": 1, "ask": 1, "free": 0}


def relative_path(path: PurePosixPath, root: Path) -> str:
    """`path` from the workspace root; the whole path for one outside it (an extra root)."""
    path, base = PurePosixPath(os.path.normpath(path)), PurePosixPath(root)
    if path == base:
        return "."
    return str(path.relative_to(base)) if base in path.parents else str(path)


def places_for(path: PurePosixPath, root: Path, hooks: Path | None = None) -> list[Place]:
    """The rows that cover `path` (absolute), strictest for the file tools first. `hooks`: the folder
    core.hooksPath names (hooks_path), when there is one."""
    rel = relative_path(path, root)
    found = [p for p in PLACES if p.pattern in _PATTERNS and _PATTERNS[p.pattern].search(rel)]
    if hooks is not None:
        here, folder = PurePosixPath(os.path.normpath(path)), PurePosixPath(hooks)
        if here == folder or folder in here.parents:
            found += [p for p in PLACES if p.pattern == HOOKS_PATH]
    return sorted(found, key=lambda p: _STRICTNESS[p.files], reverse=True)


def for_files(paths: list[PurePosixPath], root: Path, hooks: Path | None = None) -> Place | None:
    """What the file tools do for a file known by these paths (as written, and with its links
    followed): the strictest row that covers any of them."""
    found = [p for path in paths for p in places_for(path, root, hooks)]
    return max(found, key=lambda p: _STRICTNESS[p.files], default=None)


def for_commands(path: PurePosixPath, root: Path, hooks: Path | None, sandboxed: bool) -> Place | None:
    """The row that makes a command writing `path` dangerous, or None: rows that ask always do; rows
    the sandbox mounts read-only do only without a sandbox (inside one, the write fails and the
    model is told why)."""
    for place in places_for(path, root, hooks):
        if place.commands == "ask" or (place.commands == "read-only" and not sandboxed):
            return place
    return None


def refusal(rel: str) -> str:
    """What the file tools say when they refuse a path inside .git: what to do instead."""
    return (
        f"{rel}: the file tools never write inside .git, git's own folder, in any mode. Its hooks and "
        "config run as the user at their next git command, outside any sandbox, and a "
        "change there shows in no `git diff` and is not undone by `agent undo`. Use git commands "
        "instead (git add, git commit, git branch, git stash); if the task needs a hook or a config "
        "change, tell the user what to run."
    )


def asking(rel: str, place: Place) -> str:
    return f"it writes {rel}, which runs as code later ({place.why}); such writes ask in every mode"


# ------------------------------------------------------------------ the repository's git directories
def hooks_path(root: Path) -> Path | None:
    """The folder `core.hooksPath` names for the repository at `root` (relative to its top), or None."""
    if not Path(root).is_dir():
        return None
    try:
        done = subprocess.run(
            ["git", "config", "--get", "--path", "core.hooksPath"],
            cwd=root, capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    value = done.stdout.strip()
    if done.returncode != 0 or not value:
        return None
    return (Path(root) / value).resolve() if not os.path.isabs(value) else Path(value).resolve()


def _pointed(file: Path, key: str) -> Path | None:
    """The folder a `gitdir: ...` file (or a `commondir` one, key '') names, relative to its folder."""
    try:
        text = file.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if key:
        if not text.startswith(key + ":"):
            return None
        text = text[len(key) + 1 :].strip()
    return (file.parent / text).resolve() if text else None


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").exists() and ((path / "objects").is_dir() or (path / "commondir").is_file())


def _git_dirs_below(base: Path, sub: str) -> list[Path]:
    """Git directories under base/sub (modules/ or worktrees/), at any depth: a submodule named
    a/b lives in modules/a/b, and its own submodules in modules/a/b/modules/."""
    found: list[Path] = []
    top = base / sub
    if not top.is_dir():
        return found
    for folder, dirs, _ in os.walk(top):
        here = Path(folder)
        if (here / "HEAD").exists() and here != top:
            found.append(here)
            dirs[:] = ["modules"] if "modules" in dirs else []
    return found


@dataclass
class GitGuard:
    """What the sandbox does to the git of one writable root."""

    storage: list[Path] = field(default_factory=list)  # git directories: bound to themselves, writable
    control: list[Path] = field(default_factory=list)  # their control files and folders: read-only
    absent: list[Path] = field(default_factory=list)  # control names not there yet: none may appear
    names: list[str] = field(default_factory=list)  # how the model may see them in an error message


def git_guard(root: Path) -> GitGuard:
    """The git directories of the repository whose top is `root` and what in them is read-only.

    Its own git directory (.git, or the one its .git file names, as in a worktree or a submodule), the
    common one a worktree shares, other worktrees' and every submodule's. Each is bound to itself,
    so that it cannot be renamed away and replaced; `git add`, `git commit`, branches and stashes
    write objects, refs, the index and logs in it, so it stays writable, also where it lies outside
    the workspace (a worktree's). The control names (GIT_CONTROL), the .git files and the folder
    core.hooksPath names are read-only. A control name that does not exist cannot be mounted (an
    empty `commondir` or a folder in its place breaks git), so it is recorded: if a command creates
    it, the sandbox removes it afterwards.
    """
    guard = GitGuard()
    dot = root / ".git"
    if dot.is_file():
        own = _pointed(dot, "gitdir")
        guard.control.append(dot)
        guard.names.append(".git")
    elif dot.is_dir():
        own = dot.resolve()
    else:
        return guard
    if own is None or not _is_git_dir(own):
        return guard
    dirs = [own]
    if (own / "commondir").is_file() and (common := _pointed(own / "commondir", "")) is not None:
        dirs.append(common)
    for base in list(dirs):
        dirs += _git_dirs_below(base, "modules") + _git_dirs_below(base, "worktrees")
    for git_dir in dict.fromkeys(dirs):
        guard.storage.append(git_dir)
        for name in GIT_CONTROL:
            path = git_dir / name.rstrip("/")
            (guard.control if path.exists() or path.is_symlink() else guard.absent).append(path)
    guard.control += [p for p in _submodule_files(root) if p not in guard.control]
    if (hooks := hooks_path(root)) is not None and root.resolve() in hooks.parents:
        # inside the repository only: one outside is not the sandbox's to mount, nor to remove
        (guard.control if hooks.exists() else guard.absent).append(hooks)
        guard.names.append(relative_path(PurePosixPath(hooks), root))
    guard.storage.sort(key=lambda p: len(p.parts))  # an outer one is bound before what it holds
    guard.names += [".git/", *(str(p) for p in guard.storage)]
    return guard


def _submodule_files(root: Path) -> list[Path]:
    """The .git files of the submodules .gitmodules lists (each names its git directory)."""
    try:
        text = (root / ".gitmodules").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for match in re.finditer(r"^\s*path\s*=\s*(.+?)\s*$", text, re.M):
        gitfile = root / match.group(1).strip('"') / ".git"
        if gitfile.is_file() and root in gitfile.resolve().parents:
            found.append(gitfile)
    return found
