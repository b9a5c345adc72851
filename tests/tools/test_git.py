"""Checkpoints, undo and auto-commit on real repositories; the read-only git tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from tools.base import ToolContext, ToolError
from tools.git import Checkpoints, DiffArgs, GitDiff, GitLog, GitStatus, LogArgs, NoArgs, open_repo
from tools.search import workspace_files
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


def test_a_linked_worktree_keeps_its_checkpoints_to_itself(repo, tmp_path):
    """An attempt works in a linked worktree: its checkpoints must not join the user's `agent undo`
    list (an undo there would put an attempt's files into the workspace), nor a concurrent attempt's
    (one undo drops every newer checkpoint), and they go when the worktree goes."""
    root = Path(repo.working_tree_dir)
    (root / "a.py").write_text("a = 2\n")
    users = Checkpoints(open_repo(root)).create("the user's")
    trees = {}
    for name in ("one", "two"):
        sh(root, "git", "worktree", "add", "-q", "--detach", str(tmp_path / name), "HEAD")
        trees[name] = Checkpoints(open_repo(tmp_path / name))
    for name, tree in trees.items():
        (tmp_path / name / "a.py").write_text(f"a = '{name}'\n")
        tree.create(f"{name}'s first")
        (tmp_path / name / "a.py").write_text(f"a = '{name} again'\n")
        tree.create(f"{name}'s second")
    assert [c.message for c in trees["one"].list()] == ["one's first", "one's second"]
    trees["two"].undo(trees["two"].list()[0])  # back to two's first: one's are untouched
    assert (tmp_path / "two" / "a.py").read_text() == "a = 'two'\n"
    assert [c.message for c in trees["one"].list()] == ["one's first", "one's second"]
    assert trees["two"].list() == []
    assert Checkpoints(open_repo(root)).list() == [users]
    for name in trees:
        sh(root, "git", "worktree", "remove", "--force", str(tmp_path / name))
    assert sh(root, "git", "for-each-ref", "refs/worktree/") == ""
    assert Checkpoints(open_repo(root)).list() == [users]


def test_auto_commit_says_what_changed(repo):
    root = Path(repo.working_tree_dir)
    start = Checkpoints(repo).create("before the task")
    (root / "a.py").write_text("a = 1\nb = 2\n")
    (root / "new.py").write_text("n = 1\n")
    done = Checkpoints(repo).commit_changes("agent: add b", start.sha)
    message = repo.commit(done.sha).message
    assert message.startswith("agent: add b\n\n2 files changed:")
    assert "- a.py (+1 -0)" in message and "- new.py (+1 -0)" in message
    assert done.notice == f"committed {done.sha[:10]} (2 files)"
    assert sh(root, "git", "status", "--porcelain") == ""  # the index agrees with the new commit
    nothing = Checkpoints(repo).create("before the next task")
    assert Checkpoints(repo).commit_changes("nothing", nothing.sha) is None


def test_auto_commit_leaves_the_users_own_changes_and_staging_alone(repo):
    root = Path(repo.working_tree_dir)
    for name in ("staged.py", "mine.py", "gone.py"):
        (root / name).write_text(f"{name} at HEAD\n")
    sh(root, "git", "add", ".")
    sh(root, "git", "commit", "-qm", "more files")
    (root / "staged.py").write_text("staged by the user\n")
    sh(root, "git", "add", "staged.py")
    (root / "staged.py").write_text("staged, then edited again\n")  # index and work tree both differ
    (root / "mine.py").write_text("the user's unstaged edit\n")
    (root / "untracked.txt").write_text("the user's new file\n")
    before = sh(root, "git", "status", "--porcelain")
    staged_blob = sh(root, "git", "rev-parse", ":staged.py")
    head = repo.head.commit.hexsha
    cp = Checkpoints(repo)
    start = cp.create("before write_file")

    (root / "a.py").write_text("a = 2\n")  # the agent's edits
    (root / "pkg").mkdir()
    (root / "pkg" / "new.py").write_text("new\n")
    (root / "gone.py").unlink()
    done = cp.commit_changes("agent: the task", start.sha)

    commit = repo.commit(done.sha)
    assert [p.hexsha for p in commit.parents] == [head] and repo.active_branch.commit == commit
    changed = sh(root, "git", "diff-tree", "--no-commit-id", "--name-status", "-r", done.sha)
    assert changed.split("\n")[:-1] == ["M\ta.py", "D\tgone.py", "A\tpkg/new.py"]
    assert sh(root, "git", "status", "--porcelain") == before  # the user's lines, and nothing else
    assert sh(root, "git", "rev-parse", ":staged.py") == staged_blob
    assert (root / "staged.py").read_text() == "staged, then edited again\n"
    assert (root / "mine.py").read_text() == "the user's unstaged edit\n"
    assert "also held" not in done.notice


def test_auto_commit_names_a_file_the_user_had_changed_too(repo):
    root = Path(repo.working_tree_dir)
    (root / "a.py").write_text("a = 1  # the user's\n")
    cp = Checkpoints(repo)
    start = cp.create("before edit_file")
    (root / "a.py").write_text("a = 1  # the user's\nb = 2  # the agent's\n")
    done = cp.commit_changes("agent: add b", start.sha)
    assert repo.commit(done.sha).tree["a.py"].data_stream.read() == (root / "a.py").read_bytes()
    assert "a.py also held your own uncommitted changes" in done.notice
    assert sh(root, "git", "status", "--porcelain") == ""


def test_auto_commit_makes_the_first_commit_of_an_empty_repository(tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    sh(root, "git", "init", "-q", "-b", "main")
    (root / "notes.txt").write_text("the user's\n")
    sh(root, "git", "add", "notes.txt")
    repo = git.Repo(root)
    cp = Checkpoints(repo)
    start = cp.create("before write_file")
    (root / "hello.py").write_text("print('hi')\n")
    done = cp.commit_changes("agent: hello", start.sha)
    assert repo.head.commit.hexsha == done.sha and not repo.head.commit.parents
    assert sh(root, "git", "ls-tree", "-r", "--name-only", "HEAD") == "hello.py\n"
    assert sh(root, "git", "status", "--porcelain") == "A  notes.txt\n"  # still staged, not committed


def test_auto_commit_refuses_a_detached_head(repo):
    root = Path(repo.working_tree_dir)
    sh(root, "git", "checkout", "-q", "--detach")
    cp = Checkpoints(repo)
    start = cp.create("before edit_file")
    (root / "a.py").write_text("a = 2\n")
    done = cp.commit_changes("agent: edit", start.sha)
    assert done.sha is None and "HEAD is detached" in done.notice
    assert sh(root, "git", "status", "--porcelain") == " M a.py\n"
    assert sh(root, "git", "log", "--format=%s") == "first\n"


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


# ------------------------------------------------------------------ no hook runs (issue #26)
HOOKS = ("pre-commit", "post-commit", "post-index-change", "reference-transaction", "post-checkout",
         "pre-auto-gc", "post-rewrite")  # fmt: skip


def plant(root: Path, ran: Path) -> None:
    """Executable hooks and an fsmonitor command that each leave a file in `ran` when git runs them."""
    ran.mkdir()
    for name in HOOKS:
        hook = root / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\ntouch {ran}/{name}\n")
        hook.chmod(0o755)
    sh(root, "git", "config", "core.fsmonitor", f"touch {ran}/fsmonitor")


async def test_the_agent_s_own_git_runs_no_hook_and_no_fsmonitor(repo, tmp_path):
    root, ran = Path(repo.working_tree_dir), tmp_path / "ran"
    plant(root, ran)
    sh(root, "git", "status")  # as the user runs git: what was planted runs...
    assert {"fsmonitor", "post-index-change"} <= {p.name for p in ran.iterdir()}
    for found in ran.iterdir():
        found.unlink()

    repo = open_repo(root)  # ...and none of the agent's own git commands runs any of them
    cp = Checkpoints(repo)
    start = cp.create("before the task")
    (root / "a.py").write_text("a = 2\n")
    (root / "b.py").write_text("b\n")
    cp.create("after an edit")
    cp.diff_since(start.sha, "--stat")
    assert cp.commit_changes("agent: the task", start.sha).sha  # auto-commit
    (root / "a.py").write_text("a = 3\n")
    cp.create("before another edit")
    cp.undo()
    ctx = ToolContext(Workspace(root))
    for tool, args in ((GitStatus(), NoArgs()), (GitDiff(), DiffArgs()), (GitLog(), LogArgs())):
        await tool.run(args, ctx)
    workspace_files(ctx.workspace, root)  # list_files and grep ask git for the files
    Checkpoints(git.Repo(root)).create("a repository opened elsewhere")
    assert sorted(p.name for p in ran.iterdir()) == []
