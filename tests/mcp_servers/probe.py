"""A real MCP server (SDK) that reports what reached it: HTTP headers, its environment, and the
arguments of a tool whose property is named `title`. stdio by default, `http PORT` or `sse PORT`."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("probe")


@mcp.tool()
def header(name: str, ctx: Context) -> str:
    """The value of a header of the HTTP request that carried this call."""
    return (ctx.headers or {}).get(name.lower(), "(absent)")


@mcp.tool()
def environment(name: str) -> str:
    """The value of an environment variable of this server process."""
    return os.environ.get(name, "(unset)")


@mcp.tool()
def note(title: str, body: str) -> str:
    """A note; its property `title` is a name, not the JSON-schema annotation."""
    return f"{title}: {body}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1:2] == ["sse"]:
        mcp.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
