"""Running a command in a process group of its own, and stopping that whole group: the one way the
bash tool, the check, the lint command, the task suite and the llama-server build run their commands.

The command starts in a new session (so its group id is its pid) with stdin closed, and its output goes
to a sink as it arrives. On timeout, on cancel, or on an exception from a sink or a signal handler, the
group is stopped: SIGTERM, up to `grace` seconds for it to go, then SIGKILL until nothing of it is left.
The descendants that left the group (`setsid`) while still below the command get the same signals.
Only the group we started is signalled: its id stays taken while any member lives or its leader is
unreaped, the sync runner sees its command exit without reaping it (a pidfd, `waitid(WNOWAIT)`), and
once the command has exited, Linux hands out pids in turn, so a freed id is not another group's a
moment later. (A daemon that double-forked away before the stop is out of reach without cgroups.)

`run_command` blocks (the lint command, the suite, the build); `run_command_async` is for the event
loop (the bash tool, the check). Both take the same arguments and return a `CommandRun`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import io
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

DEFAULT_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
DRAIN = 2.0  # seconds the output is still read once the command is over, unless something else holds it
POLL = 0.02
READ_SIZE = 65536


class Sink(Protocol):
    """Where a command's output goes, chunk by chunk as it arrives."""

    def feed(self, data: bytes) -> None: ...


@dataclass(frozen=True)
class CommandRun:
    returncode: int | None  # negative: the signal that ended it; None: it could not be reaped in time
    timed_out: bool
    seconds: float


class CappedOutput:
    """Keeps the first and the last `limit // 2` bytes of a stream and counts the rest (all of it when
    `limit` is None)."""

    def __init__(self, limit: int | None = None) -> None:
        self.half = limit // 2 if limit is not None else None
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.half is None:
            self.head += data
            return
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept output as text: invalid UTF-8 as U+FFFD, and a line saying what was dropped."""
        head = self.head.decode("utf-8", "replace")
        if not self.dropped:
            return head + self.tail.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n[... {self.dropped} bytes of output dropped ...]\n{tail}"


class Lines:
    """A sink that hands `on_line` each whole line of text (newline kept; invalid UTF-8 as U+FFFD;
    "\\r\\n" and "\\r" as "\\n", as Python's text mode reads them). `end()` gives the unfinished last line."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self.on_line = on_line
        self.decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder("utf-8")("replace"), True)
        self.partial = ""

    def feed(self, data: bytes) -> None:
        self._split(self.decoder.decode(data))

    def end(self) -> None:
        self._split(self.decoder.decode(b"", final=True))
        if self.partial:
            line, self.partial = self.partial, ""
            self.on_line(line)

    def _split(self, text: str) -> None:
        *whole, self.partial = (self.partial + text).split("\n")
        for line in whole:
            self.on_line(line + "\n")


Argv = Sequence[str | os.PathLike[str]]


def run_command(
    argv: Argv,
    *,
    output: Sink,
    errors: Sink | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    grace: float = DEFAULT_GRACE,
    kill_leftovers: bool = False,
) -> CommandRun:
    """Run `argv` in a new session and wait for it, its output fed to `output` (stderr too, unless
    `errors` takes it) from this thread, so a sink may raise to stop the command.

    kill_leftovers: True, the command is over when its own process exits, and whatever it left in its
    group is stopped then (a check, a lint command: over when its shell exits, even if a background
    child still holds the output). False, it is over once it has exited and its output is closed, and
    what it started in the background with the output let go keeps running (`server > log &` in the
    bash tool, for the next command to use).
    OSError when the command cannot start; any exception stops the group first.
    """
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if errors is None else subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    streams: list[tuple[IO[bytes], Sink]] = [(proc.stdout, output)]
    if errors is not None:
        assert proc.stderr is not None
        streams.append((proc.stderr, errors))
    watch = _Watch(proc, streams)
    deadline = None if timeout is None else started + timeout
    timed_out = False
    try:
        while not (watch.exited if kill_leftovers else watch.exited and not watch.reading):
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            watch.wait(min(left, 1.0))
        if timed_out or kill_leftovers:
            if not timed_out:
                _reap(proc)  # first: a group left with only its zombie leader is then no group at all
            for pause in _stopping(proc.pid, grace, watch.exited):
                watch.spend(pause)  # (output still arrives: a command finishing on SIGTERM says so)
        until = time.monotonic() + DRAIN
        while watch.reading and (left := until - time.monotonic()) > 0:
            watch.wait(left)
    except BaseException:  # interrupted, or a sink raised: the command goes with us
        watch.discard()  # (still read, so that a command finishing on SIGTERM is not blocked writing)
        for pause in _stopping(proc.pid, grace, watch.exited):
            watch.spend(pause)
        watch.close()
        _reap(proc)
        raise
    watch.close()
    _reap(proc)
    return CommandRun(proc.returncode, timed_out, time.monotonic() - started)


