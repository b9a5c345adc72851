"""Git worktrees for attempts at one task: each attempt works in a tree of its own, at the workspace's
starting state (uncommitted and untracked files included), and only the winner's change comes back to
the workspace, as one patch.

Files that git ignores one by one are copied into each tree too: a generated `_version.py`, a `.env`,
a local config are what the project's code and check import, and a tree without them fails its check
whatever the attempt does. Folders ignored whole (.venv/, node_modules/, build/) are not: they are
large and rebuilt, not edited. Neither comes back: an attempt's change is what git tracks.

The starting state is a commit whose parent is HEAD (the workspace's own files, byte for byte, as a
checkpoint stores them); each attempt's tree is `git worktree add --detach` of it. An attempt that is
kept becomes a branch `agent/attempts/RUN-N` on top of that commit, so `git diff` between the two is
exactly what it did. Nothing here touches the user's index, HEAD or branches, except the branches it
is asked to keep.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from agent.errors import ConfigError
from tools.git import AGENT_IDENTITY, Checkpoints, numstat, open_repo

BRANCH_PREFIX = "agent/attempts/"
IGNORED_FILE_LIMIT = 1_000_000  # bytes: a bigger ignored file is data or a build product, not copied
IGNORED_TOTAL_LIMIT = 20_000_000  # bytes of ignored files copied into each tree, at most


@dataclass
class AttemptTree:
    number: int  # 1-based
    root: Path  # the worktree
    workdir: Path  # where the attempt works: the workspace's place inside the worktree


class AttemptTrees:
    """The worktrees of one run of attempts, under `folder` (outside the workspace)."""

    def __init__(self, workspace: Path, folder: Path, run_id: str) -> None:
        repo = open_repo(workspace)
        if repo is None or repo.working_tree_dir is None:
            raise ConfigError(
                f"attempts need a git repository, and {workspace} is not in one",
                "Each attempt works in a git worktree of the workspace, at its starting state.",
                "Make it one first: git init && git add -A && git commit -m start",
            )
        self.repo = repo
        self.checkpoints = Checkpoints(repo)
        self.top = Path(repo.working_tree_dir).resolve()
        self.inside = workspace.resolve().relative_to(self.top)  # the workspace may be a subfolder
        self.folder = folder
        self.run_id = run_id
        self.start = ""  # the commit of the starting state
        self.trees: list[AttemptTree] = []

    def create(self, count: int) -> list[AttemptTree]:
        """`count` worktrees at the workspace's state as it is now."""
        tree = self.checkpoints.snapshot_tree()
        parents = ["-p", self.repo.head.commit.hexsha] if self.repo.head.is_valid() else []
        with self.repo.git.custom_environment(**AGENT_IDENTITY):
            self.start = self.repo.git.commit_tree(
                tree, *parents, "-m", "agent: the attempts' starting state"
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        ignored = self.ignored_files()
        for number in range(1, count + 1):
            root = self.folder / str(number)
            self.repo.git.worktree("add", "--detach", "--quiet", str(root), self.start)
            for rel in ignored:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                # A build or the user may remove a generated file between the listing and here:
                # the attempt goes without it, as the workspace now does.
                with contextlib.suppress(FileNotFoundError):
                    shutil.copy2(self.top / rel, root / rel, follow_symlinks=False)
            self.trees.append(AttemptTree(number, root, root / self.inside))
        return self.trees

    def ignored_files(self) -> list[str]:
        """The files git ignores one by one (not inside a folder ignored whole), small enough to copy."""
        listing = self.repo.git.ls_files("--others", "--ignored", "--exclude-standard", "--directory", "-z")
        chosen, total = [], 0
        for rel in filter(None, listing.split("\0")):
            if rel.endswith("/"):  # a folder ignored whole
                continue
            try:
                size = os.lstat(self.top / rel).st_size
            except OSError:
                continue
            if size <= IGNORED_FILE_LIMIT and total + size <= IGNORED_TOTAL_LIMIT:
                chosen.append(rel)
                total += size
        return chosen

    def state(self, attempt: AttemptTree) -> str:
        """The tree object of what the attempt's worktree holds now."""
        return Checkpoints(open_repo(attempt.root)).snapshot_tree()

    def changes(self, attempt: AttemptTree, state: str | None = None) -> list[dict]:
        """Lines added and deleted per file by the attempt (`state`: its tree, when already taken)."""
        listing = self.repo.git.diff("--numstat", "--no-renames", self.start, state or self.state(attempt))
        return numstat(listing)

    def apply(self, attempt: AttemptTree, state: str | None = None) -> None:
        """The attempt's change (`state`: its tree, when already taken), applied to the workspace as one
        patch. Raises ConfigError, changing nothing, when the workspace moved on since the start and it
        won't apply."""
        patch = self.repo.git.diff("--binary", "--no-renames", self.start, state or self.state(attempt))
        if not patch.strip():
            return
        patch_file = self.folder / f"attempt-{attempt.number}.patch"
        patch_file.write_text(patch + "\n", encoding="utf-8")
        try:
            self.repo.git.apply("--binary", "--check", str(patch_file))
        except Exception as exc:
            branch = self.keep(attempt)
            raise ConfigError(
                f"attempt {attempt.number} passed, but its change does not apply to the workspace",
                f"the workspace changed while the attempts ran: {str(exc).strip()[-300:]}",
                f"It is kept as the branch {branch}: git diff {branch}~1 {branch} | git apply",
            ) from None
        self.repo.git.apply("--binary", str(patch_file))

    def keep(self, attempt: AttemptTree) -> str:
        """The attempt's state as a branch on top of the starting state; its name."""
        tree = self.state(attempt)
        with self.repo.git.custom_environment(**AGENT_IDENTITY):
            sha = self.repo.git.commit_tree(tree, "-p", self.start, "-m", f"agent: attempt {attempt.number}")
        branch = f"{BRANCH_PREFIX}{self.run_id}-{attempt.number}"
        self.repo.git.branch("--force", branch, sha)
        return branch

    def remove(self) -> None:
        """Every worktree of this run, gone from disk and from git's list."""
        for attempt in self.trees:
            try:
                self.repo.git.worktree("remove", "--force", "--force", str(attempt.root))
            except Exception:  # already gone, or locked: the folder goes anyway, and prune forgets it
                shutil.rmtree(attempt.root, ignore_errors=True)
        self.trees = []
        self.repo.git.worktree("prune")
        shutil.rmtree(self.folder, ignore_errors=True)
