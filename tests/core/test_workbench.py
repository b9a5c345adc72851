"""The Workbench's part in auto-commit: which checkpoint a task's commit is measured from."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agent.core.workbench import Workbench, auto_commit_subject


def sh(cwd: Path, *cmd: str) -> str:
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_a_task_commits_from_its_first_checkpoint_and_a_task_that_changed_nothing_commits_nothing(tmp_path):
    sh(tmp_path, "git", "init", "-q", "-b", "main")
    (tmp_path / "a.py").write_text("a = 1\n")
    bench = Workbench(tmp_path)
    assert bench.checkpoint("before write_file").startswith("checkpoint 00001 taken (before write_file); ")
    (tmp_path / "b.py").write_text("b\n")
    bench.checkpoint("before bash")  # a second round of the same task (a failed check)
    (tmp_path / "c.py").write_text("c\n")
    note = bench.auto_commit("agent: b and c")
    assert note.startswith("committed ") and note.endswith("(2 files)")
    assert sh(tmp_path, "git", "ls-tree", "-r", "--name-only", "HEAD") == "b.py\nc.py\n"

    bench.task_start = None  # the next prompt, as the TUI starts it
    (tmp_path / "a.py").write_text("a = 2  # the user's, between prompts\n")
    assert bench.auto_commit("agent: nothing") is None  # no checkpoint: the agent changed nothing
    assert bench.checkpoint("before edit_file") is not None
    bench.task_start = None
    assert bench.checkpoint("unchanged") is None  # the tree is the newest checkpoint's: measured from it
    (tmp_path / "d.py").write_text("d\n")
    assert bench.auto_commit("agent: d").endswith("(1 file)")
    assert sh(tmp_path, "git", "status", "--porcelain") == "?? a.py\n"


def test_an_auto_commit_subject_is_the_first_line_the_task_says_cut_short():
    assert (
        auto_commit_subject("Add a --verbose flag.\n\nIt prints each step.") == "agent: Add a --verbose flag."
    )
    assert auto_commit_subject("\n  Fix the parser  \nmore") == "agent: Fix the parser"
    assert auto_commit_subject("x" * 100) == "agent: " + "x" * 60
    assert auto_commit_subject("") == "agent: the task"
