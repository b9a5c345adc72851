"""The bash sandbox, for real: bubblewrap around real commands (CI installs bubblewrap)."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

import pytest

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
