"""The bash tool: one command at a time in the workspace, with a working directory that persists.

Each command runs in its own process group with stdin closed and a timeout; on timeout or cancel the
whole group is ended (SIGTERM, a short grace, SIGKILL), and so is every descendant that left the group
(`setsid`) while still a child of the command, so nothing it started is left running. (A daemon that
double-forked away before the kill is out of reach without cgroups.)
On Linux a command may add at most `process_room` processes (threads count) to those its user already
runs (RLIMIT_NPROC, set with `ulimit -u` before the command): a fork bomb stops there instead of
taking the machine, while builds (make -j, compilers, test runners) stay far below it. The limit does
not bind root, whom the kernel exempts; the timeout and the group kill still end a bomb there.
Output is capped at its head and tail (memory stays bounded whatever the command prints), invalid
UTF-8 shows as U+FFFD, and the model is told how many bytes were dropped.
Where the context carries an active sandbox (tools/sandbox.py), the command runs inside bubblewrap.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import resource
import shlex
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from tools.base import ToolContext, ToolResult
from tools.shown import note_shown_by_command
from tools.text_files import pid_gone

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 1800
# Processes (threads count) a command may add to what its user runs already: a parallel build's
# compilers and test workers stay far below it; a fork bomb meets it within a second.
PROCESS_ROOM = 4096
# Programs that would wait for a terminal or a pager get none.
QUIET_ENV = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "EDITOR": "true",
}


MARKER_PREFIX = "agent-cwd-"


def new_marker_dir() -> Path:
    """A folder for one command's working-directory marker, named for this process: one that an agent
    killed mid-command (kill -9) leaves behind is swept by the next agent (`sweep_markers`)."""
    _sweep_once()
    return Path(tempfile.mkdtemp(prefix=f"{MARKER_PREFIX}{os.getpid()}-"))


def sweep_markers(folder: Path) -> list[Path]:
    """Remove the marker folders in `folder` of processes that are gone; the ones removed."""
    removed = []
    for marker in folder.glob(f"{MARKER_PREFIX}*-*"):
        pid = marker.name.removeprefix(MARKER_PREFIX).split("-", 1)[0]
        if pid.isdigit() and pid_gone(int(pid)):
            shutil.rmtree(marker, ignore_errors=True)
            removed.append(marker)
    return removed


@functools.cache
def _sweep_once() -> None:
    sweep_markers(Path(tempfile.gettempdir()))


class BashArgs(BaseModel):
    command: str = Field(description="The bash command line to run.")
    timeout: int | None = Field(
        None, ge=1, le=MAX_TIMEOUT, description=f"Seconds (default {DEFAULT_TIMEOUT})."
    )


class CappedOutput:
    """Keeps the first and the last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
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
        head = self.head.decode("utf-8", "replace")
        if not self.dropped:
            return head + self.tail.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n[... {self.dropped} bytes of output dropped ...]\n{tail}"


