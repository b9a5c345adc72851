"""Git through gitpython: checkpoints and undo that never touch the user's branch or index, an optional
auto-commit, and read-only status/diff/log tools for the model.

A checkpoint is a commit of the whole working tree (tracked and untracked, minus ignored files) built
in a temporary index and kept under refs/spec-agent/checkpoints/. Undo puts the newest one back in the
working tree and drops it, so undoing twice goes back two checkpoints.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from tools.base import ToolContext, ToolError, ToolResult

REF_PREFIX = "refs/spec-agent/checkpoints/"
AGENT_IDENTITY = {
    "GIT_AUTHOR_NAME": "spec-agent",
    "GIT_AUTHOR_EMAIL": "agent@localhost",
    "GIT_COMMITTER_NAME": "spec-agent",
    "GIT_COMMITTER_EMAIL": "agent@localhost",
}


def open_repo(path: Path):
    """The repository containing `path`, or None outside git (or without git installed)."""
    try:
        import git

        return git.Repo(path, search_parent_directories=True)
    except Exception:
        return None


@dataclass
class Checkpoint:
    ref: str
    sha: str
    message: str


class Checkpoints:
    def __init__(self, repo) -> None:
        self.repo = repo
        self.root = Path(repo.working_tree_dir)

    @contextmanager
    def _scratch_index(self) -> Iterator[None]:
        # A private index: the user's staging area is never read or written.
        fd, path = tempfile.mkstemp(prefix="agent-index-")
        os.close(fd)
        os.unlink(path)
        try:
            with self.repo.git.custom_environment(GIT_INDEX_FILE=path, **AGENT_IDENTITY):
                yield
        finally:
            Path(path).unlink(missing_ok=True)

    def _worktree_tree(self) -> str:
        with self._scratch_index():
            self.repo.git.add("-A", ".")
            return self.repo.git.write_tree()

    def list(self) -> list[Checkpoint]:
        refs = [r for r in self.repo.refs if r.path.startswith(REF_PREFIX)]
        refs.sort(key=lambda r: r.path)
        return [Checkpoint(r.path, r.commit.hexsha, r.commit.message.strip()) for r in refs]

    def create(self, message: str) -> Checkpoint | None:
        """Snapshot the working tree; None when it equals the newest checkpoint already."""
        tree = self._worktree_tree()
        existing = self.list()
        if existing and self.repo.commit(existing[-1].sha).tree.hexsha == tree:
            return None
        parents: list[str] = []
        if existing:
            parents = ["-p", existing[-1].sha]
        elif self.repo.head.is_valid():
            parents = ["-p", self.repo.head.commit.hexsha]
        with self.repo.git.custom_environment(**AGENT_IDENTITY):
            sha = self.repo.git.commit_tree(tree, *parents, "-m", message)
        number = int(existing[-1].ref.rsplit("/", 1)[1]) + 1 if existing else 1
        ref = f"{REF_PREFIX}{number:05d}"
        self.repo.git.update_ref(ref, sha)
        return Checkpoint(ref, sha, message)

    def undo(self) -> tuple[Checkpoint, list[str]]:
        """Restore the newest checkpoint into the working tree and drop it. Returns it and what changed."""
        existing = self.list()
        if not existing:
            raise ToolError("There is no checkpoint to go back to.")
        target = existing[-1]
        wanted = set(self.repo.git.ls_tree("-r", "--name-only", target.sha).splitlines())
        with self._scratch_index():
            self.repo.git.add("-A", ".")
            present = set(self.repo.git.ls_files().splitlines())
            changed = set(self.repo.git.diff("--cached", "--name-only", target.sha).splitlines())
            self.repo.git.read_tree(target.sha)
            self.repo.git.checkout_index("-a", "-f")
        for name in sorted(present - wanted):
            (self.root / name).unlink(missing_ok=True)
            _remove_empty_parents(self.root / name, self.root)
        self.repo.git.update_ref("-d", target.ref)
        return target, sorted(changed | (present - wanted))

    def diff_since(self, sha: str) -> str:
        """The working tree against a checkpoint, new and deleted files included (a private index)."""
        with self._scratch_index():
            self.repo.git.add("-A", ".")
            return self.repo.git.diff("--cached", sha)

    def commit_changes(self, subject: str) -> str | None:
        """Commit everything that changed to the current branch (auto-commit), with a message that
        lists what changed. None when nothing did."""
        self.repo.git.add("-A", ".")
        # Before the first commit there is no HEAD: `diff --cached` then compares with the empty tree.
        against = ["HEAD"] if self.repo.head.is_valid() else []
        stat = self.repo.git.diff("--cached", "--numstat", *against).splitlines()
        if not stat:
            return None
        lines = []
        for row in stat:
            added, removed, name = row.split("\t", 2)
            lines.append(f"- {name} (+{added} -{removed})" if added != "-" else f"- {name} (binary)")
        body = f"{len(stat)} file{'s' if len(stat) != 1 else ''} changed:\n" + "\n".join(lines)
        with self.repo.git.custom_environment(**AGENT_IDENTITY):
            self.repo.git.commit("-m", subject, "-m", body, "--no-verify")
        return self.repo.head.commit.hexsha


def _remove_empty_parents(path: Path, root: Path) -> None:
    parent = path.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


# ---------------------------------------------------------------------------------------------- tools


def _repo(ctx: ToolContext):
    repo = open_repo(ctx.workspace.root)
    if repo is None:
        raise ToolError("The workspace is not a git repository.")
    return repo


class NoArgs(BaseModel):
    pass


class GitStatus:
    name: ClassVar[str] = "git_status"
    description: ClassVar[str] = "Show the git branch and which files are modified, staged or untracked."
    Args: ClassVar[type[BaseModel]] = NoArgs
    effect: ClassVar[str] = "read"

    def summary(self, args: NoArgs) -> str:
        return ""

    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(True, _repo(ctx).git.status("--short", "--branch") or "(clean)")


class DiffArgs(BaseModel):
    path: str | None = Field(None, description="Only this file or folder.")
    staged: bool = Field(False, description="Show staged changes instead of unstaged ones.")


class GitDiff:
    name: ClassVar[str] = "git_diff"
    description: ClassVar[str] = "Show the uncommitted changes as a unified diff."
    Args: ClassVar[type[BaseModel]] = DiffArgs
    effect: ClassVar[str] = "read"

    def summary(self, args: DiffArgs) -> str:
        return args.path or ""

    async def run(self, args: DiffArgs, ctx: ToolContext) -> ToolResult:
        repo = _repo(ctx)
        cmd = ["--cached"] if args.staged else []
        if args.path:
            ctx.workspace.resolve(args.path)
            cmd += ["--", args.path]
        diff = repo.git.diff(*cmd)
        if len(diff) > 30_000:
            diff = diff[:30_000] + f"\n... ({len(diff) - 30_000} more characters; narrow it with path)"
        return ToolResult(True, diff or "(no changes)")


class LogArgs(BaseModel):
    max_count: int = Field(10, ge=1, le=200)
    path: str | None = Field(None, description="Only commits touching this path.")


class GitLog:
    name: ClassVar[str] = "git_log"
    description: ClassVar[str] = "Show recent commits: hash, date, author, subject."
    Args: ClassVar[type[BaseModel]] = LogArgs
    effect: ClassVar[str] = "read"

    def summary(self, args: LogArgs) -> str:
        return args.path or ""

    async def run(self, args: LogArgs, ctx: ToolContext) -> ToolResult:
        repo = _repo(ctx)
        if not repo.head.is_valid():
            return ToolResult(True, "(no commits yet)")
        cmd = [f"--max-count={args.max_count}", "--format=%h %ad %an %s", "--date=short"]
        if args.path:
            cmd += ["--", args.path]
        return ToolResult(True, repo.git.log(*cmd) or "(no commits)")
