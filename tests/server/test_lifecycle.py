"""The real embedded llama-server: start, serve, stop, and every way a start can fail."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from agent.errors import ServerError
from agent.server.launch_plan import plan_launch
from agent.server.lifecycle import health, start, stop
from agent.server.preflight.report import DraftError
from agent.server.profiles import ServerProfile, Speculative, get_profile
from agent.server.registry import ServerRecord, ServerRegistry, process_start_time
from tests.conftest import FIXTURES, free_port, llama_server_pids, paths_with, start_profile
from tests.scripted_server import llama_server_stand_in

pytestmark = pytest.mark.server
REPO = Path(__file__).resolve().parents[2]


def chat(base_url: str, content: str = "def add(a, b):", max_tokens: int = 24) -> dict:
    # Greedy: the base model then repeats itself, which n-gram speculation reliably drafts from
    # (sampled at 0.7 it sometimes drafts nothing at all).
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0}
    response = httpx2.post(
        base_url + "/v1/chat/completions",
        json=body,
        timeout=60,
    )
    response.raise_for_status()
    return response.json()


def gone(pid: int) -> bool:
    return process_start_time(pid) == ""


def test_tiny_starts_serves_timings_without_draft_fields_and_stops(embedded, isolated_state):
    handle = start_profile("tiny", embedded, isolated_state)
    pid = handle.record.pid
    try:
        assert health(handle.base_url)[0] == 200
        timings = chat(handle.base_url)["timings"]
        assert timings["predicted_n"] > 0 and timings["prompt_n"] > 0
        assert "draft_n" not in timings  # no speculation: the fields are absent, not zero
    finally:
        assert stop(handle, ServerRegistry(isolated_state))
    assert gone(pid)
    assert ServerRegistry(isolated_state).running() == []


SEED_PROMPT = (
    "Write a complete Python doubly linked list module. Include a Node dataclass, DoublyLinkedList class, "
    "append, prepend, delete, find, reverse, to_list, from_list, clear, and 5 tests. "
    "Return only one complete Python file."
)


def test_tiny_ngram_drafts(tiny_ngram_server):
    timings = chat(tiny_ngram_server.base_url, SEED_PROMPT, max_tokens=96)["timings"]
    assert "draft_n" in timings and "draft_n_accepted" in timings
    assert timings["draft_n"] > 0


def test_the_log_file_holds_the_command_and_the_server_output(tiny_server):
    log = Path(tiny_server.record.log_path).read_text()
    assert log.startswith("$ ") and "--port" in log.splitlines()[0]
    assert "listening on" in log


def test_our_server_with_the_same_profile_is_reused(tiny_server, embedded):
    registry_dir = Path(tiny_server.record.log_path).parent.parent
    again = start_profile("tiny", embedded, registry_dir, port=tiny_server.record.port)
    assert again.reused and again.record.pid == tiny_server.record.pid


def test_a_port_held_by_another_program_is_refused_and_nothing_starts(embedded, isolated_state):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        before = llama_server_pids()
        with pytest.raises(ServerError) as caught:
            start_profile("tiny", embedded, isolated_state, port=port)
    assert f"port {port} on 127.0.0.1 is in use by another program" in str(caught.value)
    assert "--port" in str(caught.value)
    assert llama_server_pids() == before


def test_a_port_held_by_our_server_of_another_profile_is_refused(tiny_server, embedded):
    registry_dir = Path(tiny_server.record.log_path).parent.parent
    with pytest.raises(ServerError, match="taken by our own server for profile 'tiny'"):
        start_profile("tiny-ngram", embedded, registry_dir, port=tiny_server.record.port)


def _custom_plan(embedded, tmp_path, profile: ServerProfile, models_dir: Path | None = None):
    paths = paths_with(embedded, tmp_path, models_dir or tmp_path)
    return plan_launch(profile, paths, port=free_port())


def test_a_server_that_crashes_while_loading_fails_at_once_with_its_log(embedded, isolated_state, tmp_path):
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + os.urandom(4096))
    # (the preflight would refuse this file before any launch: tests/server/test_preflight.py)
    profile = ServerProfile(name="broken", model="broken.gguf", ctx_size=512, preflight=False)
    plan = _custom_plan(embedded, tmp_path, profile)
    started = time.monotonic()
    with pytest.raises(ServerError) as caught:
        start(plan, ServerRegistry(isolated_state), isolated_state / "logs", timeout=120)
    assert time.monotonic() - started < 30  # an exit is noticed at once, not at the timeout
    text = str(caught.value)
    assert "exited" in text and "broken" in text and "| " in text  # the log's own words are quoted
    assert ServerRegistry(isolated_state).running() == []


def test_a_draft_that_is_not_dflash_is_reported_as_such_upstream(embedded, isolated_state, tmp_path):
    profile = ServerProfile(
        name="fake-dflash",
        model="embedded",
        ctx_size=1024,
        speculative=Speculative(type="draft-dflash", draft_model=str(embedded.embedded_model())),
        preflight=False,  # the preflight refuses it before launch; this is what the server itself does
    )
    plan = _custom_plan(embedded, tmp_path, profile)
    with pytest.raises(DraftError) as caught:
        start(plan, ServerRegistry(isolated_state), isolated_state / "logs", timeout=120)
    text = str(caught.value)
    assert "the draft model is not a DFlash model" in text
    assert "target_layer_ids" in text  # the log line itself
    assert "timeout" not in text.lower()
    # The fix names what this binary loads, not BeeLlama's architecture for everyone.
    assert "This binary (upstream) loads DFlash drafts with general.architecture 'dflash'" in text
    assert caught.value.log_path.endswith(".log") and Path(caught.value.log_path).is_file()


def test_a_server_that_is_not_ready_in_time_is_stopped_and_reported(embedded, isolated_state, tmp_path):
    plan = _custom_plan(embedded, tmp_path, get_profile("tiny"))
    before = llama_server_pids()
    with pytest.raises(ServerError, match=r"did not become ready within 0 s"):
        start(plan, ServerRegistry(isolated_state), isolated_state / "logs", timeout=0.1)
    assert llama_server_pids() == before
    assert ServerRegistry(isolated_state).running() == []


def test_ctrl_c_during_start_stops_the_server(embedded, isolated_state, tmp_path):
    plan = _custom_plan(embedded, tmp_path, get_profile("tiny"))
    before = llama_server_pids()

    def interrupt(_elapsed: float, _phase: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        start(plan, ServerRegistry(isolated_state), isolated_state / "logs", progress=interrupt)
    assert llama_server_pids() == before
    assert ServerRegistry(isolated_state).running() == []


def test_beellama_answering_500_on_the_first_request_is_a_bad_dflash_draft(
    isolated_state, tmp_path, models_dir
):
    """BeeLlama accepts a non-DFlash draft, turns healthy, then fails every request (FACTS.md).
    BeeLlama cannot be built here, so a scripted server with its recorded --help stands in for it."""
    binary = llama_server_stand_in(tmp_path / "beellama" / "llama-server")
    os.environ["SCRIPTED_HELP"] = str(FIXTURES / "llama-server-beellama-0.1-help.txt")
    os.environ["SCRIPTED_DEFAULT"] = json.dumps(
        {"status": 500, "error": {"code": 500, "message": "Invalid input batch.", "type": "server_error"}}
    )
    try:
        paths = paths_with(None, tmp_path, models_dir)
        plan = plan_launch(get_profile("gemma4-31b-dflash"), paths, binary=str(binary), port=free_port())
        assert plan.capabilities.dialect == "beellama-0.1"
        with pytest.raises(ServerError) as caught:
            start(plan, ServerRegistry(isolated_state), isolated_state / "logs", timeout=30)
    finally:
        del os.environ["SCRIPTED_HELP"], os.environ["SCRIPTED_DEFAULT"]
    assert "started, but the draft model is not a DFlash model" in str(caught.value)
    assert "Invalid input batch" in str(caught.value)
    assert ServerRegistry(isolated_state).running() == []


def test_stale_registry_entries_are_dropped(isolated_state):
    registry = ServerRegistry(isolated_state)
    dead = subprocess.Popen(["true"])
    dead.wait()
    registry.add(
        ServerRecord(
            profile="tiny",
            pid=dead.pid,
            host="127.0.0.1",
            port=1,
            base_url="http://127.0.0.1:1",
            log_path="x",
            binary="x",
            proc_start="12345",
        )
    )
    assert registry.running() == []
    assert json.loads(registry.path.read_text()) == []


def test_a_recycled_pid_is_never_signalled(isolated_state):
    """A record whose pid now belongs to another process (another start time) is not ours."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        record = ServerRecord(
            profile="tiny",
            pid=sleeper.pid,
            host="127.0.0.1",
            port=1,
            base_url="",
            log_path="x",
            binary="x",
            proc_start="1",
        )
        assert not stop(record, ServerRegistry(isolated_state))
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def _agent(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )


