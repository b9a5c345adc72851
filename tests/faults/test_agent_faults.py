"""The agent itself, broken on purpose (issue 13, item 2): kill -9 and SIGTERM of `agent run` while a
tool runs, while a file is being written, while it waits on the model and while it is still starting;
two agents in one workspace (headless and TUI alike).

Every test runs the real `agent run` as a child process on the scripted model server, then checks
what a user would: the exit code (143 for SIGTERM, 5 for a second agent), the transcript (whole JSON
lines, nothing rewritten), the file (the old bytes or the new, never a mix), that `--resume` carries
on, and that no process the agent started is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agent.settings.config import state_dir
from agent.store.lock import BUSY_EXIT, AgentLocks
from agent.store.transcripts import INTERRUPTED_WHILE_RUNNING
from tests.faults import REPO, run_agent, start_agent, wait_until
from tests.faults.test_bash import left_behind
from tests.frontends.test_headless import call, sessions, task_file
from tests.scripted_server import ScriptedServer


def transcript_lines(path: Path) -> list[dict]:
    """Every line of the transcript, each one whole JSON (a torn line fails the test)."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the transcript ends in the middle of a line"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def temp_files(folder: Path, name: str) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith(f".{name}.") and n.endswith(".tmp")]


# 15.6 MB, just under the size edit_file loads: an edit writes it all back (temp file, fsync, rename),
# which takes long enough (~70 ms) for a signal to land in the middle, from a small tool call.
OLD = b"".join(b"line %07d of the file, kept whole by every write\n" % i for i in range(300_000))
NEW = OLD.replace(b"line 0150000 of the file", b"LINE 150000, CHANGED")


# ------------------------------------------------------------------------------------------- signals


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "SIGTERM"])
@pytest.mark.parametrize("during", ["tool", "write", "model"])
def test_the_agent_killed_or_terminated_mid_task_loses_nothing_and_resumes(
    tmp_path, isolated_state, sig, during
):
    """kill -9 and SIGTERM while bash runs, while edit_file writes back a 15.6 MB file, and while
    the model is still answering: the transcript is whole JSON lines; the file is the old bytes or the
    new; SIGTERM exits 143 with `session.finished` written; no process is left; `--resume` carries on
    in the same workspace (a kill -9 leaves no lock behind) and finishes the task."""
    work = tmp_path / "work"
    work.mkdir()
    big = work / "big.txt"
    big.write_bytes(OLD)
    marker = f"agent-fault-{uuid.uuid4().hex}"
    first = {
        "tool": {"tool_calls": [call("bash", command=f"echo {marker} > started.txt; sleep 60 # {marker}")]},
        "write": {
            "tool_calls": [
                call(
                    "edit_file",
                    path="big.txt",
                    old_string="line 0150000 of the file",
                    new_string="LINE 150000, CHANGED",
                )
            ]
        },
        "model": {"content": "I will think about it for a long time.", "delay": 60},
    }[during]
    task = task_file(tmp_path, "Rewrite big.txt.", approval="full-auto")
    with ScriptedServer([first]) as server:
        proc = start_agent(str(task), "--base-url", server.url, "--workdir", str(work), "--json")
        try:
            if during == "tool":
                wait_until(lambda: (work / "started.txt").exists(), what="the command to start")
            elif during == "write":
                # the temp file exists from its open() to its rename: the signal lands mid-write or mid-fsync
                wait_until(lambda: temp_files(work, "big.txt"), what="the write to begin", poll=0.0005)
            else:
                wait_until(lambda: server.requests, what="the request")
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 143), err

    content = big.read_bytes()
    assert content in (OLD, NEW), "the file is a mix of the old and the new"
    if during == "write" and sig == signal.SIGKILL:
        # killed between the temp file's open and its rename: the old file, and the temp file left over
        assert content == OLD and temp_files(work, "big.txt")
    if during == "write" and sig == signal.SIGTERM:
        assert content == NEW  # the write was under way: it is finished before the agent exits
    assert not left_behind(marker), "the command outlived the agent"
    [path] = sessions(isolated_state)
    before = transcript_lines(path)
    kinds = [e["type"] for e in before]
    if sig == signal.SIGTERM:
        assert kinds[-1] == "session.finished" and before[-1]["outcome"] == "interrupted"
        assert before[-1]["summary"]["exit_code"] == 143
        assert [json.loads(line) for line in out.splitlines()][-1]["type"] == "session.finished"
    else:
        assert "session.finished" not in kinds
    if during != "model":
        pending = [e for e in before if e["type"] == "tool.call"]
        assert len(pending) == 1

    # An edit, not a rewrite: write_file replaces only a file the model was shown whole (15 MB is not).
    edit = call("edit_file", path="big.txt", old_string="line 0000001 of the file", new_string="line one")
    again = [{"tool_calls": [edit]}, {"content": "All done."}]
    with ScriptedServer(again) as server:
        result = run_agent("--resume", path.stem, "--base-url", server.url)
        sent = server.requests[0]["messages"]
    assert result.returncode == 0, result.stderr  # not refused: the killed agent's lock died with it
    assert result.stdout.strip() == "All done."
    assert big.read_bytes() == content.replace(b"line 0000001 of the file", b"line one")
    assert not temp_files(work, "big.txt"), "the killed writer's temp file was left behind"
    after = transcript_lines(path)
    assert after[: len(before)] == before  # appended to, never rewritten
    assert any("Rewrite big.txt." in str(m.get("content")) for m in sent)
    if during != "model":  # the interrupted call has its answer in the resumed history, and a true one:
        # it was running when the agent died, so it may have taken effect (was: "not run")
        call_id, name = pending[0]["call_id"], pending[0]["name"]
        [answer] = [m for m in sent if m.get("role") == "tool" and m.get("tool_call_id") == call_id]
        assert answer["content"] == INTERRUPTED_WHILE_RUNNING.format(name=name)


