"""The model server, broken on purpose (issue 13, item 1), on the real embedded llama-server (tiny).

kill -9 of the llama-server `agent run` started, during prefill, during a stream and between turns;
a server that hangs (SIGSTOP) in the middle of its answer; a server restarted on another port; a
server without /props and /v1/models. In each the run ends (or goes on) with a message that says what
happened, within a bounded time, the transcript is whole JSON lines that were only ever appended to,
and `agent run --resume ID` carries the session on. No llama-server is left running (conftest checks
this for every test), a stopped one included.

Where in a request the fault lands is read from the server itself: its log says when it takes a task
(prefill follows), /slots how many tokens it has decoded, and its log's "prompt eval time" line that a
prefill finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx2
import pytest

from agent.server.lifecycle import stop
from agent.server.registry import ServerRecord, ServerRegistry, process_start_time
from tests.conftest import free_port, start_profile
from tests.faults import REPO, run_agent, start_agent, wait_until

pytestmark = pytest.mark.server


# ------------------------------------------------------------------------------------------- helpers


def fault_profile(isolated_state: Path, name: str = "tiny-fault", max_tokens: int = 8) -> str:
    """The tiny profile on a free port, greedy (what it says is then the same every run), answers capped."""
    folder = isolated_state.parent / "config" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    text = (REPO / "server_profiles" / "tiny.toml").read_text()
    for old, new in (
        ("port = 8920", f"port = {free_port()}"),
        ("temperature = 0.7", "temperature = 0.0"),
        ("max_tokens = 160", f"max_tokens = {max_tokens}"),
    ):
        assert old in text
        text = text.replace(old, new)
    (folder / f"{name}.toml").write_text(text)
    return name


def task(tmp_path: Path, body: str = "Say hello.", **front: object) -> Path:
    """A task file. Edit blocks, not tool calls: no tool schemas in the prompt makes it a third of the
    size (~450 tokens, not ~1,450), and prefill is most of each run's time on a CPU."""
    front = {"approval": "full-auto", "actions": "blocks", **front}
    lines = ["---", *(f"{k}: {json.dumps(v)}" for k, v in front.items()), "---", body]
    path = tmp_path / "task.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def agent_server(isolated_state: Path, agent: subprocess.Popen) -> ServerRecord:
    """The llama-server the running `agent run` started, once it is registered."""

    def found() -> ServerRecord | None:
        if agent.poll() is not None:
            out, err = agent.communicate()
            raise AssertionError(
                f"the agent ended (exit {agent.returncode}) before its server started: {out}{err}"
            )
        records = ServerRegistry(isolated_state).running()
        return records[0] if records else None

    return wait_until(found, what="the agent's llama-server", poll=0.005)


def log_of(record: ServerRecord) -> str:
    return Path(record.log_path).read_text(errors="replace")


def decoded(record: ServerRecord) -> int:
    """Tokens the server has decoded for the request it is working on (0 while it prefills)."""
    try:
        slots = httpx2.get(f"http://127.0.0.1:{record.port}/slots", timeout=5).json()
    except (httpx2.HTTPError, ValueError):
        return 0
    if not isinstance(slots, list):  # an error body: the model is still loading
        return 0
    return max((t.get("n_decoded", 0) for s in slots if s.get("is_processing") for t in s.get("next_token", [])),
               default=0)  # fmt: skip


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def transcript(isolated_state: Path) -> tuple[Path, bytes, list[dict]]:
    [path] = sorted((isolated_state / "sessions").glob("*.jsonl"))
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the transcript ends in the middle of a line"
    return path, data, [json.loads(line) for line in data.decode().splitlines()]


@contextlib.contextmanager
def finally_gone(isolated_state: Path) -> Iterator[list[ServerRecord]]:
    """Whatever happens in the test, the servers it found end: continued (SIGCONT) and killed, by pid."""
    seen: list[ServerRecord] = []
    try:
        yield seen
    finally:
        for record in seen:
            if process_start_time(record.pid) == record.proc_start:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(record.pid, signal.SIGCONT)
                    os.kill(record.pid, signal.SIGKILL)


