"""Work that runs off the event loop and stops once nobody waits for it.

The task message reads the repository before the first request: a second or more in a large one, of
Python that never awaits. Run on the event loop, it would leave Ctrl+C, SIGTERM, a cancelled prompt
(Esc, an editor's cancel) unheard until it ended. `off_loop` runs it in a thread of its own, so the
loop answers at once; a cancelled caller tells the thread to stop, and the work gives up at its next
`check_wanted()` (one per file read or outlined), raising `Unwanted`, and the caller waits for that
(briefly), so that no git command the work started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

STOP_GRACE = 2.0  # seconds a cancelled caller waits for its work to stop
_stop: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("stop", default=None)


class Unwanted(Exception):
    """The caller of this work was cancelled: nothing is left to do with its result."""


def check_wanted() -> None:
    """Raise Unwanted when the `off_loop` call running this was cancelled; nothing elsewhere."""
    stop = _stop.get()
    if stop is not None and stop.is_set():
        raise Unwanted


async def off_loop(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a daemon thread; the event loop keeps running meanwhile. Cancelled, the
    call tells the work to stop at its next `check_wanted()` and waits up to STOP_GRACE seconds for it
    (a file's worth of work, or a git command it runs), so that nothing it started outlives the
    caller; then raises CancelledError."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    ended = asyncio.Event()
    stop = threading.Event()
    context = contextvars.copy_context()
    context.run(_stop.set, stop)

    def settle(result: Any, error: BaseException | None) -> None:
        ended.set()
        if done.done():  # cancelled meanwhile
            return
        if error is None:
            done.set_result(result)
        else:
            done.set_exception(error)

    def work() -> None:
        try:
            result, error = context.run(function, *args), None
        except BaseException as exc:  # handed to the caller, which raises it
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: the caller is gone
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name=f"off-loop {getattr(function, '__name__', '')}", daemon=True).start()
    try:
        return await done
    finally:
        stop.set()
        if not ended.is_set():
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(ended.wait(), STOP_GRACE)
