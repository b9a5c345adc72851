"""`agent doctor`: what this machine has, what each profile needs, and what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

from rich.markup import escape

from agent import __version__
from agent.errors import AgentError
from agent.frontends import console
from agent.server import profile_status, select_build
from agent.server.build import build_info
from agent.server.dialect import read_capabilities
from agent.server.embedded_model import EMBEDDED_MODELS, embedded_model_ready, embedded_model_status
from agent.server.gpu import announce, list_devices
from agent.server.lifecycle import port_is_free
from agent.server.profiles import load_profiles
from agent.server.registry import ServerRegistry
from agent.server.source_build import SERVER_BIN_VAR, recorded_server
from agent.settings.config import PROJECT_CONFIG, Settings, cache_dir, config_dir, state_dir
from agent.settings.trust import project_files, trusted_by

OK, WARN, BAD = "[green]✓[/]", "[yellow]![/]", "[red]✗[/]"


def _line(mark: str, what: str, detail: str = "") -> None:
    # `what` and `detail` are plain text: Rich would take "spec-agent[coder]" for a style and drop it.
    what, detail = escape(what), escape(detail)
    console.out.print(f" {mark} {what}" + (f"  [dim]{detail}[/]" if detail else ""))


def _size(path: Path) -> str:
    if not path.exists():
        return "empty"
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return f"{total / 1e6:.0f} MB"


def _gpu() -> tuple[str, str, str]:
    if shutil.which("nvidia-smi"):
        try:
            result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return WARN, "nvidia-smi did not answer", str(exc)
        if result.returncode == 0 and result.stdout.strip():
            return OK, "GPU: " + "; ".join(result.stdout.strip().splitlines()), ""
        return WARN, "nvidia-smi is installed but lists no GPU", result.stderr.strip()[:200]
    if sys.platform == "darwin":
        return OK, "GPU: Apple Metal (llama.cpp uses it by default)", ""
    return (
        WARN,
        "no GPU visible: llama-server runs on the CPU",
        "fine for the embedded profiles (coder, tiny)",
    )


def _installed_from_source(overridden: bool) -> int:
    """The build `agent server install --source` recorded, and its dialect read from the binary itself.
    Returns the number of problems found."""
    try:
        record = recorded_server(state_dir())
    except AgentError as exc:
        _line(BAD, exc.what, exc.fix)
        return 1
    if record is None:
        if not overridden:
            _line(
                WARN,
                f"{SERVER_BIN_VAR} is not set and no llama-server was built from a checkout",
                "the gemma4/qwen profiles need your BeeLlama build: `agent server install --source DIR`",
            )
        return 0
    used = f"overridden by {SERVER_BIN_VAR}" if overridden else f"runs the ${SERVER_BIN_VAR} profiles"
    what = f"your llama-server ({used}): {record.binary}"
    if not record.binary.is_file():
        _line(BAD, what, f"gone; `agent server install --source {record.source}` builds it again")
        return 0 if overridden else 1
    try:
        caps = read_capabilities(record.binary, cache_dir())
    except (AgentError, OSError) as exc:
        _line(BAD, what, str(exc).splitlines()[0])
        return 0 if overridden else 1
    backend = f"cuda (arch {record.cuda_arch})" if record.backend == "cuda" else record.backend
    _line(
        OK,
        what,
        f"dialect {caps.dialect}, {backend}, built from {record.source} at {record.identity}, "
        f"spec types: {', '.join(caps.spec_types)}",
    )
    return 0


def cmd_doctor(args: Namespace, settings: Settings) -> int:
    problems = 0
    console.out.print(f"[bold]spec-agent {__version__}[/] on Python {sys.version.split()[0]}")

    console.out.print("\n[bold]llama-server[/]")
    try:
        build = select_build(settings)
    except AgentError as exc:  # build = "cuda" without nvcc
        problems += 1
        build = None
        _line(BAD, f"embedded build ({settings.build}): {exc.what}", exc.fix)
    for note in build.choice.notes if build else ():
        _line(WARN, note)
    if build and build.is_installed():
        info = build_info(build)
        _line(
            OK,
            f"embedded build in use: {build.choice.label}, {build.binary}",
            f"{info.get('version', '')}, built in {info.get('build_seconds')} s",
        )
        try:
            devices = list_devices(build.binary, cache_dir())
        except AgentError as exc:
            devices, problems = [], problems + 1
            _line(BAD, "its devices: --list-devices failed", exc.what)
        else:
            _line(OK, "its devices: " + ("; ".join(devices) or "CPU only"))
    elif build:
        _line(
            WARN,
            f"embedded llama-server ({build.choice.label}) not built yet",
            f"`agent server install`: {announce(build.choice)}",
        )
    env_bin = os.environ.get(SERVER_BIN_VAR)
    if env_bin:
        path = Path(env_bin).expanduser()
        try:
            caps = read_capabilities(path, cache_dir())
            _line(
                OK,
                f"{SERVER_BIN_VAR}: {path}",
                f"dialect {caps.dialect}, spec types: {', '.join(caps.spec_types)}",
            )
        except (AgentError, OSError) as exc:
            problems += 1
            _line(BAD, f"{SERVER_BIN_VAR}: {path}", str(exc).splitlines()[0])
    problems += _installed_from_source(overridden=bool(env_bin))
    mark, what, detail = _gpu()
    _line(mark, what, detail)

    console.out.print("\n[bold]models[/]")
    for model in EMBEDDED_MODELS.values():
        status = embedded_model_status(cache_dir(), model.key)
        mark = OK if embedded_model_ready(cache_dir(), model.key) else WARN
        _line(mark, f"embedded {model.key} model: {model.file_name}", status)
    models_dir = settings.resolved_models_dir()
    _line(OK if models_dir.is_dir() else WARN, f"models dir: {models_dir}", "AGENT_MODELS_DIR or models_dir")

    console.out.print("\n[bold]profiles[/]")
    registry = ServerRegistry(state_dir())
    ours = {r.port: r for r in registry.running()}
    try:
        profiles = load_profiles(Path.cwd())
    except AgentError as exc:
        problems += 1
        _line(BAD, "a profile does not load", str(exc))
        profiles = {}
    for profile in profiles.values():
        status = profile_status(profile, settings)
        mark = OK if status in ("ready", "attach", "builds on first start") else WARN
        detail = profile.base_url or ""
        if profile.kind != "attach":
            if profile.port in ours:
                detail = f":{profile.port} runs our {ours[profile.port].profile}"
            elif not port_is_free(profile.host, profile.port):
                mark, detail = WARN, f":{profile.port} is taken by another program"
            else:
                detail = f":{profile.port} free"
        _line(mark, f"{profile.name}: {status}", detail)

    console.out.print("\n[bold]state[/]")
    for record in ours.values():
        _line(OK, f"running: {record.profile} at {record.base_url}", f"pid {record.pid}")
    _line(OK, f"cache: {cache_dir()}", _size(cache_dir()))
    _line(OK, f"state: {state_dir()}", "servers, logs, sessions, telemetry")
    here = Path.cwd()
    by = trusted_by(here)
    for path in [config_dir() / "config.toml", here / PROJECT_CONFIG]:
        if not path.is_file():
            _line("[dim]-[/]", f"config: {path}", "not present")
        else:
            ignored = path == here / PROJECT_CONFIG and not by
            _line(
                WARN if ignored else OK,
                f"config: {path}",
                "ignored: this folder is not trusted" if ignored else "",
            )
    project = ", ".join(str(f.relative_to(here)) for f in project_files(here))
    if by:
        through = "" if by == here.resolve() else f" (through {by})"
        _line(OK, f"this folder is trusted{through}", f"its project files apply: {project or 'none here'}")
    elif project:
        _line(WARN, "this folder is not trusted", f"ignored: {project}; `agent trust` uses them")
    else:
        _line("[dim]-[/]", "this folder is not trusted", "it has no project files")
    _line(OK, f"default profile: {settings.profile}, approval: {settings.approval}")
    return 1 if problems else 0