class Bash:
    name: ClassVar[str] = "bash"
    description: ClassVar[str] = (
        "Run a bash command in the workspace and get its output and exit code. The working directory "
        "persists between calls. No stdin: pass answers as flags. Long output is shortened in the middle."
    )
    Args: ClassVar[type[BaseModel]] = BashArgs
    effect: ClassVar[str] = "exec"

    def __init__(
        self,
        default_timeout: int = DEFAULT_TIMEOUT,
        max_output: int = 16_000,
        grace: float = 2.0,
        process_room: int | None = PROCESS_ROOM,
    ) -> None:
        self.default_timeout = default_timeout
        self.max_output = max_output
        self.grace = grace
        self.process_room = process_room  # None: no process limit

    def summary(self, args: BashArgs) -> str:
        return args.command

    async def run(self, args: BashArgs, ctx: ToolContext) -> ToolResult:
        root = ctx.workspace.root
        cwd = Path(ctx.state.get("bash_cwd") or root)
        if not cwd.is_dir():
            cwd = root
        timeout = args.timeout or self.default_timeout
        # The marker that records where the command left us, in a folder of its own: the sandbox
        # gives commands a private /tmp, and binds this folder through it.
        marker_dir = new_marker_dir()
        cwd_file = str(marker_dir / "cwd")
        nproc = await asyncio.to_thread(process_limit, self.process_room) if self.process_room else None
        # The command travels as an argument: its text cannot end the wrapper's subshell early.
        argv = ["bash", "-c", self._script(cwd_file, nproc), "bash", args.command]
        sandbox = ctx.sandbox if ctx.sandbox is not None and ctx.sandbox.active else None
        if sandbox is not None:
            argv = sandbox.wrap(argv, also_writable=[marker_dir])
        output = CappedOutput(self.max_output)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **QUIET_ENV},
        )
        timed_out = False
        try:
            await asyncio.wait_for(self._pump(proc, output), timeout)
        except TimeoutError:
            timed_out = True
            await end_process_tree(proc, self.grace)
        except BaseException:  # cancelled by the user: the command goes too
            await end_process_tree(proc, self.grace)
            shutil.rmtree(marker_dir, ignore_errors=True)
            if sandbox is not None:
                sandbox.sweep()
            raise
        seconds = time.monotonic() - started
        notes = self._update_cwd(cwd_file, ctx)
        shutil.rmtree(marker_dir, ignore_errors=True)
        code = proc.returncode
        text = output.text().rstrip("\n")
        if sandbox is not None:
            notes = "\n".join(n for n in (notes, sandbox.sweep()) if n)
        if sandbox is not None and code != 0:
            folders = (cwd, Path(ctx.state.get("bash_cwd") or root))
            notes = "\n".join(n for n in (notes, sandbox.note(text, folders)) if n)
        if timed_out:
            status = f"[timed out after {timeout} s; the command and every process it started were killed]"
        else:
            status = f"[exit code {code}]"
        body = "\n".join(part for part in (text, status, notes) if part)
        if code == 0 and not timed_out and not output.dropped:
            note_shown_by_command(args.command, cwd, ctx, body)
        display = {
            "command": args.command,
            "exit_code": None if timed_out else code,
            "seconds": round(seconds, 2),
            "timed_out": timed_out,
            "bytes": output.total,
            "dropped": output.dropped,
            "sandboxed": sandbox is not None,
            "process_limit": nproc,
        }
        return ToolResult(not timed_out and code == 0, body, display)

    @staticmethod
    def _script(cwd_file: str, nproc: int | None = None) -> str:
        """The command ($1) as written, then a record of where it left us; its own exit code is kept.

        A watchdog ends the command's process group if the agent itself dies (kill -9 leaves no
        chance to clean up otherwise): its own group, `kill 0`, since under bubblewrap the group's
        leader is bwrap, not this shell (`-$$` named no group there, and the command ran on). It exits
        with the command, via the EXIT trap, which waits for it so that the tool never returns with
        the watchdog still running. The command runs in a subshell, so that its own `wait`
        (`a & b & wait`) does not wait for the watchdog too, and its own EXIT trap does not replace
        ours; `eval` runs it as bash -c would, a syntax error included (what comes before it runs,
        nothing after). The process limit comes first, soft and hard alike, so the command cannot
        raise it again.
        """
        limit = f"ulimit -u {nproc} 2>/dev/null\n" if nproc else ""
        watchdog = (
            f"( while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; kill -KILL 0 ) "
            ">/dev/null 2>&1 </dev/null &\n__agent_watchdog=$!\n"
            "trap 'kill $__agent_watchdog 2>/dev/null; wait $__agent_watchdog 2>/dev/null' EXIT\n"
        )
        run = f'__agent_command=$1\nshift\neval "$__agent_command"\n__agent_rc=$?\npwd -P > {shlex.quote(cwd_file)}'
        return f"{limit}{watchdog}(\n{run}\nexit $__agent_rc\n)\n"

    @staticmethod
    async def _pump(proc: asyncio.subprocess.Process, output: CappedOutput) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            output.feed(chunk)
        await proc.wait()

    @staticmethod
    def _update_cwd(cwd_file: str, ctx: ToolContext) -> str:
        path = Path(cwd_file)
        try:
            new = path.read_text().strip()
        except OSError:
            new = ""
        finally:
            path.unlink(missing_ok=True)
        if not new:
            return ""
        try:
            ctx.state["bash_cwd"] = str(ctx.workspace.resolve(new))
        except Exception:
            ctx.state["bash_cwd"] = str(ctx.workspace.root)
            return (
                f"[the command left the workspace ({new}); the next command starts in {ctx.workspace.root}]"
            )
        return ""


