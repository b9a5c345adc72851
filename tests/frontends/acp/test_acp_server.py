"""`agent acp` starting its profile's server: progress while it loads, a failed start answered with why
(the log's last line), an unreachable server. The "llama-server" here is the scripted server as a real
child process (a workspace profile, as the TUI's tests do), or a script that fails as a real one can."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import acp
import pytest

from agent.server.registry import ServerRegistry
from agent.settings.trust import trust
from tests.conftest import FIXTURES, free_port
from tests.frontends.acp.test_acp import REPO, RecordingClient, acp_agent, run, transcripts
from tests.gguf_files import CHAT_TEMPLATE, write_gguf

pytestmark = pytest.mark.slow


def workspace_profile(tmp_path: Path, ws: Path, name: str, binary_body: str, env: dict | None = None) -> int:
    """A trusted workspace's .agent/profiles/NAME.toml whose binary is a shell script; returns its port."""
    binary = tmp_path / "bin" / name
    binary.parent.mkdir(exist_ok=True)
    binary.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *--help*) cat "{FIXTURES / "llama-server-upstream-help.txt"}"; exit 0;; '
        '*--list-devices*) echo "Available devices:"; exit 0;; esac\n' + binary_body
    )
    binary.chmod(0o755)
    model = write_gguf(tmp_path / "bin" / "model.gguf", "scripted", chat_template=CHAT_TEMPLATE)
    port = free_port()
    trust(ws)
    folder = ws / ".agent" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f'binary = "{binary}"', f'model = "{model}"', f"port = {port}", "startup_timeout = 30", "[env]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in (env or {}).items()]
    (folder / f"{name}.toml").write_text("\n".join(lines) + "\n")
    return port


def test_the_profiles_server_starts_with_progress_serves_the_session_and_stops_with_the_client(
    tmp_path, isolated_state
):
    ws = tmp_path / "ws"
    ws.mkdir()
    body = f'sleep 1\ncd "{REPO}"\nexec "{sys.executable}" -m tests.scripted_server --as-llama-server "$@"\n'
    workspace_profile(tmp_path, ws, "scripted", body, {"SCRIPTED_REPLIES": json.dumps([{"content": "Hi."}])})

    async def main():
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "-p", "scripted") as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Hello?")])
        return client, reply

    client, reply = run(main())
    assert reply.stop_reason == "end_turn" and "Hi." in client.text()
    progress = [p for method, p in client.extensions if method == "spec-agent/server_progress"]
    assert progress and progress[0]["profile"] == "scripted" and progress[-1]["phase"] == "ready"
    [events] = transcripts(isolated_state)
    assert events[0]["profile"] == "scripted" and events[-1]["type"] == "session.finished"
    # (the conftest fails the test if the server outlived the agent: ServerRegistry(state).running())


def test_a_server_that_fails_to_start_answers_new_session_with_why_and_the_logs_last_line(
    tmp_path, isolated_state
):
    ws = tmp_path / "ws"
    ws.mkdir()
    body = 'echo "llama_model_load: loading tensors" >&2\necho "error: unable to load model: scripted failure" >&2\nexit 1\n'
    workspace_profile(tmp_path, ws, "broken", body)

    async def main():
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "-p", "broken") as (conn, process):
            failures = []
            for _ in range(2):  # the agent stays up: a second try fails the same way, no hang
                with pytest.raises(acp.RequestError) as failed:
                    await asyncio.wait_for(conn.new_session(cwd=str(ws), mcp_servers=[]), 60)
                failures.append(failed.value)
            alive = process.returncode is None
        return failures, alive

    failures, alive = run(main())
    assert alive
    for failure in failures:
        assert "scripted failure" in str(failure)  # the log's last line, in the message itself
        assert failure.data["log_last_line"].endswith("scripted failure")
    stderr = (tmp_path / "acp-stderr.log").read_text()
    assert "Traceback" not in stderr


def test_an_unreachable_base_url_answers_new_session_with_an_error(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()

    async def main():
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "--base-url", f"http://127.0.0.1:{free_port()}") as (conn, _p):
            with pytest.raises(acp.RequestError) as failed:
                await asyncio.wait_for(conn.new_session(cwd=str(ws), mcp_servers=[]), 60)
        return failed.value

    failure = run(main())
    assert failure.code == -32000 and "127.0.0.1" in str(failure)
    assert "Traceback" not in (tmp_path / "acp-stderr.log").read_text()


def test_the_client_going_while_the_server_loads_leaves_no_server(tmp_path, isolated_state):
    ws = tmp_path / "ws"
    ws.mkdir()
    body = f'sleep 3\ncd "{REPO}"\nexec "{sys.executable}" -m tests.scripted_server --as-llama-server "$@"\n'
    workspace_profile(tmp_path, ws, "slow", body)

    async def main():
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "-p", "slow") as (conn, process):
            opening = asyncio.create_task(conn.new_session(cwd=str(ws), mcp_servers=[]))
            while not client.extensions:  # the server is loading
                await asyncio.sleep(0.05)
            process.stdin.close()  # the editor quits
            code = await asyncio.wait_for(process.wait(), 30)
            opening.cancel()
        return code

    assert run(main()) == 0
    # (the conftest fails the test if a server it registered is still running: ServerRegistry.running())
    assert ServerRegistry(isolated_state).running() == []


def test_sigterm_ends_the_session_whole_and_stops_the_server_it_started(tmp_path, isolated_state):
    """Clients send SIGTERM soon after closing stdin (acpx after 100 ms): the server must not outlive it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    body = f'cd "{REPO}"\nexec "{sys.executable}" -m tests.scripted_server --as-llama-server "$@"\n'
    workspace_profile(tmp_path, ws, "scripted", body, {"SCRIPTED_REPLIES": json.dumps([{"content": "Hi."}])})

    async def main():
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "-p", "scripted") as (conn, process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Hello?")])
            assert len(ServerRegistry(isolated_state).running()) == 1
            process.send_signal(signal.SIGTERM)  # stdin still open: only the signal ends it
            return await asyncio.wait_for(process.wait(), 30)

    assert run(main()) == 143
    assert ServerRegistry(isolated_state).running() == []
    [events] = transcripts(isolated_state)
    assert events[-1]["type"] == "session.finished"
