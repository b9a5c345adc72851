"""MCP tool servers, over stdio, Streamable HTTP or SSE, through the `mcp` SDK's Client.

Servers are configured as Claude Code and Cursor write `.mcp.json` ({"mcpServers": {name:
{command, args, env} | {url, headers, type}}}), `${VAR}` and `${VAR:-default}` included. Values are
kept as written and expanded only when a server starts: a missing variable stops that server alone,
and listings never show what the variables hold. Keys we do not know are warned about, not refused:
the same file serves other clients.

Each server's tools join the registry as `mcp__<server>__<tool>`, with the server's own input
schema. Two failure channels stay apart: a tool that failed (`is_error`) goes back to the model as a
failed result; a protocol error or a timeout does too, worded as such. A server that will not start
is reported once and the session goes on without it. The SDK stops stdio servers itself: stdin
closed, a grace period, then the whole process tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.base import ToolContext, ToolResult, clean_schema

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class MCPConfigError(ValueError):
    """A server entry that cannot be started as written (a variable it uses is not set)."""


def _expand(text: str, key: str) -> str:
    def value(match: re.Match[str]) -> str:
        name, default = match.groups()
        if default is not None:
            return os.environ.get(name) or default  # as the shell's `:-`: unset or empty
        if name not in os.environ:
            raise MCPConfigError(
                f"${{{name}}} in {key} is not set (set {name}, or give a default: ${{{name}:-default}})"
            )
        return os.environ[name]

    return _VARIABLE.sub(value, text)


class MCPServerConfig(BaseModel):
    """One server: a command to launch (stdio) or a URL (Streamable HTTP, or SSE with `type: sse`)."""

    model_config = ConfigDict(extra="allow")  # other clients' keys: warned about when started

    command: str | None = Field(None, description="Executable of a stdio server.")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Environment of a stdio server.")
    cwd: str | None = None
    url: str | None = Field(None, description="HTTP endpoint, e.g. http://127.0.0.1:8000/mcp.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent on every HTTP request.")
    type: Literal["stdio", "http", "streamable-http", "sse"] | None = Field(
        None, description="stdio, http (Streamable HTTP, the default for a url) or sse."
    )
    timeout: float = Field(60.0, gt=0, description="Seconds per tool call.")
    startup_timeout: float = Field(30.0, gt=0, description="Seconds to connect and list the tools.")

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either `command` (a stdio server) or `url` (an HTTP server)")
        if self.type and (self.type == "stdio") != bool(self.command):
            raise ValueError(f"`type: {self.type}` needs {'`command`' if self.type == 'stdio' else '`url`'}")
        return self

    @property
    def unknown_keys(self) -> list[str]:
        return list(self.model_extra or {})

    def expanded(self) -> MCPServerConfig:
        """This entry with `${VAR}` and `${VAR:-default}` replaced from the environment."""
        return self.model_copy(
            update={
                "command": self.command and _expand(self.command, "command"),
                "args": [_expand(arg, f"args[{i}]") for i, arg in enumerate(self.args)],
                "env": {k: _expand(v, f"env.{k}") for k, v in self.env.items()},
                "url": self.url and _expand(self.url, "url"),
                "headers": {k: _expand(v, f"headers.{k}") for k, v in self.headers.items()},
            }
        )


def parse_servers(data: dict[str, Any]) -> dict[str, MCPServerConfig]:
    """Servers from a `.mcp.json`-style mapping ({"mcpServers": {...}}) or a plain {name: {...}}."""
    servers = data.get("mcpServers", data)
    return {name: MCPServerConfig.model_validate(spec) for name, spec in servers.items()}


def _cause(exc: Exception) -> Exception:
    # The SDK's task groups wrap the cause (a refused connection, an HTTP 401) in exception groups.
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _tool_name(server: str, tool: str) -> str:
    # Tool names sent to the model: letters, digits, _ and -, at most 64 characters (OpenAI's rule).
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{tool}")[:64]


def result_text(result: Any) -> str:
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            parts.append(getattr(block.resource, "text", None) or f"[resource {block.resource.uri}]")
        else:
            parts.append(f"[{kind or 'content'} omitted]")
    if not parts and result.structured_content is not None:
        import json

        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) or "(no output)"


class MCPTool:
    """One tool of one MCP server, as the registry sees it: its schema is the server's."""

    Args: ClassVar[None] = None
    effect: ClassVar[str] = "exec"  # unknown effects: asks in `ask` and `auto-edit` modes

    def __init__(self, connection: MCPConnection, tool: Any) -> None:
        self.connection = connection
        self.remote_name = tool.name
        self.name = _tool_name(connection.name, tool.name)
        self.description = (tool.description or f"{tool.name} from the MCP server {connection.name}").strip()
        schema = clean_schema(dict(tool.input_schema or {}))
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.parameters = schema

    def summary(self, args: dict[str, Any]) -> str:
        first = next(iter(args.values()), "") if args else ""
        return str(first)[:80]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await self.connection.call(self.remote_name, args)


