"""The recording proxy: the server's API on a local port, every byte passed through as the server sent it.

Any path and method is forwarded; the three chat APIs (agent/session/api_answer.py) are also read as they
pass and recorded as turns (agent/session/proxy_sessions.py). The request body is forwarded as the client
wrote it; the answer's bytes go back chunk by chunk as they arrive (`aiter_raw`, no decoding, no
buffering). What the proxy adds is only what it must: a 502 in the API's error shape when the server
cannot be reached at all. A server that dies mid-answer ends the client's stream the same way (the
connection closes before the stream's end), and a client that hangs up closes the server's stream, so the
server stops generating.
"""

from __future__ import annotations

import asyncio
import json
import time
from functools import partial

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agent.server.admin import ServerAdmin
from agent.server.endpoint import Endpoint
from agent.session.api_answer import Answer, Asked, api_of
from agent.session.proxy_sessions import ProxySessions, Turn

# Hop-by-hop headers (RFC 9110) and those the HTTP layers set for themselves; accept-encoding goes so
# that the server sends bytes the reader can read (llama-server compresses nothing anyway).
REQUEST_DROPPED = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "accept-encoding",
}
RESPONSE_DROPPED = {"transfer-encoding", "connection", "keep-alive"}
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]


class RecordingProxy:
    def __init__(self, endpoint: Endpoint, sessions: ProxySessions) -> None:
        self.endpoint, self.sessions = endpoint, sessions
        self.server = ServerAdmin(endpoint)  # its counters and log, read around each request
        # No read timeout: a long prefill on a big prompt sends nothing for minutes, and the client
        # decides how long it waits.
        self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(10.0, read=None), trust_env=False)
        self.app = Starlette(routes=[Route("/{path:path}", self.forward, methods=METHODS)])

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.server.close()

    def _auth(self, headers: dict[str, str]) -> dict[str, str]:
        """The server's key where the client sent none (a client that sends its own is passed as is)."""
        if self.endpoint.api_key and not any(k.lower() in ("authorization", "x-api-key") for k in headers):
            headers["authorization"] = f"Bearer {self.endpoint.api_key}"
        return headers

    async def forward(self, request: Request) -> Response:
        body = await request.body()
        headers = self._auth({k: v for k, v in request.headers.items() if k.lower() not in REQUEST_DROPPED})
        url = self.server.root + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        api = api_of(request.url.path) if request.method == "POST" else None
        asked = Asked.read(api, body, {k.lower(): v for k, v in request.headers.items()}) if api else None
        turn = None
        if asked is not None:
            before = await self.server.counters()
            turn = self.sessions.begin(asked, request.headers.get("user-agent", ""), before)
        outgoing = self.client.build_request(request.method, url, headers=headers, content=body)
        sent = time.monotonic()  # a whole (non-streamed) answer's headers come only when it is done
        try:
            response = await self.client.send(outgoing, stream=True)
        except httpx2.TransportError as exc:
            message = f"the model server at {self.server.root} did not answer: {exc or type(exc).__name__}"
            if turn is not None:
                self.sessions.end(turn, Answer(turn.asked.api, False), 502, message, None)
            return Response(
                json.dumps({"error": {"message": message, "type": "proxy_error", "code": 502}}),
                status_code=502,
                media_type="application/json",
            )
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in RESPONSE_DROPPED]
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        passing = self._pass(response, turn, Answer(api or "", streamed, started=sent))
        reply = PassingResponse(passing, status_code=response.status_code)
        reply.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept]
        return reply

    async def _pass(self, response: httpx2.Response, turn: Turn | None, answer: Answer):
        failure = ""
        try:
            async for chunk in response.aiter_raw():
                if turn is not None:
                    answer.feed(chunk)
                yield chunk
        except httpx2.TransportError as exc:
            failure = f"the server closed the connection mid-answer ({type(exc).__name__}: {exc})"
            raise
        except (asyncio.CancelledError, GeneratorExit):
            # Codex hangs up as soon as `response.completed` has passed, before the server ends the
            # stream: that answer is whole.
            failure = "" if answer.ended else "the client hung up mid-answer"
            raise
        finally:
            # Shielded: a client that hung up cancels this task, and the server's stream must still be
            # closed (so it stops generating) and the turn recorded.
            with anyio.CancelScope(shield=True):
                await response.aclose()
                if turn is not None:
                    answer.finish_reading()
                    after = await self.server.counters()
                    reprocessed = self.server.log_says_full_reprocess()
                    self.sessions.end(turn, answer, response.status_code, failure, after, reprocessed)


class PassingResponse(StreamingResponse):
    """A streamed answer that ends the server's stream as soon as the client hangs up, even while the
    server is silent (a long prefill): the client's disconnect is listened for beside the stream, as
    Starlette does only for older ASGI servers, and the body is closed whatever happened."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def until_done(step) -> None:
                    await step()
                    group.cancel_scope.cancel()

                group.start_soon(until_done, partial(self.stream_response, send))
                await until_done(partial(self.listen_for_disconnect, receive))
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()
