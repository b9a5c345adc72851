"""`agent undo` as a user runs it (a subprocess, a real repository), and auto-commit through `agent run`."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import git
import pytest

from tests.scripted_server import ScriptedServer
from tools.git import Checkpoints

REPO = Path(__file__).resolve().parents[3]


def agent(*args: str, cwd: Path = REPO, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=cwd, stdin=stdin,
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())  # fmt: skip


def sh(cwd: Path, *cmd: str) -> str:
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "git", "config", "user.email", "u@example.com")
    sh(root, "git", "config", "user.name", "User")
    (root / "a.py").write_text("a = 1\n")
    (root / "old.py").write_text("old\n")
    sh(root, "git", "add", ".")
    sh(root, "git", "commit", "-qm", "first")
    return root


def agent_edits(root: Path) -> None:
    Checkpoints(git.Repo(root)).create("before edit_file: a.py")
    (root / "a.py").write_text("a = 2\n")
    (root / "new.py").write_text("new\n")
    (root / "old.py").unlink()


@pytest.mark.slow
def test_undo_with_yes_shows_the_plan_and_restores(work):
    agent_edits(work)
    result = agent("undo", "--yes", "--workdir", str(work))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "checkpoint 00001 (before edit_file: a.py), taken" in out
    assert "modified  a.py" in out and "new       new.py (removed by undo)" in out
    assert "deleted   old.py (brought back by undo)" in out
    assert "3 files changed" in out  # the diffstat
    assert out.rstrip().endswith(
        "restored checkpoint 00001 (before edit_file: a.py):\n  a.py\n  new.py\n  old.py"
    )
    assert (work / "a.py").read_text() == "a = 1\n" and (work / "old.py").exists()
    assert not (work / "new.py").exists()
    assert Checkpoints(git.Repo(work)).list() == []


@pytest.mark.slow
def test_without_a_terminal_and_without_yes_nothing_changes(work):
    agent_edits(work)
    status = sh(work, "git", "status", "--porcelain")
    result = agent("undo", cwd=work)  # --workdir defaults to here
    assert result.returncode == 2
    assert "modified  a.py" in result.stdout  # the plan is shown all the same
    assert "nobody confirmed" in result.stderr and "Pass --yes" in result.stderr
    assert sh(work, "git", "status", "--porcelain") == status and (work / "a.py").read_text() == "a = 2\n"
    assert len(Checkpoints(git.Repo(work)).list()) == 1


@pytest.mark.slow
def test_on_a_terminal_it_asks(work):
    agent_edits(work)
    for answer, code in ((b"n\n", 1), (b"y\n", 0)):
        primary, secondary = pty.openpty()
        os.write(primary, answer)
        result = agent("undo", "--workdir", str(work), stdin=secondary)
        os.close(primary), os.close(secondary)
        assert result.returncode == code, result.stderr
        assert "Restore it? [y/N]" in result.stdout
    assert (work / "a.py").read_text() == "a = 1\n"


@pytest.mark.slow
def test_no_checkpoint_and_no_repository_are_clear_errors(work, tmp_path):
    result = agent("undo", "--yes", "--workdir", str(work))
    assert result.returncode == 2 and "nothing to undo" in result.stderr and "Traceback" not in result.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    result = agent("undo", "--yes", "--workdir", str(plain))
    assert result.returncode == 2 and "is not in a git repository" in result.stderr


HELLO = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}]},
    {"content": "Created hello.py."},
]


@pytest.mark.slow
def test_agent_run_commits_only_its_files_and_undo_finds_its_session(work, tmp_path, isolated_state):
    (work / "a.py").write_text("a = 'the user was here'\n")
    (work / "old.py").write_text("staged by the user\n")
    sh(work, "git", "add", "old.py")
    status = sh(work, "git", "status", "--porcelain")
    config = isolated_state.parent / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("auto_commit = true\n")
    task = tmp_path / "task.md"
    task.write_text('---\napproval: "full-auto"\n---\nCreate hello.py.\n')
    with ScriptedServer(HELLO) as server:
        run = agent("run", str(task), "--base-url", server.url, "--workdir", str(work), "--json")
    assert run.returncode == 0, run.stderr
    notices = [e["message"] for e in map(json.loads, run.stdout.splitlines()) if e["type"] == "notice"]
    assert any("`agent undo` (or /undo in the TUI) restores it" in n for n in notices)
    assert any(n.startswith("committed ") and n.endswith("(1 file)") for n in notices)
    assert sh(work, "git", "show", "--name-status", "--format=", "HEAD") == "A\thello.py\n"
    assert sh(work, "git", "status", "--porcelain") == status  # the user's changes, staged one included

    [session] = [p.stem for p in (isolated_state / "sessions").glob("*.jsonl")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sh(elsewhere, "git", "init", "-q")
    wrong = agent("undo", session, "--yes", "--workdir", str(elsewhere))
    assert wrong.returncode == 2 and f"session {session} worked in {work}" in wrong.stderr
    (work / "later.py").write_text("later\n")
    Checkpoints(git.Repo(work)).create("taken outside the session")
    undo = agent("undo", session[:17], "--yes", "--workdir", str(work))  # a prefix is enough
    assert undo.returncode == 0, undo.stderr
    assert "1 newer checkpoint (not this session's) will be dropped too" in undo.stdout
    assert "restored checkpoint 00001 (before write_file: hello.py (1 lines)):" in undo.stdout
    assert not (work / "hello.py").exists() and not (work / "later.py").exists()
    assert Checkpoints(git.Repo(work)).list() == []  # the newer one went too
    again = agent("undo", session, "--yes", "--workdir", str(work))
    assert again.returncode == 2 and f"nothing to undo in {work} from session {session}" in again.stderr
