"""Ctrl+C and a killed model server while `agent run` builds its first request in a large repository.

Before the first request, the task message reads the repository to find the code the task is about
(agent/core/repomap.py): in a repository of thousands of files, the longest the agent works on its
own. Each test runs the real `agent run` as a child process, in its own process group, on a generated
repository of 2,000 files (tests/big_repo.py) committed to a real git repository, and acts once the
agent is reading the repository's files: one of them is open in the agent's process (/proc/PID/fd),
which no step before the search does. Then it checks what a user would: the exit code and the
message, the session's record, that nothing the agent started is left running, and that the
repository is as it was, files and git alike.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from agent.server.registry import ServerRegistry
from agent.settings.config import state_dir
from agent.store.lock import AgentLocks
from tests.big_repo import BigRepo, generate
from tests.conftest import FIXTURES, free_port
from tests.faults import AGENT_RUN, REPO, wait_until
from tests.gguf_files import CHAT_TEMPLATE, write_gguf
from tests.scripted_server import ScriptedServer, llama_server_stand_in

pytestmark = pytest.mark.slow
FILES = 2_000  # ~16 MB: read in a tenth of a second, past the size a repository is searched whole
EXITED = 30  # seconds: only bounds a test that fails; the agent ends well within one


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> BigRepo:
    return generate(tmp_path_factory.mktemp("big") / "repo", files=FILES)


def task_file(tmp_path: Path, repo: BigRepo, **front: object) -> Path:
    front = {"actions": "blocks", "approval": "full-auto", "fresh_starts": 0, "max_turns": 2, **front}
    path = tmp_path / "task.md"
    path.write_text(
        "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in front.items()) + "---\n" + repo.task + "\n"
    )
    return path


def start_agent(*args: str) -> subprocess.Popen:
    """`agent run` as the leader of a process group of its own: whatever it starts is in that group,
    unless it starts it in a session of its own (a llama-server)."""
    return subprocess.Popen([*AGENT_RUN, *args], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=os.environ.copy(), start_new_session=True)  # fmt: skip


def reading(agent: subprocess.Popen, root: Path) -> str:
    """A file of the repository (not of .git/) that the agent has open now; "" when none. The search
    opens each file it reads; nothing before it opens one (Workbench opens .git's)."""
    if agent.poll() is not None:
        out, err = agent.communicate()
        raise AssertionError(
            f"the agent ended (exit {agent.returncode}) before it read the repository: {out}{err}"
        )
    try:
        for fd in os.listdir(f"/proc/{agent.pid}/fd"):
            with_path = os.readlink(f"/proc/{agent.pid}/fd/{fd}")
            if with_path.startswith(f"{root}/") and not with_path.startswith(f"{root}/.git/"):
                return with_path
    except OSError:  # a descriptor closed while it was listed
        pass
    return ""


def snapshot(root: Path) -> dict[str, object]:
    """The repository as a user would check it: every file's size and mtime, git's status, its refs
    (branches, stashes, checkpoints) and HEAD."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout

    files = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            stat = os.stat(os.path.join(folder, name))
            files[os.path.relpath(os.path.join(folder, name), root)] = (stat.st_size, stat.st_mtime_ns)
    return {
        "files": files,
        "status": git("status", "--porcelain", "--ignored"),
        "refs": git("for-each-ref"),
        "head": git("rev-parse", "HEAD"),
        "worktrees": git("worktree", "list", "--porcelain"),
    }


def left_running(agent: subprocess.Popen, root: Path, settle: float = 5.0) -> list[str]:
    """Processes of the agent's group, or working in the repository, still running `settle` seconds
    after it exited (a killed child takes a moment to be gone)."""
    deadline = time.monotonic() + settle
    while True:
        found = []
        for proc in psutil.process_iter(["pid", "cmdline", "status"]):
            try:
                if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                    continue
                in_group = os.getpgid(proc.pid) == agent.pid
                here = Path(proc.cwd()).is_relative_to(root)
            except (psutil.Error, OSError):
                continue
            if in_group or here:
                found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def transcript(state: Path) -> list[dict]:
    [path] = sorted((state / "sessions").glob("*.jsonl"))
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the transcript ends in the middle of a line"
    return [json.loads(line) for line in data.decode().splitlines()]


@pytest.fixture(autouse=True)
def no_sandbox(isolated_state: Path) -> None:
    """No agent here runs a command. Without the sandbox, a machine lacking bwrap says nothing of it:
    its "commands run unsandboxed" notice would come before what these tests read."""
    config = isolated_state.parent / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("sandbox = false\n")


def lock_is_free(root: Path) -> bool:
    with AgentLocks(state_dir(), root, "test").holding("after"):
        return True


# ------------------------------------------------------------------------------------------- Ctrl+C


def test_ctrl_c_while_the_first_request_is_built_stops_the_search_and_loses_nothing(
    tmp_path, isolated_state, big
):
    """SIGINT while the task message reads the repository: exit 130 and "interrupted", the search
    stopped where it was (the session's record holds no task message: it was never made, and was
    not sent), `session.finished` "interrupted" with exit code 130, nothing of the agent left
    running, the repository and its git state as they were, and the folder free for the next agent.
    (Heard only once the search ended, as it was when the search ran on the event loop, the task
    message was recorded and its turn begun before the agent stopped.)"""
    before = snapshot(big.root)
    with ScriptedServer([{"content": "Done."}], n_ctx=16384) as server:
        agent = start_agent(
            str(task_file(tmp_path, big)), "--base-url", server.url, "--workdir", str(big.root)
        )
        try:
            wait_until(lambda: reading(agent, big.root), what="the agent to read the repository", poll=0.0002)
            agent.send_signal(signal.SIGINT)
            out, err = agent.communicate(timeout=EXITED)
        finally:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.communicate()
        assert server.requests == [], "the first request went out after Ctrl+C"
    assert agent.returncode == 130, out + err
    assert err.startswith("interrupted"), err
    recorded = transcript(isolated_state)
    kinds = [e["type"] for e in recorded]
    assert kinds == ["session.started", "session.finished"], kinds
    assert recorded[-1]["outcome"] == "interrupted" and recorded[-1]["summary"]["exit_code"] == 130
    assert f"agent run --resume {recorded[0]['session_id']}" in err
    assert not left_running(agent, big.root), "the agent left processes behind"
    assert snapshot(big.root) == before
    assert lock_is_free(big.root)


# ------------------------------------------------------------------------------------- a killed server


def test_the_attached_server_killed_during_the_search_is_named_with_what_to_do(tmp_path, isolated_state, big):
    """The server given by --base-url (a scripted server process of the test's) killed with SIGKILL
    while the agent reads the repository: the first request finds nothing there; exit 4, the error,
    and a notice naming the address and what to do (start it again, or give its new address, then
    `agent run --resume ID`); `session.finished` (error, exit 4); nothing left running; the
    repository as it was."""
    before = snapshot(big.root)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.scripted_server", "--as-llama-server", "--port", str(port)],
        cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert "listening" in (server.stderr.readline() if server.stderr else "")
        agent = start_agent(
            str(task_file(tmp_path, big)), "--base-url", f"http://127.0.0.1:{port}", "--workdir", str(big.root),
            "--json",
        )  # fmt: skip
        try:
            wait_until(lambda: reading(agent, big.root), what="the agent to read the repository", poll=0.0002)
            server.kill()
            server.wait()
            out, err = agent.communicate(timeout=EXITED)
        finally:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.communicate()
    finally:
        server.kill()
        server.wait()
    assert agent.returncode == 4, out + err
    said = [json.loads(line) for line in out.splitlines() if line.strip()]
    [error] = [e for e in said if e["type"] == "error"]
    assert error["error"] == "server_gone" and "unreachable" in error["message"]
    recorded = transcript(isolated_state)
    [notice] = [e["message"] for e in said if e["type"] == "notice"]
    assert f"the model server at http://127.0.0.1:{port}/v1 (--base-url) no longer answers" in notice
    assert "Start it again" in notice and f"agent run --resume {recorded[0]['session_id']}" in notice
    assert recorded[-1]["type"] == "session.finished" and recorded[-1]["outcome"] == "error"
    assert recorded[-1]["summary"]["exit_code"] == 4
    assert not left_running(agent, big.root), "the agent left processes behind"
    assert snapshot(big.root) == before


def scripted_profile(config: Path, tmp_path: Path, name: str = "scripted") -> str:
    """A profile whose llama-server is the scripted server: `agent run` starts it, as its own."""
    binary = llama_server_stand_in(tmp_path / "bin" / "llama-server")
    model = write_gguf(tmp_path / "bin" / "model.gguf", "scripted", chat_template=CHAT_TEMPLATE)
    (config / "profiles").mkdir(parents=True, exist_ok=True)
    (config / "profiles" / f"{name}.toml").write_text(
        f'description = "the scripted server"\nbinary = "{binary}"\nmodel = "{model}"\nport = {free_port()}\n'
        "startup_timeout = 30\n"
    )
    return name


def test_its_own_server_killed_during_the_search_is_said_and_a_resume_starts_it_again(
    tmp_path, isolated_state, big, monkeypatch
):
    """The llama-server `agent run` started (the scripted server as one) killed with SIGKILL while the
    agent reads the repository: exit 4, the error, and a notice that the server was killed, with its
    log and `agent run --resume ID`, which starts it again; `session.finished` (error, exit 4); no
    server and nothing else of the agent's left running; the repository as it was."""
    monkeypatch.setenv("SCRIPTED_HELP", str(FIXTURES / "llama-server-upstream-help.txt"))
    profile = scripted_profile(isolated_state.parent / "config", tmp_path)
    before = snapshot(big.root)
    agent = start_agent(str(task_file(tmp_path, big, profile=profile)), "--workdir", str(big.root), "--json")
    try:
        wait_until(lambda: reading(agent, big.root), what="the agent to read the repository", poll=0.0002)
        [record] = ServerRegistry(isolated_state).running()
        os.kill(record.pid, signal.SIGKILL)
        out, err = agent.communicate(timeout=EXITED)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.communicate()
    assert agent.returncode == 4, out + err
    said = [json.loads(line) for line in out.splitlines() if line.strip()]
    [error] = [e for e in said if e["type"] == "error"]
    assert error["error"] == "server_gone"
    recorded = transcript(isolated_state)
    notices = [e["message"] for e in said if e["type"] == "notice"]
    assert any(
        f"llama-server (profile {profile}, pid {record.pid}) was killed by SIGKILL" in n
        and f"`agent run --resume {recorded[0]['session_id']}` starts it again" in n
        for n in notices
    ), notices
    assert recorded[-1]["type"] == "session.finished" and recorded[-1]["summary"]["exit_code"] == 4
    assert not ServerRegistry(isolated_state).running()
    assert not psutil.pid_exists(record.pid) or psutil.Process(record.pid).status() == psutil.STATUS_ZOMBIE
    assert not left_running(agent, big.root), "the agent left processes behind"
    assert snapshot(big.root) == before
