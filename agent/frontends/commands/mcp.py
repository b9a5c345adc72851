"""`agent mcp ...`: the MCP servers a session here would use, their tools, one call for debugging,
and the project's .mcp.json. Nothing here prints the values of `env` or `headers`: they hold tokens.
"""

from __future__ import annotations

import asyncio
import json
from argparse import Namespace
from pathlib import Path

from agent.errors import AgentError
from agent.frontends import console
from agent.session.mcp_servers import mcp_configs
from agent.settings.config import Settings, state_dir
from agent.settings.trust import is_trusted, warn_untrusted
from tools.mcp import MCPServerConfig, MCPServers, result_text

PROJECT_FILE = ".mcp.json"


def cmd_list(args: Namespace, settings: Settings) -> int:
    warn_untrusted(Path.cwd())
    configs = mcp_configs(settings, Path.cwd())
    if not configs:
        console.out.print("no MCP servers configured (add one with `agent mcp add NAME -- COMMAND ...`)")
        return 0
    servers = MCPServers(configs, state_dir() / "logs")
    for warning in servers.warnings:
        console.note(warning)

    async def probe():
        try:
            return await servers.start()
        finally:
            await servers.close()

    tools = asyncio.run(probe())
    table = console.table("server", "transport", "env / headers", "tool", "description")
    for conn in servers.connections:
        # As written in the file: `${VAR}` is shown, never what it expands to.
        transport = conn.config.url or " ".join([conn.config.command or "", *conn.config.args])
        secrets = redacted(conn.config)
        if conn.name in servers.failures:
            table.add_row(conn.name, transport, secrets, "[red]not started[/]", servers.failures[conn.name])
            continue
        name = conn.name
        for tool in (t for t in tools if t.connection is conn):
            table.add_row(name, transport, secrets, tool.name, tool.description.splitlines()[0][:80])
            name = transport = secrets = ""  # once per server
    console.out.print(table)
    return 1 if servers.failures else 0


def redacted(config: MCPServerConfig) -> str:
    """The keys of `env` and `headers`, their values as ***."""
    return " ".join(f"{key}=***" for key in [*config.env, *config.headers])


def cmd_call(args: Namespace, settings: Settings) -> int:
    warn_untrusted(Path.cwd())
    configs = mcp_configs(settings, Path.cwd())
    if args.server not in configs:
        raise AgentError(
            f"no MCP server '{args.server}' is configured here",
            f"Configured: {', '.join(sorted(configs)) or 'none'}.",
        )
    try:
        arguments = json.loads(args.arguments)
    except ValueError as exc:
        raise AgentError(
            "the tool's arguments are not valid JSON", str(exc), """Give a JSON object, e.g. '{"a": 1}'."""
        ) from exc
    if not isinstance(arguments, dict):
        raise AgentError("the tool's arguments must be a JSON object", f"Got: {args.arguments}")
    servers = MCPServers({args.server: configs[args.server]}, state_dir() / "logs")
    for warning in servers.warnings:
        console.note(warning)
    conn = servers.connections[0]

    async def call():
        try:
            tools = {tool.remote_name: tool for tool in await servers.start()}
            if args.server in servers.failures:
                raise AgentError(f"the MCP server {args.server} did not start", servers.failures[args.server])
            if args.tool not in tools:
                raise AgentError(
                    f"the MCP server {args.server} has no tool '{args.tool}'",
                    f"Its tools: {', '.join(tools) or 'none'}.",
                )
            return await conn.call_tool(args.tool, arguments)
        finally:
            await servers.close()

    try:
        result = asyncio.run(call())
    except AgentError:
        raise
    except Exception as exc:  # no result at all: refused, timed out, the server died
        console.note(f"error: {conn.failure(args.tool, exc)}")
        return 1
    # Plain print: the output is for reading and for pipes (jq), not for rich's markup.
    if result.content:
        print(result_text(result))
    if result.structured_content is not None:
        print(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    if result.is_error:
        console.note("error: the tool reported an error (isError)")
        return 1
    return 0


def _read(path: Path) -> dict:
    if not path.is_file():
        return {"mcpServers": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AgentError(
            f"{path} is not valid JSON", str(exc), "Fix it by hand; nothing was changed."
        ) from exc
    data.setdefault("mcpServers", {})
    return data


def cmd_add(args: Namespace, settings: Settings) -> int:
    command = [c for c in args.server_command if c != "--"]
    if bool(args.url) == bool(command):
        raise AgentError(
            "give either --url URL or -- COMMAND [ARGS...]", fix="agent mcp add time -- mcp-server-time"
        )
    spec: dict = {"url": args.url} if args.url else {"command": command[0], "args": command[1:]}
    if args.env:
        spec["env"] = dict(item.split("=", 1) for item in args.env)
    MCPServerConfig.model_validate(spec)
    path = Path.cwd() / PROJECT_FILE
    data = _read(path)
    data["mcpServers"][args.name] = spec
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    console.out.print(f"added MCP server {args.name} to {path}; `agent mcp list` shows its tools")
    if not is_trusted(Path.cwd()):
        console.note("this folder is not trusted, so sessions ignore its .mcp.json: `agent trust` trusts it")
    return 0


def cmd_remove(args: Namespace, settings: Settings) -> int:
    path = Path.cwd() / PROJECT_FILE
    data = _read(path)
    if args.name not in data["mcpServers"]:
        known = ", ".join(data["mcpServers"]) or "none"
        raise AgentError(f"no MCP server '{args.name}' in {path}", f"Configured there: {known}.")
    del data["mcpServers"][args.name]
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    console.out.print(f"removed MCP server {args.name} from {path}")
    return 0
