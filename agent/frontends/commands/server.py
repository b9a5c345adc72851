"""`agent server ...`: install, profiles, check, start, status, stop, logs."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from argparse import Namespace
from pathlib import Path

from rich.markup import escape

from agent.errors import AgentError, ServerError
from agent.frontends import console
from agent.server import machine_paths, profile_status, select_build, select_source_build
from agent.server.build import build_info, install
from agent.server.gpu import announce, choose_build
from agent.server.launch_plan import check_profile, plan_launch
from agent.server.lifecycle import health, start, stop
from agent.server.preflight.report import DraftError, PreflightReport
from agent.server.profiles import ServerProfile, get_profile, load_profiles
from agent.server.registry import ServerRecord, ServerRegistry
from agent.server.source_build import (
    SERVER_BIN_VAR,
    build_folder,
    inspect_checkout,
    install_source,
    names_server_bin_var,
    record_server,
)
from agent.settings.config import Settings, cache_dir, state_dir
from agent.settings.trust import warn_untrusted


def _registry() -> ServerRegistry:
    return ServerRegistry(state_dir())


def cmd_install(args: Namespace, settings: Settings) -> int:
    requested = getattr(args, "backend", None)
    if getattr(args, "source", None):
        return _install_source(args, settings, requested)
    build = select_build(settings, requested, tuple(args.cmake_arg))
    for line in build.choice.notes:
        console.note(line)
    if requested and requested != settings.build:
        try:
            runs_get = choose_build(settings.build, tuple(settings.cmake_args)).backend
        except ServerError:  # the runs' own choice cannot be built here; their start will say why
            runs_get = settings.build
        if runs_get != build.backend:
            console.note(
                f'note: runs use the {runs_get} build unless told otherwise: set build = "{build.backend}" '
                f"in the config, or AGENT_BUILD={build.backend}"
            )
    if build.is_installed() and not args.force:
        info = build_info(build)
        console.out.print(f"llama-server ({build.choice.label}) is already built: {build.binary}")
        console.note(f"{info.get('source', '')}  {' '.join(build.cmake_args)}  ({info.get('version', '')})")
        return 0
    console.note(announce(build.choice, args.jobs))
    console.note(f"into {build.root} (log: {build.log})")
    # The bar stops first, then the note on an interrupt is printed below it.
    with (
        _interruptible(build.log, "the next `agent server install` starts it again"),
        console.build_progress() as progress,
    ):
        install(build, cache_dir(), progress, jobs=args.jobs, force=args.force)
    console.out.print(
        f"built {build.binary} ({build.choice.label}) in {build_info(build).get('build_seconds', '?')} s"
    )
    return 0


def _install_source(args: Namespace, settings: Settings, requested) -> int:
    """`agent server install --source DIR`: the user's checkout, built out of tree and recorded."""
    checkout = inspect_checkout(Path(args.source))
    build = select_source_build(settings, checkout, requested, tuple(args.cmake_arg))
    for line in build.choice.notes:
        console.note(line)
    if build.is_installed() and not args.force:
        console.out.print(
            f"llama-server from {checkout.root} ({checkout.label}, {build.choice.label}) is already built: "
            f"{build.binary}"
        )
    else:
        folder = build_folder(cache_dir(), checkout, build)
        console.note(f"{checkout.root} ({checkout.label}): {announce(build.choice, args.jobs)}")
        console.note(f"build folder {folder} (kept for the next rebuild; the checkout is left untouched)")
        console.note(f"log: {build.log}")
        resume = f"`agent server install --source {checkout.root}` continues from where it stopped"
        with _interruptible(build.log, resume), console.build_progress() as progress:
            install_source(build, checkout, cache_dir(), progress, jobs=args.jobs, force=args.force)
        seconds = build_info(build).get("build_seconds", "?")
        console.out.print(f"built {build.binary} ({build.choice.label}) in {seconds} s")
    record = record_server(state_dir(), build, checkout)
    console.out.print(f"dialect {record.dialect}; {record.version}")
    console.out.print(
        f'recorded for the profiles whose binary is "${SERVER_BIN_VAR}" '
        f"({', '.join(_bin_var_profiles()) or 'none here'})"
    )
    if os.environ.get(SERVER_BIN_VAR):
        console.note(
            f"warning: {SERVER_BIN_VAR} is set ({os.environ[SERVER_BIN_VAR]}) and wins over this build; "
            f"unset it to run this one"
        )
    return 0


