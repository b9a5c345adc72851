"""Places where a file written now runs as code later (issue #26): each row of the table with its test,
the file tools' refusal and the permissions' verdicts."""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

import pytest

from tests.test_loop import git_repo
from tools import protected
from tools.base import ToolContext, ToolError
from tools.files import EditArgs, EditFile, MultiEdit, MultiEditArgs, OneEdit, WriteArgs, WriteFile
from tools.permissions import MODES, Permissions, Rules
from tools.workspace import Workspace

PLANT = "touch planted"  # what a planted hook or command does, as the user, if it ever runs
HOOK = f"#!/bin/sh\n{PLANT}\n"


def git(cwd: Path, *args: str) -> str:
    """git as the user runs it in their own shell: hooks and fsmonitor included."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def as_it_is(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else (b"<folder>" if path.is_dir() else None)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a commit and a submodule, `lib`."""
    root = git_repo(tmp_path / "proj")
    (root / "a.py").write_text("a = 1\n")
    lib = git_repo(tmp_path / "lib")
    git(lib, "commit", "-q", "--allow-empty", "-m", "lib")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    return root


# ------------------------------------------------------------------ the table, row by row
ROWS = {  # each row's pattern: a path it covers, what the file tools do, what a command meets
    ".git/": (".git/objects/info/alternates", "refuse", None),
    ".git": ("lib/.git", "refuse", "read-only"),
    ".git/hooks/": (".git/hooks/pre-commit", "refuse", "read-only"),
    ".git/config": (".git/config", "refuse", "read-only"),
    ".git/info/": (".git/info/attributes", "refuse", "read-only"),
    ".git/config.worktree": (".git/config.worktree", "refuse", "read-only"),
    ".git/commondir": (".git/commondir", "refuse", "read-only"),
    ".git/worktrees/*/hooks/": (".git/worktrees/wt/hooks/pre-commit", "refuse", "read-only"),
    ".git/worktrees/*/config": (".git/worktrees/wt/config", "refuse", "read-only"),
    ".git/worktrees/*/info/": (".git/worktrees/wt/info/exclude", "refuse", "read-only"),
    ".git/worktrees/*/config.worktree": (".git/worktrees/wt/config.worktree", "refuse", "read-only"),
    ".git/worktrees/*/commondir": (".git/worktrees/wt/commondir", "refuse", "read-only"),
    ".git/modules/**/hooks/": (".git/modules/lib/hooks/post-checkout", "refuse", "read-only"),
    ".git/modules/**/config": (".git/modules/a/b/config", "refuse", "read-only"),
    ".git/modules/**/info/": (".git/modules/lib/info/exclude", "refuse", "read-only"),
    protected.HOOKS_PATH: (".githooks/pre-commit", "ask", "read-only"),
    ".envrc": ("sub/.envrc", "ask", "ask"),
    ".vscode/tasks.json": (".vscode/tasks.json", "ask", "ask"),
    ".vscode/settings.json": (".vscode/settings.json", "ask", "ask"),
    ".idea/": (".idea/workspace.xml", "ask", "ask"),
}
WS = Path("/work/project")


@pytest.mark.parametrize("pattern", list(ROWS))
def test_each_row_decides_for_the_file_tools_and_for_commands(pattern):
    rel, files, commands = ROWS[pattern]
    path = PurePosixPath(WS / rel)
    hooks = WS / ".githooks"
    assert pattern in [p.pattern for p in protected.places_for(path, WS, hooks)]
    assert protected.for_files([path], WS, hooks).files == files
    unsandboxed = protected.for_commands(path, WS, hooks, sandboxed=False)
    sandboxed = protected.for_commands(path, WS, hooks, sandboxed=True)
    if commands is None:  # objects, refs, the index: git commands write them
        assert unsandboxed is None and sandboxed is None
    else:
        assert unsandboxed is not None  # without a sandbox, a command that writes it asks
        assert (sandboxed is not None) is (commands == "ask")  # with one, the read-only mount holds


@pytest.mark.parametrize(
    "rel", [".gitignore", ".gitattributes", ".github/workflows/ci.yml", "src/config", "hooks/pre-commit",
            ".vscode/launch.json", "notes/.git-notes", "my.envrc", ".idea-notes.md"],
)  # fmt: skip
def test_look_alikes_are_not_guarded(rel):
    assert protected.places_for(PurePosixPath(WS / rel), WS, WS / ".githooks") == []


# ------------------------------------------------------------------ the file tools themselves
async def test_the_file_tools_refuse_to_write_inside_git_however_the_path_is_written(repo):
    ctx = ToolContext(Workspace(repo))
    (repo / "hooks-link").symlink_to(".git/hooks")
    config = (repo / ".git" / "config").read_bytes()
    attempts = [
        (WriteFile(), WriteArgs(path=".git/hooks/pre-commit", content=HOOK)),
        (WriteFile(), WriteArgs(path="./.git/hooks/pre-commit", content=HOOK)),
        (WriteFile(), WriteArgs(path="lib/../.git/hooks/pre-commit", content=HOOK)),
        (WriteFile(), WriteArgs(path=str(repo / ".git" / "hooks" / "pre-commit"), content=HOOK)),
        (WriteFile(), WriteArgs(path="hooks-link/pre-commit", content=HOOK)),  # through a symlink
        (WriteFile(), WriteArgs(path=".git/modules/lib/hooks/post-checkout", content=HOOK)),
        (WriteFile(), WriteArgs(path="lib/.git", content="gitdir: ../planted\n")),
        (WriteFile(), WriteArgs(path=".git/config", content=f"[core]\n\tfsmonitor = {PLANT}\n")),
        (EditFile(), EditArgs(path=".git/config", old_string="[core]", new_string=f"[core]\n\tpager = {PLANT}")),
        (MultiEdit(), MultiEditArgs(path=".git/config", edits=[
            OneEdit(old_string="[core]", new_string=f"[core]\n\tsshCommand = {PLANT}")])),
    ]  # fmt: skip
    for tool, args in attempts:
        with pytest.raises(ToolError) as refused:
            await tool.run(args, ctx)
        message = str(refused.value)
        assert "never write inside .git" in message and "Use git commands" in message, args
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (repo / ".git" / "modules" / "lib" / "hooks" / "post-checkout").exists()
    assert (repo / ".git" / "config").read_bytes() == config
    assert (repo / "lib" / ".git").read_text().startswith("gitdir: ../.git/modules/lib")


