"""The approval modes, declared once (tools/approval.py), are the ones every reader of them accepts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent.cli import build_parser
from agent.session.taskfile import TaskSpec
from agent.settings.config import Settings
from tools.approval import DESCRIPTIONS, EDITS_UNASKED, MODES, MODES_IN_WORDS
from tools.permissions import Permissions


def test_every_mode_has_a_name_and_a_description_in_the_same_order():
    assert tuple(DESCRIPTIONS) == MODES
    assert set(EDITS_UNASKED) <= set(MODES)
    assert MODES_IN_WORDS == "ask, auto-edit, full-auto or read-only"


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_is_taken_by_the_settings_the_task_file_the_command_line_and_the_permissions(mode):
    assert Settings(approval=mode).approval == mode
    assert TaskSpec(approval=mode).approval == mode
    assert build_parser().parse_args(["run", "--approval", mode]).approval == mode
    assert Permissions(mode).mode == mode


def test_anything_else_is_refused_by_each_of_them():
    with pytest.raises(ValidationError):
        Settings(approval="auto")
    with pytest.raises(ValidationError):
        TaskSpec(approval="auto")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--approval", "auto"])
    with pytest.raises(ValueError):
        Permissions("auto")
