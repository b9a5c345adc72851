"""Checkpoints, undo and auto-commit on real repositories; the read-only git tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from tools.base import ToolContext, ToolError
from tools.git import Checkpoints, DiffArgs, GitDiff, GitLog, GitStatus, LogArgs, NoArgs, open_repo
from tools.workspace import Workspace


def sh(cwd: Path, *cmd: str) -> str:
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> git.Repo:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "git", "config", "user.email", "u@example.com")
    sh(root, "git", "config", "user.name", "User")
    (root / "a.py").write_text("a = 1\n")
    (root / ".gitignore").write_text("*.log\n")
    sh(root, "git", "add", ".")
    sh(root, "git", "commit", "-qm", "first")
    return git.Repo(root)


def state(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_a_checkpoint_touches_neither_branch_nor_index(repo):
    root = Path(repo.working_tree_dir)
    (root / "a.py").write_text("a = 2\n")
    sh(root, "git", "add", "a.py")  # the user's own staged change
    (root / "new.py").write_text("new\n")
    head, index = repo.head.commit.hexsha, sh(root, "git", "diff", "--cached", "--name-only")
    status = sh(root, "git", "status", "--porcelain")
    Checkpoints(repo).create("before edit")
    assert repo.head.commit.hexsha == head and repo.active_branch.name == "main"
    assert sh(root, "git", "diff", "--cached", "--name-only") == index
    assert sh(root, "git", "status", "--porcelain") == status


def test_undo_restores_the_checkpoint_and_works_twice(repo):
    root = Path(repo.working_tree_dir)
    cp = Checkpoints(repo)
    cp.create("one")
    original = state(root)
    (root / "a.py").write_text("a = 2\n")
    (root / "b.py").write_text("b\n")
    cp.create("two")
    second = state(root)
    (root / "a.py").write_text("a = 3\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "c.py").write_text("c\n")
    (root / "debug.log").write_text("ignored, kept")

    restored, changed = cp.undo()
    assert restored.message == "two"
    assert {k: v for k, v in state(root).items() if k != "debug.log"} == second
    assert not (root / "pkg").exists() and "pkg/c.py" in changed
    assert (root / "debug.log").read_text() == "ignored, kept"  # ignored files are not the agent's to touch

    cp.undo()
    assert {k: v for k, v in state(root).items() if k != "debug.log"} == original
    with pytest.raises(ToolError, match="no checkpoint"):
        cp.undo()


def test_an_unchanged_tree_takes_no_second_checkpoint(repo):
    cp = Checkpoints(repo)
    assert cp.create("one") is not None
    assert cp.create("again") is None
    assert len(cp.list()) == 1


def test_checkpoints_work_before_the_first_commit(tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    sh(root, "git", "init", "-q")
    (root / "x.txt").write_text("x\n")
    cp = Checkpoints(git.Repo(root))
    cp.create("first")
    (root / "x.txt").write_text("changed\n")
    cp.undo()
    assert (root / "x.txt").read_text() == "x\n"


def test_auto_commit_says_what_changed(repo):
    root = Path(repo.working_tree_dir)
    (root / "a.py").write_text("a = 1\nb = 2\n")
    (root / "new.py").write_text("n = 1\n")
    sha = Checkpoints(repo).commit_changes("agent: add b")
    message = repo.commit(sha).message
    assert message.startswith("agent: add b\n\n2 files changed:")
    assert "- a.py (+1 -0)" in message and "- new.py (+1 -0)" in message
    assert Checkpoints(repo).commit_changes("nothing") is None


def test_outside_a_repository_there_is_no_repo(tmp_path):
    assert open_repo(tmp_path) is None


async def test_read_only_git_tools(repo):
    root = Path(repo.working_tree_dir)
    (root / "a.py").write_text("a = 5\n")
    ctx = ToolContext(Workspace(root))
    status = await GitStatus().run(NoArgs(), ctx)
    assert "## main" in status.output and " M a.py" in status.output
    diff = await GitDiff().run(DiffArgs(), ctx)
    assert "-a = 1" in diff.output and "+a = 5" in diff.output
    log = await GitLog().run(LogArgs(max_count=5), ctx)
    assert log.output.endswith("User first")


async def test_git_tools_outside_a_repo_say_so(tmp_path):
    with pytest.raises(ToolError, match="not a git repository"):
        await GitStatus().run(NoArgs(), ToolContext(Workspace(tmp_path)))