async def test_the_file_tools_still_write_the_places_that_ask_once_permitted(repo):
    # the permissions ask for these; the tools themselves do not refuse them
    ctx = ToolContext(Workspace(repo))
    for rel in (".envrc", ".vscode/tasks.json", ".idea/workspace.xml", ".gitignore"):
        assert (await WriteFile().run(WriteArgs(path=rel, content="x\n"), ctx)).ok
        assert (repo / rel).read_text() == "x\n"


# ------------------------------------------------------------------ the permissions
@pytest.mark.parametrize("tool", ["write_file", "edit_file", "multi_edit"])
def test_file_changes_inside_git_are_refused_and_other_places_ask_in_every_mode(tool, repo):
    suffix = " (2 lines)" if tool == "write_file" else ""  # write_file's subject, as the loop gives it
    git(repo, "config", "core.hooksPath", ".githooks")
    for mode in MODES:
        permissions = Permissions(mode, None, repo)
        for rel in (".git/hooks/pre-commit", ".git/config", "lib/.git", ".git/modules/lib/config"):
            verdict = permissions.check(tool, "edit", rel + suffix)
            assert verdict.decision == "deny" and "Use git commands" in verdict.reason, (mode, rel)
        for rel in (".envrc", ".vscode/tasks.json", ".vscode/settings.json", ".idea/misc.xml",
                    ".githooks/pre-commit"):  # fmt: skip
            verdict = permissions.check(tool, "edit", rel + suffix)
            expected = "deny" if mode == "read-only" else "ask"
            assert verdict.decision == expected, (mode, rel, verdict)
            if expected == "ask":
                assert "runs as code later" in verdict.reason and verdict.rule == rel


def test_a_rule_that_names_the_file_lets_it_be_written_and_a_broad_one_does_not(repo):
    rules = Rules(allow={"write_file": ["*", ".envrc"], "edit_file": [".vscode/*"]})
    permissions = Permissions("full-auto", rules, repo)
    assert permissions.check("write_file", "edit", ".envrc (1 lines)").decision == "allow"
    assert permissions.check("multi_edit", "edit", ".vscode/tasks.json").decision == "ask"  # `*` names none
    assert permissions.check("write_file", "edit", "sub/.envrc (1 lines)").decision == "ask"
    everything = Rules(allow={"write_file": ["*", ".git/*"]})
    assert (
        Permissions("full-auto", everything, repo).check("write_file", "edit", ".git/config").decision
        == "deny"
    )


def test_a_rule_for_write_file_matches_its_path_without_the_line_count():
    # write_file's subject is "PATH (N lines)": a deny rule on the path must still hold
    rules = Rules(deny={"write_file": [".env"]})
    assert (
        Permissions("full-auto", rules, WS).check("write_file", "edit", ".env (3 lines)").decision == "deny"
    )


@pytest.mark.parametrize(
    "line",
    ["cat > .git/hooks/pre-commit <<'EOF'\n#!/bin/sh\ntouch planted\nEOF", "chmod +x .git/hooks/pre-commit",
     "git config core.fsmonitor 'touch planted'", "echo '[alias] st = !sh' >> .git/config",
     "echo x > .git/modules/lib/hooks/post-checkout", "echo x > .githooks/pre-commit"],
)  # fmt: skip
def test_commands_that_write_git_s_control_files_ask_without_a_sandbox_and_run_in_one(line, repo):
    git(repo, "config", "core.hooksPath", ".githooks")
    without = Permissions("full-auto", None, repo, sandboxed=lambda: False).check("bash", "exec", line)
    assert without.decision == "ask" and without.reason.startswith("dangerous"), without
    within = Permissions("full-auto", None, repo, sandboxed=lambda: True).check("bash", "exec", line)
    assert within.decision == "allow"  # the sandbox mounts them read-only: the write fails there


@pytest.mark.parametrize(
    "line", ["echo 'curl x | sh' > .envrc", "cp tasks.json .vscode/tasks.json", "tee .vscode/settings.json",
             "sed -i s/a/b/ .idea/workspace.xml", "mv x .envrc"],
)  # fmt: skip
def test_commands_that_write_ide_and_direnv_files_ask_with_a_sandbox_too(line, repo):
    for sandboxed in (False, True):
        verdict = Permissions("full-auto", None, repo, sandboxed=lambda s=sandboxed: s).check(
            "bash", "exec", line
        )
        assert verdict.decision == "ask" and "runs as code later" in verdict.reason, (sandboxed, verdict)
