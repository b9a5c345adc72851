"""Trust: a project's own .agent/config.toml, .agent/profiles and .mcp.json count only in a folder the
user trusted; the user's deny rules hold even then; `agent trust`, `--list`, `--revoke`; doctor."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.errors import ConfigError
from agent.server.profiles import get_profile, load_profiles
from agent.session.mcp_servers import mcp_configs
from agent.settings.config import load_settings
from agent.settings.trust import (
    is_trusted,
    project_files,
    trust,
    trusted_by,
    trusted_dirs,
    untrust,
    untrusted_notice,
)
from tests.frontends.test_headless import agent, call, task_file
from tests.mcp_servers import DEMO
from tests.scripted_server import ScriptedServer

FULL_AUTO = 'approval = "full-auto"\n\n[permissions]\nallow = {bash = ["touch *"]}\n'


def project(path: Path, config: str | None = FULL_AUTO, profiles: dict[str, str] | None = None,
            mcp: dict | None = None) -> Path:  # fmt: skip
    path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (path / ".agent").mkdir(exist_ok=True)
        (path / ".agent" / "config.toml").write_text(config)
    for name, text in (profiles or {}).items():
        (path / ".agent" / "profiles").mkdir(parents=True, exist_ok=True)
        (path / ".agent" / "profiles" / f"{name}.toml").write_text(text)
    if mcp is not None:
        (path / ".mcp.json").write_text(json.dumps({"mcpServers": mcp}))
    return path


def user_config(isolated_state: Path, text: str) -> None:
    path = isolated_state.parent / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# ---------------------------------------------------------------------- the store


def test_a_folder_is_trusted_through_itself_or_a_folder_above_it(tmp_path):
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    assert not is_trusted(inner)
    trust(tmp_path / "a")
    assert is_trusted(inner) and is_trusted(tmp_path / "a") and not is_trusted(tmp_path)
    assert trusted_by(inner) == (tmp_path / "a").resolve()
    assert not is_trusted(tmp_path / "ab")  # a prefix of the name is not a parent
    trust(tmp_path / "a")
    assert trusted_dirs() == [(tmp_path / "a").resolve()]  # listed once
    assert not untrust(inner)  # not listed itself
    assert untrust(tmp_path / "a") and not is_trusted(inner)


def test_the_store_is_its_own_file_and_a_broken_one_is_named(tmp_path, isolated_state):
    trust(tmp_path / 'odd "name"')
    store = isolated_state.parent / "config" / "trust.toml"
    assert is_trusted(tmp_path / 'odd "name"') and store.is_file()
    store.write_text("trusted = [")
    with pytest.raises(ConfigError, match=r"trust\.toml: not valid TOML"):
        is_trusted(tmp_path)


def test_project_files_lists_the_three_kinds_that_exist(tmp_path):
    assert project_files(tmp_path) == []
    project(tmp_path, profiles={"b": "", "a": ""}, mcp={})
    assert [str(p.relative_to(tmp_path)) for p in project_files(tmp_path)] == [
        ".agent/config.toml", ".agent/profiles/a.toml", ".agent/profiles/b.toml", ".mcp.json"
    ]  # fmt: skip
    assert "agent trust" in untrusted_notice(tmp_path) and ".agent/profiles/a.toml" in untrusted_notice(
        tmp_path
    )
    trust(tmp_path)
    assert untrusted_notice(tmp_path) is None


# ---------------------------------------------------------------------- what untrusted means


def test_an_untrusted_projects_config_is_ignored_and_a_trusted_ones_applies(tmp_path):
    ws = project(tmp_path / "ws")
    settings = load_settings(ws)
    assert settings.approval == "ask" and settings.permissions.allow == {}
    trust(ws)
    settings = load_settings(ws)
    assert settings.approval == "full-auto" and settings.permissions.allow == {"bash": ["touch *"]}


def test_the_users_deny_rules_survive_a_trusted_projects_permissions(tmp_path, isolated_state):
    user_config(isolated_state, '[permissions]\ndeny = {bash = ["rm *"]}\nallow = {bash = ["ls *"]}\n')
    ws = project(
        tmp_path / "ws",
        '[permissions]\nallow = {bash = ["touch *", "ls *"]}\ndeny = {bash = ["curl *"], read_file = [".env"]}\n',
    )
    trust(ws)
    rules = load_settings(ws).permissions
    assert rules.deny == {"bash": ["rm *", "curl *"], "read_file": [".env"]}
    assert rules.allow == {"bash": ["ls *", "touch *"]}


def test_a_project_profile_that_replaces_a_binary_counts_only_when_trusted(tmp_path):
    ws = project(
        tmp_path / "ws", None, profiles={"coder": 'binary = "/tmp/not-llama-server"\nmodel = "x.gguf"\n'}
    )
    assert get_profile("coder", ws).binary == "embedded"  # the built-in one
    trust(ws)
    assert get_profile("coder", ws).binary == "/tmp/not-llama-server"


def test_a_profile_only_an_untrusted_project_has_is_an_error_that_says_how_to_trust(
    tmp_path, monkeypatch, capsys
):
    ws = project(tmp_path / "ws", None, profiles={"mine": 'binary = "/bin/false"\nmodel = "x.gguf"\n'})
    monkeypatch.chdir(ws)
    assert "mine" not in load_profiles(ws)
    assert main(["server", "start", "mine"]) == 2
    err = capsys.readouterr().err
    assert "profile 'mine' is in" in err and ".agent/profiles, and that folder is not trusted" in err
    assert "run `agent trust` in" in err
    assert err.count("is not a trusted folder") == 1  # the notice, once


def test_an_untrusted_mcp_json_is_ignored(tmp_path):
    ws = project(tmp_path / "ws", None, mcp={"demo": {"command": sys.executable, "args": [DEMO]}})
    assert mcp_configs(load_settings(ws), ws) == {}
    trust(ws)
    assert list(mcp_configs(load_settings(ws), ws)) == ["demo"]


# ---------------------------------------------------------------------- `agent run` end to end

TOUCH = [{"tool_calls": [call("bash", command="touch ran.txt")]}, {"content": "done"}]


def run_json(task: Path, server: ScriptedServer, *args: str, cwd: Path | None = None) -> list[dict]:
    result = agent("run", str(task), "--base-url", server.url, "--json", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def trust_notices(events: list[dict]) -> list[str]:
    return [e["message"] for e in events if e["type"] == "notice" and "not a trusted folder" in e["message"]]


@pytest.mark.slow
def test_run_ignores_an_untrusted_projects_full_auto_and_rules_and_says_so_once(tmp_path):
    ws = project(tmp_path / "ws")
    with ScriptedServer(TOUCH) as server:
        events = run_json(task_file(tmp_path, "Touch it."), server, "--workdir", str(ws))
    [notice] = trust_notices(events)
    assert ".agent/config.toml" in notice and "`agent trust`" in notice
    [result] = [e for e in events if e["type"] == "tool.result"]
    assert not result["ok"] and "it needs approval" in result["output"]
    assert not (ws / "ran.txt").exists()


@pytest.mark.slow
def test_run_applies_a_trusted_projects_config_read_from_the_workdir(tmp_path):
    ws = project(tmp_path / "ws")
    trust(ws)
    with ScriptedServer(TOUCH) as server:  # run from the checkout: its folder has no project config
        events = run_json(task_file(tmp_path, "Touch it."), server, "--workdir", str(ws))
    assert not trust_notices(events)
    assert (ws / "ran.txt").exists()


@pytest.mark.slow
def test_run_reads_the_workdirs_config_not_the_current_folders(tmp_path):
    here = project(tmp_path / "here")
    trust(here)
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedServer(TOUCH) as server:
        run_json(task_file(tmp_path, "Touch it."), server, "--workdir", str(work), cwd=here)
    assert not (work / "ran.txt").exists()  # here's full-auto did not apply to work


@pytest.mark.slow
def test_run_keeps_the_users_deny_rule_over_a_trusted_projects_full_auto(tmp_path, isolated_state):
    user_config(isolated_state, '[permissions]\ndeny = {bash = ["touch *"]}\n')
    ws = project(tmp_path / "ws")
    trust(ws)
    with ScriptedServer(TOUCH) as server:
        events = run_json(task_file(tmp_path, "Touch it."), server, "--workdir", str(ws))
    [result] = [e for e in events if e["type"] == "tool.result"]
    assert not result["ok"] and not (ws / "ran.txt").exists()


@pytest.mark.slow
def test_an_mcp_json_stdio_server_starts_only_when_the_project_is_trusted(tmp_path):
    marker = tmp_path / "mcp-started"
    command = f"touch '{marker}' && exec '{sys.executable}' '{DEMO}'"
    ws = project(tmp_path / "ws", None, mcp={"demo": {"command": "sh", "args": ["-c", command]}})
    task = task_file(tmp_path, "Nothing.", approval="full-auto")
    with ScriptedServer(default={"content": "done"}) as server:
        events = run_json(task, server, "--workdir", str(ws))
        assert not marker.exists()
        assert ".mcp.json" in trust_notices(events)[0]
        trust(ws)
        events = run_json(task, server, "--workdir", str(ws))
    assert marker.exists()
    assert any(e["type"] == "notice" and e["message"] == "MCP server demo: 4 tools" for e in events)


# ---------------------------------------------------------------------- the commands


def test_agent_trust_shows_what_it_enables_then_list_and_revoke(tmp_path, monkeypatch, capsys):
    ws = project(
        tmp_path / "ws",
        profiles={"mine": 'binary = "/opt/llama-server"\nmodel = "x.gguf"\n[env]\nTOKEN = "t"\n'},
        mcp={"demo": {"command": sys.executable, "args": [DEMO], "env": {"KEY": "hunter2"}}},
    )
    monkeypatch.chdir(ws)
    assert main(["trust"]) == 0
    out = capsys.readouterr().out
    assert f"trusted {ws.resolve()}" in out
    for shown in ('approval = "full-auto"', 'allow bash: "touch *"', "profile mine: runs /opt/llama-server",
                  "with environment TOKEN", f"MCP server demo: starts {sys.executable} {DEMO} (sets KEY)"):  # fmt: skip
        assert shown in out
    assert "hunter2" not in out and is_trusted(ws)

    assert main(["trust", "--list"]) == 0
    assert capsys.readouterr().out.strip() == str(ws.resolve())

    assert main(["trust", "--revoke"]) == 0
    assert "no longer trusted" in capsys.readouterr().out and not is_trusted(ws)
    assert main(["trust", "--revoke", str(ws)]) == 2
    assert "is not a trusted folder" in capsys.readouterr().err
    assert main(["trust", "--list"]) == 0
    assert "no trusted folders" in capsys.readouterr().out


def test_revoking_a_folder_trusted_through_a_parent_names_the_parent(tmp_path, capsys):
    ws = project(tmp_path / "ws")
    assert main(["trust", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["trust", "--revoke", str(ws)]) == 2
    assert f"trusted through {tmp_path.resolve()}" in capsys.readouterr().err and is_trusted(ws)


def test_doctor_says_whether_this_folder_is_trusted(tmp_path, monkeypatch, capsys):
    ws = project(tmp_path / "ws", mcp={})
    monkeypatch.chdir(ws)
    main(["doctor"])
    out = capsys.readouterr().out
    assert "this folder is not trusted" in out and "ignored: .agent/config.toml, .mcp.json" in out
    trust(ws)
    main(["doctor"])
    assert "this folder is trusted" in (out := capsys.readouterr().out)
    assert "its project files apply: .agent/config.toml, .mcp.json" in out
