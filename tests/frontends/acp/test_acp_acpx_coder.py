"""The README's main job (examples/tasks/hello) done through `agent acp` on the embedded coder, driven by
acpx (npm, a headless ACP client no one here wrote), as an editor would drive it: one prompt, the task's
text as typed, acpx answering every permission request with "allow" (`--approve-all`).

The project declares the task's check in its .agent/config.toml (the folder trusted), so the prompt is
worked on until the model says it is done and then until the check passes (a failure's output fed back,
up to check_rounds times), each round a tool call the client sees. The test also runs the check
afterwards, as `agent run` runs it (`agent.core.checks.run_check`). The coder profile samples at
temperature 0, as the task file asks (`sampling: {temperature: 0}`), and the task's `max_turns` goes
into the session's settings.

Skipped, saying why, where acpx is not installed (`npm install -g acpx@0.19`). 10 s on 2 cores at load
2 (the coder at 25 tok/s), 68 s at load 6.6 (0.8 tok/s): nearly all of it the model.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.core.checks import run_check
from agent.session.taskfile import load_task
from agent.settings.trust import trust
from tests.conftest import llama_server_pids
from tests.frontends.acp.test_acp import transcripts
from tests.frontends.acp.test_acp_acpx import _runs, messages, updates
from tests.frontends.test_headless import REPO
from tests.test_coder_real import coder_here

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(
        shutil.which("acpx") is None, reason="acpx is not installed: npm install -g acpx@0.19"
    ),
]

HELLO = REPO / "examples" / "tasks" / "hello" / "task.md"


def test_acpx_solves_the_hello_task_through_agent_acp_on_the_embedded_coder(
    embedded, tmp_path, isolated_state
):
    task = load_task(HELLO)
    profile = coder_here(isolated_state, "coder")  # no drafts (temperature 0, 16k context), a free port
    (isolated_state.parent / "config" / "config.toml").write_text(f"max_turns = {task.spec.max_turns}\n")
    ws = tmp_path / "ws"
    (ws / ".agent").mkdir(parents=True)
    (ws / ".agent" / "config.toml").write_text(f"check = {json.dumps(task.spec.check)}\ncheck_rounds = 2\n")
    trust(ws)
    command = shlex.join([sys.executable, "-m", "agent", "acp", "-p", profile])
    result = subprocess.run(
        ["acpx", "--agent", command, "--cwd", str(ws), "--approve-all", "--format", "json",
         "--timeout", "540", "exec", task.body],
        capture_output=True, text=True, timeout=600, cwd=ws, env=os.environ.copy(),
    )  # fmt: skip
    lines = messages(result)
    assert result.returncode == 0, (result.stderr[-2000:], lines[-3:])
    [prompt_id] = [m["id"] for m in lines if m.get("method") == "session/prompt"]
    assert any(
        m.get("id") == prompt_id and m.get("result", {}).get("stopReason") == "end_turn" for m in lines
    )

    check = asyncio.run(run_check(task.spec.check, ws))  # the task's own check, as `agent run` runs it
    assert check.passed, check.output
    assert (ws / "hello.py").exists()

    # The figures, as llama.cpp measured them, in the usage update after each model request.
    usage = updates(lines, "usage_update")
    assert len(usage) >= 2  # the write, then the request that hears it was written
    last = usage[-1]
    figures = last["_meta"]["spec-agent/figures"]
    assert last["size"] == 16384 and 0 < last["used"] <= last["size"]
    assert figures["generation_tokens_per_second"] > 0 and figures["prefill_tokens_per_second"] > 0
    assert figures["output_tokens"] > 0 and figures["ttft_s"] > 0
    assert 0 < figures["cache_reuse"] <= 1  # the second request reuses the first one's prompt
    assert figures["cache_break"] is None  # and only appended to it: nothing to explain
    assert figures["draft_acceptance"] is None  # the coder profile drafts nothing
    assert "tok/s gen" in figures["summary"]
    edits = [u for u in updates(lines, "tool_call") if u["kind"] == "edit"]
    assert edits and edits[0]["title"] == "Write hello.py"
    # The project's check ran inside the prompt, each round a tool call; the last one passed.
    rounds = [u for u in updates(lines, "tool_call") if u["title"].startswith("Check `python3 - <<'HIDDEN'")]
    ends = {u["toolCallId"]: u["status"] for u in updates(lines, "tool_call_update")}
    assert rounds and ends[rounds[-1]["toolCallId"]] == "completed"
    assert all(ends[u["toolCallId"]] == "failed" for u in rounds[:-1])  # each failure fed back, then fixed

    [events] = transcripts(isolated_state)
    assert events[-1]["type"] == "session.finished" and events[-1]["outcome"] == "completed"
    assert {e["decision"] for e in events if e["type"] == "permission.decided"} == {"allow"}

    # acpx ends the agent when the prompt is answered; the server it started goes with it.
    deadline = time.monotonic() + 30
    while (llama_server_pids() or _agent_left(command)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not llama_server_pids() and not _agent_left(command)


def _agent_left(command: str) -> bool:
    return any(_runs(p, command) for p in Path("/proc").glob("[0-9]*"))
