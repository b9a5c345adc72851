"""Starting, watching and stopping llama-server from a profile.

`plan_launch` resolves everything that can be checked before a process exists (binary, model files,
flags against the binary's dialect) and runs the preflight on the GGUF headers
(agent/server/preflight.py): a file that cannot work is refused before anything starts. `start` runs
the plan as a child in its own process group with its output in a log file, waits on /health, and
turns an early exit into a diagnosis from the log. A failure of the draft alone is a `DraftError`, the
cue for the fallback in agent/connect.py. `stop` sends SIGTERM to the group, waits a grace period,
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
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from agent.errors import ServerError
from agent.server.dialect import BinaryCapabilities, read_capabilities, translate_args
from agent.server.embedded_model import embedded_key, lookup_embedded_model
from agent.server.gpu import list_devices
from agent.server.preflight import (
    DFLASH_SPEC_TYPES,
    DraftError,
    PreflightReport,
    flag_value,
    preflight,
    template_in_args,
)
from agent.server.profiles import EMBEDDED, LOOPBACK_HOSTS, ServerProfile
from agent.server.registry import ServerRecord, ServerRegistry, process_start_time
from agent.server.source_build import SERVER_BIN_VAR, installed_binary

# (seconds since start, what the server is doing)
StartProgress = Callable[[float, str], None]


def api_root(base_url: str) -> str:
    """The server's root, where llama-server's /health, /props and /metrics live."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def openai_base_url(base_url: str) -> str:
    """The base URL the OpenAI client wants: the root plus /v1 unless a path is given."""
    url = base_url.rstrip("/")
    path = url.split("://", 1)[-1].partition("/")[2]
    return url if path else url + "/v1"


@dataclass
class LaunchPlan:
    """A profile resolved against this machine: exactly what will be executed."""

    profile: ServerProfile
    binary: Path
    capabilities: BinaryCapabilities
    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    notes: list[str] = field(default_factory=list)
    preflight: PreflightReport | None = None  # None: the profile turned it off (preflight = false)

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def command_line(self) -> str:
        import shlex

        return shlex.join([str(self.binary), *self.argv])


@dataclass
class MachinePaths:
    """Where this machine keeps things; passed in so tests can point them at temp dirs."""

    models_dir: Path
    cache_dir: Path
    state_dir: Path
    embedded_binary: Callable[[], Path]
    embedded_model: Callable[[str], Path]  # an EMBEDDED_MODELS key -> the assembled GGUF
    embedded_templates: Callable[[], Path]


def resolve_binary(profile: ServerProfile, paths: MachinePaths, override: str | None = None) -> Path:
    spec = override or profile.binary
    if spec == EMBEDDED:
        return paths.embedded_binary()
    expanded = os.path.expandvars(spec)
    if "$" in expanded:
        installed = installed_binary(spec, paths.state_dir)  # `agent server install --source`'s build
        if installed is not None:
            return installed
        var = expanded[expanded.index("$") :].split("/")[0].strip("${}")
        raise ServerError(
            f"profile '{profile.name}' runs the binary named by ${var}, which is not set",
            f'The profile says binary = "{spec}".',
            f"Point it at your llama-server build, e.g. `export {var}=~/beellama.cpp/llama-server`, "
            "or pass --binary PATH"
            + (
                ", or build your checkout with `agent server install --source DIR`."
                if var == SERVER_BIN_VAR
                else "."
            ),
        )
    path = Path(expanded).expanduser()
    if not path.is_file():
        raise ServerError(
            f"llama-server binary not found: {path}",
            f"Profile '{profile.name}' names it as its binary.",
            "Build it (see the profile's description) or fix the path; LLAMA_SERVER_BIN or --binary "
            "override it.",
        )
    if not os.access(path, os.X_OK):
        raise ServerError(f"{path} is not executable", fix=f"chmod +x {path}")
    return path


