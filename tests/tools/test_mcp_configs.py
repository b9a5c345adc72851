""".mcp.json as Claude Code and Cursor write it: headers, ${VAR} expansion, SSE, keys we do not know;
and tool schemas whose properties are named like JSON-schema keywords. Real servers throughout."""

from __future__ import annotations

import sys

import pytest

from agent.events import Notice
from agent.session.mcp_servers import start_mcp
from tests.mcp_servers import DEMO, PROBE, served
from tools.base import ToolRegistry, clean_schema
from tools.mcp import MCPServerConfig, MCPServers, parse_servers


async def started(tmp_path, **configs: MCPServerConfig):
    servers = MCPServers(configs, tmp_path)
    return servers, {t.name: t for t in await servers.start()}


@pytest.mark.slow
async def test_headers_are_sent_to_an_http_server_with_variables_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_TOKEN", "sk-123")
    with served(PROBE, "http") as url:
        config = MCPServerConfig(
            url=url, headers={"Authorization": "Bearer ${DEMO_TOKEN}", "X-Team": "${DEMO_TEAM:-core}"}
        )
        servers, tools = await started(tmp_path, web=config)
        try:
            header = tools["mcp__web__header"]
            assert (await header.run({"name": "Authorization"}, None)).output == "Bearer sk-123"
            assert (await header.run({"name": "X-Team"}, None)).output == "core"
        finally:
            await servers.close()


@pytest.mark.slow
async def test_an_sse_server_is_spoken_to_over_sse_headers_included(tmp_path):
    with served(PROBE, "sse") as url:
        config = parse_servers({"mcpServers": {"old": {"type": "sse", "url": url, "headers": {"X-Id": "7"}}}})
        servers, tools = await started(tmp_path, **config)
        try:
            assert (
                await tools["mcp__old__note"].run({"title": "over", "body": "sse"}, None)
            ).output == "over: sse"
            assert (await tools["mcp__old__header"].run({"name": "X-Id"}, None)).output == "7"
        finally:
            await servers.close()


@pytest.mark.slow
async def test_command_args_and_env_of_a_stdio_server_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_PYTHON", sys.executable)
    monkeypatch.setenv("DEMO_SECRET", "s3cret")
    monkeypatch.setenv("DEMO_EMPTY", "")
    monkeypatch.delenv("DEMO_UNSET", raising=False)
    config = MCPServerConfig(
        command="${DEMO_PYTHON}",
        args=["${DEMO_UNSET:-" + PROBE + "}"],
        env={"SECRET": "${DEMO_SECRET}", "MODE": "${DEMO_EMPTY:-fallback}", "PLAIN": "$DEMO_SECRET"},
    )
    servers, tools = await started(tmp_path, probe=config)
    try:
        env = tools["mcp__probe__environment"]
        assert (await env.run({"name": "SECRET"}, None)).output == "s3cret"
        assert (await env.run({"name": "MODE"}, None)).output == "fallback"  # as the shell's `:-`
        assert (await env.run({"name": "PLAIN"}, None)).output == "$DEMO_SECRET"  # only ${...} expands
    finally:
        await servers.close()
    assert config.env["SECRET"] == "${DEMO_SECRET}"  # the config itself keeps what was written


@pytest.mark.slow
async def test_a_missing_variable_names_the_server_the_key_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("DEMO_NOPE", raising=False)
    configs = {
        "web": MCPServerConfig(
            url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer ${DEMO_NOPE}"}
        ),
        "demo": MCPServerConfig(command=sys.executable, args=[DEMO]),
    }
    notices: list[str] = []
    servers = await start_mcp(
        configs, lambda e: notices.append(e.message) if isinstance(e, Notice) else None, tmp_path
    )
    await servers.close()
    failure = next(n for n in notices if "did not start" in n)
    assert failure.startswith(
        "MCP server web did not start: ${DEMO_NOPE} in headers.Authorization is not set"
    )
    assert "MCP server demo: 4 tools" in notices  # the other server is unaffected


@pytest.mark.slow
async def test_unknown_keys_are_a_warning_and_the_server_still_starts(tmp_path):
    from agent.events import Notice
    from agent.session.mcp_servers import start_mcp

    configs = parse_servers(
        {
            "mcpServers": {
                "demo": {"command": sys.executable, "args": [DEMO], "oauth": {"id": "x"}, "disabled": False}
            }
        }
    )
    shown = []
    servers = await start_mcp(configs, shown.append, tmp_path)
    try:
        assert servers.warnings == [
            "warning: MCP server demo: unknown key 'oauth' ignored",
            "warning: MCP server demo: unknown key 'disabled' ignored",
        ]
        notices = [e.message for e in shown if isinstance(e, Notice)]
        assert notices[:2] == servers.warnings  # every front end shows them
        assert "MCP server demo: 4 tools" in notices
    finally:
        await servers.close()


def test_type_must_match_command_or_url():
    with pytest.raises(ValueError, match="`type: sse` needs `url`"):
        parse_servers({"x": {"type": "sse", "command": "server"}})
    with pytest.raises(ValueError, match="`type: stdio` needs `command`"):
        parse_servers({"x": {"type": "stdio", "url": "http://h/mcp"}})
    assert parse_servers({"x": {"type": "http", "url": "http://h/mcp"}})["x"].type == "http"


@pytest.mark.slow
async def test_a_property_named_title_survives_schema_cleaning(tmp_path):
    servers, tools = await started(tmp_path, probe=MCPServerConfig(command=sys.executable, args=[PROBE]))
    try:
        note = tools["mcp__probe__note"]
        assert note.parameters == {
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title", "body"],
        }
        parsed = ToolRegistry([note]).parse("mcp__probe__note", '{"title": "todo", "body": "tests"}')
        assert parsed.error is None
        assert (await note.run(parsed.raw_arguments, None)).output == "todo: tests"
    finally:
        await servers.close()


def test_schema_cleaning_touches_keywords_only():
    schema = {
        "title": "Args",
        "description": "said by the tool's description",
        "type": "object",
        "properties": {
            "description": {"title": "Description", "type": "string"},
            "default": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "style": {"type": "object", "default": {"title": "kept", "color": "red"}},
        },
        "$defs": {"title": {"title": "Title", "type": "string"}},
        "required": ["description"],
    }
    assert clean_schema(schema) == {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "default": {"type": "integer"},
            "style": {"type": "object", "default": {"title": "kept", "color": "red"}},
        },
        "$defs": {"title": {"type": "string"}},
        "required": ["description"],
    }
