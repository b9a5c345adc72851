"""One ACP session: its state (the hosted session, the queue of updates on their way to the client, the tool
calls the client has been told of), and what the client hands a session in our terms: its prompt's
blocks as text, its MCP servers as configurations."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.schema import (
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    McpServerStdio,
    ResourceContentBlock,
    SseMcpServer,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
)

from agent.session.host import HostedSession
from agent.session.live import LiveSession
from tools.mcp import MCPServerConfig


@dataclass
class CallView:
    """What the client has been told of one tool call, and the file's text before an edit."""

    kind: str
    title: str
    locations: list[ToolCallLocation]
    path: Path | None = None
    old_text: str | None = None


@dataclass
class AcpSession:
    hosted: HostedSession  # the session host's: it stays across a profile or protocol switch
    outbox: asyncio.Queue
    sender: asyncio.Task | None = None
    work: asyncio.Task | None = None  # the running prompt
    calls: dict[str, CallView] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)  # notices from before the client knew the session
    reopening: bool = False  # its notices are held while it opens again (a switch), then said as one
    check_call: str = ""  # the tool call showing the check that runs now
    check_rounds_left: int = 0  # how many more failures of that check go back to the model

    @property
    def live(self) -> LiveSession:
        return self.hosted.live

    @property
    def session_id(self) -> str:
        return self.hosted.session_id

    @property
    def workspace(self) -> Path:
        return self.hosted.workspace

    @property
    def closed(self) -> bool:
        """Ended: by the client, or by a switch after which it could not open again."""
        return self.hosted.closed

    # Updates go out in order, one task sending them: an approval or a response waits on `flush` so that
    # what the session said before it reaches the client first.
    def put(self, update: Any) -> None:
        self.outbox.put_nowait(update)

    async def flush(self) -> None:
        await self.outbox.join()

    async def send_all(self, conn: Any, log: Callable[[str], None]) -> None:
        gone = False
        while True:
            update = await self.outbox.get()
            try:
                if not gone:
                    await conn.session_update(session_id=self.session_id, update=update)
            except Exception as exc:  # the client went: the work is wound up and recorded, unsent
                gone = True
                log(f"acp: the client no longer hears session {self.session_id}: {exc}")
            finally:
                self.outbox.task_done()


def prompt_text(blocks: list) -> tuple[str, str]:
    """(what the person typed, the message for the model): text as is; an attached file (an embedded
    resource) as its path and a fenced copy; a link to a file as its path for the model to read."""
    typed, parts = [], []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            typed.append(block.text)
            parts.append(block.text)
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            where = _path_of(block.resource.uri)
            parts.append(f"The file {where}, attached:\n```\n{block.resource.text}\n```")
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"(see the file {_path_of(block.uri)})")
    return "\n".join(typed), "\n\n".join(parts)


def _path_of(uri: str) -> str:
    return uri.removeprefix("file://")


def client_servers(servers: list, taken: set[str]) -> dict[str, MCPServerConfig]:
    """The client's MCP servers in our configuration's terms, started beside the user's own; a name
    that clashes with one of the user's gets a `-client` suffix rather than replacing it."""
    configs: dict[str, MCPServerConfig] = {}
    for server in servers:
        name = f"{server.name}-client" if server.name in taken else server.name
        if isinstance(server, McpServerStdio):
            configs[name] = MCPServerConfig(
                command=server.command, args=list(server.args), env={e.name: e.value for e in server.env}
            )
        elif isinstance(server, HttpMcpServer | SseMcpServer):
            configs[name] = MCPServerConfig(
                url=server.url, headers={h.name: h.value for h in server.headers},
                type="sse" if isinstance(server, SseMcpServer) else "http",
            )  # fmt: skip
    return configs