def resolve_model_file(value: str, what: str, profile: ServerProfile, paths: MachinePaths) -> Path:
    key = embedded_key(value)
    if key is not None:
        try:
            lookup_embedded_model(key)
        except ServerError as exc:
            raise ServerError(
                f"the {what} of profile '{profile.name}' names an unknown embedded model: '{value}'",
                exc.why,
                exc.fix,
            ) from None
        return paths.embedded_model(key)
    path = Path(os.path.expandvars(value)).expanduser()
    if not path.is_absolute():
        path = paths.models_dir / path
    # A draft that cannot be used is the fallback's cue (agent/connect.py): the target runs without it.
    error = DraftError if what == "draft model" else ServerError
    if path.is_dir():
        raise error(
            f"the {what} of profile '{profile.name}' is a folder, not a GGUF file: {path}",
            f"The profile names '{value}'.",
            "Name the .gguf file inside that folder.",
            **(
                {"reason": f"the draft model is a folder, not a GGUF file: {path}"}
                if error is DraftError
                else {}
            ),
        )
    if not path.is_file():
        raise error(
            f"the {what} of profile '{profile.name}' is missing: {path}",
            f"The profile names '{value}', looked up in the models dir {paths.models_dir}."
            if not Path(value).expanduser().is_absolute()
            else f"The profile names {value}.",
            "Download the file there, or set AGENT_MODELS_DIR (or models_dir in config.toml) to the "
            "folder that holds it. Nothing is downloaded for you.",
            **({"reason": f"the draft model is missing: {path}"} if error is DraftError else {}),
        )
    return path


def _resolve_template(value: str, paths: MachinePaths) -> Path:
    if value.startswith(EMBEDDED + ":"):
        path = paths.embedded_templates() / value.split(":", 1)[1]
    else:
        path = Path(os.path.expandvars(value)).expanduser()
    if not path.is_file():
        raise ServerError(f"chat template file not found: {path}")
    return path


def plan_launch(
    profile: ServerProfile,
    paths: MachinePaths,
    host: str | None = None,
    port: int | None = None,
    binary: str | None = None,
    api_key: str | None = None,
    ctx_size: int | None = None,
    strict: bool = False,
) -> LaunchPlan:
    """`strict`: a preflight warning (memory that will not fit, no chat template) refuses too."""
    if profile.kind == "attach":
        raise ServerError(
            f"profile '{profile.name}' attaches to {profile.base_url}; it is never started here",
            fix=profile.launch or "Start that server yourself, then run the agent with this profile.",
        )
    if ctx_size is not None:
        profile = profile.model_copy(update={"ctx_size": ctx_size})
    bin_path = resolve_binary(profile, paths, binary)
    profile, offload_note = _offload_on_gpu(profile, bin_path, paths.cache_dir)
    model = resolve_model_file(profile.model or "", "model", profile, paths) if profile.model else None
    if model is None:
        raise ServerError(f"profile '{profile.name}' names no model", fix="Set `model = ...` in the profile.")
    spec = profile.speculative
    draft = (
        resolve_model_file(spec.draft_model, "draft model", profile, paths)
        if spec and spec.draft_model
        else None
    )
    template = _resolve_template(profile.chat_template_file, paths) if profile.chat_template_file else None
    caps = read_capabilities(bin_path, paths.cache_dir)
    host = host or profile.host
    port = port or profile.port
    raw = profile.server_args(str(model), str(draft) if draft else None, str(template) if template else None)
    raw += ["--host", host, "--port", str(port)]
    translated = translate_args(raw, caps, profile.name)
    notes = [offload_note] if offload_note else []
    if translated.notes:
        notes.append(
            f"profile written for {profile.dialect}, binary speaks {caps.dialect}: "
            + ", ".join(translated.notes)
        )
    env = {**os.environ, **profile.env}
    if api_key:
        env["LLAMA_API_KEY"] = api_key  # the environment, not argv: argv is visible to every user in ps
    if host not in LOOPBACK_HOSTS and not api_key:
        notes.append(
            f"warning: listening on {host} without an API key; anyone on the network can use this "
            "server. Set AGENT_API_KEY to require one."
        )
    plan = LaunchPlan(profile, bin_path, caps, translated.argv, env, host, port, notes)
    if profile.preflight:
        plan.preflight = preflight(
            profile.name,
            translated.argv,
            model,
            draft,
            flag_value(translated.argv, "--spec-type"),
            caps.dialect,
            binary=bin_path,
            binary_label=caps.label(),
            template_given=template is not None
            or bool(profile.chat_template)
            or template_in_args(profile.args),
            cache_dir=paths.cache_dir,
        )
        plan.preflight.raise_for_failures(strict)
        notes += plan.preflight.notes()
    return plan


