"""`agent acp`: the agent as an ACP (Agent Client Protocol) agent on stdin/stdout, for Zed, Toad, acpx.

Built on PyPI's `agent-client-protocol` (0.12, `import acp`). The modules: session (one session's state,
the client's prompt and MCP servers in our terms), views (what the client is shown: tool calls, updates,
usage), pickers (the session's settings as config options and modes), agent (SpecAgent: the protocol's
requests, the sessions and server connections, approvals), wire (stdin and stdout, and `cmd_acp`, the
CLI's handler).
"""
