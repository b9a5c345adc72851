"""`agent acp` driven end to end by acpx (npm, a headless ACP client no one here wrote), against the
scripted model server. Skipped, saying why, where acpx is not installed (`npm install -g acpx@0.19`)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripted_server import ScriptedServer
from tests.test_acp import transcripts
from tests.test_headless import call

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
