"""The one exception type for errors the user must fix, shown once and plainly, and the exit codes
they and every other ending of a run give; and the failures of a model request (`LLMError` and its
kinds), which the model client raises (agent/core/llm.py:map_error) and every front end may meet."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwinding as Ctrl+C does, so that `finally` blocks run (the running request, task or
    command stops, and a server the command started is stopped); the exit is ExitCode.TERMINATED."""


def raise_terminated(_signum: int, _frame: object) -> None:
    """The SIGTERM handler that unwinds (signal.signal(signal.SIGTERM, raise_terminated))."""
    raise Terminated()


class ExitCode(IntEnum):
    """What `agent run` exits with (`agent new` with its agent part's, `agent acp` on a signal), each
    code with the words `agent run --help` says it in."""

    meaning: str

    def __new__(cls, code: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.meaning = meaning
        return member

    SUCCESS = 0, "success"
    FAILED = 1, "task or check failed"
    CONFIG = 2, "usage/config"
    LIMIT = 3, "limit"  # turns or time
    SERVER = 4, "server"
    BUSY = 5, "another agent works in this folder"  # or has this session open: try again later
    INTERRUPTED = 130, "interrupted"  # 128 + SIGINT (Ctrl+C)
    TERMINATED = 143, "terminated (SIGTERM)"  # 128 + SIGTERM
    # Never the agent's own: what the task suite records for a run it stopped, as timeout(1) exits.
    TIMED_OUT = 124, "stopped at the suite's time limit"


RUN_EXIT_CODES = "exit codes: " + ", ".join(
    f"{code.value} {code.meaning}" for code in ExitCode if code is not ExitCode.TIMED_OUT
)


class AgentError(Exception):
    """What failed, why, and what to do about it. `exit_code`: usage and configuration unless a
    subclass says otherwise (the server, a workspace another agent holds: agent/store/lock.py)."""

    exit_code: int = ExitCode.CONFIG

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

    exit_code = ExitCode.SERVER


class LLMError(Exception):
    """A model request failed. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ContextOverflow(LLMError):
    """The prompt does not fit the server's context: compact and retry."""

    def __init__(self, message: str, n_prompt_tokens: int | None, n_ctx: int | None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.n_prompt_tokens = n_prompt_tokens
        self.n_ctx = n_ctx


class ServerLoading(LLMError):
    """503 while the model loads: wait and retry."""


class ServerGone(LLMError):
    """Connection refused or reset, before or during the stream. `partial`: text had already arrived."""

    def __init__(self, message: str, partial: bool = False, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.partial = partial


class ServerStalled(LLMError):
    """The server took the request and then stopped sending: hung, stopped (SIGSTOP) or overloaded."""

    def __init__(self, message: str, partial: bool = False, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.partial = partial


class BadRequest(LLMError):
    """The server refused the request (4xx): shown to the user, not retried."""


class ServerFailure(LLMError):
    """Anything else: a 5xx, an unreadable answer."""


def first_line(exc: BaseException) -> str:
    """An error's first line, for a one-line message (its type's name when it says nothing)."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]
