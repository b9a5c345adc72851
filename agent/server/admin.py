"""What the agent asks and tells a model server beside its chat requests: the model's name
(/v1/models), the context size and slot count (/props), the token and draft counters (/metrics), a
slot's prefill and its copy to other slots (/slots), and what the server's log said since the last look.

The lookups are retried (a server starting or restarting); when one still gives nothing, the fallback
taken is kept in `notices` for the front end to show, never silent. The model client
(agent/core/llm.py) sends the chat requests and asks this for the counters and the log around each.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import httpx2
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from agent.server.endpoint import Endpoint
from agent.store.telemetry import parse_server_counters

LOOKUP_TRIES = 4  # /v1/models and /props: about 1.5 s of tries for a server that is (re)starting
# What llama-server logs when a sliding-window or hybrid model cannot roll its cache back.
FULL_REPROCESS_LOG = "forcing full prompt re-processing"


def _transient(exc: BaseException) -> bool:
    """Worth asking again: no connection yet, or the server is loading or failing for now (5xx)."""
    if isinstance(exc, httpx2.HTTPStatusError):
        return exc.response.status_code >= 500
    return isinstance(exc, httpx2.TransportError)


def _lookup_retrying() -> AsyncRetrying:
    return AsyncRetrying(
        retry=retry_if_exception(_transient),
        stop=stop_after_attempt(LOOKUP_TRIES),
        wait=wait_exponential(multiplier=0.2, max=2),
        reraise=True,
    )


def _lookup_failure(exc: BaseException) -> str:
    """Why a lookup gave nothing, in a few words."""
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.HTTPError):
        return f"{type(exc).__name__}: {exc}"
    return f"an answer without it ({type(exc).__name__})"


def _log_size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


class ServerAdmin:
    """The server of one endpoint, beside its chat requests (see the module)."""

    def __init__(
        self, endpoint: Endpoint, connect_timeout: float = 10.0, read_timeout: float = 600.0
    ) -> None:
        self.endpoint = endpoint
        self.root = endpoint.base_url.removesuffix("/v1")
        # /v1/models answers as a chat request's connection would: a server may be slow to answer it
        # while it loads, and the name is asked once per session.
        self._models_timeout = httpx2.Timeout(read_timeout, connect=connect_timeout)
        self._metrics_ok = endpoint.metrics_url is not None
        # llama-server wants the key on /props and /metrics too (only /health answers without it).
        auth = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        self._http = httpx2.AsyncClient(timeout=5.0, headers=auth)
        self.notices: list[str] = []  # fallbacks taken (no model name, no context size): to be shown
        self._log_read = _log_size(endpoint.server_log)

    def take_notices(self) -> list[str]:
        taken, self.notices = self.notices, []
        return taken

    async def close(self) -> None:
        await self._http.aclose()

    async def model_name(self) -> str:
        """The endpoint's model, else the first that /v1/models lists, else "default" (with a notice).
        Raises httpx2.TransportError when nothing answers: the session cannot start."""
        if self.endpoint.model:
            return self.endpoint.model
        ids: list[str] = []
        why = "it lists none"
        try:
            async for attempt in _lookup_retrying():
                with attempt:
                    response = await self._http.get(
                        self.endpoint.base_url + "/models", timeout=self._models_timeout
                    )
                    response.raise_for_status()
            ids = [str(m["id"]) for m in response.json()["data"]]
        except httpx2.TransportError:
            raise
        except Exception as exc:  # a server without /v1/models still answers chat requests
            why = _lookup_failure(exc)
        self.endpoint.model = ids[0] if ids else "default"
        if not ids:
            self.notices.append(
                f"the server did not name its model (/v1/models: {why}); requests ask for 'default'"
            )
        return self.endpoint.model

    async def context_size(self, fallback: int | None = None) -> int | None:
        """n_ctx from llama-server's /props; else `fallback`, with a notice saying so."""
        try:
            props = await self._props()
            settings = props.get("default_generation_settings", {})
            return int(settings.get("n_ctx") or props.get("n_ctx"))
        except (httpx2.HTTPError, ValueError, TypeError, AttributeError) as exc:
            why = _lookup_failure(exc)
        assumed = f"assuming {fallback} tokens" if fallback else "the budget is unknown"
        self.notices.append(f"the server did not report its context size (/props: {why}); {assumed}")
        return fallback

    async def slots(self) -> int | None:
        """How many requests the server decodes at once (/props `total_slots`); None when it does not say
        (not a llama-server, or an old one)."""
        try:
            return int((await self._props())["total_slots"])
        except (httpx2.HTTPError, ValueError, TypeError, KeyError, AttributeError):
            return None

    async def _props(self) -> dict[str, Any]:
        async for attempt in _lookup_retrying():
            with attempt:
                response = await self._http.get(self.root + "/props")
                response.raise_for_status()
        return response.json()

    async def prefill(self, request: dict[str, Any], slot: int, timeout: float) -> int:
        """Process `request`'s prompt (a chat request's body) into `slot`, and stop after one token: a
        slot that a copy (`copy_slot`) then serves. The prompt's tokens."""
        body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        body.update(stream=False, max_tokens=1, id_slot=slot, cache_prompt=True)
        response = await self._http.post(
            self.endpoint.base_url + "/chat/completions", json=body, timeout=timeout
        )
        response.raise_for_status()
        return int(response.json().get("usage", {}).get("prompt_tokens") or 0)

    async def copy_slot(self, source: int, targets: Iterable[int], filename: str) -> None:
        """Copy the cache of slot `source` into each of `targets`: llama-server saves it as `filename`
        in its `--slot-save-path` folder, then restores it into each."""
        for slot, action in [(source, "save"), *((target, "restore") for target in targets)]:
            response = await self._http.post(
                f"{self.root}/slots/{slot}",
                params={"action": action},
                json={"filename": filename},
                timeout=120,
            )
            response.raise_for_status()

    async def counters(self) -> dict[str, float] | None:
        """The server's token and draft counters (/metrics); None when it has none (asked no more)."""
        if not self._metrics_ok:
            return None
        try:
            response = await self._http.get(self.endpoint.metrics_url)
            if response.status_code != 200:
                self._metrics_ok = False
                return None
            return parse_server_counters(response.text)
        except (httpx2.HTTPError, ValueError):
            self._metrics_ok = False
            return None

    def log_says_full_reprocess(self) -> bool:
        """Whether the server's log, since the last look, says it re-processed a whole prompt."""
        path = self.endpoint.server_log
        if not path:
            return False
        try:
            with open(path, "rb") as log:
                if os.fstat(log.fileno()).st_size < self._log_read:
                    self._log_read = 0  # a restarted server (its draft turned off) writes a new log
                log.seek(self._log_read)
                new = log.read()
        except OSError:
            return False
        self._log_read += len(new)
        return FULL_REPROCESS_LOG.encode() in new
