"""Real MCP servers for the tests, and a way to serve one over HTTP or SSE."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEMO = str(Path(__file__).resolve().parent / "demo.py")  # add, shout, fail, slow
PROBE = str(Path(__file__).resolve().parent / "probe.py")  # header, environment, note; also over SSE


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def served(server: str, transport: str = "http") -> Iterator[str]:
    """A server script as a child process speaking `http` (Streamable HTTP) or `sse`; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, server, transport, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}"
    finally:
        proc.terminate()
        proc.wait(10)
