"""Published agents through `agent launch` on the real tiny llama-server (tiny-ngram): OpenCode and Codex
from npm and Aider from PyPI, each installed once into the cache (pinned versions), each doing one prompt. The
tiny model cannot code; what is tested is that the agent talks to the managed server through the proxy,
its turns are recorded with the server's figures, the figures are printed at exit, and nothing is left
running. Aider doing a real task on the embedded coder is measured in docs/benchmarks.md."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.store.telemetry import read_jsonl
from agent.store.transcripts import list_session_paths, load_session
from tests.conftest import free_port

# Each installs its agent the first time (Aider: about 2 minutes, 700 MB).
pytestmark = [pytest.mark.server, pytest.mark.timeout(1500)]

CLIENTS = Path(os.environ.get("AGENT_TEST_CLIENTS", Path.home() / ".cache" / "spec-agent" / "test-clients"))
OPENCODE = "opencode-ai@1.18.33"
CODEX = "@openai/codex@0.171.0"  # talks the OpenAI responses API, which llama-server serves too
AIDER = "aider-chat==0.86.2"


def npm_bin(package: str, command: str) -> Path:
    prefix = CLIENTS / package.lstrip("@").replace("/", "-").replace("@", "-")
    binary = prefix / "node_modules" / ".bin" / command
    if not binary.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed on this machine")
        subprocess.run(["npm", "install", "--prefix", str(prefix), package], check=True, timeout=600)
    return binary


def aider_bin() -> Path:
    venv = CLIENTS / AIDER.replace("==", "-")
    binary = venv / "bin" / "aider"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", AIDER], check=True, timeout=900)
    return binary


def launched(agent: str, binary: Path, workdir: Path, args: list[str]) -> subprocess.CompletedProcess:
    """The agent through `agent launch` on tiny-ngram, with the 32k context its prompts need (OpenCode's
    first request is 16k tokens: on the profile's 8k it is refused, and OpenCode compacts in a loop)."""
    env = {**os.environ, "PATH": f"{binary.parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "agent", "launch", agent, "-p", "tiny-ngram", "--ctx-size", "32768",
               "--server-port", str(free_port()), "--", *args]  # fmt: skip
    return subprocess.run(
        command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600
    )


def one_recorded_session(state: Path) -> tuple[str, list[dict]]:
    [path] = list_session_paths(state)
    record = load_session(state, path.stem)
    assert record.started["options"]["via"] == "proxy"
    return path.stem, read_jsonl(state / "telemetry" / f"{path.stem}.jsonl")


def test_opencode_from_npm_does_a_prompt_through_agent_launch(isolated_state: Path, tmp_path: Path):
    binary = npm_bin(OPENCODE, "opencode")
    run = launched("opencode", binary, tmp_path, ["run", "Say hello."])
    assert run.returncode == 0, run.stdout + run.stderr
    session, turns = one_recorded_session(isolated_state)
    assert turns and all(t["stats"]["predicted_n"] for t in turns)  # the server's timings, per turn
    assert f"{session}: {len(turns)} turn" in run.stdout  # its figures at exit


def test_codex_from_npm_does_a_prompt_through_agent_launch_on_the_responses_api(
    isolated_state: Path, tmp_path: Path
):
    binary = npm_bin(CODEX, "codex")
    run = launched("codex", binary, tmp_path, ["exec", "--skip-git-repo-check", "Say hello."])
    assert run.returncode == 0, run.stdout + run.stderr
    session, turns = one_recorded_session(isolated_state)
    assert turns, run.stdout + run.stderr
    assert turns and all(t["stats"]["predicted_n"] for t in turns)
    assert turns[0]["client"].startswith("codex_exec/")
    assert f"{session}: {len(turns)} turn" in run.stdout


def test_aider_from_pypi_does_a_prompt_through_agent_launch(isolated_state: Path, tmp_path: Path):
    binary = aider_bin()
    (tmp_path / "hello.py").write_text('print("hi")\n')
    run = launched(
        "aider",
        binary,
        tmp_path,
        ["--yes-always", "--no-git", "--no-pretty", "--message", "Say hello.", "hello.py"],
    )
    assert run.returncode == 0, run.stdout + run.stderr
    session, turns = one_recorded_session(isolated_state)
    assert turns and all(t["stats"]["predicted_n"] for t in turns)
    assert turns[0]["client"].startswith("OpenAI/Python")  # litellm's OpenAI client, as Aider sends it
    assert f"{session}: {len(turns)} turn" in run.stdout
