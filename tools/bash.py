"""The bash tool: one command at a time in the workspace, with a working directory that persists.

Each command runs in its own process group with stdin closed and a timeout; on timeout or cancel the
whole group is ended (SIGTERM, a short grace, SIGKILL), so nothing it started is left running.
Output is capped at its head and tail, and the model is told how many bytes were dropped.
Where the context carries an active sandbox (tools/sandbox.py), the command runs inside bubblewrap.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from tools.base import ToolContext, ToolResult

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 1800
# Programs that would wait for a terminal or a pager get none.
QUIET_ENV = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "EDITOR": "true",
}


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
        self, default_timeout: int = DEFAULT_TIMEOUT, max_output: int = 16_000, grace: float = 2.0
    ) -> None:
        self.default_timeout = default_timeout
        self.max_output = max_output
        self.grace = grace

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
        marker_dir = Path(tempfile.mkdtemp(prefix="agent-cwd-"))
        cwd_file = str(marker_dir / "cwd")
        script = self._script(args.command, cwd_file)
        argv = ["bash", "-c", script]
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
            await self._end_group(proc)
        except BaseException:  # cancelled by the user: the command goes too
            await self._end_group(proc)
            shutil.rmtree(marker_dir, ignore_errors=True)
            raise
        seconds = time.monotonic() - started
        notes = self._update_cwd(cwd_file, ctx)
        shutil.rmtree(marker_dir, ignore_errors=True)
        code = proc.returncode
        text = output.text().rstrip("\n")
        if sandbox is not None and code != 0:
            notes = "\n".join(n for n in (notes, sandbox.note(text)) if n)
        if timed_out:
            status = f"[timed out after {timeout} s; the command and every process it started were killed]"
        else:
            status = f"[exit code {code}]"
        body = "\n".join(part for part in (text, status, notes) if part)
        display = {
            "command": args.command,
            "exit_code": None if timed_out else code,
            "seconds": round(seconds, 2),
            "timed_out": timed_out,
            "bytes": output.total,
            "dropped": output.dropped,
            "sandboxed": sandbox is not None,
        }
        return ToolResult(not timed_out and code == 0, body, display)

    @staticmethod
    def _script(command: str, cwd_file: str) -> str:
        """The command as written, then a record of where it left us; its own exit code is kept.

        A watchdog ends the command's process group if the agent itself dies (kill -9 leaves no
        chance to clean up otherwise); it exits with the command, via the EXIT trap.
        """
        watchdog = (
            f"( while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; kill -KILL -$$ ) "
            ">/dev/null 2>&1 </dev/null &\n__agent_watchdog=$!\ntrap 'kill $__agent_watchdog 2>/dev/null' EXIT\n"
        )
        return f"{watchdog}{command}\n__agent_rc=$?\npwd -P > {shlex.quote(cwd_file)}\nexit $__agent_rc\n"

    @staticmethod
    async def _pump(proc: asyncio.subprocess.Process, output: CappedOutput) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            output.feed(chunk)
        await proc.wait()

    async def _end_group(self, proc: asyncio.subprocess.Process) -> None:
        for sig, wait in ((signal.SIGTERM, self.grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                await asyncio.wait_for(proc.wait(), wait)
                # The leader is gone; make sure the rest of its group is too.
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            except TimeoutError:
                continue
            break
        if proc.returncode is None:
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