def assert_resumes(session: str, before: bytes, isolated_state: Path, *args: str) -> list[dict]:
    """`agent run --resume` carries the session on: a new part appended after the old, untouched, with
    a model turn whose prompt holds the whole history. Returns the new part's events."""
    earlier = [json.loads(line) for line in before.decode().splitlines()]
    asked = max((t["stats"]["prompt_n"] + (t["stats"].get("cache_n") or 0) for t in earlier if t["type"] == "turn.completed"), default=300)  # fmt: skip
    result = run_agent("--resume", session, *args, "--json", timeout=180)
    assert result.returncode in (0, 3), result.stderr  # done, or the turn limit: either way it went on
    path, data, _ = transcript(isolated_state)
    assert path.stem == session and data.startswith(before)
    added = [json.loads(line) for line in data[len(before) :].decode().splitlines()]
    assert added[0]["type"] == "session.started" and added[0]["resumed"]
    turns = [e["stats"] for e in added if e["type"] == "turn.completed"]
    # the system prompt and the history, again (from the server's cache, or prefilled anew): no less
    # than any request before (or than the system prompt and the task alone, ~450 tokens)
    assert turns and turns[0]["prompt_n"] + (turns[0].get("cache_n") or 0) > asked
    assert added[-1]["type"] == "session.finished"
    return added


def assert_killed_run(
    result_code: int, out: str, err: str, isolated_state: Path, *said_one_of: str
) -> tuple[str, bytes]:
    """What a run whose server died says: exit 4, the error, and a notice naming the dead server."""
    assert result_code == 4, out + err
    said = events(out)
    errors = [e for e in said if e["type"] == "error"]
    assert errors and any(words in errors[-1]["message"] for words in said_one_of), errors
    notices = [e["message"] for e in said if e["type"] == "notice"]
    path, data, recorded = transcript(isolated_state)
    assert any("was killed by SIGKILL" in n and f"agent run --resume {path.stem}" in n for n in notices), (
        notices
    )
    assert recorded[-1]["type"] == "session.finished" and recorded[-1]["outcome"] == "error"
    assert recorded[-1]["summary"]["exit_code"] == 4
    return path.stem, data


# ------------------------------------------------------------------------------------------ kill -9


