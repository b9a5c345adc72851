"""From a profile name (or `--base-url`) to a model endpoint: start the server or attach to one.

A server started here is stopped when the `connect()` block ends; one that was already running
(ours from another terminal, or anyone's behind an attach profile) is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

from agent.config import Settings, state_dir
from agent.errors import ServerError
from agent.llm import Endpoint
from agent.server import machine_paths
from agent.server.build import Progress
from agent.server.lifecycle import (
    ServerHandle,
    StartProgress,
    api_root,
    openai_base_url,
    plan_launch,
    start,
    stop,
)
from agent.server.profiles import ServerProfile, attach_profile, get_profile
from agent.server.registry import ServerRegistry


@dataclass
class Connection:
    endpoint: Endpoint
    profile: ServerProfile
    handle: ServerHandle | None = None  # None when attached
    notes: tuple[str, ...] = ()

    @property
    def started_here(self) -> bool:
        return self.handle is not None and not self.handle.reused


def resolve_profile(
    settings: Settings, profile: str | None, base_url: str | None, workspace: Path
) -> ServerProfile:
    url = base_url or (settings.base_url if not profile else None)
    if url:
        return attach_profile(url)
    return get_profile(profile or settings.profile, workspace)


def _api_key(profile: ServerProfile, settings: Settings) -> str | None:
    if profile.api_key_env and os.environ.get(profile.api_key_env):
        return os.environ[profile.api_key_env]
    return settings.api_key


def _check_reachable(profile: ServerProfile, api_key: str | None) -> None:
    url = openai_base_url(profile.base_url or "") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
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
            + " Or let the agent start one: --profile tiny (or another profile).",
        ) from exc


def endpoint_for(profile: ServerProfile, base_url: str, api_key: str | None) -> Endpoint:
    return Endpoint(
        base_url=openai_base_url(base_url),
        api_key=api_key,
        model=profile.model if profile.kind == "attach" else profile.name,
        profile=profile.name,
        spec_mode=profile.spec_label,
        sampling=profile.sampling.request_params(),
        extra_body=dict(profile.request),
        metrics_url=api_root(base_url) + "/metrics",
    )


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
) -> Iterator[Connection]:
    api_key = _api_key(profile, settings)
    if profile.kind == "attach":
        _check_reachable(profile, api_key)
        yield Connection(endpoint_for(profile, profile.base_url or "", api_key), profile)
        return
    paths = machine_paths(settings, build_progress=build_progress, on_build=on_build)
    plan = plan_launch(profile, paths, port=port, api_key=api_key, ctx_size=ctx_size)
    registry = ServerRegistry(state_dir())
    handle = start(plan, registry, state_dir() / "logs", start_progress, owned=not keep_running)
    ours = not handle.reused
    if handle.reused and handle.record.is_orphaned() and not keep_running:
        # Started by a run that died before it could stop it (kill -9): this run stops it instead.
        registry.adopt(handle.record.pid)
        ours = True
    try:
        yield Connection(endpoint_for(profile, handle.base_url, api_key), profile, handle, tuple(plan.notes))
    finally:
        if ours and not keep_running:
            stop(handle, registry)
