"""The action protocols' names come from the registry alone: a task file's `actions:` and a profile's
`actions` are checked against it, and the CLI offers it."""

from __future__ import annotations

import asyncio

import pytest

from agent.cli import build_parser
from agent.errors import ConfigError
from agent.protocols.registry import protocol_names
from agent.server.profiles import attach_profile
from agent.session.live import SessionSetup, open_session
from agent.session.taskfile import parse_task
from agent.settings.config import Settings


def test_a_task_file_may_name_any_protocol_of_the_registry():
    for name in protocol_names():
        spec, _ = parse_task(f"---\nactions: {name}\n---\nDo it.\n", "task.md")
        assert spec.actions == name


def test_a_task_file_naming_no_protocol_is_refused_with_the_field_and_the_names():
    with pytest.raises(ConfigError) as error:
        parse_task("---\nactions: smoke-signals\n---\nDo it.\n", "task.md")
    assert "actions" in str(error.value) and all(name in str(error.value) for name in protocol_names())


def test_a_profile_naming_no_protocol_is_refused_when_its_session_opens(tmp_path):
    profile = attach_profile("http://127.0.0.1:9").model_copy(update={"actions": "smoke-signals"})

    async def open_it() -> None:
        async with open_session(SessionSetup(Settings(), tmp_path, profile, "test"), lambda event: None):
            pass

    with pytest.raises(ConfigError, match="no action protocol 'smoke-signals'") as error:
        asyncio.run(open_it())
    assert "field 'actions'" in str(error.value)


def test_the_cli_offers_the_registry_s_names():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    (actions,) = [a for a in run._actions if a.dest == "actions"]
    assert list(actions.choices) == protocol_names()