# ------------------------------------------------------------------------------------ processes


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgid: int
    start: int  # clock ticks after boot: with the pid, it names one process even after pids wrap
    uid: int
    threads: int
    state: str = ""  # "Z": a zombie, dead but not yet reaped


def process_table() -> dict[int, _Proc]:
    """Every process /proc shows (Linux); {} elsewhere."""
    table: dict[int, _Proc] = {}
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
            table[pid] = _Proc(
                pid, int(fields[1]), int(fields[2]), int(fields[19]), uid, int(fields[17]), fields[0].decode()
            )
        except (OSError, ValueError, IndexError):
            continue  # it ended while we looked
    return table


def process_limit(room: int) -> int | None:
    """RLIMIT_NPROC for one command: the tasks its user runs now plus `room`, never above the limit in
    force. None where there is no /proc to count from (the limit is per user, not per command)."""
    table = process_table()
    if not table:
        return None
    uid = os.getuid()
    running = sum(p.threads for p in table.values() if p.uid == uid)
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    wanted = running + room
    return wanted if soft == resource.RLIM_INFINITY else min(soft, wanted)


def _descendants(pid: int, table: dict[int, _Proc]) -> list[_Proc]:
    children: dict[int, list[_Proc]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def _signal_tree(pgid: int, escaped: list[_Proc], sig: signal.Signals) -> bool:
    """Send `sig` to the group and to the descendants that left it; False when none of them is left."""
    alive = True
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        alive = False
    current = process_table()
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


async def _exited(proc: asyncio.subprocess.Process, seconds: float) -> bool:
    """Whether the leader exits within `seconds`. Its return code is polled, not awaited: `wait()`
    also waits for the pipes, which a grandchild that escaped the kill may hold open for ever."""
    deadline = time.monotonic() + seconds
    while proc.returncode is None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return proc.returncode is not None


async def end_process_tree(proc: asyncio.subprocess.Process, grace: float) -> None:
    """End a command started with start_new_session=True: its process group, and the descendants that
    left the group (setsid) while still below it. SIGTERM and `grace` seconds first (none when 0),
    then SIGKILL. Never waits long: the pipes are closed even if something unseen still holds them."""
    pgid = proc.pid
    table = await asyncio.to_thread(process_table)
    escaped = [p for p in _descendants(pgid, table) if p.pgid != pgid]
    if grace > 0 and _signal_tree(pgid, escaped, signal.SIGTERM):
        await _exited(proc, grace)
    for _ in range(50):  # a fork bomb adds members while they are killed: until none is left
        if not _signal_tree(pgid, escaped, signal.SIGKILL):
            break
        await asyncio.sleep(0.02)
        escaped = [p for p in escaped if _alive(p)]
    if not await _exited(proc, 5.0):
        return  # not ours to wait for any more (it cannot outlive SIGKILL; the kernel is slow)
    try:
        await asyncio.wait_for(proc.wait(), 1.0)
    except TimeoutError:
        # Something outside the group still holds the output pipe: stop reading it.
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()


def _alive(proc: _Proc) -> bool:
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0] != b"Z" and int(fields[19]) == proc.start
