"""Fixtures for the TUI: a workspace profile whose "llama-server" is the scripted server as a real
child process, so that starting, killing and restarting a server is exercised for real."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.settings.trust import trust
from tests.conftest import FIXTURES, free_port
from tests.gguf_files import CHAT_TEMPLATE, write_gguf
from tests.scripted_server import llama_server_stand_in


@pytest.fixture
def scripted_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """scripted_profile(workspace, name, replies=[...], default={...}) writes .agent/profiles/NAME.toml
    and returns its port. The replies travel in the profile's environment for the server process.
    The workspace is trusted, as a project's own profiles count only then (agent/settings/trust.py)."""
    binary = llama_server_stand_in(tmp_path / "scripted-bin" / "llama-server")
    # A real GGUF header (with a chat template): the preflight reads it before each launch.
    model = write_gguf(tmp_path / "scripted-bin" / "model.gguf", "scripted", chat_template=CHAT_TEMPLATE)
    monkeypatch.setenv("SCRIPTED_HELP", str(FIXTURES / "llama-server-upstream-help.txt"))

    def write(
        workspace: Path,
        name: str,
        replies: list | None = None,
        default: dict | None = None,
        model_path: Path | None = None,
    ) -> int:
        port = free_port()
        trust(workspace)
        folder = workspace / ".agent" / "profiles"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.toml").write_text(
            f'description = "scripted server {name}"\nbinary = "{binary}"\nmodel = "{model_path or model}"\n'
            f"port = {port}\nstartup_timeout = 30\n\n[env]\n"
            f"SCRIPTED_REPLIES = {json.dumps(json.dumps(replies or []))}\n"
            + (f"SCRIPTED_DEFAULT = {json.dumps(json.dumps(default))}\n" if default is not None else "")
        )
        return port

    return write
