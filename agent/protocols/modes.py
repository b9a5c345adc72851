"""The protocol each `actions` mode names."""

from __future__ import annotations

from pathlib import Path

from agent.protocols.base import ActionProtocol, ActionsMode
from agent.protocols.edit_blocks.protocol import BlockActions
from agent.protocols.tool_calls.protocol import ToolCallActions


def make_actions(mode: ActionsMode, workspace: Path) -> ActionProtocol:
    return BlockActions(workspace) if mode == "blocks" else ToolCallActions()
