"""`agent acp` driven end to end by acpx (npm, a headless ACP client no one here wrote), against the
scripted model server. Skipped, saying why, where acpx is not installed (`npm install -g acpx@0.19`)."""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.frontends.acp.test_acp import alive, transcripts
from tests.frontends.test_headless import call
from tests.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("acpx") is None, reason="acpx is not installed: npm install -g acpx@0.19"
    ),
]

SCRIPT = [
    {"reasoning": "Reading first.", "tool_calls": [call("read_file", path="notes.txt")]},
    {"tool_calls": [call("write_file", path="notes.txt", content="v2\n")]},
    {"content": "The notes said v1; now they say v2."},
]


def acpx(url: str, ws: Path, policy: str, *extra: str) -> subprocess.CompletedProcess:
    command = shlex.join([sys.executable, "-m", "agent", "acp", "--base-url", url])
    return subprocess.run(
        ["acpx", "--agent", command, "--cwd", str(ws), policy, "--format", "json", "--timeout", "60", *extra,
         "exec", "What do the notes say? Then update them."],
        capture_output=True, text=True, timeout=120, cwd=ws, env=os.environ.copy(),
    )  # fmt: skip


def messages(result: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def updates(lines: list[dict], kind: str) -> list[dict]:
    return [m["params"]["update"] for m in lines if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == kind]  # fmt: skip


def test_acpx_runs_a_prompt_with_a_read_an_approved_edit_and_the_figures(tmp_path, isolated_state):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("v1\n")
    with ScriptedServer(SCRIPT) as server:
        result = acpx(server.url, ws, "--approve-all")
    assert result.returncode == 0, result.stderr
    lines = messages(result)
    init = next(m for m in lines if m.get("id") == 0 and "result" in m and "agentInfo" in m["result"])
    assert init["result"]["agentInfo"]["name"] == "spec-agent"
    assert [u["kind"] for u in updates(lines, "tool_call")] == ["read", "edit"]
    [asked] = [m for m in lines if m.get("method") == "session/request_permission"]
    assert asked["params"]["toolCall"]["title"] == "Write notes.txt"
    diff = next(
        c for u in updates(lines, "tool_call_update") for c in u.get("content") or [] if c["type"] == "diff"
    )
    assert (diff["oldText"], diff["newText"]) == ("v1\n", "v2\n")
    answer = "".join(u["content"]["text"] for u in updates(lines, "agent_message_chunk"))
    assert "The notes said v1; now they say v2." in answer and "tok/s gen" in answer
    assert (
        updates(lines, "usage_update")[-1]["_meta"]["spec-agent/figures"]["generation_tokens_per_second"]
        == 100
    )
    assert any(m.get("result", {}).get("stopReason") == "end_turn" for m in lines)
    assert (ws / "notes.txt").read_text() == "v2\n"
    [events] = transcripts(isolated_state)
    assert [e["decision"] for e in events if e["type"] == "permission.decided"] == ["allow", "allow"]
    assert events[-1]["type"] == "session.finished"


def test_acpx_denying_everything_leaves_the_file_and_the_model_hears_why(tmp_path, isolated_state):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("v1\n")
    with ScriptedServer(SCRIPT) as server:
        result = acpx(server.url, ws, "--deny-all")
        told = [m for m in server.requests[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert result.returncode == 5, result.stderr  # acpx's PERMISSION_DENIED: it saw the refusal through
    assert any(m.get("result", {}).get("stopReason") == "end_turn" for m in messages(result))
    assert (ws / "notes.txt").read_text() == "v1\n"
    assert "declined" in told
    [events] = transcripts(isolated_state)
    assert [e["decision"] for e in events if e["type"] == "permission.decided"] == ["allow", "deny"]


def test_an_acpx_session_lives_across_invocations_switches_mode_and_closes_with_nothing_left(
    tmp_path, isolated_state
):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = [
        {"content": "First answer: I will remember 7."},
        {"tool_calls": [call("bash", command="echo hi > hi.txt")]},  # full-auto by then: not asked
        {"content": "Second answer: ran it."},
    ]
    env = {**os.environ, "HOME": str(tmp_path / "home")}  # acpx keeps its sessions under ~/.acpx

    with ScriptedServer(script) as server:
        command = shlex.join([sys.executable, "-m", "agent", "acp", "--base-url", server.url])

        def acpx_(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(["acpx", "--agent", command, "--ttl", "30", *args], capture_output=True,
                                  text=True, timeout=120, cwd=ws, env=env)  # fmt: skip

        steps = [acpx_("sessions", "new"), acpx_("prompt", "Remember 7."), acpx_("set-mode", "full-auto")]
        steps.append(acpx_("prompt", "Run it."))
        kept = [p for p in Path("/proc").glob("[0-9]*") if _runs(p, command)]  # acpx's queue owner holds it
        steps.append(acpx_("sessions", "close"))
        second_request = server.requests[1]["messages"]
    assert [s.returncode for s in steps] == [0] * 5, [s.stderr for s in steps]
    assert "First answer" in steps[1].stdout and "Second answer: ran it." in steps[3].stdout
    assert (ws / "hi.txt").read_text() == "hi\n"
    assert any(m["role"] == "assistant" and "First answer" in m["content"] for m in second_request)
    [events] = transcripts(isolated_state)  # one session, across three acpx invocations
    assert any(e["type"] == "notice" and "full-auto (set by the client)" in e["message"] for e in events)
    assert len(kept) == 1 and not [p for p in Path("/proc").glob("[0-9]*") if _runs(p, command)]  # closed


def _runs(proc: Path, command: str) -> bool:
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        return (
            state != "Z" and (proc / "cmdline").read_bytes().replace(b"\0", b" ").strip() == command.encode()
        )
    except OSError:
        return False


def test_acpx_cancel_stops_a_running_command_and_the_prompt_ends_cancelled(tmp_path, isolated_state):
    ws = tmp_path / "ws"
    ws.mkdir()
    config = isolated_state.parent / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('approval = "full-auto"\n')
    script = [{"tool_calls": [call("bash", command="sleep 300 & echo $! > pid.txt; wait")]}]
    env = {**os.environ, "HOME": str(tmp_path / "home")}

    with ScriptedServer(script) as server:
        command = shlex.join([sys.executable, "-m", "agent", "acp", "--base-url", server.url])
        argv = ["acpx", "--agent", command, "--ttl", "30"]
        run_ = functools.partial(subprocess.run, capture_output=True, text=True, timeout=120, cwd=ws, env=env)
        assert run_([*argv, "sessions", "new"]).returncode == 0
        prompt = subprocess.Popen(
            [*argv, "prompt", "Wait."], stdout=subprocess.PIPE, text=True, cwd=ws, env=env
        )
        pid_file = ws / "pid.txt"
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline and prompt.poll() is None
            time.sleep(0.05)
        cancelled = run_([*argv, "cancel"])
        output, _ = prompt.communicate(timeout=60)
        closed = run_([*argv, "sessions", "close"])
    assert cancelled.returncode == 0 and closed.returncode == 0
    assert prompt.returncode == 0 and "[done] cancelled" in output
    assert not alive(int(pid_file.read_text()))
    [events] = transcripts(isolated_state)
    assert any(e["type"] == "error" and e["error"] == "interrupted" for e in events)
