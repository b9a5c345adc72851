"""The bash tool with real processes: output, exit codes, cwd, timeouts and no orphans."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.bash import MARKER_PREFIX, Bash, BashArgs, CappedOutput, _signal_tree, sweep_markers


def alive(pid: int, settle: float = 2.0) -> bool:
    """Whether pid still runs; a SIGKILL sent a moment ago is given `settle` seconds to land."""
    deadline = time.monotonic() + settle
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.02)


async def test_output_and_exit_code_are_reported(ctx):
    result = await Bash().run(BashArgs(command="echo hello; echo oops >&2; exit 3"), ctx)
    assert not result.ok
    assert result.output == "hello\noops\n[exit code 3]"
    assert result.display["exit_code"] == 3


async def test_the_working_directory_persists_between_calls(ctx):
    (ctx.workspace.root / "sub").mkdir()
    await Bash().run(BashArgs(command="cd sub"), ctx)
    result = await Bash().run(BashArgs(command="pwd"), ctx)
    assert result.output.splitlines()[0] == str(ctx.workspace.root / "sub")


async def test_leaving_the_workspace_resets_the_directory(ctx):
    result = await Bash().run(BashArgs(command="cd /"), ctx)
    assert "left the workspace" in result.output
    assert (await Bash().run(BashArgs(command="pwd"), ctx)).output.splitlines()[0] == str(ctx.workspace.root)


async def test_stdin_is_closed_so_reading_it_does_not_hang(ctx):
    result = await Bash(default_timeout=10).run(BashArgs(command="read line; echo got:$line"), ctx)
    assert result.output.startswith("got:")


@pytest.mark.slow
async def test_a_runaway_command_is_killed_with_its_children(ctx):
    marker = ctx.workspace.root / "pids"
    command = f"sleep 300 & echo $! > {marker}; sleep 300"
    started = time.monotonic()
    result = await Bash(grace=0.5).run(BashArgs(command=command, timeout=1), ctx)
    assert time.monotonic() - started < 10
    assert not result.ok and "timed out after 1 s" in result.output
    child = int(marker.read_text())
    assert not alive(child)


@pytest.mark.slow
async def test_a_child_ignoring_sigterm_is_killed_too(ctx):
    marker = ctx.workspace.root / "pid"
    command = f"bash -c 'trap \"\" TERM; echo $$ > {marker}; sleep 300' & sleep 300"
    await Bash(grace=0.3).run(BashArgs(command=command, timeout=1), ctx)
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not alive(int(marker.read_text()))


@pytest.mark.slow
async def test_cancelling_kills_the_command(ctx):
    marker = ctx.workspace.root / "pid"
    task = asyncio.create_task(Bash(grace=0.3).run(BashArgs(command=f"echo $$ > {marker}; sleep 300"), ctx))
    while not marker.exists():
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(int(marker.read_text()))


async def test_long_output_keeps_head_and_tail_and_counts_what_was_dropped(ctx):
    result = await Bash(max_output=2000).run(BashArgs(command="seq 1 100000"), ctx)
    lines = result.output.splitlines()
    assert lines[0] == "1" and lines[-2] == "100000" and lines[-1] == "[exit code 0]"
    assert "bytes of output dropped" in result.output
    assert result.display["bytes"] == len("\n".join(str(i) for i in range(1, 100001))) + 1


def test_capped_output_is_exact_below_the_limit():
    out = CappedOutput(100)
    for piece in (b"abc", b"def"):
        out.feed(piece)
    assert out.text() == "abcdef" and out.dropped == 0


async def test_environment_avoids_pagers(ctx):
    result = await Bash().run(BashArgs(command="echo $PAGER $GIT_PAGER"), ctx)
    assert result.output.startswith("cat cat")


async def test_no_orphans_after_many_commands(ctx):
    before = set(os.listdir("/proc"))
    for _ in range(5):
        await Bash().run(BashArgs(command="true"), ctx)
    # This test's shells only: they run in its workspace (other programs on the machine start bash too).
    # Each command's watchdog shell was SIGKILLed with its group; on a loaded machine it may not have
    # died yet when the command returns, so each gets alive()'s moment for a kill to land.
    new = [p for p in set(os.listdir("/proc")) - before if p.isdigit()]
    ours = [p for p in new if _comm(p) == "bash" and _cwd(p) == str(ctx.workspace.root)]
    assert not [p for p in ours if alive(int(p))]


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:  # gone since
        return ""


def _cwd(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def test_a_process_group_left_only_with_zombies_counts_as_ended():
    # Where PID 1 does not reap orphans (this CI box, a container without an init), a killed command's
    # children stay zombies; signalling them still succeeds, and a cancel waited a second for nothing.
    child = subprocess.Popen(["true"], start_new_session=True)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert _signal_tree(child.pid, [], signal.SIGKILL) is False  # exited, not yet reaped: ended
    finally:
        child.wait()


def test_a_marker_folder_left_by_an_agent_killed_mid_command_is_swept_and_a_live_ones_kept(tmp_path):
    # A real process makes its marker folder (as a command starts) and is killed -9 before it can
    # remove it; the sweep takes only that one.
    make = "from tools.bash import new_marker_dir; print(new_marker_dir(), flush=True); import time; time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", make], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(tmp_path)}, cwd=Path(__file__).parents[2])  # fmt: skip
    left = Path(child.stdout.readline().strip())
    child.kill()
    child.wait()
    child.stdout.close()
    live = tmp_path / f"{MARKER_PREFIX}{os.getpid()}-abc"
    live.mkdir()
    other = tmp_path / f"{MARKER_PREFIX}not-a-pid"
    other.mkdir()
    assert left.parent == tmp_path and left.is_dir()
    assert sweep_markers(tmp_path) == [left]
    assert not left.exists() and live.is_dir() and other.is_dir()
