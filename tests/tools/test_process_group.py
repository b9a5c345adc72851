"""The process-group runner with real processes: output, exit codes, and a stop that leaves nothing of
the group behind (on timeout, on cancel, on an exception from a sink), sync and async alike."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.process_group import (
    CappedOutput,
    Lines,
    group_alive,
    run_command,
    run_command_async,
    signal_tree,
)

SLEEPER = f'{sys.executable} -c "import time; time.sleep(120)"'
# The command's child starts a grandchild; each writes its pid to $1, and the grandchild sleeps.
CHILD = f'bash -c \'echo $$ >> "$1"; ( echo $BASHPID >> "$1"; exec {SLEEPER} ) & wait\' _ "$1" &'
READY = 'until [ "$(wc -l < "$1" 2>/dev/null)" -ge 2 ] 2>/dev/null; do sleep 0.02; done; echo ready;'


def family(pids: Path, ready: bool = False) -> list[str]:
    """A command whose child starts a grandchild (`ready`: it says so once both have started)."""
    return ["bash", "-c", f"{CHILD} {READY if ready else ''} wait", "_", str(pids)]


def alive(pid: int, settle: float = 3.0) -> bool:
    """Whether pid still runs (a zombie does not); a signal sent a moment ago gets `settle` seconds."""
    deadline = time.monotonic() + settle
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z" or time.monotonic() > deadline:
            return state != "Z"
        time.sleep(0.02)


def written_pids(path: Path, count: int, within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pids = path.read_text().split() if path.exists() else []
        if len(pids) >= count:
            return [int(p) for p in pids]
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {count} pids")


@contextlib.contextmanager
def cleanup(pid_file: Path):
    """After a failed assertion: only the processes this test wrote down."""
    try:
        yield
    finally:
        for pid in pid_file.read_text().split() if pid_file.exists() else []:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)


# -------------------------------------------------------------------------------------------- output


def test_output_and_exit_code_come_back():
    output = CappedOutput()
    ran = run_command(["bash", "-c", "echo out; echo err >&2; exit 3"], output=output)
    assert (ran.returncode, ran.timed_out) == (3, False)
    assert output.text() == "out\nerr\n"


def test_stderr_can_be_kept_apart():
    out, err = CappedOutput(), CappedOutput()
    run_command(["bash", "-c", "echo out; echo err >&2"], output=out, errors=err)
    assert (out.text(), err.text()) == ("out\n", "err\n")


async def test_the_async_runner_captures_output_and_the_exit_code_too(tmp_path):
    output = CappedOutput()
    ran = await run_command_async(
        ["bash", "-c", 'echo "$GREETING from $(pwd)"; exit 4'], output=output, cwd=tmp_path,
        env={**os.environ, "GREETING": "hello"},
    )  # fmt: skip
    assert ran.returncode == 4 and output.text() == f"hello from {tmp_path}\n"


def test_stdin_is_closed():
    output = CappedOutput()
    ran = run_command(["bash", "-c", "cat; echo done"], output=output, timeout=30)
    assert not ran.timed_out and output.text() == "done\n"


def test_a_command_that_cannot_start_raises_oserror():
    with pytest.raises(OSError):
        run_command(["/no/such/program"], output=CappedOutput())


def test_capped_output_keeps_head_and_tail_and_counts_the_rest():
    output = CappedOutput(10)
    run_command(["bash", "-c", "printf 'abcde%.0s' {1..100}; printf 'vwxyz'"], output=output)
    assert output.head == bytearray(b"abcde") and output.tail == bytearray(b"vwxyz")
    assert output.dropped == 500 - 5 and "[... 495 bytes of output dropped ...]" in output.text()


def test_lines_are_whole_across_chunks_with_newlines_as_text_mode_reads_them():
    seen: list[str] = []
    lines = Lines(seen.append)
    for chunk in (b"one\r", b"\ntw", b"o\rthree\n\xff fo", b"ur"):
        lines.feed(chunk)
    lines.end()
    assert seen == ["one\n", "two\n", "three\n", "\ufffd four"]


# ------------------------------------------------------------------------------------------ the stop


@pytest.mark.slow
def test_a_timeout_stops_the_child_and_the_grandchild(tmp_path):
    pids = tmp_path / "pids"
    with cleanup(pids):
        ran = run_command(family(pids), output=CappedOutput(), timeout=0.5, grace=0.2)
        assert ran.timed_out and ran.returncode is not None and ran.returncode < 0
        child, grandchild = written_pids(pids, 2)
        assert not alive(child) and not alive(grandchild)


@pytest.mark.slow
async def test_an_async_timeout_stops_the_child_and_the_grandchild(tmp_path):
    pids = tmp_path / "pids"
    with cleanup(pids):
        ran = await run_command_async(family(pids), output=CappedOutput(), timeout=0.5, grace=0.2)
        assert ran.timed_out
        child, grandchild = written_pids(pids, 2)
        assert not alive(child) and not alive(grandchild)


@pytest.mark.slow
async def test_cancelling_stops_the_whole_group(tmp_path):
    pids = tmp_path / "pids"
    with cleanup(pids):
        task = asyncio.create_task(run_command_async(family(pids), output=CappedOutput(), grace=0.2))
        child, grandchild = await asyncio.to_thread(written_pids, pids, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not alive(child) and not alive(grandchild)


@pytest.mark.slow
async def test_a_second_cancel_during_the_stop_still_kills_the_group(tmp_path):
    # A TaskGroup whose own task is cancelled cancels its children again (`agent bench --jobs` under
    # SIGTERM): the stop under way must still end in SIGKILL for a group that ignores SIGTERM.
    pids = tmp_path / "pids"
    stubborn = [
        "bash",
        "-c",
        f'trap "" TERM; echo $$ >> "$1"; {SLEEPER} & echo $! >> "$1"; wait',
        "_",
        str(pids),
    ]
    with cleanup(pids):
        task = asyncio.create_task(run_command_async(stubborn, output=CappedOutput(), grace=1.0))
        shell, sleeper = await asyncio.to_thread(written_pids, pids, 2)
        task.cancel()
        await asyncio.sleep(0.3)  # within the grace: SIGTERM sent and ignored, SIGKILL not yet
        assert alive(shell, settle=0) and alive(sleeper, settle=0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not alive(shell) and not alive(sleeper)


def test_a_sink_that_raises_stops_the_whole_group(tmp_path):
    # As the build's progress callback does to cancel a build from the TUI.
    pids = tmp_path / "pids"

    class Cancel(Exception):
        pass

    def on_line(line: str) -> None:
        if line.startswith("ready"):
            raise Cancel

    with cleanup(pids):
        with pytest.raises(Cancel):
            run_command(family(pids, ready=True), output=Lines(on_line), grace=0.2)
        child, grandchild = written_pids(pids, 2)
        assert not alive(child) and not alive(grandchild)


def test_an_interrupt_stops_the_whole_group(tmp_path):
    pids = tmp_path / "pids"
    runner = (
        "import sys; from tools.process_group import CappedOutput, run_command; "
        "run_command(sys.argv[1:], output=CappedOutput(), grace=0.2)"
    )
    with cleanup(pids):
        caller = subprocess.Popen(
            [sys.executable, "-c", runner, *family(pids)], cwd=Path(__file__).parents[2],
            stderr=subprocess.PIPE,
        )  # fmt: skip
        child, grandchild = written_pids(pids, 2)
        caller.send_signal(signal.SIGINT)
        _, err = caller.communicate(timeout=30)
        assert b"KeyboardInterrupt" in err
        assert not alive(child) and not alive(grandchild)


@pytest.mark.slow
def test_the_grace_lets_a_command_finish_on_sigterm_and_its_last_words_are_kept(tmp_path):
    # The suite's `agent run` writes its session record's end when stopped: more than a pipe holds, so
    # the output is read during the grace, or the writer would block until the SIGKILL.
    output = CappedOutput()
    last_words = "head -c 300000 /dev/zero | tr '\\0' x; echo; echo finishing; exit 143"
    command = f'trap "{last_words}" TERM; echo started; sleep 60 & wait'
    ran = run_command(["bash", "-c", command], output=output, timeout=0.5, grace=10)
    assert ran.timed_out and ran.returncode == 143 and ran.seconds < 10
    assert output.text() == "started\n" + "x" * 300000 + "\nfinishing\n"


@pytest.mark.slow
def test_what_ignores_sigterm_gets_sigkill_after_the_grace(tmp_path):
    pids = tmp_path / "pids"
    command = f"trap '' TERM; echo $$ > {pids}; sleep 60 & echo $! >> {pids}; wait"
    with cleanup(pids):
        started = time.monotonic()
        ran = run_command(["bash", "-c", command], output=CappedOutput(), timeout=0.3, grace=0.3)
        assert ran.timed_out and ran.returncode == -signal.SIGKILL and time.monotonic() - started < 10
        assert not any(alive(pid) for pid in written_pids(pids, 2))


@pytest.mark.slow
async def test_a_descendant_that_left_the_group_is_stopped_too(tmp_path):
    pids = tmp_path / "pids"
    command = f"setsid {SLEEPER} & echo $! > {pids}; wait"
    with cleanup(pids):
        started = time.monotonic()
        ran = await run_command_async(["bash", "-c", command], output=CappedOutput(), timeout=0.5, grace=0)
        assert ran.timed_out and time.monotonic() - started < 10  # its pipe did not hold us
        [escaped] = written_pids(pids, 1)
        assert not alive(escaped)


# ---------------------------------------------------------------------------------- what is left


@pytest.mark.parametrize("runner", ["sync", "async"])
def test_with_kill_leftovers_a_command_is_over_at_its_exit_and_leaves_nothing(tmp_path, runner):
    pids = tmp_path / "pids"
    # The background child holds the output: without kill_leftovers this would run to the timeout.
    command = ["bash", "-c", f"{SLEEPER} & echo $! > {pids}; echo ran"]
    output = CappedOutput()
    with cleanup(pids):
        started = time.monotonic()
        if runner == "sync":
            ran = run_command(command, output=output, timeout=60, grace=0, kill_leftovers=True)
        else:
            ran = asyncio.run(
                run_command_async(command, output=output, timeout=60, grace=0, kill_leftovers=True)
            )
        assert (ran.returncode, ran.timed_out, output.text()) == (0, False, "ran\n")
        assert time.monotonic() - started < 15
        [child] = written_pids(pids, 1)
        assert not alive(child)


def test_without_kill_leftovers_a_background_child_that_let_go_of_the_output_runs_on(tmp_path):
    # The bash tool's `server > log &`: the next command talks to it.
    pids = tmp_path / "pids"
    with cleanup(pids):
        ran = run_command(
            ["bash", "-c", f"{SLEEPER} > /dev/null 2>&1 & echo $! > {pids}"],
            output=CappedOutput(),
            timeout=30,
        )
        [child] = written_pids(pids, 1)
        assert ran.returncode == 0 and alive(child, settle=0)


@pytest.mark.parametrize("runner", ["sync", "async"])
def test_no_process_of_many_short_commands_is_left(tmp_path, runner):
    before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    for _ in range(5):
        command = ["bash", "-c", "sleep 0.05 & true | cat; wait"]
        if runner == "sync":
            run_command(command, output=CappedOutput(), cwd=tmp_path, timeout=30, kill_leftovers=True)
        else:
            asyncio.run(
                run_command_async(
                    command, output=CappedOutput(), cwd=tmp_path, timeout=30, kill_leftovers=True
                )
            )
    new = {int(p) for p in os.listdir("/proc") if p.isdigit()} - before
    assert not [pid for pid in new if _cwd(pid) == str(tmp_path) and alive(pid)]
    assert not [pid for pid in new if _ppid(pid) == os.getpid()]  # no child left unreaped, zombie or not


def test_a_group_left_only_with_zombies_counts_as_ended():
    # Where PID 1 does not reap orphans (a container without an init) killed members stay zombies, and
    # signalling them still succeeds.
    child = subprocess.Popen(["true"], start_new_session=True)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert signal_tree(child.pid, [], signal.SIGKILL) is False
        assert not group_alive(child.pid)
    finally:
        child.wait()


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0