def _offload_on_gpu(profile: ServerProfile, binary: Path, cache_dir: Path) -> tuple[ServerProfile, str]:
    """An embedded profile names no -ngl (it must run on any machine); on a binary with a GPU device,
    all layers go there: the embedded models are small enough for any GPU llama.cpp supports, and a
    partial offload ('auto', upstream's default) decodes at the CPU's pace for the layers left behind."""
    if profile.kind != "embedded" or profile.gpu_layers is not None or _names_ngl(profile.args):
        return profile, ""
    devices = list_devices(binary, cache_dir)
    if not devices:
        return profile, ""
    update: dict = {"gpu_layers": "all"}
    spec = profile.speculative
    if spec and spec.draft_model and spec.draft_gpu_layers is None:
        update["speculative"] = spec.model_copy(update={"draft_gpu_layers": "all"})
    return profile.model_copy(update=update), f"all layers on the GPU: {devices[0]}"


def _names_ngl(args: list[str]) -> bool:
    return any(a.split("=")[0] in ("-ngl", "--gpu-layers", "--n-gpu-layers") for a in args)


def check_profile(
    profile: ServerProfile, paths: MachinePaths, binary: str | None = None, ctx_size: int | None = None
) -> PreflightReport:
    """The preflight as `agent server check` shows it: the binary, the files and the flags too, each a
    row, and every check that can still run after one fails. It starts nothing."""
    from agent.errors import AgentError
    from agent.server.preflight import Finding

    if ctx_size is not None:
        profile = profile.model_copy(update={"ctx_size": ctx_size})
    rows: list[Finding] = []
    caps = bin_path = model = draft = template = None
    draft_problem = None
    try:
        bin_path = resolve_binary(profile, paths, binary)
        caps = read_capabilities(bin_path, paths.cache_dir)
        rows.append(Finding("binary", "ok", caps.label(), bin_path))
    except AgentError as exc:
        rows.append(Finding("binary", "fail", exc.what, key="binary", found=exc.why, fix=exc.fix))
    try:
        if not profile.model:
            raise ServerError(
                f"profile '{profile.name}' names no model", fix="Set `model = ...` in the profile."
            )
        model = resolve_model_file(profile.model, "model", profile, paths)
    except AgentError as exc:
        rows.append(Finding("model file", "fail", exc.what, key="model", found=exc.why, fix=exc.fix))
    spec = profile.speculative
    if spec and spec.draft_model:
        try:
            draft = resolve_model_file(spec.draft_model, "draft model", profile, paths)
        except AgentError as exc:
            draft_problem = Finding(
                "draft file",
                "fail",
                exc.what,
                key="speculative.draft_model",
                found=exc.why,
                fix=exc.fix,
                draft=True,
            )
    try:
        template = (
            _resolve_template(profile.chat_template_file, paths) if profile.chat_template_file else None
        )
    except AgentError as exc:
        rows.append(Finding("chat template", "fail", exc.what, key="chat_template_file", fix=exc.fix))
    argv = profile.server_args(
        str(model or "model.gguf"), str(draft) if draft else None, str(template or "") or None
    )
    if caps is not None:
        try:
            translated = translate_args(argv, caps, profile.name)
            argv = translated.argv
            rows.append(
                Finding(
                    "flags",
                    "ok",
                    f"written for {profile.dialect}, the binary speaks {caps.dialect}: "
                    + (", ".join(translated.notes) if translated.notes else "accepted as written"),
                )
            )
        except ServerError as exc:
            rows.append(Finding("flags", "fail", exc.what, found=exc.why, fix=exc.fix))
    if model is None:
        report = PreflightReport(profile.name)
        if draft_problem is not None:
            report.findings.append(draft_problem)
    else:
        report = preflight(
            profile.name,
            argv,
            model,
            draft,
            flag_value(argv, "--spec-type") or (spec.type if spec else None),
            caps.dialect if caps else "",
            binary=bin_path,
            binary_label=caps.label() if caps else "",
            template_given=template is not None
            or bool(profile.chat_template)
            or template_in_args(profile.args),
            cache_dir=paths.cache_dir,
            draft_problem=draft_problem,
        )
    report.findings[:0] = rows
    return report


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
    log_path = log_dir / f"{plan.profile.name}-{plan.port}.log"
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
                + _tail_text(log_path),
                f"A large model may need more time: raise startup_timeout in the profile. Log: {log_path}",
            )
        progress(elapsed, _loading_phase(log_path) or ("loading the model" if status == 503 else "starting"))
        time.sleep(0.2)


