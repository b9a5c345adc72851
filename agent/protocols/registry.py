"""The action protocols by the name a profile gives (`actions = "blocks"`), found by their folders: each
subpackage of agent/protocols whose `protocol` module names a `PROTOCOL` class is one. A new protocol
is a new folder; nothing outside it names it (tests/test_layers.py keeps the core from doing so)."""

from __future__ import annotations

import pkgutil
from functools import cache
from importlib import import_module
from pathlib import Path

import agent.protocols
from agent.protocols.base import ActionProtocol


@cache
def protocols() -> dict[str, type]:
    """{mode: the protocol's class}, for every protocol folder."""
    found: dict[str, type] = {}
    for module in pkgutil.iter_modules(agent.protocols.__path__):
        if module.ispkg:
            cls = getattr(import_module(f"agent.protocols.{module.name}.protocol"), "PROTOCOL", None)
            if cls is not None:
                found[cls.mode] = cls
    return found


def protocol_class(mode: str) -> type:
    try:
        return protocols()[mode]
    except KeyError:
        raise ValueError(f"no action protocol '{mode}': there are {', '.join(sorted(protocols()))}") from None


def make_actions(mode: str, workspace: Path | None = None) -> ActionProtocol:
    return protocol_class(mode)(workspace or Path.cwd())


def system_prompt_of(mode: str) -> str:
    return protocol_class(mode).system_prompt
