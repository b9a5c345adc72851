"""The action protocols as the front ends see them, through the session layer: their names (the CLI's
choices, read without importing a protocol, so `agent --help` stays fast) and a line on each (ACP's
picker). The list itself is agent/protocols/registry.py's."""

from __future__ import annotations

from agent.protocols.registry import protocol_names, protocols

__all__ = ["described", "protocol_names"]


def described() -> list[tuple[str, str]]:
    """(name, the first line of its class's docstring) for each protocol, the default first."""
    return [(name, (cls.__doc__ or "").strip().splitlines()[0]) for name, cls in protocols().items()]
