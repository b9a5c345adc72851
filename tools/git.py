"""Git through gitpython: checkpoints and undo that never touch the user's branch or index, an optional
auto-commit of the files the agent changed (and nothing else), and read-only status/diff/log tools
for the model.

A checkpoint is a commit of the whole working tree (tracked and untracked, minus ignored files) built
in a temporary index and kept under refs/spec-agent/checkpoints/. Undo puts the newest one back in the
working tree and drops it, so undoing twice goes back two checkpoints.

The agent's own git commands never run the repository's hooks or its fsmonitor command: whatever a
hook or config in .git says runs outside the sandbox, as the user (issue #26). Every repository
opened here carries NO_HOOKS on each command (a checkpoint's `git add` writes the index, which runs
post-index-change; `update-ref` runs reference-transaction; `git status` runs core.fsmonitor).
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
# A linked worktree's (an attempt's) own: refs under refs/worktree/ belong to one worktree and go with
# it, where the others are shared by all, so an attempt's checkpoints would join the user's `agent undo`.
WORKTREE_REF_PREFIX = "refs/worktree/spec-agent/checkpoints/"
# Config for every git command the agent runs on its own. Hooks are looked up in /dev/null/<name>,
# which cannot exist: an empty folder of ours could be filled by a command that runs as the user.
NO_HOOKS = (f"core.hooksPath={os.devnull}", "core.fsmonitor=false")
NO_HOOKS_ARGS = [arg for option in NO_HOOKS for arg in ("-c", option)]
AGENT_IDENTITY = {
    "GIT_AUTHOR_NAME": "spec-agent",
    "GIT_AUTHOR_EMAIL": "agent@localhost",
    "GIT_COMMITTER_NAME": "spec-agent",
    "GIT_COMMITTER_EMAIL": "agent@localhost",
}


def open_repo(path: Path):
    """The repository containing `path`, or None outside git (or without git installed); its git
    commands run no hooks and no fsmonitor (`without_hooks`)."""
    try:
        import git

        return without_hooks(git.Repo(path, search_parent_directories=True))
    except Exception:
        return None


def without_hooks(repo):
    """`repo`, whose every git command from now on runs with NO_HOOKS."""
    repo.git.set_persistent_git_options(c=list(NO_HOOKS))
    return repo


@dataclass
class Checkpoint:
    ref: str
    sha: str
    message: str


class Checkpoints:
    def __init__(self, repo) -> None:
        self.repo = without_hooks(repo)  # however it was opened: these commands are the agent's own
        self.root = Path(repo.working_tree_dir)
        linked = Path(repo.git_dir).resolve() != Path(repo.common_dir).resolve()
        self.prefix = WORKTREE_REF_PREFIX if linked else REF_PREFIX

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

    def snapshot_tree(self) -> str:
        """The tree object of the working tree as it is on disk (its own bytes, untracked files too)."""
        with self._scratch_index():
            self._stage_worktree()
            return self.repo.git.write_tree()

    def _stage_worktree(self) -> None:
        """The working tree into the scratch index, byte for byte as it is on disk.

        `git add` finds the files (tracked and untracked, minus ignored, symlinks and submodules as
        such), but stores them through the repository's conversions: core.autocrlf, the text and eol
        attributes, filters. Undo must give back exactly what was there (a CRLF file under
        `* text=auto` came back LF; with core.autocrlf=true every LF file came back CRLF), so each
        file whose stored bytes are not its own is stored again without them.
        """
        self.repo.git.add("-A", ".")
        files = self._regular_files(self.repo.git.ls_files("-s", "-z"))
        if not files:
            return
        own = self._hash_raw(list(files))
        converted = [path for path, (_, sha) in files.items() if own[path] != sha]
        if not converted:
            return
        stored = self._hash_raw(converted, write=True)
        for chunk in _chunks(converted):
            cacheinfo = [
                arg for path in chunk for arg in ("--cacheinfo", f"{files[path][0]},{stored[path]},{path}")
            ]
            self.repo.git.update_index("--add", *cacheinfo)

    def _write_own_bytes(self, tree: str) -> None:
        """After checkout-index: the files whose bytes a conversion changed on the way out get their
        stored bytes back (a checkpoint holds them exactly as they were, see `_stage_worktree`)."""
        files = self._regular_files(self.repo.git.ls_tree("-r", "-z", "--full-tree", tree), ls_tree=True)
        if not files:
            return
        on_disk = self._hash_raw(list(files))
        for path, (_, sha) in files.items():
            if on_disk[path] != sha:
                data = self.repo.odb.stream(bytes.fromhex(sha)).read()
                (self.root / path).write_bytes(data)

    @staticmethod
    def _regular_files(listing: str, ls_tree: bool = False) -> dict[str, tuple[str, str]]:
        """{path: (mode, sha)} of the regular files in `ls-files -s -z` (or `ls-tree -r -z`) output."""
        files = {}
        for record in listing.split("\0"):
            if not record:
                continue
            meta, path = record.split("\t", 1)
            fields = meta.split()
            mode, sha = fields[0], fields[2] if ls_tree else fields[1]
            if mode in ("100644", "100755"):
                files[path] = (mode, sha)
        return files

    def _hash_raw(self, paths: list[str], write: bool = False) -> dict[str, str]:
        """Blob ids of the files' own bytes (no filters, no line-ending conversion); stored with `write`."""
        shas: dict[str, str] = {}
        for chunk in _chunks(paths):
            out = self.repo.git.hash_object("--no-filters", *(["-w"] if write else []), "--", *chunk)
            shas.update(zip(chunk, out.split(), strict=True))
        return shas

    def list(self) -> list[Checkpoint]:
        # (for-each-ref, not gitpython's refs, which leave out a worktree's own refs/worktree/)
        listing = self.repo.git.for_each_ref(
            "--sort=refname", "--format=%(refname)%00%(objectname)%00%(contents)%00", self.prefix
        )
        fields = listing.split("\0")
        return [
            Checkpoint(ref.lstrip("\n"), sha, message.strip())
            for ref, sha, message in zip(fields[0::3], fields[1::3], fields[2::3], strict=False)
        ]

    def create(self, message: str) -> Checkpoint | None:
        """Snapshot the working tree; None when it equals the newest checkpoint already."""
        tree = self.snapshot_tree()
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
        ref = f"{self.prefix}{number:05d}"
        self.repo.git.update_ref(ref, sha)
        return Checkpoint(ref, sha, message)

    def branch_off(self, branch: str, parent: str, message: str) -> bool:
        """The working tree as it is now, committed on top of `parent` as `branch` (made, or moved);
        False, and no branch, when the tree is `parent`'s."""
        tree = self.snapshot_tree()
        if self.repo.commit(parent).tree.hexsha == tree:
            return False
        with self.repo.git.custom_environment(**AGENT_IDENTITY):
            sha = self.repo.git.commit_tree(tree, "-p", parent, "-m", message)
        self.repo.git.branch("--force", branch, sha)
        return True

    def undo(self, target: Checkpoint | None = None) -> tuple[Checkpoint, list[str]]:
        """Restore a checkpoint (default: the newest) into the working tree and drop it, with every newer
        one: they recorded states after it, and a later undo must go further back, not forward.
        Returns it and what changed."""
        existing = self.list()
        if not existing:
            raise ToolError("There is no checkpoint to go back to.")
        target = target or existing[-1]
        # (-z everywhere: without it git quotes names with spaces, quotes or non-ASCII letters)
        wanted = _names(self.repo.git.ls_tree("-r", "-z", "--name-only", "--full-tree", target.sha))
        with self._scratch_index():
            self._stage_worktree()
            present = _names(self.repo.git.ls_files("-z"))
            changed = _names(self.repo.git.diff("--cached", "-z", "--name-only", "--no-renames", target.sha))
            self.repo.git.read_tree(target.sha)
            self.repo.git.checkout_index("-a", "-f")
            self._write_own_bytes(target.sha)
        for name in sorted(present - wanted):
            (self.root / name).unlink(missing_ok=True)
            _remove_empty_parents(self.root / name, self.root)
        newer = existing[[c.ref for c in existing].index(target.ref) :]
        for dropped in newer:
            self.repo.git.update_ref("-d", dropped.ref)
        return target, sorted(changed | (present - wanted))

    def diff_since(self, sha: str, *options: str) -> str:
        """The working tree against a checkpoint, new and deleted files included (a private index).
        `options` go to `git diff` (`--stat`, `--name-status`)."""
        with self._scratch_index():
            self._stage_worktree()
            return self.repo.git.diff("--cached", *options, sha)

    def commit_changes(self, subject: str, since: str) -> AutoCommit | None:
        """Auto-commit: commit to the current branch only the files that differ between checkpoint
        `since` (taken before the task's first change) and the working tree: the agent's new, modified
        and deleted files. None when there are none, or they end up as HEAD has them.

        The commit is built in a private index from HEAD's tree plus those files, so whatever else the
        user had modified or staged stays exactly as it was; the user's index is then reset for the
        committed paths only, so they do not show as staged reverse-changes. A file the user had also
        changed before the task is committed as it is now (the user's edits and the agent's together;
        one blob cannot be split), and the notice names it. With a detached HEAD nothing is committed:
        the commit would belong to no branch.
        """
        from git import GitCommandError

        paths = self._changed_between(since, self.snapshot_tree())
        if not paths:
            return None
        if self.repo.head.is_detached:
            return AutoCommit(
                None,
                "auto-commit skipped: HEAD is detached, so the commit would be on no branch; "
                "the agent's changes are in the working tree",
            )
        born = self.repo.head.is_valid()
        base = self.repo.head.commit.hexsha if born else self._empty_tree()
        with self._scratch_index():
            self.repo.git.read_tree(base)
            self.repo.git.update_index("--add", "--remove", "--", *paths)
            stat = self.repo.git.diff("--cached", "--numstat", "--no-renames", base).splitlines()
            if not stat:
                return None  # the agent put back what HEAD has
            tree = self.repo.git.write_tree()
        lines = []
        for row in stat:
            added, removed, name = row.split("\t", 2)
            lines.append(f"- {name} (+{added} -{removed})" if added != "-" else f"- {name} (binary)")
        body = f"{len(stat)} file{'s' if len(stat) != 1 else ''} changed:\n" + "\n".join(lines)
        with self.repo.git.custom_environment(**AGENT_IDENTITY):
            sha = self.repo.git.commit_tree(tree, *(["-p", base] if born else []), "-m", subject, "-m", body)
        # The expected old value makes this fail, not overwrite, if the branch moved meanwhile.
        self.repo.git.update_ref(
            "-m", f"spec-agent auto-commit: {subject}", "HEAD", sha, base if born else ""
        )
        # Files the user had uncommitted changes in before the task: they went into the commit too.
        mixed = sorted(set(self._changed_between(base, since)) & set(paths))
        notice = f"committed {sha[:10]} ({len(stat)} file{'s' if len(stat) != 1 else ''})"
        if mixed:
            notice += (
                f"; {', '.join(mixed)} also held your own uncommitted changes, committed with the agent's"
            )
        try:
            with self.repo.git.custom_environment(GIT_LITERAL_PATHSPECS="1"):
                self.repo.git.reset("-q", "--", *paths)
        except GitCommandError as exc:  # e.g. the user's own git holds index.lock right now
            notice += f"; your index was left as it was ({exc.stderr.strip()}): `git reset` syncs it"
        return AutoCommit(sha, notice)

    def _changed_between(self, old: str, new: str) -> list[str]:
        out = self.repo.git.diff_tree("-r", "-z", "--name-only", "--no-renames", old, new)
        return [name for name in out.split("\0") if name]

    def _empty_tree(self) -> str:
        with self._scratch_index():
            return self.repo.git.write_tree()


@dataclass
class AutoCommit:
    sha: str | None  # None: refused
    notice: str  # what to tell the user


def numstat(listing: str) -> list[dict]:
    """`git diff --numstat` output as [{path, added, deleted}]; None counts for a binary file."""
    found = []
    for line in listing.splitlines():
        added, deleted, path = [*line.split("\t", 2), "", ""][:3]
        if path:
            binary = added == "-"
            found.append({"path": path, "added": None if binary else int(added),
                          "deleted": None if binary else int(deleted)})  # fmt: skip
    return found


def _names(listing: str) -> set[str]:
    return {name for name in listing.split("\0") if name}


def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    """Paths a few hundred at a time: a command line has a length limit."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


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
