"""The exit codes, declared once (agent/errors.py): what scripts read, in numbers and in words."""

from __future__ import annotations

import json
import signal

from agent.errors import RUN_EXIT_CODES, AgentError, ExitCode, ServerError
from agent.session.task_run import SIGNAL_EXIT
from agent.store.lock import WorkspaceBusy


def test_an_exit_code_is_written_out_as_its_number():
    # They travel in --json events and transcripts, and in messages.
    assert json.dumps({"exit_code": ExitCode.SERVER}) == '{"exit_code": 4}'
    assert f"exit {ExitCode.LIMIT}" == "exit 3"


def test_a_signal_s_exit_code_is_128_and_the_signal():
    assert SIGNAL_EXIT == {signal.SIGINT: 128 + signal.SIGINT, signal.SIGTERM: 128 + signal.SIGTERM}


def test_each_error_exits_with_its_code():
    assert [AgentError.exit_code, ServerError.exit_code, WorkspaceBusy.exit_code] == [2, 4, 5]


def test_the_help_says_every_code_of_a_run_and_not_the_suite_s_own():
    assert RUN_EXIT_CODES.startswith("exit codes: 0 success, 1 task or check failed, 2 usage/config")
    assert "124" not in RUN_EXIT_CODES and RUN_EXIT_CODES.endswith("143 terminated (SIGTERM)")
