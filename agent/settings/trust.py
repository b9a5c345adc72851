"""Which folders' own configuration the agent obeys.

A repository can carry `.agent/config.toml` (approval mode, permission rules, MCP servers),
`.agent/profiles/*.toml` (the binary a server profile runs) and `.mcp.json` (programs started as MCP
servers). Cloning one must not be enough to widen what the agent may do or to run its programs, so
these files are read only in a folder the user trusted (`agent trust`, /trust in the TUI), as Codex
and Claude Code do. A folder is trusted when it, or a folder above it, is listed.

The list is its own file, trust.toml in the user's config folder, and not a field of config.toml:
config.toml is the user's hand-written file (comments, order) and this one is written by
`agent trust`, so the agent never rewrites the user's file; and as no Settings field names trusted
folders, a project's own .agent/config.toml cannot declare itself trusted.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from agent.errors import ConfigError
from agent.settings.paths import PROJECT_CONFIG, config_dir

TRUST_FILE = "trust.toml"
PROJECT_PROFILES = Path(".agent") / "profiles"
PROJECT_MCP = Path(".mcp.json")

_warned: set[Path] = set()  # folders whose notice this process already printed


def trust_file() -> Path:
    return config_dir() / TRUST_FILE


def _resolved(path: Path | str) -> Path:
    return Path(path).expanduser().resolve()


def trusted_dirs() -> list[Path]:
    """The folders the user trusted, as written (resolved when they were added)."""
    path = trust_file()
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path}: not valid TOML", str(exc), "Fix the file, or remove it and run `agent trust` again."
        ) from exc
    listed = data.get("trusted", [])
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
        raise ConfigError(f"{path}: 'trusted' must be a list of folder paths", fix="Fix or remove the file.")
    return [Path(item) for item in listed]


def trusted_by(path: Path | str) -> Path | None:
    """The listed folder that trusts `path` (itself or a folder above it), or None."""
    target = _resolved(path)
    for folder in trusted_dirs():
        if target == folder or folder in target.parents:
            return folder
    return None


def is_trusted(path: Path | str) -> bool:
    return trusted_by(path) is not None


def _write(folders: list[Path]) -> None:
    path = trust_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Folders whose own .agent/config.toml, .agent/profiles/ and .mcp.json the agent uses,",
        "# with every folder inside them. Written by `agent trust`; `agent trust --revoke DIR` removes one.",
        "trusted = [",
        # A JSON string is a TOML basic string: the same quotes and escapes.
        *(f"    {json.dumps(str(folder), ensure_ascii=False)}," for folder in folders),
        "]",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def trust(path: Path | str) -> Path:
    """List the folder (resolved); returns it. Already listed: nothing changes."""
    folder = _resolved(path)
    folders = trusted_dirs()
    if folder not in folders:
        _write([*folders, folder])
    return folder


def untrust(path: Path | str) -> bool:
    """Take the folder off the list; False when it was not listed itself."""
    folder = _resolved(path)
    folders = trusted_dirs()
    if folder not in folders:
        return False
    _write([f for f in folders if f != folder])
    return True


def project_files(path: Path | str) -> list[Path]:
    """The files of the folder that only apply once it is trusted, those that exist."""
    root = Path(path)
    found = [root / PROJECT_CONFIG] if (root / PROJECT_CONFIG).is_file() else []
    profiles = root / PROJECT_PROFILES
    if profiles.is_dir():
        found += sorted(p for p in profiles.glob("*.toml") if p.is_file())
    if (root / PROJECT_MCP).is_file():
        found.append(root / PROJECT_MCP)
    return found


def untrusted_notice(path: Path | str, how: str = "run `agent trust` in that folder") -> str | None:
    """What an untrusted folder's project files mean for this run, or None when nothing is ignored."""
    files = project_files(path)
    if not files or is_trusted(path):
        return None
    names = ", ".join(str(f.relative_to(path)) for f in files)
    return (
        f"{_resolved(path)} is not a trusted folder, so its own configuration is ignored: {names}. "
        "Such files can set the approval mode and permission rules, the programs a server profile "
        f"runs and MCP servers to start. Read them, then {how} to use them."
    )


def warn_untrusted(path: Path | str) -> None:
    """The notice on stderr, once per process: for the plain commands that read project files."""
    folder = _resolved(path)
    if folder in _warned:
        return
    notice = untrusted_notice(path)
    if notice:
        _warned.add(folder)
        print(f"note: {notice}", file=sys.stderr)