async def run_command_async(
    argv: Argv,
    *,
    output: Sink,
    errors: Sink | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    grace: float = DEFAULT_GRACE,
    kill_leftovers: bool = False,
) -> CommandRun:
    """`run_command` for the event loop; cancelling it stops the group, then lets the cancel through."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if errors is None else asyncio.subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    readers = [asyncio.ensure_future(_pump(proc.stdout, output))]
    if errors is not None:
        assert proc.stderr is not None
        readers.append(asyncio.ensure_future(_pump(proc.stderr, errors)))
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                if kill_leftovers:
                    await _exit(proc)
                else:
                    await asyncio.wait(readers)  # (not gather: a timeout must not cancel the readers)
                    for reader in readers:
                        reader.result()  # a sink's error
                    await proc.wait()  # (the pipes are closed: this is the exit, seen at once)
        except TimeoutError:
            timed_out = True
        if timed_out or kill_leftovers:
            await _stop_async(proc, grace)
        pending = [r for r in readers if not r.done()]
        if pending:
            await asyncio.wait(pending, timeout=DRAIN)
        for reader in readers:
            if reader.done():
                reader.result()  # a sink's error
    except BaseException:  # cancelled: the command goes too
        await _stop_despite_cancels(proc, readers, grace)
        raise
    _close(proc, readers)
    return CommandRun(proc.returncode, timed_out, time.monotonic() - started)


# ------------------------------------------------------------------------------ the sync runner's eyes


class _Watch:
    """A command's pipes and its exit, waited on together from the calling thread: its exit through a
    pidfd where Linux gives one, else `waitid(WNOWAIT)`; neither reaps it."""

    def __init__(self, proc: subprocess.Popen, streams: list[tuple[IO[bytes], Sink]]) -> None:
        self.proc = proc
        self.selector = selectors.DefaultSelector()
        for stream, sink in streams:
            self.selector.register(stream, selectors.EVENT_READ, sink)
        self.exited = False
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # not Linux, or a kernel before 5.3
            self.pidfd = os.pidfd_open(proc.pid)
            self.selector.register(self.pidfd, selectors.EVENT_READ, None)

    @property
    def reading(self) -> bool:
        return any(key.data is not None for key in self.selector.get_map().values())

    def wait(self, seconds: float) -> None:
        """Feed what arrives within `seconds` to the sinks; back at the first output, its end, or the exit."""
        if self.pidfd is None and not self.exited:
            seconds = min(seconds, POLL)  # the exit is looked at, not waited on
        if self.selector.get_map():
            events = self.selector.select(seconds)
        else:
            time.sleep(seconds)
            events = []
        for key, _ in events:
            if key.data is None:
                self._close_pidfd()
                self.exited = True
                continue
            data = os.read(key.fd, READ_SIZE)
            if data:
                key.data.feed(data)
            else:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
        if self.pidfd is None and not self.exited:
            self.exited = _exited_unreaped(self.proc)

    def spend(self, seconds: float) -> None:
        """Feed what arrives in the next `seconds` to the sinks."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            self.wait(left)

    def discard(self) -> None:
        """Read on into nothing: the sinks have done their part (one of them may have raised)."""
        for key in list(self.selector.get_map().values()):
            if key.data is not None:
                self.selector.modify(key.fileobj, selectors.EVENT_READ, _DISCARD)

    def close(self) -> None:
        """Stop reading: what still holds the pipes (a daemon out of reach) gets a broken pipe."""
        self._close_pidfd()
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            self.selector.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None


class _Discard:
    def feed(self, data: bytes) -> None:
        pass


_DISCARD = _Discard()


def _exited_unreaped(proc: subprocess.Popen) -> bool:
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already, by someone else
        return True


def _reap(proc: subprocess.Popen) -> None:
    """Wait for the command's own process, which cannot outlive SIGKILL (the kernel may be slow)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


# ----------------------------------------------------------------------------- the async runner's parts


async def _pump(stream: asyncio.StreamReader, sink: Sink) -> None:
    while chunk := await stream.read(READ_SIZE):
        sink.feed(chunk)


async def _exit(proc: asyncio.subprocess.Process, seconds: float | None = None) -> bool:
    """Whether the command's process exits (within `seconds`). Its return code is polled, not awaited:
    `wait()` also waits for the pipes, which a child left running may hold open for ever."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while proc.returncode is None:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL)
    return True