@pytest.mark.slow
def test_sigterm_while_the_agent_is_still_starting_exits_143_and_stops_what_it_started(
    tmp_path, isolated_state
):
    """SIGTERM before the agent's work begins (an MCP server still starting, which may take 30 s):
    the run unwinds at once, exit 143, and the MCP server's process goes too."""
    marker = f"mcp-start-{uuid.uuid4().hex}"
    task = task_file(
        tmp_path, "Do it.", approval="full-auto",
        mcp={"slow": {"command": "sh", "args": ["-c", f"touch {tmp_path}/mcp-started; sleep 60 # {marker}"]}},
    )  # fmt: skip
    with ScriptedServer([{"content": "never asked"}]) as server:
        proc = start_agent(str(task), "--base-url", server.url, "--workdir", str(tmp_path))
        try:
            wait_until(lambda: (tmp_path / "mcp-started").exists(), what="the MCP server to start")
            began = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
            took = time.monotonic() - began
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert not server.requests
    assert proc.returncode == 143, err
    assert took < 10, f"SIGTERM took {took:.1f} s to end the run"  # not the MCP server's 30 s startup
    assert not left_behind(marker), "the MCP server outlived the agent"
    [path] = sessions(isolated_state)
    assert transcript_lines(path)[0]["type"] == "session.started"


