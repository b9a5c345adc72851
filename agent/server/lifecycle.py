"""Starting, watching and stopping llama-server from a profile (planned by launch_plan.py; a failed start
explained by diagnose.py).

`plan_launch` resolves everything that can be checked before a process exists (binary, model files,
flags against the binary's dialect) and runs the preflight on the GGUF headers
(agent/server/preflight/): a file that cannot work is refused before anything starts. `start` runs
the plan as a child in its own process group with its output in a log file, waits on /health, and
turns an early exit into a diagnosis from the log. A failure of the draft alone is a `DraftError`, the
cue for the fallback in agent/session/connect.py. `stop` sends SIGTERM to the group, waits a grace period,
then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

from agent.errors import ServerError
from agent.server.diagnose import dflash_fix, diagnose_exit, loading_phase, log_line, tail_text
from agent.server.launch_plan import LaunchPlan, api_root
from agent.server.preflight.checks import DFLASH_SPEC_TYPES
from agent.server.preflight.report import DraftError
from agent.server.registry import ServerRecord, ServerRegistry, process_start_time

# (seconds since start, what the server is doing)
StartProgress = Callable[[float, str], None]


@dataclass
class ServerHandle:
    """A running server: one we started (with its Popen), or one of ours found in the registry."""

    record: ServerRecord
    reused: bool = False
    process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return self.record.base_url


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def health(base_url: str, timeout: float = 2.0) -> tuple[int, str]:
    """(HTTP status, body) of /health; (0, reason) when nothing answers."""
    try:
        response = httpx2.get(api_root(base_url) + "/health", timeout=timeout)
    except httpx2.HTTPError as exc:
        return 0, f"{type(exc).__name__}: {exc}"
    return response.status_code, response.text


def server_log_path(log_dir: Path, profile: str, port: int) -> Path:
    """Where the server of `profile` on `port` writes its output: one file, written afresh at each start
    (a start that failed on its draft is moved aside first: connect.keep_failed_log)."""
    return log_dir / f"{profile}-{port}.log"


def start(
    plan: LaunchPlan,
    registry: ServerRegistry,
    log_dir: Path,
    progress: StartProgress | None = None,
    timeout: float | None = None,
    owned: bool = False,
    draft_off: str = "",
) -> ServerHandle:
    """Start the planned server and wait until it is healthy; reuse ours if it already runs there.

    `owned`: this process will stop the server when it is done (recorded, so that a run killed before
    it could do so leaves a server the next run adopts). `draft_off`: why this start runs the profile
    without its draft (recorded, so that a run reusing the server says so too).
    """
    progress = progress or (lambda _t, _m: None)
    existing = registry.at(plan.host, plan.port)
    if existing:
        if existing.profile == plan.profile.name and health(existing.base_url)[0] == 200:
            return ServerHandle(existing, reused=True)
        raise ServerError(
            f"port {plan.port} is taken by our own server for profile '{existing.profile}' (pid {existing.pid})",
            fix=f"Stop it with `agent server stop {existing.profile}`, or pass --port to use another port.",
        )
    if not port_is_free(plan.host, plan.port):
        status, _ = health(plan.base_url, timeout=1.0)
        what = "a server that answers /health (another llama-server?)" if status else "another program"
        raise ServerError(
            f"port {plan.port} on {plan.host} is in use by {what}",
            "We did not start it, so we will not stop it.",
            f"Pass --port to use another port, or attach to it with --base-url {plan.base_url}.",
        )
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = server_log_path(log_dir, plan.profile.name, plan.port)
    with _interrupt_at_safe_points() as check_interrupt:
        with log_path.open("wb") as log:
            log.write(f"$ {plan.command_line()}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    [str(plan.binary), *plan.argv],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=plan.env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServerError(f"could not execute {plan.binary}", str(exc)) from exc
        handle = ServerHandle(
            ServerRecord(
                profile=plan.profile.name,
                pid=proc.pid,
                host=plan.host,
                port=plan.port,
                base_url=plan.base_url,
                log_path=str(log_path),
                binary=str(plan.binary),
                argv=plan.argv,
                started_at=time.time(),
                owner_pid=os.getpid() if owned else None,
                owner_start=process_start_time(os.getpid()) if owned else "",
                draft_off=draft_off,
            ),
            process=proc,
        )
        try:
            handle.record.proc_start = process_start_time(proc.pid)
            registry.add(handle.record)

            def checked(elapsed: float, phase: str) -> None:
                check_interrupt()
                progress(elapsed, phase)

            _wait_until_healthy(handle, plan, checked, timeout or plan.profile.startup_timeout)
            check_interrupt()
        except BaseException:
            # A failed start, a timeout or Ctrl+C: nothing may be left running.
            stop(handle, registry, grace=3.0)
            raise
    return handle


@contextmanager
def _interrupt_at_safe_points() -> Iterator[Callable[[], None]]:
    """Ctrl+C while a server starts is honoured at points where we can clean up, not wherever the
    signal lands (Python drops a KeyboardInterrupt raised inside an import's callback, and the server
    would be left running). Off the main thread, signals are not ours to handle and nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: pending.append(signum))

    def check() -> None:
        if pending:
            pending.clear()
            raise KeyboardInterrupt

    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt


def _wait_until_healthy(
    handle: ServerHandle, plan: LaunchPlan, progress: StartProgress, timeout: float
) -> None:
    proc = handle.process
    assert proc is not None
    log_path = Path(handle.record.log_path)
    started = time.monotonic()
    while True:
        elapsed = time.monotonic() - started
        code = proc.poll()
        if code is not None:
            raise diagnose_exit(plan, code, log_path)
        status, _ = health(plan.base_url, timeout=1.0)
        if status == 200:
            _check_first_completion(plan, log_path)
            progress(elapsed, "ready")
            return
        if elapsed > timeout:
            raise ServerError(
                f"llama-server for profile '{plan.profile.name}' did not become ready within {timeout:.0f} s",
                "It is still running but /health never answered 200. Last lines of its log:\n"
                + tail_text(log_path),
                f"A large model may need more time: raise startup_timeout in the profile. Log: {log_path}",
            )
        progress(elapsed, loading_phase(log_path) or ("loading the model" if status == 503 else "starting"))
        time.sleep(0.2)


# BeeLlama 0.1 logs this at load for a draft without DFlash target layers, then answers every real
# request with HTTP 500 "Invalid input batch" (FACTS.md); a 2-token request does not show it.
_NO_TARGET_LAYERS = "n_target_layers=0"


def _check_first_completion(plan: LaunchPlan, log_path: Path | None = None) -> None:
    """A DFlash server is only known good once it has drafted (FACTS.md: BeeLlama accepts a draft that
    is not a DFlash model, turns healthy, then answers 500 "Invalid input batch" to every request)."""
    spec = plan.profile.speculative
    if not spec or not (set(spec.type.split(",")) & DFLASH_SPEC_TYPES):
        return
    hit = log_line(log_path, _NO_TARGET_LAYERS, also="dflash") if log_path else None
    if hit:
        raise DraftError(
            f"llama-server for profile '{plan.profile.name}' loaded, but the draft model is not a DFlash model",
            f"Its log says, before any request:\n  | {hit.strip()}\nn_target_layers=0: the draft has no "
            'DFlash target layers, so every real request would fail with HTTP 500 "Invalid input batch".',
            dflash_fix(plan.capabilities.dialect) + f"\nLog: {log_path}",
            reason="the draft model is not a DFlash model (the server logged n_target_layers=0)",
            log_path=str(log_path),
        )
    headers = (
        {"Authorization": f"Bearer {plan.env['LLAMA_API_KEY']}"} if plan.env.get("LLAMA_API_KEY") else {}
    )
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    try:
        response = httpx2.post(
            plan.base_url + "/v1/chat/completions", json=body, headers=headers, timeout=120
        )
    except httpx2.HTTPError:
        return  # an unreachable server shows up on the next health poll or request, with its own error
    if response.status_code >= 500:
        message = response.text[:300]
        if "Invalid input batch" in message:
            raise DraftError(
                f"llama-server for profile '{plan.profile.name}' started, but the draft model is not a DFlash model",
                f"A 2-token test request got HTTP {response.status_code}: {message}",
                dflash_fix(plan.capabilities.dialect) + f"\nLog: {log_path}",
                reason='the draft model is not a DFlash model (HTTP 500 "Invalid input batch")',
                log_path=str(log_path or ""),
            )
        raise ServerError(
            f"llama-server for profile '{plan.profile.name}' started, but its first completion failed",
            f"A 2-token test request got HTTP {response.status_code}: {message}",
            f"Log: {log_path}",
        )


def stop(handle: ServerHandle | ServerRecord, registry: ServerRegistry, grace: float = 10.0) -> bool:
    """SIGTERM the server's process group, wait `grace` seconds, then SIGKILL. True if it was running."""
    record = handle.record if isinstance(handle, ServerHandle) else handle
    proc = handle.process if isinstance(handle, ServerHandle) else None
    # Our own child is judged by its Popen (exact even before its record is complete); a server
    # started from another terminal by its recorded pid and start time.
    if not _running(record, proc):
        registry.remove(record.pid)
        return False
    _signal_group(record.pid, signal.SIGTERM)
    _signal_group(
        record.pid, signal.SIGCONT
    )  # a stopped (SIGSTOP) server acts on SIGTERM only once continued
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _running(record, proc):
        time.sleep(0.05)
    if _running(record, proc):
        _signal_group(record.pid, signal.SIGKILL)
        while _running(record, proc):
            time.sleep(0.05)
    registry.remove(record.pid)
    return True


def _running(record: ServerRecord, proc: subprocess.Popen | None) -> bool:
    if proc is not None:
        return proc.poll() is None
    return record.is_alive()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # The server leads its own process group (start_new_session), so its group id is its pid.
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)