async def _stop_async(proc: asyncio.subprocess.Process, grace: float) -> None:
    for pause in _stopping(proc.pid, grace, proc.returncode is not None):
        await asyncio.sleep(pause)
    await _exit(proc, 5.0)


async def _stop_despite_cancels(
    proc: asyncio.subprocess.Process, readers: list[asyncio.Future], grace: float
) -> None:
    """Stop the group and close its transport, however often the caller is cancelled meanwhile. A
    TaskGroup whose own task is cancelled cancels its children again: `agent bench --jobs` under
    SIGTERM left the second cancel in the middle of the stop, so the loop closed before the command
    exited ("Event loop is closed" tracebacks, a child never sent SIGKILL)."""
    stop = asyncio.ensure_future(_stop_async(proc, grace))
    try:
        while not stop.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(stop)
        stop.result()
    finally:
        _close(proc, readers)


def _close(proc: asyncio.subprocess.Process, readers: list[asyncio.Future]) -> None:
    """Stop reading, and close the process's transport now, while the loop runs. (asyncio has no public
    way to.) Left to asyncio, it closes once the exit and the pipes' ends have come in; a suite stopped
    by SIGTERM closed its loop first, and the transport, collected later, printed "Event loop is
    closed" tracebacks (`agent bench` under `timeout` on the GPU)."""
    for reader in readers:
        reader.cancel()
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


# ---------------------------------------------------------------------------------------- the stop


def _stopping(pgid: int, grace: float, leader_exited: bool) -> Iterator[float]:
    """Stop group `pgid` and the descendants that left it: SIGTERM, up to `grace` seconds (none when 0)
    for all of them to go, then SIGKILL until none is left. Yields the seconds to wait between looks,
    so that the sync runner reads the output meanwhile and the async one awaits. Once the leader has
    exited its children belong to init, so no descendant can be found: /proc is not read for them."""
    escaped = [] if leader_exited else [p for p in _descendants(pgid, process_table()) if p.pgid != pgid]
    if grace > 0 and signal_tree(pgid, escaped, signal.SIGTERM):
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (group_alive(pgid) or any(_alive(p) for p in escaped)):
            yield POLL
    for _ in range(50):  # a fork bomb adds members while they are killed: until none is left
        if not signal_tree(pgid, escaped, signal.SIGKILL):
            return
        yield POLL
        escaped = [p for p in escaped if _alive(p)]


@dataclass(frozen=True)
class ProcessEntry:
    """One process as /proc shows it."""

    pid: int
    ppid: int
    pgid: int
    start: int  # clock ticks after boot: with the pid, it names one process even after pids wrap
    uid: int
    threads: int
    state: str = ""  # "Z": a zombie, dead but not yet reaped


def process_table() -> dict[int, ProcessEntry]:
    """Every process /proc shows (Linux); {} elsewhere."""
    table: dict[int, ProcessEntry] = {}
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return table
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                data = f.read()
            fields = data[data.rindex(b")") + 2 :].split()  # the name may hold spaces and parentheses
            pid = int(entry.name)
            table[pid] = ProcessEntry(
                pid, int(fields[1]), int(fields[2]), int(fields[19]), uid, int(fields[17]), fields[0].decode()
            )
        except (OSError, ValueError, IndexError):
            continue  # it ended while we looked
    return table


def _descendants(pid: int, table: dict[int, ProcessEntry]) -> list[ProcessEntry]:
    children: dict[int, list[ProcessEntry]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def signal_tree(pgid: int, escaped: list[ProcessEntry], sig: signal.Signals) -> bool:
    """Send `sig` to the group and to the descendants that left it; False when none of them is left."""
    alive = True
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        alive = False
    except PermissionError:  # none of it may be signalled (a setuid member; on macOS, zombies only)
        alive = False
    current = process_table() if alive or escaped else {}
    if alive and current and all(p.state == "Z" for p in current.values() if p.pgid == pgid):
        # A group of zombies takes signals but is dead: where PID 1 does not reap orphans (a container
        # without an init), a killed `sleep` stays one, and the SIGKILL loop spun its full second.
        alive = False
    for proc in escaped:
        now = current.get(proc.pid)
        if now is not None and now.start == proc.start:  # the same process, not a reused pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)
                alive = True
    return alive


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs. A zombie does not count: where nothing reaps
    orphans (FACTS.md: this CI kind's PID 1), a dead member stays in the table as one."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _alive(proc: ProcessEntry) -> bool:
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0] != b"Z" and int(fields[19]) == proc.start
