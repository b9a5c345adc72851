"""Shared fixtures: isolated state per test, the real embedded llama-server, and a no-orphans check."""

from __future__ import annotations

import os
import signal
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.server import machine_paths
from agent.server.launch_plan import MachinePaths, plan_launch
from agent.server.lifecycle import ServerHandle, start, stop
from agent.server.profiles import get_profile
from agent.server.registry import ServerRegistry
from agent.settings.config import Settings
from tools.base import ToolContext
from tools.workspace import Workspace

FIXTURES = Path(__file__).parent / "fixtures"

# A suite started in the background by a non-interactive shell (`pytest &`, `nohup .ci/run &`) inherits
# SIGINT ignored, and so would every agent it starts: the Ctrl-C tests then failed for the launcher's
# sake (seen 2026-12-05). A handler, unlike SIG_IGN, is reset at exec, so children get Ctrl-C back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
AGENT_ENV = ("AGENT_PROFILE", "AGENT_BASE_URL", "AGENT_API_KEY", "AGENT_MODELS_DIR", "LLAMA_SERVER_BIN")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts the real llama-server is slow too: `pytest -m "not slow"` is the fast tier."""
    for item in items:
        if item.get_closest_marker("server"):
            item.add_marker(pytest.mark.slow)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Every process this test session starts inherits this marker, so that the orphan check counts ours
# only, and not the servers of another test run on the same machine.
SESSION_MARKER = f"AGENT_TEST_SESSION={uuid.uuid4().hex}"
os.environ[SESSION_MARKER.split("=")[0]] = SESSION_MARKER.split("=")[1]


def llama_server_pids() -> set[int]:
    """Running (not zombie) llama-server processes started by this test session."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            name, state = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2]
            if name != "llama-server" or state == "Z":
                continue
            if SESSION_MARKER.encode() in (entry / "environ").read_bytes().split(b"\0"):
                pids.add(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.fixture(scope="session", autouse=True)
def no_orphaned_servers() -> Iterator[None]:
    """Every llama-server a test started is gone by the end of the session."""
    yield
    left = llama_server_pids()
    assert not left, f"llama-server processes left running by the tests: {sorted(left)}"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test gets its own state and config dirs; the build cache stays shared (it is keyed)."""
    state = tmp_path / "state"
    monkeypatch.setenv("AGENT_STATE_DIR", str(state))
    monkeypatch.setenv("AGENT_CONFIG_DIR", str(tmp_path / "config"))
    for var in AGENT_ENV:
        monkeypatch.delenv(var, raising=False)
    yield state
    left = ServerRegistry(state).running()
    for record in left:
        stop(record, ServerRegistry(state), grace=2)
    assert not left, f"test left servers running: {left}"


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    """What a tool runs with: a fresh workspace folder `ws` in the test's tmp dir."""
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(Workspace(root))


@pytest.fixture(scope="session")
def embedded() -> MachinePaths:
    """This machine's paths with the embedded llama-server built (CI builds it before the tests)."""

    def progress(fraction: float, message: str) -> None:
        print(f"[build {fraction:4.0%}] {message}", file=sys.stderr)

    paths = machine_paths(Settings(), build_progress=progress)
    paths.embedded_binary()
    paths.embedded_model()
    return paths


def start_profile(name: str, paths: MachinePaths, state_dir: Path, **overrides) -> ServerHandle:
    profile = get_profile(name)
    plan = plan_launch(profile, paths, port=overrides.pop("port", None) or free_port(), **overrides)
    return start(plan, ServerRegistry(state_dir), state_dir / "logs", timeout=120)


@pytest.fixture(scope="module")
def tiny_server(embedded: MachinePaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    state = tmp_path_factory.mktemp("tiny-state")
    handle = start_profile("tiny", embedded, state)
    yield handle
    stop(handle, ServerRegistry(state))


@pytest.fixture(scope="module")
def tiny_ngram_server(
    embedded: MachinePaths, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerHandle]:
    state = tmp_path_factory.mktemp("tiny-ngram-state")
    handle = start_profile("tiny-ngram", embedded, state)
    yield handle
    stop(handle, ServerRegistry(state))


def fake_binary(tmp_path: Path, help_fixture: str) -> Path:
    """An executable whose --help prints a recorded llama-server help text (dialect tests only)."""
    path = tmp_path / "bin" / "llama-server"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncat '{FIXTURES / help_fixture}'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    """A models dir holding small GGUF headers named as the seed's profiles expect them: the targets
    with a chat template, the Gemma 4 draft as BeeLlama 0.1's `dflash-draft`, the Qwen one as
    upstream's `dflash` (the preflight reads them when a test plans a launch)."""
    from tests.gguf_files import CHAT_TEMPLATE, write_dflash, write_gguf

    folder = tmp_path / "models"
    write_gguf(folder / "gemma-4-31B-it-Q4_K_S.gguf", "gemma4", chat_template=CHAT_TEMPLATE)
    write_dflash(folder / "gemma4-31b-it-dflash-Q5_K_M.gguf", "dflash-draft")
    write_gguf(folder / "Qwen3.6-27B-Q4_K_M.gguf", "qwen35", chat_template=CHAT_TEMPLATE)
    write_dflash(folder / "Qwen3.6-27B-DFlash-Q8_0.gguf", "dflash")
    return folder


def paths_with(base: MachinePaths | None, tmp_path: Path, models_dir: Path) -> MachinePaths:
    def no_build(*_key: str) -> Path:
        raise AssertionError("this test must not build llama-server")

    return MachinePaths(
        models_dir=models_dir,
        cache_dir=tmp_path / "cache",
        state_dir=tmp_path / "state",
        embedded_binary=base.embedded_binary if base else no_build,
        embedded_model=base.embedded_model if base else no_build,
        embedded_templates=base.embedded_templates if base else no_build,
    )


os.environ.setdefault("NO_COLOR", "1")
