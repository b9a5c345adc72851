"""A call a tool's result proposes (the rest of a rename the task asks for) runs next through the loop's
own path for a call: asked for in `ask` mode, shown as its own tool.call and tool.result, and told to
the model inside the result of the call that proposed it, as the transcript rebuilds it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from agent.events import ApprovalAnswer, ApprovalRequested, ToolCallStarted
from agent.store.transcripts import SessionRecord
from tests.core.test_loop import Run, call, git_repo
from tests.frontends.test_headless import SCHEMA, agent, task_file
from tests.scripted_server import ScriptedServer
from tools.permissions import Permissions

TASK = "Rename want_bytes to to_bytes everywhere."
RENAMED = "from enc import to_bytes\n\nprint(to_bytes('a'))\n"
EDIT = {
    "tool_calls": [
        call("edit_file", path="enc.py", old_string="def want_bytes(s):", new_string="def to_bytes(s):")
    ]
}


def renaming_repo(path: Path) -> Path:
    repo = git_repo(path)
    (repo / "enc.py").write_text("def want_bytes(s):\n    return s.encode()\n")
    (repo / "sign.py").write_text("from enc import want_bytes\n\nprint(want_bytes('a'))\n")
    return repo


async def test_the_rest_of_a_rename_runs_as_its_own_call_and_is_told_with_the_edit(tmp_path):
    repo = renaming_repo(tmp_path / "repo")
    with ScriptedServer([EDIT, {"content": "Renamed."}]) as server:
        run = Run(server, repo)
        outcome = await run(TASK)
        told = server.requests[1]["messages"][-1]
    started = run.of(ToolCallStarted)
    assert [(e.name, e.proposed_by) for e in started] == [
        ("edit_file", ""),
        ("rename_symbol", started[0].call_id),
    ]
    assert started[1].arguments == {"path": "enc.py", "old": "want_bytes", "new": "to_bytes"}
    assert [(r.name, r.ok) for r in run.results()] == [("edit_file", True), ("rename_symbol", True)]
    assert run.results()[1].display["renamed"] == ["sign.py"]
    assert (repo / "sign.py").read_text() == RENAMED and outcome.status == "completed"
    # One tool message, for the model's one call: the follow-up's result inside it.
    assert told["role"] == "tool" and told["tool_call_id"] == started[0].call_id
    assert told["content"].endswith(
        "rename_symbol, run next: Renamed `want_bytes` to `to_bytes`: 2 lines in sign.py."
    )
    assert run.agent.changes == 2


async def test_in_ask_mode_the_rest_of_a_rename_is_asked_for_like_any_edit(tmp_path):
    repo = renaming_repo(tmp_path / "repo")
    asked: list[ApprovalRequested] = []

    async def approve(request: ApprovalRequested) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer("yes")

    with ScriptedServer([EDIT, {"content": "Renamed."}]) as server:
        run = Run(server, repo, approval="ask", approve=approve)
        await run(TASK)
    assert [(a.name, a.summary) for a in asked] == [
        ("edit_file", "enc.py"), ("rename_symbol", "enc.py: want_bytes -> to_bytes"),
    ]  # fmt: skip
    assert (repo / "sign.py").read_text() == RENAMED


async def test_the_rest_of_a_rename_declined_writes_nothing_and_the_model_is_told(tmp_path):
    repo = renaming_repo(tmp_path / "repo")

    async def approve(request: ApprovalRequested) -> ApprovalAnswer:
        return ApprovalAnswer("yes" if request.name == "edit_file" else "no", "keep sign.py as it is")

    with ScriptedServer([EDIT, {"content": "Left it."}]) as server:
        run = Run(server, repo, approval="ask", approve=approve)
        await run(TASK)
        told = server.requests[1]["messages"][-1]["content"]
    assert (repo / "sign.py").read_text() == "from enc import want_bytes\n\nprint(want_bytes('a'))\n"
    assert (repo / "enc.py").read_text().startswith("def to_bytes(s):")  # the edit itself was approved
    assert told.endswith("rename_symbol, run next: Not run: the user declined: keep sign.py as it is")
    assert not run.results()[1].ok


async def test_the_transcript_rebuilds_the_history_the_model_was_given(tmp_path):
    repo = renaming_repo(tmp_path / "repo")
    with ScriptedServer([EDIT, {"content": "Renamed."}]) as server:
        run = Run(server, repo)
        await run(TASK)
    recorded = SessionRecord("s", tmp_path / "s.jsonl", [e.to_json() for e in run.events])
    assert recorded.history() == run.agent.messages[1:]


async def test_the_rest_of_a_rename_runs_after_an_edit_block_too(tmp_path):
    repo = renaming_repo(tmp_path / "repo")
    block = "enc.py\n```python\n<<<<<<< SEARCH\ndef want_bytes(s):\n=======\ndef to_bytes(s):\n>>>>>>> REPLACE\n```"
    with ScriptedServer([{"content": block}, {"content": "Renamed."}]) as server:
        run = Run(server, repo, actions="blocks")
        outcome = await run(TASK)
        told = server.requests[1]["messages"][-1]["content"]
    assert [e.name for e in run.of(ToolCallStarted)] == ["edit_file", "rename_symbol"]
    assert "Renamed `want_bytes` to `to_bytes`: 2 lines in sign.py." in told
    assert "Go on with the task." in told and "Fix what failed" not in told
    assert (repo / "sign.py").read_text() == RENAMED and outcome.status == "completed"


@pytest.mark.slow  # `agent run` in a subprocess, twice
@pytest.mark.parametrize("actions", ["tools", "blocks"])
def test_agent_run_shows_and_records_the_rest_of_a_rename_as_its_own_call(tmp_path, isolated_state, actions):
    repo = renaming_repo(tmp_path / "repo")
    edit = EDIT if actions == "tools" else {
        "content": "enc.py\n```python\n<<<<<<< SEARCH\ndef want_bytes(s):\n=======\ndef to_bytes(s):\n>>>>>>> REPLACE\n```"
    }  # fmt: skip
    task = task_file(tmp_path, TASK, approval="auto-edit", actions=actions)
    with ScriptedServer([edit, {"content": "Renamed."}]) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json", "--workdir", str(repo))
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    calls = [e for e in events if e["type"] == "tool.call"]
    assert [(e["name"], e["proposed_by"]) for e in calls] == [
        ("edit_file", ""), ("rename_symbol", calls[0]["call_id"]),
    ]  # fmt: skip
    [recorded] = (isolated_state / "sessions").glob("*.jsonl")
    kept = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert any(e["type"] == "tool.result" and e["name"] == "rename_symbol" and e["ok"] for e in kept)
    assert (repo / "sign.py").read_text() == RENAMED


async def test_a_rename_reaching_a_file_a_rule_denies_runs_nowhere_and_says_which_file(tmp_path):
    repo = renaming_repo(tmp_path / "repo")
    (repo / "vendor").mkdir()
    (repo / "vendor" / "copy.py").write_text("from enc import want_bytes\n")
    settings = {"permissions": {"deny": {"edit_file": ["vendor/*"]}}}
    with ScriptedServer([EDIT, {"content": "Left it."}]) as server:
        run = Run(server, repo, settings=settings)
        await run(TASK)
    result = run.results()[1]
    assert result.name == "rename_symbol" and not result.ok
    assert "vendor/copy.py: denied by the rule edit_file: 'vendor/*'" in result.output
    assert (repo / "vendor" / "copy.py").read_text() == "from enc import want_bytes\n"
    assert "want_bytes" in (repo / "sign.py").read_text()  # the call is one change: none of it ran


async def test_a_rename_reaching_a_file_that_runs_as_code_later_asks_even_in_full_auto(tmp_path):
    repo = renaming_repo(tmp_path / "repo")
    (repo / "githooks").mkdir()
    (repo / "githooks" / "check.py").write_text("from enc import want_bytes\n")
    subprocess.run(["git", "config", "core.hooksPath", "githooks"], cwd=repo, check=True)
    asked: list[ApprovalRequested] = []

    async def approve(request: ApprovalRequested) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer("no")

    with ScriptedServer([EDIT, {"content": "Left it."}]) as server:
        run = Run(server, repo, approval="full-auto", approve=approve)
        await run(TASK)
    assert [a.name for a in asked] == ["rename_symbol"]
    assert "githooks/check.py" in asked[0].reason
    assert (repo / "githooks" / "check.py").read_text() == "from enc import want_bytes\n"


def test_in_ask_mode_a_rename_is_asked_for_once_for_the_call_not_again_for_each_file(tmp_path):
    permissions = Permissions("ask", workspace=tmp_path)
    verdict = permissions.check_files("rename_symbol", "edit", "enc.py: a -> b", ["enc.py", "sign.py"])
    assert (verdict.decision, verdict.reason) == ("ask", "ask mode: edits need approval")