@pytest.mark.slow
def test_a_terminated_bench_of_two_tasks_at_once_exits_143_and_leaves_nothing(isolated_state):
    """`agent bench --tasks --jobs 2` stopped by SIGTERM (timeout(1) on the GPU) while both tasks run
    a command: each task's group is stopped, the exit is 143, and no traceback is printed ("Event loop
    is closed" was, from a task cancelled twice while its stop ran)."""
    marker = f"bench-term-{uuid.uuid4().hex}"
    command = {"content": f"```bash\nsleep 300; : {marker}\n```"}
    with ScriptedServer(default=command) as server:
        argv = [
            "bench",
            "--base-url",
            server.url,
            "--tasks",
            "--task",
            "hello",
            "--task",
            "cli-flag",
            "--actions",
            "blocks",
        ]
        proc = subprocess.Popen([sys.executable, "-m", "agent", *argv, "--jobs", "2"], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            wait_until(lambda: len(left_behind(marker, settle=0)) >= 2, timeout=60, what="both commands")
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 143, out
    assert "Traceback" not in out and "Event loop is closed" not in out, out
    assert not left_behind(marker), "a task's command outlived the bench"


# ------------------------------------------------------------------------------ two agents, one folder


def _holder(ws: Path, server_url: str, tmp_path: Path) -> subprocess.Popen:
    """An `agent run` busy in `ws` (its server's script holds a 60 s command), started and running."""
    task = task_file(tmp_path, "Hold the folder.", approval="full-auto")
    proc = start_agent(str(task), "--base-url", server_url, "--workdir", str(ws))
    wait_until(lambda: (ws / "holding.txt").exists(), what="the first agent's command")
    return proc


@pytest.mark.slow
def test_a_second_agent_in_the_same_workspace_is_refused_naming_the_first(tmp_path, isolated_state):
    ws = tmp_path / "ws"
    ws.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(ws)  # the same folder by another name
    marker = f"holder-{uuid.uuid4().hex}"
    hold = {"tool_calls": [call("bash", command=f"touch holding.txt; sleep 60 # {marker}")]}
    with ScriptedServer([hold]) as first, ScriptedServer([{"content": "second"}]) as second:
        proc = _holder(ws, first.url, tmp_path)
        try:
            [path] = sessions(isolated_state)
            holder_id = path.stem
            (tmp_path / "t2").mkdir()
            other = task_file(tmp_path / "t2", "Second task.")
            began = time.monotonic()
            refused = run_agent(str(other), "--base-url", second.url, "--workdir", str(ws))
            took = time.monotonic() - began
            by_alias = run_agent(str(other), "--base-url", second.url, "--workdir", str(alias), "--json")
            resumed_elsewhere = run_agent("--resume", holder_id, "--base-url", second.url,
                                          "--workdir", str(tmp_path / "t2"))  # fmt: skip
            assert not second.requests  # refused before asking the model anything
            assert sessions(isolated_state) == [path]  # and before writing a transcript
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    assert proc.returncode == 143

    assert refused.returncode == BUSY_EXIT == 5, refused.stderr
    assert took < 15
    message = refused.stderr
    assert f"another agent is already working in {ws}" in message
    assert f"session {holder_id}" in message and f"pid {proc.pid}" in message and "`agent run`" in message
    assert time.strftime("%Y-%m-%d") in message and "s ago" in message  # its start time
    assert f"kill {proc.pid}" in message and "--workdir" in message  # what to do
    assert "Traceback" not in message

    assert by_alias.returncode == 5
    [error] = [json.loads(line) for line in by_alias.stdout.splitlines()]
    assert error["type"] == "error" and error["error"] == "busy" and holder_id in error["message"]

    assert resumed_elsewhere.returncode == 5  # another folder, but the same transcript
    assert f"session {holder_id} is already open in another agent" in resumed_elsewhere.stderr

    # Once the first agent is gone, the folder is free again.
    with ScriptedServer([{"content": "second"}]) as server:
        after = run_agent(str(other), "--base-url", server.url, "--workdir", str(ws))
    assert after.returncode == 0, after.stderr
    assert not left_behind(marker)


@pytest.mark.slow
def test_agents_in_different_workspaces_run_side_by_side(tmp_path, isolated_state):
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    ws.mkdir()
    elsewhere.mkdir()
    marker = f"holder-{uuid.uuid4().hex}"
    hold = {"tool_calls": [call("bash", command=f"touch holding.txt; sleep 60 # {marker}")]}
    with ScriptedServer([hold]) as first, ScriptedServer([{"content": "side by side"}]) as second:
        proc = _holder(ws, first.url, tmp_path)
        try:
            other = task_file(elsewhere, "Another task.")
            result = run_agent(str(other), "--base-url", second.url, "--workdir", str(elsewhere))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "side by side"


@pytest.mark.slow
async def test_the_tui_is_refused_in_a_busy_workspace_and_refuses_a_second_agent(tmp_path, isolated_state):
    """The TUI takes the same lock: started where `agent run` works, it shows who holds the folder and
    starts no session; holding the folder itself, it makes `agent run` exit 5 naming the TUI's session."""
    import asyncio

    from tests.frontends.tui.helpers import SIZE, git_workspace, make_app, screen_text, wait_for

    ws = git_workspace(tmp_path / "ws")
    marker = f"holder-{uuid.uuid4().hex}"
    hold = {"tool_calls": [call("bash", command=f"touch holding.txt; sleep 60 # {marker}")]}
    with ScriptedServer([hold]) as first, ScriptedServer([{"content": "TUI answer."}]) as second:
        proc = await asyncio.to_thread(_holder, ws, first.url, tmp_path)
        try:
            [path] = sessions(isolated_state)
            app = make_app(ws, base_url=second.url)
            async with app.run_test(size=SIZE) as pilot:
                await wait_for(pilot, lambda: app.status.state == "failed", what="the refusal")
                text = screen_text(app)
                assert "another agent is already working in" in text, text
                assert f"session {path.stem}" in text and f"pid {proc.pid}" in text
                assert app.session.session_id == "" and not app.ready
                assert app.session.connection is None  # refused before connecting
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.communicate, timeout=30)
        assert proc.returncode == 143
        assert not second.requests

        app = make_app(ws, base_url=second.url)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready, what="the TUI's session")
            tui_session = app.session.session_id
            other = task_file(tmp_path, "Headless while the TUI is open.")
            refused = await asyncio.to_thread(
                run_agent, str(other), "--base-url", second.url, "--workdir", str(ws)
            )
            assert refused.returncode == 5, refused.stderr
            assert f"session {tui_session}" in refused.stderr and "`agent (TUI)`" in refused.stderr
            await app.quit_app()
        with ScriptedServer([{"content": "after the TUI"}]) as server:
            after = await asyncio.to_thread(
                run_agent, str(other), "--base-url", server.url, "--workdir", str(ws)
            )
        assert after.returncode == 0, after.stderr  # quitting the TUI let go of the folder
    assert not left_behind(marker)


def test_the_lock_is_the_kernel_s_so_a_dead_holder_never_blocks(tmp_path):
    """flock: a holder that dies (kill -9) lets go with its last descriptor; a child process it
    started does not inherit the lock (close-on-exec), so a command that outlives the agent does not
    keep the folder locked."""
    ws = tmp_path / "ws"
    ws.mkdir()
    code = (
        "import sys, subprocess, time; from pathlib import Path; from agent.store.lock import AgentLocks; "
        f"locks = AgentLocks(Path({str(state_dir())!r}), Path({str(ws)!r}), 'test').holding('s1'); "
        "child = subprocess.Popen(['sleep', '30']); print(child.pid, flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        child = int(holder.stdout.readline())
        with pytest.raises(Exception, match="another agent is already working") as refused:
            AgentLocks(state_dir(), ws, "second").holding("s2")
        assert refused.value.exit_code == 5 and refused.value.holder["session"] == "s1"
        holder.kill()
        holder.wait()
        with AgentLocks(state_dir(), ws, "second").holding("s2") as locks:  # at once: no stale lock
            assert locks.held
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if child:
            with contextlib.suppress(ProcessLookupError):  # the holder's child, by its pid: it outlived it
                os.kill(child, signal.SIGKILL)
