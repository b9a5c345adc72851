"""Fault injection and bad input: each test breaks one thing on purpose (issue 13).

The helpers below run the real `agent run` as a child process, as a user or a script would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AGENT_RUN = [sys.executable, "-m", "agent", "run"]


def start_agent(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([*AGENT_RUN, *args], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **(env or {})})  # fmt: skip


def run_agent(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*AGENT_RUN, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=os.environ.copy())  # fmt: skip


def wait_until(condition: Callable[[], object], timeout: float = 120, what: str = "", poll: float = 0.01):
    """Poll `condition` until it is true and return its value; the timeout only bounds a failing test."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(poll)
    return value
