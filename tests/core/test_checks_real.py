"""The check loop's feedback on the real embedded llama-server (tiny), greedy and capped at 8 tokens an
answer: too few to write a block, so the files stay as they were and the check fails the same way every
run, and what is under test is what the agent tells the model back."""

from __future__ import annotations

import json
import sys

import pytest

from agent.protocols.edit_blocks.prompt import FAILED_DEFINITION_REMINDER
from tests.faults import start_agent
from tests.faults.test_server_faults import agent_server, fault_profile, finally_gone, task

pytestmark = pytest.mark.server

PADDING = "".join(
    f"# line {n} of a long module, kept to make it too long to show whole\n" for n in range(3000)
)


def test_a_failure_located_in_tests_alone_shows_the_function_the_task_is_about_on_the_real_server(
    tmp_path, isolated_state, embedded
):
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "add.py").write_text(f"def add(a, b):\n    return a - b\n\n\n{PADDING}")  # shown in part
    (work / "tests" / "test_add.py").write_text(
        "import add\n\n\ndef test_add():\n    assert add.add(2, 3) == 5\n"
    )
    check = f"PYTHONPATH=. {sys.executable} -m pytest -q -p no:cacheprovider tests/test_add.py"
    front = {"check": check, "check_rounds": 1, "fresh_starts": 0, "max_turns": 3}
    body = "`add(2, 3)` returns -1, it should return 5."
    profile = fault_profile(isolated_state)
    proc = start_agent(str(task(tmp_path, body, **front)), "-p", profile, "--workdir", str(work), "--json")
    with finally_gone(isolated_state) as seen:
        seen.append(agent_server(isolated_state, proc))
        out, err = proc.communicate(timeout=300)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [e["passed"] for e in events if e["type"] == "check.result"][:1] == [False], out + err
    checked = next(i for i, e in enumerate(events) if e["type"] == "check.result")
    told = next(e for e in events[checked:] if e["type"] == "user.message")["content"]
    assert told.startswith(
        "`add` in add.py, the code the task is about, now reads (the check failed in a test of it):\n```\n"
        "def add(a, b):\n    return a - b\n```"
    ), told[:600]
    assert "test_add.py now reads" not in told
    assert told.rstrip().endswith(FAILED_DEFINITION_REMINDER.format(file="add.py", name="add"))
    assert (work / "add.py").read_text().startswith("def add(a, b):\n    return a - b\n")
