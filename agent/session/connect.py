"""From a profile name (or `--base-url`) to a model endpoint: start the server or attach to one.

A server started here is stopped when the `connect()` block ends; one that was already running
(ours from another terminal, or anyone's behind an attach profile) is left alone.

When the profile's draft fails (the preflight refuses it, the server aborts while loading it, or the
first completion fails on it: a `DraftError`), `launch` starts the same profile without `speculative`,
unless the profile says `fallback = false`. The connection then carries "draft off: <reason>", which
the front ends record as a `DraftOff` event (transcript, telemetry, `agent stats`, the TUI's status).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from agent.errors import ServerError
from agent.events import DraftOff, Event
from agent.server import machine_paths
from agent.server.admin import LOOKUP_TRIES
from agent.server.build import Progress
from agent.server.diagnose import log_tail
from agent.server.endpoint import Endpoint
from agent.server.launch_plan import LaunchPlan, MachinePaths, api_root, openai_base_url, plan_launch
from agent.server.lifecycle import ServerHandle, StartProgress, server_log_path, start, stop
from agent.server.preflight.report import DraftError
from agent.server.profiles import ServerProfile, attach_profile, get_profile
from agent.server.registry import ServerRegistry
from agent.settings.config import Settings, state_dir
from agent.store.transcripts import SessionRecord

# (seconds since the start, what the server is doing, the last line of its log): what a front end shows
# while the model loads. It may raise to cancel the start, which then stops the half-started server.
StartReport = Callable[[float, str, str], None]


@dataclass
class Connection:
    endpoint: Endpoint
    profile: ServerProfile
    handle: ServerHandle | None = None  # None when attached
    notes: tuple[str, ...] = ()
    draft_off: str = ""  # why the server runs without the profile's draft; "" when it has it
    draft_log: str = ""  # the log of the start that failed on the draft
    owned: bool = False  # this connection stops the server when it ends (so it may restart it)
    relaunch: Callable[[ServerProfile, str], Launched] | None = field(default=None, repr=False)

    @property
    def started_here(self) -> bool:
        return self.handle is not None and not self.handle.reused

    def fall_back(self, error: Exception) -> DraftOff | None:
        """A request failed the way a wrong DFlash draft makes it fail (BeeLlama 0.1 answers HTTP 500
        "Invalid input batch" once it drafts, FACTS.md): restart this server, same port, without the
        draft. The event marks the session; None when this failure is not that, or not ours to fix."""
        spec = self.profile.speculative
        if (
            INVALID_BATCH not in str(error)
            or spec is None
            or not spec.draft_model
            or not self.profile.fallback
            or not self.owned
            or self.relaunch is None
            or self.handle is None
        ):
            return None
        reason = 'the draft model is not a DFlash model (HTTP 500 "Invalid input batch" on a request)'
        stop(self.handle, ServerRegistry(state_dir()))
        self.draft_log = keep_failed_log(self.handle.record.log_path)
        launched = self.relaunch(self.profile.model_copy(update={"speculative": None}), reason)
        self.handle, self.profile, self.draft_off = launched.handle, launched.profile, reason
        self.endpoint.spec_mode = "none"
        return self.draft_off_event()

    def server_fate(self) -> str:
        """Why the server this connection started no longer answers: it exited (how), or it is stopped
        (SIGSTOP). "" while it runs, and for a server that is not ours to watch (attached)."""
        handle = self.handle
        if handle is None:
            return ""
        record = handle.record
        name = f"llama-server (profile {self.profile.name}, pid {record.pid})"
        log = f"; its log: {record.log_path}" if record.log_path else ""
        stopped = _process_state(record.pid) in ("T", "t")
        code = None
        if handle.process is not None and not stopped:
            # A killed process closes its sockets before it can be reaped: the client may see the
            # connection drop a moment before the exit can be read.
            try:
                code = handle.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
        if code is not None:
            if code < 0:
                try:
                    how = f"was killed by {signal.Signals(-code).name}"
                except ValueError:
                    how = f"was killed by signal {-code}"
            else:
                how = f"exited with code {code}"
            return f"{name} {how}{log}"
        if handle.process is None and not record.is_alive():
            return f"{name} is no longer running{log}"
        if stopped:
            return f"{name} is stopped (SIGSTOP or a debugger): it cannot answer until it is continued (kill -CONT {record.pid})"
        return ""

    def draft_off_event(self) -> DraftOff | None:
        """The event that marks the session, when the draft is off."""
        if not self.draft_off:
            return None
        return DraftOff(
            self.draft_off,
            self.profile.name,
            draft_off_message(self.profile.name, self.draft_off, self.draft_log),
        )


def _process_state(pid: int) -> str:
    """The one-letter state of /proc/PID/stat (R, S, T for stopped, Z...), or "" when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 : stat.rindex(")") + 3]


# What BeeLlama 0.1 answers once it drafts with a draft that is not a DFlash model.
INVALID_BATCH = "Invalid input batch"


