"""`agent proxy`: the profile's server (started, or attached to), served through the recording proxy.

Each request another agent sends through it is recorded as a turn of a session (`agent sessions`,
`agent stats`, `agent watch`) and shown here as one line as it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from argparse import Namespace
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import uvicorn

from agent.errors import ConfigError
from agent.frontends import console
from agent.frontends.proxy.app import RecordingProxy
from agent.server.admin import ServerAdmin
from agent.server.lifecycle import port_is_free
from agent.session.connect import Connection, connect, resolve_profile
from agent.session.proxy_sessions import Conversation, ProxySessions, proxied_summary
from agent.settings.config import Settings, state_dir
from agent.store.telemetry import TurnStats, summary_line

DEFAULT_PORT = 8788
HOST = "127.0.0.1"


@dataclass
class Proxied:
    """A proxy being served: where clients reach it, and its sessions."""

    url: str  # http://127.0.0.1:PORT, the server's root: /v1/... and /v1/messages below it
    model: str
    sessions: ProxySessions
    connection: Connection
    context: int | None = None  # the server's context, in tokens, as its /props says

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"


def free_port() -> int:
    """A port no one listens on now, for a proxy that nobody needs to find by number."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def turn_line(session_id: str, turn: int, stats: TurnStats | None, error: str = "") -> str:
    """One turn on one line, as `agent proxy` and `agent watch` print it."""
    head = f"{session_id} turn {turn}"
    if stats is None:
        return f"{head}: failed: {error}"
    return f"{head}: {stats.summary() or 'no figures'}" + (f" ({error})" if error else "")


@contextlib.contextmanager
def server_for(args: Namespace, settings: Settings) -> Iterator[Connection]:
    """The profile's server for the command's time: started (and stopped after) or attached to."""
    profile = resolve_profile(settings, args.profile, args.base_url, Path.cwd(), say=console.note)
    with contextlib.ExitStack() as stack:
        with console.build_progress() as built, console.start_progress(profile.name) as started:
            opening = connect(
                settings, profile, start_progress=started, build_progress=built, on_build=console.note,
                port=args.server_port, ctx_size=args.ctx_size,
            )  # fmt: skip
            connection = stack.enter_context(opening)
        yield connection


@contextlib.asynccontextmanager
async def serving(
    connection: Connection, port: int, quiet: bool = False, single: bool = False
) -> AsyncIterator[Proxied]:
    """The recording proxy on 127.0.0.1:`port` in front of `connection`'s server, until the block ends;
    its sessions are finished then. `single`: all requests are one session (ProxySessions)."""
    if not port_is_free(HOST, port):
        raise ConfigError(
            f"the proxy's port {port} is in use",
            "another program listens on it",
            fix=f"Stop what listens on it, or pick another with --port (`ss -ltnp 'sport = :{port}'` shows who).",
        )
    endpoint = connection.endpoint

    def report(conversation: Conversation, turn: int, stats: TurnStats | None, error: str) -> None:
        console.out.print(turn_line(conversation.session_id, turn, stats, error), highlight=False)

    sessions = ProxySessions(
        state_dir(),
        connection.profile.name,
        connection.profile.spec_label,
        None if quiet else report,
        single=single,
    )
    proxy = RecordingProxy(endpoint, sessions)
    config = uvicorn.Config(
        proxy.app, host=HOST, port=port, log_level="critical", lifespan="off",
        server_header=False, date_header=False,  # the server's own headers pass through instead
    )  # fmt: skip
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # Ctrl+C is the caller's
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # raises what stopped it
                raise ConfigError(f"the proxy could not listen on {HOST}:{port}")
            await asyncio.sleep(0.02)
        model = endpoint.model or await served_model(proxy.server) or connection.profile.name
        context = await proxy.server.context_size()
        yield Proxied(f"http://{HOST}:{port}", model, sessions, connection, context)
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await task
        await proxy.aclose()
        sessions.close()


async def served_model(server: ServerAdmin) -> str:
    """The model the server names on /v1/models ("" when it will not say)."""
    try:
        return await server.model_name()
    except httpx2.TransportError:
        return ""


def print_figures(summaries: list[dict]) -> None:
    if not summaries:
        console.note("no requests went through the proxy")
    for summary in summaries:
        failed = f" · {summary['errors']} failed" if summary["errors"] else ""
        console.out.print(f"{summary['session']}: {summary_line(summary)}{failed}", highlight=False)
    if summaries:
        console.note("per turn, with the cause of each cache break: agent stats SESSION")


def cmd_proxy(args: Namespace, settings: Settings) -> int:
    with server_for(args, settings) as connection:
        return asyncio.run(_proxy(connection, args.port))


async def _proxy(connection: Connection, port: int) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with serving(connection, port) as proxied:
        console.out.print(
            f"proxy for {connection.profile.name} ({connection.endpoint.base_url}) at {proxied.url}\n"
            f"  OpenAI clients:    base URL {proxied.openai_base_url}, any API key\n"
            f"  Anthropic clients: base URL {proxied.url}\n"
            "  each request is recorded: `agent watch` in another terminal shows them live; Ctrl+C stops",
            highlight=False,
        )
        await stop.wait()
        summaries = proxied_summary(proxied.sessions.conversations)
    print_figures(summaries)
    return 0
