"""The bash tool: one command at a time in the workspace, with a working directory that persists.

Each command runs in its own process group with stdin closed and a timeout (tools/process_group.py);
on timeout or cancel the whole group is ended (SIGTERM, a short grace, SIGKILL), and so is every
descendant that left the group (`setsid`) while still a child of the command, so nothing it started is
left running. A command that ends by itself leaves what it started in the background with its output
let go (`server > log &`) running, for the next command to use.
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
import functools
import os
import resource
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from tools.base import ToolContext, ToolResult
from tools.process_group import CappedOutput, process_table, run_command_async
from tools.process_group import signal_tree as _signal_tree  # noqa: F401 (tests/tools/test_bash.py's name)
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
        try:
            ran = await run_command_async(
                argv, output=output, cwd=cwd, env={**os.environ, **QUIET_ENV}, timeout=timeout,
                grace=self.grace,
            )  # fmt: skip
        except BaseException:  # cancelled by the user: the command went too
            shutil.rmtree(marker_dir, ignore_errors=True)
            if sandbox is not None:
                sandbox.sweep()
            raise
        code, timed_out, seconds = ran.returncode, ran.timed_out, ran.seconds
        notes = self._update_cwd(cwd_file, ctx)
        shutil.rmtree(marker_dir, ignore_errors=True)
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
