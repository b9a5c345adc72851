"""The action protocols by the name a profile gives (`actions = "blocks"`), found by their folders: each
subpackage of agent/protocols with a `NAME` (in its `__init__`, cheap to read: the CLI's choices) and a
`protocol` module ending in `PROTOCOL = TheClass` is one. A new protocol is a new folder. This is the one
list of their names: the CLI's choices, task files and profiles are checked against it, and nothing
below the session layer names a protocol (tests/test_layers.py)."""

from __future__ import annotations

import pkgutil
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

import agent.protocols

if TYPE_CHECKING:
    from agent.core.protocol import ActionProtocol


@cache
def _folders() -> dict[str, str]:
    """{name: folder}, importing only each folder's __init__."""
    found: dict[str, str] = {}
    for module in pkgutil.iter_modules(agent.protocols.__path__):
        name = (
            getattr(import_module(f"agent.protocols.{module.name}"), "NAME", None) if module.ispkg else None
        )
        if name is not None:
            found[name] = module.name
    return found


def protocol_names() -> list[str]:
    """The names, native tool calls first (the default, as a profile that names none gets it)."""
    return sorted(_folders(), reverse=True)  # tools, blocks


@cache
def protocols() -> dict[str, type]:
    """{name: the protocol's class}, for every protocol folder, in `protocol_names()`'s order."""
    found: dict[str, type] = {}
    for name in protocol_names():
        cls = import_module(f"agent.protocols.{_folders()[name]}.protocol").PROTOCOL
        assert cls.mode == name, f"agent/protocols/{_folders()[name]}: PROTOCOL.mode is not NAME"
        found[name] = cls
    return found


def protocol_class(name: str) -> type:
    try:
        return protocols()[name]
    except KeyError:
        raise ValueError(f"no action protocol '{name}': there are {', '.join(protocol_names())}") from None


def make_actions(name: str, workspace: Path | None = None) -> ActionProtocol:
    return protocol_class(name)(workspace or Path.cwd())
