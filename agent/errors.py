"""The one exception type for errors the user must fix, shown once and plainly."""

from __future__ import annotations


class AgentError(Exception):
    """What failed, why, and what to do about it.

    `exit_code` follows `agent run`'s convention: 2 for usage and configuration, 4 for the server,
    5 for a workspace another agent holds (agent/store/lock.py).
    """

    exit_code = 2

    def __init__(self, what: str, why: str = "", fix: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.fix = fix

    def __str__(self) -> str:
        parts = [self.what]
        if self.why:
            parts.append(self.why)
        if self.fix:
            parts.append(self.fix)
        return "\n".join(parts)


class ConfigError(AgentError):
    """A settings file, a profile or a task file that does not validate."""


class ServerError(AgentError):
    """llama-server could not be found, built, started or reached."""

    exit_code = 4