def test_start_status_stop_from_a_shell(embedded, isolated_state):
    port = str(free_port())
    started = _agent("server", "start", "tiny-ngram", "--port", port)
    assert started.returncode == 0, started.stderr
    assert f"tiny-ngram ready at http://127.0.0.1:{port}" in started.stdout
    status = _agent("server", "status", "--json")
    records = json.loads(status.stdout)
    assert [(r["profile"], r["port"], r["health"]) for r in records] == [("tiny-ngram", int(port), 200)]
    pid = records[0]["pid"]
    stopped = _agent("server", "stop")
    assert stopped.returncode == 0 and "stopped tiny-ngram" in stopped.stdout
    assert gone(pid)
    assert "no servers running" in _agent("server", "status").stdout


def test_a_killed_server_disappears_from_status(embedded, isolated_state):
    handle = start_profile("tiny", embedded, isolated_state)
    os.killpg(handle.record.pid, signal.SIGKILL)
    handle.process.wait()
    assert ServerRegistry(isolated_state).running() == []


def test_ctrl_c_on_the_start_command_leaves_nothing_running(embedded, isolated_state):
    before = llama_server_pids()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "server", "start", "tiny", "--port", str(free_port())],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not llama_server_pids() - before:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert llama_server_pids() == before
    assert ServerRegistry(isolated_state).running() == []


def test_a_missing_model_gives_a_clear_error_from_the_command_line(isolated_state, tmp_path):
    result = _agent(
        "server",
        "start",
        "gemma4-31b-baseline",
        "--binary",
        "/bin/true",
        env={"AGENT_MODELS_DIR": str(tmp_path)},
    )
    assert result.returncode == 4
    assert "error: the model of profile 'gemma4-31b-baseline' is missing" in result.stderr
    assert "Traceback" not in result.stderr
