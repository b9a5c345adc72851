"""A session's settings as the client shows them: ACP's session config options (pickers, stabilized in
2026) for the profile (which server, model and speculative setup), the approval mode and the action
protocol, and the older session modes (the approval modes again) for clients that know only those.

The values are what the session runs on now; agent.py changes them (a profile or a protocol reopens the
session, as /profile does) and reports them back.
"""

from __future__ import annotations

from pathlib import Path

from acp.schema import (
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)

from agent.errors import AgentError
from agent.server.profiles import ServerProfile, load_profiles
from agent.session.actions import described
from tools.approval import DESCRIPTIONS, MODES

PROFILE, MODE, ACTIONS = "profile", "mode", "actions"  # the config options' ids


def modes(current: str) -> SessionModeState:
    return SessionModeState(
        current_mode_id=current,
        available_modes=[
            SessionMode(id=m, name=DESCRIPTIONS[m][0], description=DESCRIPTIONS[m][1]) for m in MODES
        ],
    )


def config_options(profile: ServerProfile, mode: str, actions: str, workspace: Path) -> list:
    """The three pickers, each with its current value."""
    return [
        _select(PROFILE, "Profile", "The llama-server, model and speculative setup this session runs on; "
                "another starts its server and the conversation carries over.", "model",
                profile.name, profile_choices(profile, workspace)),
        _select(MODE, "Approval", "What runs without asking first.", "mode", mode,
                [SessionConfigSelectOption(value=m, name=n, description=d) for m, (n, d) in DESCRIPTIONS.items()]),
        _select(ACTIONS, "Action protocol", "How the model acts: native tool calls, or edit blocks written as "
                "text (small models do better with these).", None, actions, protocol_choices()),
    ]  # fmt: skip


def profile_choices(current: ServerProfile, workspace: Path) -> list[SessionConfigSelectOption]:
    """The profiles of this folder and the user's, each with what it runs; the one in use first when it
    is no file's (`--base-url`: attached to a server)."""
    try:
        profiles = load_profiles(workspace)
    except AgentError:  # a profile file that does not read: the session goes on with the one it has
        profiles = {}
    choices = [_profile_choice(name, p) for name, p in sorted(profiles.items())]
    if current.name not in profiles or profiles[current.name].base_url != current.base_url:
        choices = [_profile_choice(current.name, current), *(c for c in choices if c.value != current.name)]
    return choices


def _profile_choice(name: str, profile: ServerProfile) -> SessionConfigSelectOption:
    if profile.kind == "attach":
        what = f"attached to {profile.base_url}"
    else:
        what = f"speculation: {profile.spec_label}" + (
            f"; {profile.description}" if profile.description else ""
        )
    return SessionConfigSelectOption(value=name, name=name, description=what)


def protocol_choices() -> list[SessionConfigSelectOption]:
    return [SessionConfigSelectOption(value=name, name=name, description=line) for name, line in described()]


def _select(ident, name, description, category, current, choices) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        id=ident, name=name, description=description, category=category, type="select",
        current_value=current, options=choices,
    )  # fmt: skip