def _bin_var_profiles() -> list[str]:
    try:
        profiles = load_profiles(Path.cwd())
    except AgentError:
        return []
    return [p.name for p in profiles.values() if names_server_bin_var(p.binary)]


@contextlib.contextmanager
def _interruptible(log: Path, resume: str):
    """Ctrl+C or SIGTERM during a build: the build's process group is stopped (agent/server/build.py),
    nothing is recorded, and the user is told where things stand before the CLI's last line
    ("interrupted", or "terminated (SIGTERM)")."""
    try:
        with console.sigterm_as_interrupt():
            yield
    except KeyboardInterrupt:
        console.note(f"build interrupted: its processes are stopped and nothing was recorded; {resume}")
        console.note(f"the log so far: {log}")
        raise


def cmd_profiles(args: Namespace, settings: Settings) -> int:
    warn_untrusted(Path.cwd())
    profiles = load_profiles(Path.cwd())
    running = {r.profile: r for r in _registry().running()}
    table = console.table("profile", "kind", "speculative", "ctx", "port", "status", "description")
    for profile in profiles.values():
        status = "running" if profile.name in running else profile_status(profile, settings)
        port = str(profile.port) if profile.kind != "attach" else (profile.base_url or "")
        table.add_row(
            profile.name,
            profile.kind,
            profile.spec_label,
            str(profile.ctx_size or "-"),
            port,
            status,
            profile.description,
        )
    console.out.print(table)
    return 0


STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def preflight_table(report: PreflightReport):
    table = console.table("check", "result", "detail", left=("check", "result", "detail"))
    for finding in report.findings:
        detail = [finding.summary]
        if finding.status in ("fail", "warn"):
            detail += [
                f"{label}: {value}"
                for label, value in (
                    ("file", finding.file),
                    ("key read", finding.key),
                    ("expected", finding.expected),
                    ("found", finding.found),
                    ("do", finding.fix),
                )
                if value
            ]
        elif finding.file is not None and finding.check.endswith("file"):
            detail.append(str(finding.file))
        style = STATUS_STYLE[finding.status]
        table.add_row(
            finding.check, f"[{style}]{finding.status}[/]", escape("\n".join(str(d) for d in detail))
        )
    return table


def cmd_check(args: Namespace, settings: Settings) -> int:
    """The preflight as a table; exit 0 when the profile can launch, else the refusal (nothing starts)."""
    warn_untrusted(Path.cwd())
    profile = get_profile(args.profile, Path.cwd())
    if profile.kind == "attach":
        raise AgentError(
            f"profile '{profile.name}' attaches to {profile.base_url}: there is nothing here to check",
            fix="`agent doctor` checks that the server answers.",
        )
    with console.build_progress() as progress:
        paths = machine_paths(settings, build_progress=progress)
        report = check_profile(profile, paths, binary=args.binary, ctx_size=args.ctx_size)
    console.out.print(f"[bold]{profile.name}[/]  {profile.description}")
    console.out.print(preflight_table(report))
    console.out.print(f"[dim]GGUF headers read in {report.seconds:.2f} s[/]")
    error = report.error(args.strict)
    if error is not None:
        if isinstance(error, DraftError) and profile.fallback:
            console.note(
                f"warning: the draft fails; `agent run` and the TUI would run '{profile.name}' without it "
                "(fallback = false in the profile refuses instead)"
            )
        raise error
    if report.warnings:
        console.note(f"{len(report.warnings)} warning(s); --strict refuses them")
    return 0


def cmd_start(args: Namespace, settings: Settings) -> int:
    from agent.session.connect import draft_off_message, keep_failed_log

    warn_untrusted(Path.cwd())
    profile = get_profile(args.profile, Path.cwd())
    draft_off = ""
    while True:
        # The same fallback as every other front end's (agent/session/connect.py:launch), with the build's bar
        # shown while planning and the start's status while loading.
        chosen = profile.model_copy(update={"speculative": None}) if draft_off else profile
        try:
            plan = _plan(chosen, settings, args)
            for line in plan.notes:
                console.note(line)
            console.note(f"$ {plan.command_line()}")
            with console.start_progress(f"{profile.name}") as progress:
                handle = start(
                    plan,
                    _registry(),
                    state_dir() / "logs",
                    progress,
                    timeout=args.timeout,
                    draft_off=draft_off,
                )
            break
        except DraftError as error:
            if draft_off or profile.speculative is None or not profile.fallback:
                raise
            draft_off = error.reason
            failed_log = keep_failed_log(error.log_path)
            console.note(f"warning: {error.what}")
            console.note(f"warning: {draft_off_message(profile.name, draft_off, failed_log)}")
    if handle.record.draft_off and not draft_off:
        console.note(f"warning: {draft_off_message(profile.name, handle.record.draft_off)}")
    if handle.reused:
        console.out.print(f"{profile.name} is already running at {handle.base_url} (pid {handle.record.pid})")
    else:
        took = time.time() - handle.record.started_at
        console.out.print(
            f"{profile.name} ready at {handle.base_url} in {took:.1f} s (pid {handle.record.pid})"
            + (" without its draft" if draft_off else "")
        )
        console.note(f"log: {handle.record.log_path}   stop: agent server stop {profile.name}")
    if args.foreground:
        try:
            _follow(Path(handle.record.log_path), lambda: handle.record.is_alive())
        except KeyboardInterrupt:
            pass
        finally:
            stop(handle, _registry())
            console.note(f"stopped {profile.name}")
    return 0