def dflash_fix(dialect: str) -> str:
    """What to do about a draft the DFlash loader refused, naming the binary that loads each kind."""
    own = {"upstream": "dflash", "beellama-0.1": "dflash-draft"}.get(dialect)
    which = (
        f"This binary ({dialect}) loads DFlash drafts with general.architecture '{own}'"
        if own
        else f"This binary ({dialect}) loads DFlash drafts of either architecture, dflash or dflash-draft"
    )
    return (
        "speculative.draft_model must be a DFlash draft GGUF made for this target model. "
        f"{which}; 'dflash' files load on upstream llama.cpp and BeeLlama 0.2+, 'dflash-draft' files "
        "(the seed's Gemma 4 draft) on BeeLlama 0.1+. `agent server check PROFILE` reads the file's header."
    )


# BeeLlama 0.1 logs this at load for a draft without DFlash target layers, then answers every real
# request with HTTP 500 "Invalid input batch" (FACTS.md); a 2-token request does not show it.
_NO_TARGET_LAYERS = "n_target_layers=0"


def _check_first_completion(plan: LaunchPlan, log_path: Path | None = None) -> None:
    """A DFlash server is only known good once it has drafted (FACTS.md: BeeLlama accepts a draft that
    is not a DFlash model, turns healthy, then answers 500 "Invalid input batch" to every request)."""
    spec = plan.profile.speculative
    if not spec or not (set(spec.type.split(",")) & DFLASH_SPEC_TYPES):
        return
    hit = _log_line(log_path, _NO_TARGET_LAYERS, also="dflash") if log_path else None
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


