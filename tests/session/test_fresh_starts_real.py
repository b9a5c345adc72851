"""A stuck task's fresh start on the real embedded llama-server (tiny): the conversation is cleared,
the task comes again with the line its check fails on, the other way of working (a plan first), and
the server the run started is gone afterwards."""

from __future__ import annotations

import json

import pytest

from agent.protocols.edit_blocks.prompt import PLAN_TASK
from tests.core.test_loop import git_repo
from tests.faults import start_agent
from tests.faults.test_server_faults import agent_server, fault_profile, finally_gone, task

pytestmark = pytest.mark.server

NEVER = "python3 -c 'raise ValueError(\"the check never passes\")'"


def test_a_stuck_task_starts_afresh_on_the_real_server(tmp_path, isolated_state, embedded):
    repo = git_repo(tmp_path / "repo")
    profile = fault_profile(isolated_state, max_tokens=32)
    front = {"check": NEVER, "check_rounds": 0, "fresh_starts": 1, "max_turns": 2}
    proc = start_agent(str(task(tmp_path, **front)), "-p", profile, "--workdir", str(repo), "--json")
    with finally_gone(isolated_state) as seen:
        seen.append(agent_server(isolated_state, proc))
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [e["passed"] for e in events if e["type"] == "check.result"] == [False, False]
    [cleared] = [i for i, e in enumerate(events) if e["type"] == "compaction"]
    assert events[cleared]["reason"] == "cleared for fresh start 1"
    again = next(e for e in events[cleared:] if e["type"] == "user.message")["content"]
    assert "Say hello." in again and "failed: ValueError: the check never passes" in again
    assert PLAN_TASK in again  # the first line went without the plan step, the fresh start with it
    first = next(e for e in events if e["type"] == "user.message")["content"]
    assert PLAN_TASK not in first
