"""What `agent run` and `agent new` call from synchronous code: one task, as one session
(agent/session/task_run.py) or as several attempts at once (agent/session/attempts.py), with SIGTERM
outside the work unwinding like Ctrl+C, so that a server the run started is stopped."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from agent.errors import AgentError, ExitCode, LLMError, Terminated, raise_terminated
from agent.events import Event
from agent.session.attempts import run_attempts
from agent.session.task_run import TaskRequest, TaskResult, run_task
from agent.session.taskfile import load_task
from agent.settings.config import Settings


async def run_task_or_attempts(
    request: TaskRequest,
    settings: Settings,
    emit: Callable[[Event], None],
    say: Callable[[str], None] | None = None,
) -> TaskResult:
    """`run_task`, or several attempts at once when the request or the task file asks for them."""
    count = request.attempts or (load_task(request.task).spec.attempts if request.task else None) or 1
    if count == 1:
        return await run_task(request, settings, emit, say)
    return await run_attempts(request, settings, emit, say, count)


def run_task_blocking(
    request: TaskRequest,
    settings: Settings,
    emit: Callable[[Event], None],
    say: Callable[[str], None] | None = None,
) -> TaskResult | None:
    """The task from synchronous code, SIGTERM included: the result, or None when a SIGTERM came
    outside the work (exit ExitCode.TERMINATED). A server that failed before the session started raises an
    AgentError with ExitCode.SERVER."""
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        return asyncio.run(run_task_or_attempts(request, settings, emit, say))
    except Terminated:
        return None
    except LLMError as exc:  # the server failed before the session could start
        error = AgentError(
            f"the model server failed: {exc}", fix="`agent server status` and `agent server logs` show it."
        )
        error.exit_code = ExitCode.SERVER
        raise error from None
    finally:
        signal.signal(signal.SIGTERM, previous)