def _log_line(path: Path, needle: str, also: str = "") -> str | None:
    """The first line of the log holding `needle` (and `also`, in any case); the load is at its start."""
    try:
        with path.open("rb") as f:
            text = f.read(8 * 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
    return next((line for line in text.splitlines() if needle in line and also.lower() in line.lower()), None)


def log_tail(path: Path, lines: int = 15) -> list[str]:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            return f.read().decode("utf-8", "replace").splitlines()[-lines:]
    except OSError:
        return []


def _tail_text(path: Path, lines: int = 15) -> str:
    return "\n".join(f"  | {line}" for line in log_tail(path, lines))


def _loading_phase(log_path: Path) -> str:
    for line in reversed(log_tail(log_path, 5)):
        for marker in ("load_model:", "load_tensors:", "llama_server:", "srv "):
            if marker in line:
                return line.split(marker, 1)[1].strip()[:80]
    return ""


# A line in the log of a server that exited while starting, what it means for the user, what to do
# ("dflash": the fix names the binary that loads each DFlash architecture), and whether the draft alone
# is at fault (a DraftError: the fallback can run the target without it). Draft lines come first: the
# generic "failed to load model" line follows them in the same log.
_DIAGNOSES: list[tuple[str, str, str, bool]] = [
    ("DFlash model has no target_layer_ids", "the draft model is not a DFlash model", "dflash", True),
    (
        "DFlash model requires 'target_layers'",
        "the DFlash draft has no target_layers in its metadata",
        "dflash",
        True,
    ),
    (
        "unknown model architecture: 'dflash-draft'",
        "this binary cannot load a dflash-draft model (BeeLlama 0.1's DFlash format)",
        "dflash",
        True,
    ),
    (
        "unknown model architecture: 'dflash'",
        "this binary cannot load a dflash model (upstream llama.cpp's DFlash format)",
        "dflash",
        True,
    ),
    (
        "vocabs are not compatible",
        "the draft's tokenizer does not match the target's",
        "A draft must share the target's tokenizer: pick one of the same model family. "
        "`agent server check PROFILE` says where they differ.",
        True,
    ),
    (
        "failed to load draft model",
        "llama-server could not load the draft model",
        "Check that speculative.draft_model is a complete GGUF this binary supports "
        "(`agent server check PROFILE` reads its header).",
        True,
    ),
    (
        "unknown speculative type",
        "this llama-server does not know the speculative type",
        "Use a --spec-type the binary lists in its --help, or a binary that has it.",
        False,
    ),
    (
        "invalid argument",
        "llama-server refused an argument",
        "Remove or fix that flag in the profile.",
        False,
    ),
    (
        "error while handling argument",
        "llama-server refused an argument",
        "Remove or fix that flag in the profile.",
        False,
    ),
    ("couldn't bind", "the port is already in use", "Pass --port to use another port.", False),
    (
        "out of memory",
        "the model does not fit in memory",
        "Lower ctx_size or gpu_layers in the profile, or use a smaller quantization.",
        False,
    ),
    (
        "failed to allocate",
        "the model does not fit in memory",
        "Lower ctx_size or gpu_layers in the profile, or use a smaller quantization.",
        False,
    ),
    (
        "failed to load model",
        "llama-server could not load the model file",
        "Check that the file is a complete GGUF this build supports (a partial download fails this way).",
        False,
    ),
]


def diagnose_exit(plan: LaunchPlan, code: int, log_path: Path) -> ServerError:
    lines = log_tail(log_path, 40)
    signal_name = ""
    if code < 0:
        signal_name = f" (killed by {signal.Signals(-code).name})"
    elif code == 134:
        signal_name = " (SIGABRT: an assertion failed)"
    for needle, meaning, fix, draft in _DIAGNOSES:
        hit = next((line for line in reversed(lines) if needle.lower() in line.lower()), None)
        if hit:
            what = f"llama-server for profile '{plan.profile.name}' exited while starting: {meaning}"
            why = f"Exit code {code}{signal_name}. The log says:\n  | {hit.strip()}"
            cause = next((line for line in reversed(lines) if "error loading model" in line), None)
            if cause and cause is not hit:  # what the loader itself objected to, e.g. a missing key
                why += f"\n  | {cause.strip()}"
            fix = f"{dflash_fix(plan.capabilities.dialect) if fix == 'dflash' else fix}\nFull log: {log_path}"
            if draft and plan.profile.speculative is not None:
                return DraftError(what, why, fix, reason=meaning, log_path=str(log_path))
            return ServerError(what, why, fix)
    return ServerError(
        f"llama-server for profile '{plan.profile.name}' exited with code {code}{signal_name} while starting",
        "Last lines of its log:\n" + _tail_text(log_path),
        f"Full log: {log_path}",
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
