"""llama-server: locating or building it, profiles, launch, health and stop.

This package knows nothing of the agent loop or of any front end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.config import Settings, cache_dir, state_dir
from agent.errors import ServerError
from agent.server.build import Progress, embedded_build, install
from agent.server.embedded_model import TINY, embedded_model_path
from agent.server.lifecycle import MachinePaths


def machine_paths(
    settings: Settings, build_progress: Progress | None = None, on_build: Callable[[], None] | None = None
) -> MachinePaths:
    """This machine's folders, with the embedded binary built on first use (announced via `on_build`)."""
    cache = cache_dir()
    build = embedded_build(cache, settings.llama_cpp_version, settings.cmake_args)

    def embedded_binary() -> Path:
        if not build.is_installed():
            if on_build:
                on_build()
            install(build, cache, build_progress or (lambda _f, _m: None))
        return build.binary

    def embedded_templates() -> Path:
        embedded_binary()
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
