"""The action protocols as the front ends see them, through the session layer: their names (the CLI's
choices, read without importing a protocol, so `agent --help` stays fast) and a line on each (ACP's
picker). The list itself is agent/protocols/registry.py's."""

from __future__ import annotations

from typing import Any

from agent.protocols.registry import protocol_names, protocols

__all__ = ["acted_by", "described", "protocol_names"]


def described() -> list[tuple[str, str]]:
    """(name, the first line of its class's docstring) for each protocol, the default first."""
    return [(name, (cls.__doc__ or "").strip().splitlines()[0]) for name, cls in protocols().items()]


def acted_by(events: list[dict[str, Any]]) -> str | None:
    """The protocol a recorded session's model acted through, which the transcript does not name: native
    calls are kept in its assistant messages, others were read from its text. None when it never acted."""
    native = any(e.get("tool_calls") for e in events if e["type"] == "assistant.message")
    if not native and not any(e["type"] == "tool.call" for e in events):
        return None
    return next(name for name, cls in protocols().items() if cls.native_calls == native)