def draft_recovery(
    connection: Connection, emit: Callable[[Event], None]
) -> Callable[[Exception], Awaitable[bool]]:
    """The agent loop's `recover`: on a draft failure at a request, the server restarts without the
    draft (in a thread: a model load takes seconds) and the request is sent again."""

    async def recover(error: Exception) -> bool:
        event = await asyncio.to_thread(connection.fall_back, error)
        if event is None:
            return False
        emit(event)
        return True

    return recover


def draft_off_message(profile: str, reason: str, failed_log: str = "") -> str:
    return (
        f"draft off: {reason}. The server runs profile '{profile}' without its draft (no speculation); "
        "set `fallback = false` in the profile to refuse instead."
        + (f" Log of the start that failed: {failed_log}" if failed_log else "")
    )


@dataclass
class Launched:
    plan: LaunchPlan
    handle: ServerHandle
    draft_off: str = ""
    failed_log: str = ""

    @property
    def profile(self) -> ServerProfile:
        """The profile the server runs: without `speculative` when its draft is off."""
        profile = self.plan.profile
        if self.draft_off and profile.speculative is not None:
            return profile.model_copy(update={"speculative": None})
        return profile


def launch(
    profile: ServerProfile,
    paths: MachinePaths,
    registry: ServerRegistry,
    log_dir: Path,
    progress: StartProgress | None = None,
    *,
    port: int | None = None,
    api_key: str | None = None,
    ctx_size: int | None = None,
    owned: bool = False,
    slots: int = 1,
) -> Launched:
    """Plan (with the preflight) and start the profile; on a draft failure, the same without the draft.

    A reused server that was itself started without its draft says so through its registry record.
    (`agent server start` does the same in agent/frontends/commands/server.py, with its own progress displays.)"""

    def plan_and_start(chosen: ServerProfile, draft_off: str = "") -> Launched:
        plan = plan_launch(chosen, paths, port=port, api_key=api_key, ctx_size=ctx_size, slots=slots)
        handle = start(plan, registry, log_dir, progress, owned=owned, draft_off=draft_off)
        return Launched(plan, handle, handle.record.draft_off)

    try:
        return plan_and_start(profile)
    except DraftError as error:
        if profile.speculative is None or not profile.fallback:
            raise
        failed = error
    failed_log = keep_failed_log(failed.log_path)
    if progress:
        progress(0.0, f"draft off: {failed.reason}; starting without the draft")
    launched = plan_and_start(profile.model_copy(update={"speculative": None}), failed.reason)
    launched.failed_log = failed_log
    return launched


def keep_failed_log(log_path: str) -> str:
    """The failed start's log, moved aside so that the restart (same name and port) does not overwrite it."""
    log = Path(log_path) if log_path else None
    if log is None or not log.is_file():
        return ""
    kept = log.with_suffix(".draft-failed.log")
    log.replace(kept)
    return str(kept)


AUTO = "auto"
FALLBACK_PROFILE = "coder-ngram"  # the embedded default, for `-p auto` with nothing measured


def resolve_profile(
    settings: Settings,
    profile: str | None,
    base_url: str | None,
    workspace: Path,
    say: Callable[[str], None] | None = None,
) -> ServerProfile:
    """The profile a command runs on. `-p auto` picks one and tells `say` which and why."""
    url = base_url or (settings.base_url if not profile else None)
    if url:
        return attach_profile(url)
    name = profile or settings.profile
    if name != AUTO:
        return get_profile(name, workspace)
    chosen, why = pick_auto(settings, workspace)
    if say:
        say(why)
    return chosen


def session_profile(
    settings: Settings,
    workspace: Path,
    named: str | None = None,
    base_url: str | None = None,
    resumed: SessionRecord | None = None,
    say: Callable[[str], None] | None = None,
) -> ServerProfile:
    """The profile a session runs on, new or resumed, in every front end: a profile named now (a flag,
    a task file, a switch) on its own server, whatever the session ran on before; else a URL given now;
    else what the resumed session last ran on (the server it attached to, or its profile); else the
    settings' (`resolve_profile`). A session attached with --base-url thus reconnects to that URL:
    its profile, "attach", alone would mean the attach profile's own 127.0.0.1:8910."""
    started = resumed.latest_started if resumed else {}
    url = base_url or (None if named else started.get("base_url") or None)
    return resolve_profile(settings, named or started.get("profile"), url, workspace, say=say)


def pick_auto(settings: Settings, workspace: Path) -> tuple[ServerProfile, str]:
    """The fastest profile measured on this machine (`agent bench`, `agent server tune`) among those
    that can start here and may be picked; the embedded default when none is."""
    from agent.server import profile_status
    from agent.server.profiles import load_profiles
    from agent.store.measurements import measured_here

    profiles = load_profiles(workspace)
    candidates = []
    for m in measured_here().values():
        p = profiles.get(m.profile)
        if (
            p is not None
            and p.auto
            and p.kind != "attach"
            and not profile_status(p, settings).startswith("missing")
        ):
            candidates.append(m)
    if not candidates:
        default = settings.profile if settings.profile != AUTO else FALLBACK_PROFILE
        return get_profile(default, workspace), (
            f"-p auto: nothing measured on this machine yet, so the default profile '{default}'. "
            "`agent server tune PROFILE` or `agent bench PROFILE ...` measures."
        )
    candidates.sort(key=lambda m: m.gen_tok_s, reverse=True)
    best, rest = candidates[0], candidates[1:4]
    when = time.strftime("%Y-%m-%d", time.localtime(best.when))
    why = f"-p auto: '{best.profile}', the fastest measured here: {best.gen_tok_s:.1f} tok/s ({when}, `{best.command}`)"
    if rest:
        why += "; then " + ", ".join(f"{m.profile} {m.gen_tok_s:.1f}" for m in rest)
    return profiles[best.profile], why


