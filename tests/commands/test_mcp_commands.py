"""`agent mcp add / list / remove` on a project's .mcp.json, with a real server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent.cli import main

DEMO = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "demo.py")


def test_add_list_and_remove(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["mcp", "add", "demo", "--", sys.executable, DEMO]) == 0
    assert json.loads((tmp_path / ".mcp.json").read_text()) == {
        "mcpServers": {"demo": {"command": sys.executable, "args": [DEMO]}}
    }
    capsys.readouterr()
    assert main(["mcp", "list"]) == 0
    out = capsys.readouterr().out
    assert "mcp__demo__add" in out and "Add two integers." in out
    assert main(["mcp", "remove", "demo"]) == 0
    assert json.loads((tmp_path / ".mcp.json").read_text()) == {"mcpServers": {}}


def test_list_reports_a_server_that_does_not_start(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main(["mcp", "add", "gone", "--", "/no/such/server"])
    assert main(["mcp", "list"]) == 1
    assert "not started" in capsys.readouterr().out


def test_add_needs_a_command_or_a_url(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["mcp", "add", "x"]) == 2
    assert "either --url URL or -- COMMAND" in capsys.readouterr().err


def test_a_broken_mcp_json_is_named_and_left_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".mcp.json").write_text("{broken")
    assert main(["mcp", "remove", "x"]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    assert (tmp_path / ".mcp.json").read_text() == "{broken"
