"""The bash sandbox, for real: bubblewrap around real commands (CI installs bubblewrap)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.core.test_loop import git_repo
from tools.base import ToolContext
from tools.bash import Bash, BashArgs
from tools.permissions import Permissions
from tools.sandbox import Sandbox, unavailable
from tools.workspace import Workspace

pytestmark = pytest.mark.skipif(
    bool(unavailable()) and not os.environ.get("AGENT_REQUIRE_SANDBOX"),
    reason=f"no sandbox here: {unavailable()}",
)  # .ci/run sets AGENT_REQUIRE_SANDBOX: there a missing bwrap fails these tests instead


@pytest.fixture
def tmp_path():
    """Outside /tmp: the sandbox gives commands a private /tmp, which would hide what the tests check."""
    path = Path(tempfile.mkdtemp(prefix="agent-sandbox-test-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def context(tmp_path: Path, mode: str = "full-auto", network: bool = False) -> tuple[ToolContext, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n")
    (home / ".netrc").write_text("machine x login me password planted\n")
    permissions = Permissions(mode, None, ws)
    sandbox = Sandbox([ws], network, mode=lambda: permissions.mode, home=home)
    return ToolContext(Workspace(ws), sandbox=sandbox), home


async def sh(ctx: ToolContext, command: str):
    return await Bash().run(BashArgs(command=command), ctx)


async def test_the_workspace_is_writable_and_nothing_else(tmp_path):
    ctx, _ = context(tmp_path)
    outside = tmp_path / "outside.txt"
    result = await sh(ctx, f"echo hi > made.txt && echo no > {outside}")
    assert (tmp_path / "ws" / "made.txt").read_text() == "hi\n"
    assert not outside.exists()
    assert not result.ok and "Read-only file system" in result.output
    assert "[sandboxed: only the workspace and /tmp are writable" in result.output  # the model is told why
    assert result.display["sandboxed"] is True


async def test_planted_credentials_cannot_be_read(tmp_path):
    ctx, home = context(tmp_path)
    result = await sh(ctx, f"cat {home}/.ssh/id_ed25519; cat {home}/.netrc; ls -A {home}/.ssh")
    assert "planted" not in result.output
    assert (home / ".ssh" / "id_ed25519").exists()  # hidden from the command, not touched


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    return server, server.getsockname()[1]


CONNECT = (
    f"{sys.executable} -c \"import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3)\""
)


async def test_the_network_is_off_unless_the_settings_allow_it(tmp_path):
    server, port = _listener()
    try:
        ctx, _ = context(tmp_path)
        assert not (await sh(ctx, f"{CONNECT} {port}")).ok  # the host's ports are out of reach
        ctx, _ = context(tmp_path, network=True)
        assert (await sh(ctx, f"{CONNECT} {port}")).ok
    finally:
        server.close()


async def test_a_test_suite_reaches_its_own_server_inside_the_sandbox(tmp_path):
    ctx, _ = context(tmp_path)
    own_server = (
        f"{sys.executable} -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        "c = socket.create_connection(s.getsockname(), 3); print('reached', s.getsockname()[1])\""
    )
    result = await sh(ctx, own_server)
    assert result.ok and "reached" in result.output, result.output


async def test_only_the_modes_that_run_commands_unasked_are_sandboxed(tmp_path):
    for mode, sandboxed in (("ask", False), ("auto-edit", True), ("full-auto", True), ("read-only", False)):
        ctx, _ = context(tmp_path, mode)
        result = await sh(ctx, "true")
        assert result.display["sandboxed"] is sandboxed, mode


# ------------------------------------------------------------------ git's control files (issue #26)
def git(cwd: Path, *args: str) -> str:
    """git as the user runs it in their own shell, outside any sandbox: hooks and fsmonitor included."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def repository(tmp_path: Path, mode: str = "full-auto") -> tuple[ToolContext, Path]:
    ctx, _ = context(tmp_path, mode)
    ws = git_repo(tmp_path / "ws")
    (ws / "a.txt").write_text("a\n")
    git(ws, "add", "a.txt")
    git(ws, "commit", "-qm", "first")
    return ctx, ws