def _api_key(profile: ServerProfile, settings: Settings) -> str | None:
    if profile.api_key_env and os.environ.get(profile.api_key_env):
        return os.environ[profile.api_key_env]
    return settings.api_key


def _check_reachable(profile: ServerProfile, api_key: str | None) -> None:
    url = openai_base_url(profile.base_url or "") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    # A refused connection is tried again for a moment (a server restarting); a timeout is not.
    retrying = Retrying(
        retry=retry_if_exception_type(httpx2.ConnectError),
        stop=stop_after_attempt(LOOKUP_TRIES),
        wait=wait_exponential(multiplier=0.2, max=1),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                httpx2.get(url, headers=headers, timeout=5)
    except httpx2.HTTPError as exc:
        raise ServerError(
            f"nothing answers at {profile.base_url}",
            f"{type(exc).__name__}: {exc}",
            (
                f"Start it first: {profile.launch}"
                if profile.launch
                else "Start that server, or check the URL."
            )
            + " If it listens at another address now, give that one: --base-url URL."
            + " Or let the agent start one: --profile tiny (or another profile).",
        ) from exc


def endpoint_for(
    profile: ServerProfile, base_url: str, api_key: str | None, server_log: str | None = None
) -> Endpoint:
    return Endpoint(
        base_url=openai_base_url(base_url),
        api_key=api_key,
        model=profile.model if profile.kind == "attach" else profile.name,
        profile=profile.name,
        spec_mode=profile.spec_label,
        sampling=profile.sampling.request_params(),
        extra_body=dict(profile.request),
        metrics_url=api_root(base_url) + "/metrics",
        server_log=server_log,
    )


def server_log(profile: ServerProfile, port: int | None = None) -> Path:
    """The log the profile's server writes (its name is the lifecycle's)."""
    return server_log_path(state_dir() / "logs", profile.name, port or profile.port)


def last_log_line(profile: ServerProfile, port: int | None = None) -> str:
    return (log_tail(server_log(profile, port), 1) or [""])[0]


@contextmanager
def connect(
    settings: Settings,
    profile: ServerProfile,
    start_progress: StartProgress | None = None,
    build_progress: Progress | None = None,
    on_build=None,
    port: int | None = None,
    ctx_size: int | None = None,
    keep_running: bool = False,
    slots: int = 1,
    report: StartReport | None = None,
) -> Iterator[Connection]:
    """The profile's server, started (with `slots` parallel slots) or attached to, for the block's time;
    a server this started is stopped after it unless `keep_running`. `report`, instead of
    `start_progress`, also gets the server log's last line with each step of the start."""
    if report is not None:

        def start_progress(elapsed: float, phase: str) -> None:
            report(elapsed, phase, last_log_line(profile, port))

    api_key = _api_key(profile, settings)
    if profile.kind == "attach":
        _check_reachable(profile, api_key)
        yield Connection(endpoint_for(profile, profile.base_url or "", api_key), profile)
        return
    paths = machine_paths(settings, build_progress=build_progress, on_build=on_build)
    registry = ServerRegistry(state_dir())
    launched = launch(
        profile,
        paths,
        registry,
        state_dir() / "logs",
        start_progress,
        port=port,
        api_key=api_key,
        ctx_size=ctx_size,
        owned=not keep_running,
        slots=slots,
    )
    plan, handle = launched.plan, launched.handle
    ours = not handle.reused
    if handle.reused and handle.record.is_orphaned() and not keep_running:
        # Started by a run that died before it could stop it (kill -9): this run stops it instead.
        registry.adopt(handle.record.pid)
        ours = True

    def relaunch(without_draft: ServerProfile, reason: str) -> Launched:
        again = plan_launch(
            without_draft, paths, port=handle.record.port, api_key=api_key, ctx_size=ctx_size, slots=slots
        )
        started = start(again, registry, state_dir() / "logs", start_progress, owned=not keep_running,
                         draft_off=reason)  # fmt: skip
        return Launched(again, started, reason)

    connection = Connection(
        endpoint_for(launched.profile, handle.base_url, api_key, handle.record.log_path),
        launched.profile,
        handle,
        tuple(plan.notes),
        launched.draft_off,
        launched.failed_log,
        owned=ours,
        relaunch=relaunch,
    )
    try:
        yield connection
    finally:
        if ours and not keep_running and connection.handle is not None:
            stop(connection.handle, registry)