@dataclass
class MCPConnection:
    name: str
    config: MCPServerConfig
    log_dir: Path | None = None
    client: Any = None
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def open(self) -> list[MCPTool]:
        from mcp import Client, StdioServerParameters
        from mcp.client.sse import sse_client
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client  # what the SDK's own session group uses

        config = self.config.expanded()
        if config.url and config.type == "sse":
            target: Any = sse_client(config.url, headers=config.headers or None)
        elif config.url:
            http = await self.stack.enter_async_context(create_mcp_http_client(headers=config.headers))
            target = streamable_http_client(config.url, http_client=http)
        else:
            params = StdioServerParameters(
                command=config.command or "", args=config.args, env=config.env or None, cwd=config.cwd
            )
            errlog = None
            if self.log_dir is not None:  # the server's stderr goes to a log, not over the user's screen
                self.log_dir.mkdir(parents=True, exist_ok=True)
                errlog = self.stack.enter_context((self.log_dir / f"mcp-{self.name}.log").open("a"))
            target = stdio_client(params, errlog=errlog) if errlog else params
        self.client = await self.stack.enter_async_context(
            Client(target, read_timeout_seconds=self.config.timeout)
        )
        tools, cursor = [], None
        while True:
            page = await self.client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return [MCPTool(self, tool) for tool in tools]

    async def call_tool(self, tool: str, args: dict[str, Any]) -> Any:
        """The SDK's CallToolResult; a protocol error, a timeout or a broken connection raises."""
        return await self.client.call_tool(tool, args, read_timeout_seconds=self.config.timeout)

    def failure(self, tool: str, exc: Exception) -> str:
        """Why a call got no result at all (as opposed to a tool that reported an error)."""
        from mcp.shared.exceptions import MCPError

        exc = _cause(exc)
        if isinstance(exc, MCPError):
            if getattr(exc, "code", None) == -32001 or "timed out" in str(exc).lower():
                return f"the MCP tool {tool} timed out after {self.config.timeout:.0f} s."
            return f"the MCP server {self.name} refused the call: {exc}"
        return f"the MCP server {self.name} failed: {type(exc).__name__}: {exc}"  # it died, or the link broke

    async def call(self, tool: str, args: dict[str, Any]) -> ToolResult:
        try:
            result = await self.call_tool(tool, args)
        except Exception as exc:
            return ToolResult(False, f"Error: {self.failure(tool, exc)}")
        text = result_text(result)
        return ToolResult(
            not result.is_error, text if not result.is_error else f"Error: {text}", {"server": self.name}
        )

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.stack.aclose()


class MCPServers:
    """All configured servers of a session, started together and closed together."""

    def __init__(self, configs: dict[str, MCPServerConfig], log_dir: Path | None = None) -> None:
        self.connections = [MCPConnection(name, config, log_dir) for name, config in sorted(configs.items())]
        self.tools: list[MCPTool] = []
        self.failures: dict[str, str] = {}
        self.warnings = [
            f"warning: MCP server {conn.name}: unknown key '{key}' ignored"
            for conn in self.connections
            for key in conn.config.unknown_keys
        ]

    async def start(self) -> list[MCPTool]:
        async def one(conn: MCPConnection) -> list[MCPTool]:
            try:
                return await asyncio.wait_for(conn.open(), conn.config.startup_timeout)
            except Exception as exc:  # one broken server must not stop the session
                exc = _cause(exc)
                if isinstance(exc, TimeoutError):
                    what = "did not answer in time"
                elif isinstance(exc, MCPConfigError):
                    what = str(exc)
                else:
                    what = f"{type(exc).__name__}: {exc}"
                self.failures[conn.name] = what
                await conn.close()
                return []

        # One at a time: the SDK's task groups want to be entered and left in order.
        for conn in self.connections:
            self.tools += await one(conn)
        return self.tools

    async def close(self) -> None:
        for conn in reversed(self.connections):
            await conn.close()
