"""Places where a file written now runs as code later (issue #26): each row of the table with its test,
the file tools' refusal, the permissions' verdicts, and the model's attempts through the real agent
loop in full-auto with the real bwrap: what it plants does not exist afterwards (or is unchanged), the
user's next git commands run nothing of it, and the model is told why."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from agent.events import ApprovalAnswer, ApprovalRequested, Notice
from tests.core.test_loop import Run, call, git_repo
from tests.scripted_server import ScriptedServer
from tools import protected, sandbox
from tools.base import ToolContext, ToolError
from tools.files import EditArgs, EditFile, MultiEdit, MultiEditArgs, OneEdit, WriteArgs, WriteFile
from tools.permissions import MODES, Permissions, Rules
from tools.workspace import Workspace

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"
PLANT = "touch planted"  # what a planted hook or command does, as the user, if it ever runs
HOOK = f"#!/bin/sh\n{PLANT}\n"
needs_bwrap = pytest.mark.skipif(
    bool(sandbox.unavailable()) and not os.environ.get("AGENT_REQUIRE_SANDBOX"),
    reason=f"no sandbox here: {sandbox.unavailable()}",
)  # .ci/run sets AGENT_REQUIRE_SANDBOX: there a missing bwrap fails these tests instead


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


def test_every_row_of_the_table_has_a_test_and_a_line_in_the_security_doc():
    assert sorted(ROWS) == sorted(p.pattern for p in protected.PLACES)
    documented = DOCS.read_text()
    for place in protected.PLACES:
        assert f"`{place.pattern}`" in documented, place.pattern


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


# ------------------------------------------------------------------ through the agent loop, full-auto
def told(server: ScriptedServer, index: int = 1) -> str:
    """What the model read back after its call: the last message of the next request."""
    return server.requests[index]["messages"][-1]["content"]


def users_next_git_commands(repo: Path) -> None:
    """What the user does later in their own shell, where anything planted would run as them."""
    git(repo, "status")
    git(repo, "commit", "-q", "--allow-empty", "-m", "the user's commit")
    assert not (repo / "planted").exists()


E2E = [  # (the model's call, the file it plants or changes, what the model must be told)
    (call("write_file", path=".git/hooks/pre-commit", content=HOOK), ".git/hooks/pre-commit",
     "never write inside .git"),
    (call("bash", command=f"cat > .git/hooks/pre-commit <<'EOF'\n{HOOK}EOF\nchmod +x .git/hooks/pre-commit"),
     ".git/hooks/pre-commit", "hooks, config and info/ are read-only"),
    (call("write_file", path=".git/config", content=f"[core]\n\tfsmonitor = {PLANT}\n"), ".git/config",
     "never write inside .git"),
    (call("edit_file", path=".git/config", old_string="[core]", new_string=f"[core]\n\tfsmonitor = {PLANT}"),
     ".git/config", "never write inside .git"),
    (call("multi_edit", path=".git/config",
          edits=[{"old_string": "[core]", "new_string": f"[core]\n\tsshCommand = {PLANT}"}]),
     ".git/config", "never write inside .git"),
    (call("bash", command=f"git config core.fsmonitor '{PLANT}'"), ".git/config", "read-only"),
    (call("bash", command=f"git config alias.st '!{PLANT}'"), ".git/config", "read-only"),
    (call("bash", command=f"printf '[core]\\n\\tpager = {PLANT}\\n' >> .git/config"), ".git/config",
     "read-only"),
    (call("write_file", path=".git/info/attributes", content="* filter=planted\n"), ".git/info/attributes",
     "never write inside .git"),
    (call("write_file", path=".git/modules/lib/hooks/post-checkout", content=HOOK),
     ".git/modules/lib/hooks/post-checkout", "never write inside .git"),
    (call("bash", command=f"printf '#!/bin/sh\\n{PLANT}\\n' > .git/modules/lib/hooks/post-checkout"),
     ".git/modules/lib/hooks/post-checkout", "read-only"),
    (call("write_file", path=".envrc", content=f"{PLANT}\n"), ".envrc", "direnv runs it"),
    (call("bash", command=f"echo '{PLANT}' > .envrc"), ".envrc", "direnv runs it"),
    (call("write_file", path=".vscode/tasks.json", content="{}\n"), ".vscode/tasks.json", "VS Code runs"),
    (call("bash", command="mkdir -p .vscode && echo {} > .vscode/tasks.json"), ".vscode/tasks.json",
     "VS Code runs"),
    (call("write_file", path=".vscode/settings.json", content="{}\n"), ".vscode/settings.json",
     "VS Code settings"),
    (call("write_file", path=".idea/workspace.xml", content="<x/>\n"), ".idea/workspace.xml",
     "JetBrains"),
    (call("bash", command="mkdir -p .idea && cp a.py .idea/workspace.xml"), ".idea/workspace.xml",
     "JetBrains"),
]  # fmt: skip


@needs_bwrap
@pytest.mark.parametrize(
    ("model_call", "target", "reason"), E2E, ids=[c["name"] + ":" + t for c, t, _ in E2E]
)
async def test_in_full_auto_what_the_model_plants_is_not_there_and_it_is_told_why(
    repo, model_call, target, reason
):
    before = as_it_is(repo / target)
    with ScriptedServer([{"tool_calls": [model_call]}, {"content": "Done."}]) as server:
        run = Run(server, repo, approval="full-auto")  # as `agent run`: nobody to approve
        outcome = await run()
        answer = told(server)
    assert outcome.status == "completed"
    assert as_it_is(repo / target) == before, answer
    assert reason in answer, answer
    if target.startswith((".envrc", ".vscode", ".idea")):  # asked in full-auto; nobody could answer
        assert "runs as code later" in answer and "nobody can approve" in answer
    users_next_git_commands(repo)


@needs_bwrap
async def test_in_full_auto_a_model_commits_branches_and_stashes_in_the_sandbox(repo):
    commands = "echo b = 2 > b.py && git add b.py && git commit -qm 'add b' && git checkout -qb feature && git stash list"
    with ScriptedServer([{"tool_calls": [call("bash", command=commands)]}, {"content": "Done."}]) as server:
        run = Run(server, repo, approval="full-auto")
        await run()
    result = run.results()[0]
    assert result.ok and result.display["sandboxed"], result.output
    assert git(repo, "log", "--format=%s", "main") == "add b\nfirst\n"
    assert git(repo, "branch", "--show-current") == "feature\n"


async def test_without_a_sandbox_a_command_that_plants_a_hook_asks_and_headless_it_is_refused(
    repo, monkeypatch
):
    missing = lambda: "bwrap (bubblewrap) is not installed"  # noqa: E731
    monkeypatch.setattr(sandbox, "unavailable", missing)  # what Sandbox.active asks
    monkeypatch.setattr("agent.session.build_agent.sandbox_unavailable", missing)  # what the session says
    plant = call(
        "bash", command=f"cat > .git/hooks/pre-commit <<'EOF'\n{HOOK}EOF\nchmod +x .git/hooks/pre-commit"
    )
    with ScriptedServer([{"tool_calls": [plant]}, {"content": "Done."}]) as server:
        run = Run(server, repo, approval="full-auto")
        await run()
        answer = told(server)
    assert any("commands run unsandboxed" in n.message for n in run.of(Notice))
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert "Not run:" in answer and "dangerous: it writes .git/hooks/pre-commit" in answer
    assert "nobody can approve" in answer
    users_next_git_commands(repo)


async def test_in_full_auto_an_envrc_is_asked_for_and_written_once_the_user_says_yes(repo):
    asked: list[ApprovalRequested] = []

    async def approve(request: ApprovalRequested) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer("yes")

    script = [
        {"tool_calls": [call("write_file", path=".envrc", content="export A=1\n")]},
        {"content": "Done."},
    ]
    with ScriptedServer(script) as server:
        await Run(server, repo, approval="full-auto", approve=approve)()
    assert [r.summary for r in asked] == [".envrc (1 lines)"] and "direnv" in asked[0].reason
    assert (repo / ".envrc").read_text() == "export A=1\n"


@needs_bwrap
async def test_edit_blocks_into_git_are_refused_like_tool_calls(repo):
    fence = "```"
    blocks = {"content": "\n".join([
        ".git/hooks/pre-commit", f"{fence}sh", *HOOK.splitlines(), fence, "",
        ".git/config", fence, "<<<<<<< SEARCH", "[core]", "=======", "[core]", f"\tfsmonitor = {PLANT}",
        ">>>>>>> REPLACE", fence, "",
        f"{fence}bash", f"printf '#!/bin/sh\\n{PLANT}\\n' > .git/hooks/post-commit", fence,
    ])}  # fmt: skip
    config = (repo / ".git" / "config").read_bytes()
    with ScriptedServer([blocks, {"content": "Nothing more."}]) as server:
        run = Run(server, repo, approval="full-auto", actions="blocks")
        await run()
        answer = told(server)
    assert [r.ok for r in run.results()] == [False, False, False]
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert (repo / ".git" / "config").read_bytes() == config
    assert len(re.findall("never write inside .git", answer)) == 2 and "are read-only" in answer
    users_next_git_commands(repo)


async def test_a_real_run_s_checkpoint_runs_no_hook_planted_before_it(repo, tmp_path):
    ran = tmp_path / "ran"
    ran.mkdir()
    for name in ("pre-commit", "post-index-change", "reference-transaction"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\ntouch {ran}/{name}\n")
        hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", f"touch {ran}/fsmonitor")
    script = [{"tool_calls": [call("write_file", path="b.py", content="b = 2\n")]}, {"content": "Done."}]
    with ScriptedServer(script) as server:
        run = Run(server, repo, approval="full-auto")
        await run()
    assert any("checkpoint 00001 taken" in n.message for n in run.of(Notice))
    assert sorted(p.name for p in ran.iterdir()) == []
