"""One prefill for the attempts' first prompts, copied to every slot.

Attempts at one task send the same system prompt, repository and task first (the environment note,
with each worktree's own path, comes after the files: agent/core/prompt.py). Sent at once, each
slot would process those same few thousand tokens itself: on 2 CPU cores four real-task prompts of
4,200-5,700 tokens prefilled at 70-80 tokens/s in all, and an attempt's first answer came a median
of 369 s into a 480 s task; with one prefill shared, 152 s (docs/benchmarks.md, real-repository tasks).
So each attempt's session is opened with this prefill's `request_gate`, which every model request
awaits before it is sent: the first request to arrive has its prompt processed into slot 0 alone (one
token generated), llama-server saves that slot to its `--slot-save-path` folder and restores it into
the other slots, and only then do the attempts' requests go, each finding the shared part already in
whichever slot it gets. Once that is done, the gate lets every request through at once.

It needs a server that the agent started with slots, and so with that folder
(agent/server/launch_plan.py): this run's, or the one `agent bench --attempts` runs it on. And no
draft model (a restore fills the main model's cache only). Anything that fails on the way is said,
and the attempts then prefill as before: the sharing saves time, and is never what an attempt
depends on. Cancelled (the run stopped), the prefill's connection closes, which stops it on the
server, and the saved slot's file is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.core.llm import RequestGate
from agent.events import Event, Notice
from agent.server.admin import ServerAdmin
from agent.server.preflight.memory import flag_value
from agent.session.connect import Connection

PREFILL_TIMEOUT = 900.0  # seconds: a long prompt on a slow CPU


class SharedPrefill:
    def __init__(self, connection: Connection, slots: int, name: str, emit: Callable[[Event], None]) -> None:
        self.connection, self.slots, self.name, self.emit = connection, slots, name, emit
        self._shared: asyncio.Task[None] | None = None

    @property
    def folder(self) -> Path | None:
        """The server's slot folder, where this run may share: None where it may not."""
        handle, spec = self.connection.handle, self.connection.profile.speculative
        if self.slots < 2 or handle is None or (spec and spec.draft_model):
            return None
        found = flag_value(handle.record.argv, "--slot-save-path")
        return Path(found) if found else None

    @property
    def request_gate(self) -> RequestGate | None:
        """What each attempt's model requests await before they are sent (its session's
        `request_gate`); None where the server cannot share a prefill."""
        return self._wait_for_prefill if self.folder is not None else None

    async def _wait_for_prefill(self, request: dict[str, Any]) -> None:
        """The first request starts the prefill of its prompt; every request waits until it is done."""
        if self._shared is None:
            self._shared = asyncio.ensure_future(self._share(request))
        # Shielded: an attempt cancelled while it waits (another passed) leaves the others their copy.
        with contextlib.suppress(Exception):
            await asyncio.shield(self._shared)

    async def _share(self, request: dict[str, Any]) -> None:
        folder, filename = self.folder, f"{self.name}.bin"
        assert folder is not None
        server = ServerAdmin(self.connection.endpoint)
        began = time.monotonic()
        try:
            tokens = await server.prefill(request, slot=0, timeout=PREFILL_TIMEOUT)
            prefilled = time.monotonic() - began
            await server.copy_slot(0, range(1, self.slots), filename)
        except Exception as exc:
            self.emit(Notice(f"the attempts prefill their prompts each: sharing one prefill failed ({exc})"))
            return
        finally:
            await server.close()
            (folder / filename).unlink(missing_ok=True)
        self.emit(Notice(f"one prefill of {tokens:,} tokens ({prefilled:.0f} s) serves the {self.slots} "
                         f"attempts: copied to each slot in {time.monotonic() - began - prefilled:.1f} s"))  # fmt: skip

    async def close(self) -> None:
        """Stop a prefill still running (every attempt ended first)."""
        if self._shared is not None and not self._shared.done():
            self._shared.cancel()
            with contextlib.suppress(BaseException):
                await self._shared