def test_kill_9_of_the_server_during_prefill(tmp_path, isolated_state, embedded):
    profile = fault_profile(isolated_state)
    work = tmp_path / "work"
    proc = start_agent(str(task(tmp_path, max_turns=1)), "-p", profile, "--workdir", str(work), "--json")
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        wait_until(
            lambda: "processing task" in log_of(record), what="the request to reach the server", poll=0.005
        )
        os.kill(record.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    assert "prompt eval time" not in log_of(record)  # it died before its prefill was done
    # llama-server opens its stream as it starts to prefill: the connection broke before any text came
    # (or, when the kill beat the response's first bytes, the retries found nothing listening)
    session, before = assert_killed_run(
        proc.returncode, out, err, isolated_state, "broke before its answer began", "unreachable"
    )
    _, _, recorded = transcript(isolated_state)
    assert not [e for e in recorded if e["type"] == "assistant.message"]
    assert_resumes(session, before, isolated_state)


def test_kill_9_of_the_server_during_a_stream(tmp_path, isolated_state, embedded):
    profile = fault_profile(isolated_state, max_tokens=400)
    proc = start_agent(
        str(task(tmp_path, max_turns=1)), "-p", profile, "--workdir", str(tmp_path / "work"), "--json"
    )
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        wait_until(lambda: decoded(record) >= 3, what="tokens to flow", poll=0.05)
        os.kill(record.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    session, before = assert_killed_run(
        proc.returncode, out, err, isolated_state, "broke in the middle of its answer"
    )
    assert_resumes(session, before, isolated_state, "-p", fault_profile(isolated_state, max_tokens=8))


def test_kill_9_of_the_server_between_turns(tmp_path, isolated_state, embedded):
    """Between two model requests: while the task's check runs (it waits for the kill), so that the
    failed check's report to the model is the request that finds the server gone."""
    profile = fault_profile(isolated_state)
    flags = {name: tmp_path / name for name in ("between", "killed", "resumed")}
    check = (
        f"if [ -f {flags['resumed']} ]; then true; else touch {flags['between']}; "
        f"while [ ! -f {flags['killed']} ]; do sleep 0.05; done; false; fi"
    )
    body = task(tmp_path, max_turns=2, check=check, check_rounds=1)
    proc = start_agent(str(body), "-p", profile, "--workdir", str(tmp_path / "work"), "--json")
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        wait_until(flags["between"].exists, what="the first turn and the check", poll=0.05)
        os.kill(record.pid, signal.SIGKILL)
        flags["killed"].touch()
        out, err = proc.communicate(timeout=60)
    session, before = assert_killed_run(proc.returncode, out, err, isolated_state, "unreachable")
    _, _, recorded = transcript(isolated_state)
    kinds = [e["type"] for e in recorded]
    assert kinds.count("turn.completed") == 1 and "check.result" in kinds  # a whole turn, then the check
    flags["resumed"].touch()
    added = assert_resumes(session, before, isolated_state)
    assert added[-1]["outcome"] == "completed" and added[-1]["summary"]["check"]["passed"]


# ------------------------------------------------------------------------------------------ SIGSTOP


def test_a_server_that_hangs_mid_stream_is_a_timeout_with_a_clear_message(tmp_path, isolated_state, embedded):
    """SIGSTOP in the middle of an answer: the socket stays open and silent. The run ends after the
    stall timeout (AGENT_STALL_TIMEOUT, 2 s here; 120 s by default, not the 600 s read timeout), says the
    server stopped answering, and stops the stopped server (SIGTERM with SIGCONT, not a 10 s grace)."""
    profile = fault_profile(isolated_state, max_tokens=400)
    proc = start_agent(
        str(task(tmp_path, max_turns=1)), "-p", profile, "--workdir", str(tmp_path / "work"), "--json",
        env={"AGENT_STALL_TIMEOUT": "2"},
    )  # fmt: skip
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        wait_until(lambda: decoded(record) >= 3, what="tokens to flow", poll=0.05)
        os.kill(record.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - stopped_at
    assert proc.returncode == 4, err
    assert took < 10, f"{took:.1f} s from SIGSTOP to the end of the run"
    assert process_start_time(record.pid) == ""  # the agent stopped its server, stopped as it was
    said = events(out)
    [error] = [e for e in said if e["type"] == "error"]
    assert error["error"] == "server_stalled"
    assert (
        "the model server stopped answering: nothing arrived for 2 s in the middle of its answer"
        in error["message"]
    )
    notices = [e["message"] for e in said if e["type"] == "notice"]
    assert any(f"pid {record.pid}) is stopped (SIGSTOP" in n for n in notices), notices
    path, before, recorded = transcript(isolated_state)
    assert recorded[-1]["type"] == "session.finished" and recorded[-1]["summary"]["exit_code"] == 4
    assert_resumes(path.stem, before, isolated_state, "-p", fault_profile(isolated_state, max_tokens=8))


async def test_a_server_that_hangs_during_prefill_times_out_once_at_the_read_timeout(
    isolated_state, embedded
):
    """SIGSTOP before the first token: the read timeout (600 s by default, 2 s here) ends the request as
    ServerStalled, and it is not sent again (was: a timeout counted as a refused connection, retried
    three times, three read timeouts in all)."""
    from agent.core.llm import ModelClient
    from agent.errors import ServerStalled
    from agent.server.profiles import get_profile
    from agent.session.connect import endpoint_for

    handle = start_profile("tiny", embedded, isolated_state)
    record = handle.record
    client = ModelClient(endpoint_for(get_profile("tiny"), handle.base_url, None), read_timeout=2)
    prompt = "Summarise these notes.\n" + "\n".join(
        f"note {i}: the build passed on machine {i}" for i in range(60)
    )
    stopped_at = 0.0
    try:

        async def ask() -> None:
            async for _ in client.stream([{"role": "user", "content": prompt}], max_tokens=4):
                pass

        work = asyncio.create_task(ask())
        while "processing task" not in log_of(record):
            assert not work.done(), work
            await asyncio.sleep(0.005)
        os.kill(record.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        with pytest.raises(ServerStalled) as stalled:
            await work
        took = time.monotonic() - stopped_at
        prefilled = "prompt eval time" in log_of(record)  # (read while it is still stopped)
    finally:
        await client.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGCONT)
        stop(handle, ServerRegistry(isolated_state))
    assert not prefilled  # it was stopped in its prefill
    assert "the model server stopped answering: nothing arrived for 2 s after the request was sent" in str(
        stalled.value
    )
    assert not stalled.value.partial
    assert took < 5, f"{took:.1f} s: the request was sent again"


async def test_a_server_silent_before_its_headers_is_asked_once_not_three_times():
    """A server that takes the request and sends nothing, not even its headers (the scripted server
    here; llama-server sends its headers at once): the read timeout is a ServerStalled error, and the
    request is not sent again (was: the SDK's timeout error is a connection error, so it was retried as
    a refused connection is: three requests, three read timeouts)."""
    from agent.core.llm import ModelClient
    from agent.errors import ServerStalled
    from agent.server.endpoint import Endpoint
    from tests.scripted_server import ScriptedServer

    with ScriptedServer(default={"content": "too late", "delay": 4}) as server:
        client = ModelClient(Endpoint(base_url=server.url + "/v1", model="m"), read_timeout=1)
        began = time.monotonic()
        try:
            with pytest.raises(ServerStalled) as stalled:
                async for _ in client.stream([{"role": "user", "content": "hi"}]):
                    pass
        finally:
            await client.close()
        took = time.monotonic() - began
        asked = len(server.requests)
    assert asked == 1 and took < 2.5, (asked, took)
    assert "stopped answering: nothing arrived for 1 s after the request was sent" in str(stalled.value)


# ------------------------------------------------------------------------------- another port, no /props


def test_a_server_restarted_on_another_port(tmp_path, isolated_state, embedded):
    """A session attached by URL whose server came back elsewhere: --resume alone says nothing answers
    at the old address and how to give the new one, without touching the transcript; --resume with
    --base-url carries on there, and later resumes go there too."""
    first = start_profile("tiny", embedded, isolated_state)
    body = task(tmp_path, max_turns=1, sampling={"temperature": 0, "max_tokens": 8})
    try:
        result = run_agent(str(body), "--base-url", first.base_url, "--workdir", str(tmp_path / "work"), "--json",
                           timeout=180)  # fmt: skip
        assert result.returncode in (0, 3), result.stderr
    finally:
        stop(first, ServerRegistry(isolated_state))
    path, before, _ = transcript(isolated_state)
    second = start_profile("tiny", embedded, isolated_state)
    try:
        assert second.record.port != first.record.port
        began = time.monotonic()
        lost = run_agent("--resume", path.stem, "--json", timeout=180)
        assert lost.returncode == 4 and time.monotonic() - began < 30
        assert f"nothing answers at {first.base_url}" in lost.stderr
        assert "--base-url URL" in lost.stderr and "Traceback" not in lost.stderr
        assert path.read_bytes() == before
        added = assert_resumes(path.stem, before, isolated_state, "--base-url", second.base_url)
        assert added[0]["base_url"] == second.base_url
        _, before, _ = transcript(isolated_state)
        assert_resumes(path.stem, before, isolated_state)  # no --base-url: the new address was kept
    finally:
        stop(second, ServerRegistry(isolated_state))


class _Proxy(BaseHTTPRequestHandler):
    """Forwards to the real server, streaming, except the paths in `missing`: 404, as a server without
    them answers (an OpenAI-compatible server that is not llama-server has no /props)."""

    protocol_version = "HTTP/1.1"
    upstream = ""
    missing: tuple[str, ...] = ()
    asked: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def _forward(self) -> None:
        self.asked.append(self.path)
        if self.path.split("?")[0] in self.missing:
            body = b'{"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
        with httpx2.stream(self.command, self.upstream + self.path, content=data, headers=headers,
                           timeout=120) as response:  # fmt: skip
            self.send_response(response.status_code)
            self.send_header("Content-Type", response.headers.get("content-type", "application/json"))
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in response.iter_raw():
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")


def test_a_server_without_props_and_models_is_used_with_the_fallbacks_announced(
    tmp_path, isolated_state, embedded
):
    server = start_profile("tiny", embedded, isolated_state)
    handler = type(
        "Proxy", (_Proxy,), {"upstream": server.base_url, "missing": ("/props", "/v1/models"), "asked": []}
    )
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    proxy.daemon_threads = True
    thread = threading.Thread(target=proxy.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{proxy.server_address[1]}"
    try:
        body = task(tmp_path, max_turns=1, sampling={"temperature": 0, "max_tokens": 8})
        result = run_agent(
            str(body), "--base-url", url, "--workdir", str(tmp_path / "work"), "--json", timeout=180
        )
        assert result.returncode in (0, 3), result.stderr
        notices = [e["message"] for e in events(result.stdout) if e["type"] == "notice"]
        assert any("/v1/models: HTTP 404" in n and "'default'" in n for n in notices), notices
        assert any("/props: HTTP 404" in n and "assuming" in n for n in notices), notices
        assert "/v1/chat/completions" in handler.asked  # the real server answered through it
        path, before, recorded = transcript(isolated_state)
        assert [e for e in recorded if e["type"] == "turn.completed"]
        assert_resumes(path.stem, before, isolated_state)
    finally:
        proxy.shutdown()
        proxy.server_close()
        stop(server, ServerRegistry(isolated_state))