def as_it_is(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else (b"<folder>" if path.is_dir() else None)


PLANT = "touch planted"  # what each planted hook or command would do, as the user, if it ever ran
GIT_VECTORS = [  # (command, the file it plants or changes)
    (f"cat > .git/hooks/pre-commit <<'EOF'\n#!/bin/sh\n{PLANT}\nEOF\nchmod +x .git/hooks/pre-commit",
     ".git/hooks/pre-commit"),
    (f"printf '#!/bin/sh\\n{PLANT}\\n' > hook && cp hook .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
     ".git/hooks/pre-commit"),
    (f"printf '#!/bin/sh\\n{PLANT}\\n' > hook && chmod +x hook && ln -s ../../hook .git/hooks/pre-commit",
     ".git/hooks/pre-commit"),
    (f"cd .git/hooks && printf '#!/bin/sh\\n{PLANT}\\n' > pre-commit && chmod +x pre-commit", ".git/hooks/pre-commit"),
    ("chmod +x .git/hooks/pre-commit.sample && mv .git/hooks/pre-commit.sample .git/hooks/pre-commit",
     ".git/hooks/pre-commit"),
    (f"git config core.fsmonitor '{PLANT}'", ".git/config"),
    (f"git config core.pager '{PLANT}'", ".git/config"),
    (f"git config alias.st '!{PLANT}'", ".git/config"),
    (f"printf '[core]\\n\\tfsmonitor = {PLANT}\\n' >> .git/config", ".git/config"),
    (f"sed -i 's/^\\[core\\]/[core]\\n\\tfsmonitor = {PLANT}/' .git/config", ".git/config"),
    ("echo '* diff=planted' > .git/info/attributes", ".git/info/attributes"),
    ("mv .git/hooks .git/old-hooks && mkdir .git/hooks", ".git/hooks"),
    (f"mv .git .git-old && git init -q && git config core.fsmonitor '{PLANT}'", ".git/config"),
]  # fmt: skip


@pytest.mark.parametrize(("command", "target"), GIT_VECTORS, ids=[c for c, _ in GIT_VECTORS])
async def test_git_s_hooks_and_config_are_read_only_and_the_model_is_told(tmp_path, command, target):
    ctx, ws = repository(tmp_path)
    (ws / ".git" / "hooks" / "pre-commit.sample").write_text(f"#!/bin/sh\n{PLANT}\n")
    before = as_it_is(ws / target)
    result = await sh(ctx, command)
    assert as_it_is(ws / target) == before, result.output
    assert not result.ok and "[sandboxed: git's hooks, config and info/ are read-only" in result.output
    assert "use git commands" in result.output.lower() or "with git commands" in result.output
    git(ws, "status")  # the user's next git commands, outside the sandbox: nothing planted runs
    git(ws, "commit", "-q", "--allow-empty", "-m", "the user's own commit")
    assert not (ws / "planted").exists()


async def test_a_control_file_git_would_read_that_a_command_creates_is_removed_and_the_model_is_told(
    tmp_path,
):
    ctx, ws = repository(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    result = await sh(ctx, "echo ../../elsewhere > .git/commondir && touch .git/config.worktree")
    assert not (ws / ".git" / "commondir").exists() and not (ws / ".git" / "config.worktree").exists()
    assert "[sandboxed: removed" in result.output and ".git/commondir" in result.output
    assert git(ws, "log", "--format=%s") == "first\n"  # git still finds its own objects


async def test_a_model_can_commit_branch_and_stash_inside_the_sandbox(tmp_path):
    ctx, ws = repository(tmp_path)
    result = await sh(
        ctx,
        "echo b > b.txt && git add b.txt && git commit -qm 'add b' && git checkout -qb feature && "
        "echo more >> a.txt && git stash -q && git stash list && git tag v1 && git branch",
    )
    assert result.ok, result.output
    assert git(ws, "log", "--format=%s", "main") == "add b\nfirst\n"
    assert git(ws, "branch", "--format=%(refname:short)").split() == ["feature", "main"]
    assert len(git(ws, "stash", "list").splitlines()) == 1 and git(ws, "tag") == "v1\n"


async def test_a_worktree_s_git_directories_get_the_same_treatment(tmp_path):
    main = git_repo(tmp_path / "main")
    (main / "a.txt").write_text("a\n")
    git(main, "add", "a.txt")
    git(main, "commit", "-qm", "first")
    ws = tmp_path / "ws"
    git(main, "worktree", "add", "-q", str(ws), "-b", "work")
    ctx = ToolContext(Workspace(ws), sandbox=Sandbox([ws], home=tmp_path / "home"))
    config, gitfile = (main / ".git" / "config").read_bytes(), (ws / ".git").read_bytes()
    result = await sh(ctx, "echo b > b.txt && git add b.txt && git commit -qm 'in the worktree'")
    assert result.ok, result.output  # the shared objects and refs, outside the workspace, are writable
    assert git(main, "log", "--format=%s", "work") == "in the worktree\nfirst\n"
    for plant in (
        f"printf '#!/bin/sh\\n{PLANT}\\n' > {main}/.git/hooks/pre-commit",
        f"git config core.fsmonitor '{PLANT}'",
        "echo 'gitdir: /tmp/planted' > .git",
        f"echo {tmp_path}/planted > {main}/.git/worktrees/ws/commondir",
    ):
        result = await sh(ctx, plant)
        assert not result.ok and "[sandboxed: git's hooks, config" in result.output, plant
    assert (main / ".git" / "config").read_bytes() == config and (ws / ".git").read_bytes() == gitfile
    assert not (main / ".git" / "hooks" / "pre-commit").exists()


async def test_a_submodule_s_git_directory_gets_the_same_treatment(tmp_path):
    ctx, ws = repository(tmp_path)
    lib = git_repo(tmp_path / "lib")
    git(lib, "commit", "-q", "--allow-empty", "-m", "lib")
    git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(ws, "commit", "-qm", "the submodule")
    module = ws / ".git" / "modules" / "lib"
    config, gitfile = (module / "config").read_bytes(), (ws / "lib" / ".git").read_bytes()
    for plant in (
        f"printf '#!/bin/sh\\n{PLANT}\\n' > .git/modules/lib/hooks/post-checkout",
        f"git -C lib config core.fsmonitor '{PLANT}'",
        "echo 'gitdir: ../planted' > lib/.git",
    ):
        result = await sh(ctx, plant)
        assert not result.ok and "[sandboxed: git's hooks, config" in result.output, plant
    assert (module / "config").read_bytes() == config and (ws / "lib" / ".git").read_bytes() == gitfile
    assert not (module / "hooks" / "post-checkout").exists()
    result = await sh(ctx, "cd lib && echo x > x.txt && git add x.txt && git commit -qm 'in the submodule'")
    assert result.ok, result.output
    assert git(ws / "lib", "log", "-1", "--format=%s") == "in the submodule\n"


async def test_the_folder_core_hooks_path_names_is_read_only_too(tmp_path):
    ctx, ws = repository(tmp_path)
    git(ws, "config", "core.hooksPath", ".githooks")
    result = await sh(ctx, f"mkdir -p .githooks && printf '#!/bin/sh\\n{PLANT}\\n' > .githooks/pre-commit")
    assert not (ws / ".githooks").exists()  # it did not exist: made by the command, removed after it
    assert "[sandboxed: removed" in result.output and ".githooks" in result.output
    (ws / ".githooks").mkdir()
    result = await sh(ctx, f"printf '#!/bin/sh\\n{PLANT}\\n' > .githooks/pre-commit")
    assert not result.ok and "[sandboxed: git's hooks, config" in result.output
    assert not (ws / ".githooks" / "pre-commit").exists()


async def test_commands_on_path_under_tmp_stay_reachable_inside_the_sandbox(tmp_path, monkeypatch):
    """A checkout and its virtualenv under /tmp: the private /tmp hid `python3` ("No such file")."""
    venv = Path(tempfile.mkdtemp(prefix="agent-venv-", dir="/tmp"))
    try:
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "lib").mkdir()
        (venv / "lib" / "data.txt").write_text("site-packages live here\n")
        (venv / "bin").mkdir()
        tool = venv / "bin" / "hello-from-tmp"
        tool.write_text(f"#!/bin/sh\ncat {venv}/lib/data.txt\n")
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
        ctx, _ = context(tmp_path)
        result = await sh(ctx, "hello-from-tmp && echo scratch > /tmp/private.txt && ls /tmp")
        assert result.ok, result.output
        assert "site-packages live here" in result.output  # the venv's root, not only its bin/
        assert result.output.count("private.txt") == 1 and not (Path("/tmp") / "private.txt").exists()
        denied = await sh(ctx, f"echo x > {venv}/lib/data.txt")
        assert not denied.ok  # reachable, read-only
    finally:
        shutil.rmtree(venv, ignore_errors=True)


async def test_a_users_tmpdir_outside_the_sandbox_s_writable_folders_points_at_its_private_tmp(
    tmp_path, monkeypatch
):
    """TMPDIR=/var/tmp/me (HPC sites set one) is read-only inside the sandbox: mktemp, pip and pytest's
    tmp_path failed there. Inside, TMPDIR is the private /tmp."""
    own = tmp_path / "usertmp"
    own.mkdir()
    monkeypatch.setenv("TMPDIR", str(own))
    ctx, _ = context(tmp_path)
    result = await sh(ctx, 'f=$(mktemp) && echo "$TMPDIR $f"')
    assert result.ok, result.output
    assert result.output.startswith("/tmp /tmp/tmp.") and not any(own.iterdir())
