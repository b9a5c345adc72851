"""One prompt whose project declares a check: the model's first answer fails it, the fed-back failure
makes the second pass, and the work is committed. The session layer's tests, ACP's and the TUI's run
this same scenario, so that every front end is held to the same check loop and auto-commit."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from agent.settings.trust import trust
from tests.frontends.test_headless import call, events_of

CHECK = "grep -q 'x = 2' app.py || { echo 'app.py says x is not 2'; exit 1; }"
PROMPT = "Make x two in app.py."
SCRIPT = [
    {"tool_calls": [call("write_file", path="app.py", content="x = 1\n")]},
    {"content": "Done."},  # the check fails: its output goes back
    {"tool_calls": [call("edit_file", path="app.py", old_string="x = 1", new_string="x = 2")]},
    {"content": "Fixed."},  # the check passes: the work is committed
]


def project(path: Path, *, trusted: bool = True, check: str | None = CHECK, rounds: int = 2) -> Path:
    """A git repository whose .agent/config.toml declares the check, the auto-commit and auto-edit."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "README.md").write_text("a project\n")
    config = 'approval = "auto-edit"\nauto_commit = true\n'
    if check is not None:
        config += f"check = {json.dumps(check)}\ncheck_rounds = {rounds}\n"
    (path / ".agent").mkdir(exist_ok=True)
    (path / ".agent" / "config.toml").write_text(config)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "start")
    if trusted:
        trust(path)
    return path


def git(path: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=path, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def session_events(state: Path, workspace: Path) -> list[dict[str, Any]]:
    """The one recorded session in `workspace`."""
    found = [
        events
        for events in map(events_of, sorted((state / "sessions").glob("*.jsonl")))
        if events[0]["workspace"] == str(workspace.resolve())
    ]
    assert len(found) == 1, found
    return found[0]


def what_happened(state: Path, workspace: Path, requests: list[dict]) -> dict[str, Any]:
    """The scenario's result as any front end leaves it: the check rounds, what the model was told, the
    file, the commits, the notices, and how the session's transcript ends."""
    events = session_events(state, workspace)
    told = requests[2]["messages"][-1]["content"] if len(requests) > 2 else ""
    return {
        "checks started": [(e["round"], e["rounds_left"]) for e in events if e["type"] == "check.started"],
        "checks": [(e["round"], e["passed"]) for e in events if e["type"] == "check.result"],
        "requests": len(requests),
        "failure fed back": "app.py says x is not 2" in told and "check" in told,
        "prompt typed": next(e["typed"] or e["content"] for e in events if e["type"] == "user.message"),
        "app.py": (workspace / "app.py").read_text(),
        "commits": git(workspace, "log", "--format=%s").splitlines(),
        "committed app.py": git(workspace, "show", "HEAD:app.py"),
        "clean": git(workspace, "status", "--porcelain") == "",
        "notices": [
            re.sub(r"\b[0-9a-f]{10}\b", "SHA", e["message"].splitlines()[0])
            for e in events
            if e["type"] == "notice" and e["message"].startswith(("changed ", "committed", "the check"))
        ],
    }


EXPECTED = {
    "checks started": [(1, 2), (2, 1)],
    "checks": [(1, False), (2, True)],
    "requests": 4,
    "failure fed back": True,
    "prompt typed": PROMPT,
    "app.py": "x = 2\n",
    "commits": [f"agent: {PROMPT}", "start"],
    "committed app.py": "x = 2\n",
    "clean": True,
    "notices": ["changed 1 file (lines added, deleted):", "committed SHA (1 file)"],
}
