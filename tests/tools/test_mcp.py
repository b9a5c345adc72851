"""MCP tools from real servers: one written with the SDK (stdio and HTTP) and a published one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mcp_servers import DEMO, served
from tools.base import ToolRegistry
from tools.mcp import MCPServerConfig, MCPServers, parse_servers


def demo(**kw) -> MCPServerConfig:
    return MCPServerConfig(command=sys.executable, args=[DEMO], **kw)


def running(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", "--", marker], capture_output=True, text=True).stdout
    return [pid for pid in out.split() if int(pid) != os.getpid()]


@pytest.mark.slow
async def test_stdio_tools_are_listed_with_their_schemas_and_called(tmp_path):
    servers = MCPServers({"demo": demo()}, tmp_path)
    tools = {t.name: t for t in await servers.start()}
    try:
        assert set(tools) == {"mcp__demo__add", "mcp__demo__shout", "mcp__demo__fail", "mcp__demo__slow"}
        add = tools["mcp__demo__add"]
        assert add.parameters["required"] == ["a", "b"] and "title" not in add.parameters
        assert (await add.run({"a": 2, "b": 3}, None)).output == "5"
    finally:
        await servers.close()


@pytest.mark.slow
async def test_a_failing_tool_is_a_failed_result_with_its_message(tmp_path):
    servers = MCPServers({"demo": demo()}, tmp_path)
    tools = {t.name: t for t in await servers.start()}
    result = await tools["mcp__demo__fail"].run({"reason": "disk full"}, None)
    await servers.close()
    assert not result.ok and "failed on purpose: disk full" in result.output


@pytest.mark.slow
async def test_a_hung_tool_times_out_and_the_server_stays_usable(tmp_path):
    servers = MCPServers({"demo": demo(timeout=1)}, tmp_path)
    tools = {t.name: t for t in await servers.start()}
    started = time.monotonic()
    slow = await tools["mcp__demo__slow"].run({"seconds": 30}, None)
    assert not slow.ok and "timed out after 1 s" in slow.output and time.monotonic() - started < 10
    assert (await tools["mcp__demo__shout"].run({"text": "still here"}, None)).output == "STILL HERE"
    await servers.close()


@pytest.mark.slow
async def test_arguments_are_checked_against_the_servers_schema_before_the_call(tmp_path):
    servers = MCPServers({"demo": demo()}, tmp_path)
    registry = ToolRegistry(await servers.start())
    await servers.close()
    parsed = registry.parse("mcp__demo__add", '{"a": 1}')
    assert parsed.error and "'b' is a required property" in parsed.error
    assert "mcp__demo__add(a: integer, b: integer)" in parsed.error
    assert registry.parse("mcp__demo__add", '{"a": 1, "b": 2}').error is None


@pytest.mark.slow
async def test_the_stdio_server_is_stopped_on_close(tmp_path):
    marker = f"--marker-{os.getpid()}-{time.time_ns()}"
    config = MCPServerConfig(command=sys.executable, args=[DEMO, marker])
    servers = MCPServers({"demo": config}, tmp_path)
    try:
        await servers.start()
        assert running(marker)
    finally:
        await servers.close()
    deadline = time.monotonic() + 5
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(marker)


@pytest.mark.slow
async def test_a_server_that_does_not_start_is_reported_and_the_others_still_work(tmp_path):
    servers = MCPServers({"broken": MCPServerConfig(command="/no/such/server"), "demo": demo()}, tmp_path)
    tools = await servers.start()
    await servers.close()
    assert "broken" in servers.failures and "No such file" in servers.failures["broken"]
    assert {t.name for t in tools} >= {"mcp__demo__add"}


@pytest.fixture
def http_server():
    with served(DEMO) as url:
        yield url


@pytest.mark.slow
async def test_a_streamable_http_server_works_the_same(tmp_path, http_server):
    servers = MCPServers({"web": MCPServerConfig(url=http_server)}, tmp_path)
    tools = {t.name: t for t in await servers.start()}
    result = await tools["mcp__web__shout"].run({"text": "over http"}, None)
    await servers.close()
    assert result.ok and result.output == "OVER HTTP"


@pytest.mark.slow
async def test_the_published_time_server_from_pypi(tmp_path):
    command = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
    servers = MCPServers({"time": MCPServerConfig(command=command)}, tmp_path)
    tools = {t.name: t for t in await servers.start()}
    result = await tools["mcp__time__get_current_time"].run({"timezone": "UTC"}, None)
    await servers.close()
    assert result.ok and json.loads(result.output)["timezone"] == "UTC"


def test_configs_read_the_mcp_json_shape_and_refuse_ambiguous_servers():
    servers = parse_servers(
        {"mcpServers": {"a": {"command": "x", "args": ["-v"]}, "b": {"url": "http://h/mcp"}}}
    )
    assert servers["a"].args == ["-v"] and servers["b"].url == "http://h/mcp"
    with pytest.raises(ValueError, match="either `command`"):
        parse_servers({"c": {"command": "x", "url": "http://h"}})
