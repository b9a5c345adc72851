"""`agent mcp add / list / remove / call` on a project's .mcp.json, with real servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.settings.trust import trust
from tests.mcp_servers import DEMO, PROBE, served


@pytest.fixture(autouse=True)
def trusted_project(tmp_path, isolated_state):
    """Each test's folder is a project the user trusted: an untrusted one's .mcp.json is ignored
    (tests/settings/test_trust.py covers that)."""
    trust(tmp_path)


@pytest.mark.slow
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


def write_servers(path: Path, servers: dict) -> None:
    (path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


@pytest.mark.slow
def test_list_shows_the_keys_of_env_and_headers_never_their_values(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEMO_TOKEN", "sk-expanded")
    write_servers(
        tmp_path,
        {
            "demo": {"command": sys.executable, "args": [DEMO], "env": {"API_KEY": "hunter2"}},
            "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${DEMO_TOKEN}"}},
        },
    )
    assert main(["mcp", "list"]) == 1  # nothing listens on port 9
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "API_KEY=***" in out and "Authorization=***" in out and "mcp__demo__add" in out
    assert "hunter2" not in out and "sk-expanded" not in out and "Bearer" not in out


@pytest.mark.slow
def test_call_prints_text_and_structured_content(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_servers(tmp_path, {"demo": {"command": sys.executable, "args": [DEMO]}})
    assert main(["mcp", "call", "demo", "add", '{"a": 2, "b": 3}']) == 0
    out = capsys.readouterr().out
    text, structured = out.split("\n", 1)
    assert text == "5" and json.loads(structured) == {"result": 5}


@pytest.mark.slow
def test_call_exits_1_when_the_tool_reports_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_servers(tmp_path, {"demo": {"command": sys.executable, "args": [DEMO]}})
    assert main(["mcp", "call", "demo", "fail", '{"reason": "disk full"}']) == 1
    captured = capsys.readouterr()
    assert "failed on purpose: disk full" in captured.out and "isError" in captured.err


@pytest.mark.slow
def test_call_exits_2_on_bad_input_naming_what_there_is(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_servers(tmp_path, {"demo": {"command": sys.executable, "args": [DEMO]}})
    assert main(["mcp", "call", "nope", "add", "{}"]) == 2
    assert "no MCP server 'nope'" in (err := capsys.readouterr().err) and "Configured: demo." in err
    assert main(["mcp", "call", "demo", "nope", "{}"]) == 2
    err = capsys.readouterr().err
    assert "has no tool 'nope'" in err and "add, shout, fail" in err
    assert main(["mcp", "call", "demo", "add", "{'a': 1}"]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "Expecting property name enclosed in double quotes" in err
    assert main(["mcp", "call", "demo", "add", "[1, 2]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err


@pytest.mark.slow
def test_call_over_http_with_a_header_from_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEMO_TOKEN", "sk-1")
    with served(PROBE, "http") as url:
        write_servers(
            tmp_path, {"web": {"type": "http", "url": url, "headers": {"X-Token": "${DEMO_TOKEN}"}}}
        )
        assert main(["mcp", "call", "web", "header", '{"name": "X-Token"}']) == 0
    assert capsys.readouterr().out.startswith("sk-1\n")


def test_call_reports_a_missing_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEMO_NOPE", raising=False)
    write_servers(
        tmp_path, {"demo": {"command": sys.executable, "args": [DEMO], "env": {"K": "${DEMO_NOPE}"}}}
    )
    assert main(["mcp", "call", "demo", "add", '{"a": 1, "b": 2}']) == 2
    err = capsys.readouterr().err
    assert "the MCP server demo did not start" in err and "${DEMO_NOPE} in env.K is not set" in err
