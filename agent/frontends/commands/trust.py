"""`agent trust [DIR]`, `--list`, `--revoke [DIR]`: which folders' own configuration the agent uses.

Trusting shows what the folder's files set (approval mode, rules, profiles' programs, MCP servers),
so the user sees what they agreed to; `--revoke` takes it back. The rules are in agent/settings/trust.py.
"""

from __future__ import annotations

import json
import tomllib
from argparse import Namespace
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.settings import trust
from agent.settings.config import PROJECT_CONFIG, Settings, config_dir


def cmd_trust(args: Namespace, settings: Settings) -> int:
    if args.list:
        return _list()
    folder = Path(args.dir or Path.cwd()).expanduser().resolve()
    if args.revoke:
        return _revoke(folder)
    if not folder.is_dir():
        raise AgentError(f"{folder} is not a folder", fix="agent trust [DIR]: DIR is a project's folder.")
    already = trust.trusted_by(folder)
    trust.trust(folder)
    said = f"(already, through {already})" if already and already != folder else ""
    print(f"trusted {folder} {said}".rstrip())
    files = trust.project_files(folder)
    if not files:
        print("it has no project files yet (.agent/config.toml, .agent/profiles/*.toml, .mcp.json);")
        print("those added later apply without asking again")
    else:
        print("these files of it now apply:")
        for path in files:
            print(f"  {path.relative_to(folder)}")
            for line in describe(folder, path):
                print(f"      {line}")
    print(f"`agent trust --revoke {folder}` takes it back")
    return 0


def _list() -> int:
    folders = trust.trusted_dirs()
    if not folders:
        print(f"no trusted folders ({trust.trust_file()} lists none); `agent trust` in a project adds it")
        return 0
    for folder in folders:
        print(f"{folder}" + ("" if folder.is_dir() else "  (no longer exists)"))
    return 0


def _revoke(folder: Path) -> int:
    if not trust.untrust(folder):
        parent = trust.trusted_by(folder)
        if parent:
            raise AgentError(
                f"{folder} is trusted through {parent}, not by itself",
                fix=f"agent trust --revoke {parent} (that also stops trusting every other folder in it)",
            )
        raise AgentError(f"{folder} is not a trusted folder", fix="agent trust --list shows those that are.")
    print(
        f"{folder} is no longer trusted: its own .agent/config.toml, .agent/profiles and .mcp.json are ignored"
    )
    if parent := trust.trusted_by(folder):
        print(f"(it is still trusted through {parent})")
    return 0


def describe(folder: Path, path: Path) -> list[str]:
    """What one project file sets, in a line or a few: what the user agrees to by trusting it."""
    try:
        if path == folder / PROJECT_CONFIG:
            return _describe_config(tomllib.loads(path.read_text(encoding="utf-8")))
        if path.suffix == ".toml":
            return _describe_profile(path)
        return _describe_mcp(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, UnicodeDecodeError, AgentError) as exc:  # TOMLDecodeError is a ValueError
        return [f"does not load: {str(exc).splitlines()[0]}"]


def _describe_config(data: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in data.items():
        if key == "permissions" and isinstance(value, dict):
            for kind in ("allow", "ask", "deny"):
                for tool, patterns in (value.get(kind) or {}).items():
                    lines.append(f"{kind} {tool}: " + ", ".join(json.dumps(p) for p in patterns))
        elif key == "mcp_servers" and isinstance(value, dict):
            lines += _describe_mcp(value)
        else:
            lines.append(f"{key} = {json.dumps(value, default=str)}")
    if any(line.startswith("allow ") for line in lines):
        lines.append("(its rules join yours: your own deny and ask rules still hold)")
    return lines or ["(empty)"]


def _describe_profile(path: Path) -> list[str]:
    from agent.server.profiles import builtin_profiles_dir, load_profile_file

    profile = load_profile_file(path)
    if profile.kind == "attach":
        what = f"profile {profile.name}: attaches to {profile.base_url}"
    elif profile.kind == "embedded":
        what = f"profile {profile.name}: runs the embedded llama-server"
    else:
        what = f"profile {profile.name}: runs {profile.binary}"
    lines = [what + (f" {' '.join(profile.args)}" if profile.args else "")]
    if profile.env:
        lines.append("with environment " + ", ".join(profile.env))
    for where, folder in (("built-in", builtin_profiles_dir()), ("your", config_dir() / "profiles")):
        if (folder / path.name).is_file():
            lines.append(f"(replaces the {where} profile {profile.name} in this folder)")
            break
    return lines


def _describe_mcp(data: dict[str, Any]) -> list[str]:
    from tools.mcp import parse_servers

    lines = []
    for name, server in parse_servers(data).items():
        if server.command:
            what = f"MCP server {name}: starts {' '.join([server.command, *server.args])}"
        else:
            what = f"MCP server {name}: connects to {server.url}"
        secrets = [*server.env, *server.headers]  # their values may be tokens: keys only
        lines.append(what + (f" (sets {', '.join(secrets)})" if secrets else ""))
    return lines or ["(no servers)"]