def _plan(profile: ServerProfile, settings: Settings, args: Namespace):
    # The build, if one is needed, shows its own progress bar.
    with console.build_progress() as progress:
        paths = machine_paths(
            settings,
            build_progress=progress,
            on_build=console.note,
        )
        return plan_launch(
            profile,
            paths,
            host=args.host,
            port=args.port,
            binary=args.binary,
            api_key=settings.api_key,
            ctx_size=getattr(args, "ctx_size", None),
            strict=getattr(args, "strict", False),
        )


def cmd_status(args: Namespace, settings: Settings) -> int:
    records = _registry().running()
    if args.json:
        import json

        print(json.dumps([{**r.__dict__, "health": health(r.base_url)[0]} for r in records], indent=2))
        return 0
    if not records:
        console.out.print("no servers running (start one with `agent server start PROFILE`)")
        return 0
    table = console.table("profile", "url", "pid", "up", "health", "log")
    for r in records:
        code, body = health(r.base_url)
        state = {200: "ok", 503: "loading"}.get(code, f"{code} {body[:30]}" if code else "no answer")
        table.add_row(r.profile, r.base_url, str(r.pid), console.format_age(r.started_at), state, r.log_path)
    console.out.print(table)
    return 0


def _select(records: list[ServerRecord], name: str | None, verb: str) -> list[ServerRecord]:
    if name:
        chosen = [r for r in records if r.profile == name or str(r.port) == name]
        if not chosen:
            running = ", ".join(r.profile for r in records) or "none"
            raise AgentError(f"no server of ours named '{name}' is running", f"Running: {running}.")
        return chosen
    if len(records) > 1:
        names = ", ".join(f"{r.profile} (:{r.port})" for r in records)
        raise AgentError(
            f"several servers are running: {names}",
            fix=f"Say which: `agent server {verb} PROFILE`" + (", or --all." if verb == "stop" else "."),
        )
    return records


def cmd_stop(args: Namespace, settings: Settings) -> int:
    registry = _registry()
    records = registry.running()
    if not records:
        console.out.print("no servers of ours are running")
        return 0
    chosen = records if args.all else _select(records, args.profile, "stop")
    for record in chosen:
        stop(record, registry, grace=args.grace)
        console.out.print(f"stopped {record.profile} (pid {record.pid}, :{record.port})")
    return 0


def cmd_logs(args: Namespace, settings: Settings) -> int:
    records = _registry().running()
    if records and (args.profile or len(records) == 1):
        record = _select(records, args.profile, "logs")[0]
        path, alive = Path(record.log_path), record.is_alive
    else:
        # Nothing running: show the newest log of the profile (or of any), so a failed start can be read.
        pattern = f"{args.profile}-*.log" if args.profile else "*.log"
        logs = sorted((state_dir() / "logs").glob(pattern), key=lambda p: p.stat().st_mtime)
        if not logs:
            raise AgentError("no server logs yet", fix="Start a server with `agent server start PROFILE`.")
        path, alive = logs[-1], (lambda: False)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    sys.stdout.write("\n".join(lines[-args.lines :]) + "\n")
    sys.stdout.flush()
    if args.follow:
        with contextlib.suppress(KeyboardInterrupt):
            _follow(path, alive, from_end=True)
    return 0


def _follow(path: Path, alive, from_end: bool = True) -> None:
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        if from_end:
            handle.seek(0, os.SEEK_END)
        while True:
            line = handle.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            elif not alive():
                raise ServerError("the server has exited", f"Its log: {path}")
            else:
                time.sleep(0.2)
