"""A session's MCP servers: which (the user's settings, the trusted project's .mcp.json, a task's
front matter) and their start, each one's tools or its failure said as a notice."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from agent.errors import ConfigError
from agent.events import Event, Notice
from agent.settings.config import Settings
from agent.settings.trust import is_trusted
from tools.mcp import MCPServerConfig, MCPServers, parse_servers


def mcp_configs(settings: Settings, workspace: Path, extra: dict | None = None) -> dict[str, MCPServerConfig]:
    """MCP servers for a session: the settings', then the project's .mcp.json (in a trusted folder
    only: it names programs to start), then the task's."""
    configs = dict(settings.mcp_servers)
    project = workspace / ".mcp.json"
    if project.is_file() and is_trusted(workspace):
        try:
            configs.update(parse_servers(json.loads(project.read_text(encoding="utf-8"))))
        except (ValueError, ValidationError) as exc:
            raise ConfigError(f"{project} is not a valid MCP configuration", str(exc)) from exc
    if extra:
        configs.update(parse_servers(extra))
    return configs


async def start_mcp(
    configs: dict[str, MCPServerConfig], emit: Callable[[Event], None], log_dir: Path
) -> MCPServers:
    servers = MCPServers(configs, log_dir)
    for warning in servers.warnings:  # a key another client understands and we do not
        emit(Notice(warning))
    if not configs:
        return servers
    tools = await servers.start()
    for conn in servers.connections:
        if conn.name in servers.failures:
            emit(Notice(f"MCP server {conn.name} did not start: {servers.failures[conn.name]}; "
                        f"going on without it (its log: {log_dir / f'mcp-{conn.name}.log'})"))  # fmt: skip
        else:
            count = sum(1 for t in tools if t.connection is conn)
            emit(Notice(f"MCP server {conn.name}: {count} tool{'s' if count != 1 else ''}"))
    return servers
