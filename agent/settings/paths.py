"""Where the agent keeps things: the state, cache and config folders, and a project's own config file.

Apart from agent/settings/config.py so that agent/settings/trust.py, which the settings consult, can name them too.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "spec-agent"
PROJECT_CONFIG = Path(".agent") / "config.toml"


def _dir_from_env(var: str, default: str) -> Path:
    value = os.environ.get(var)
    return Path(os.path.expandvars(value)).expanduser() if value else Path(default)


def state_dir() -> Path:
    """Where running servers, their logs, sessions and telemetry are kept (AGENT_STATE_DIR)."""
    import platformdirs

    return _dir_from_env("AGENT_STATE_DIR", platformdirs.user_state_dir(APP_NAME))


def cache_dir() -> Path:
    """Where the built llama-server and the embedded model are kept (AGENT_CACHE_DIR)."""
    import platformdirs

    return _dir_from_env("AGENT_CACHE_DIR", platformdirs.user_cache_dir(APP_NAME))


def config_dir() -> Path:
    """Where the user's config.toml and their own profiles live (AGENT_CONFIG_DIR)."""
    import platformdirs

    return _dir_from_env("AGENT_CONFIG_DIR", platformdirs.user_config_dir(APP_NAME))
