"""The agent loop against the scripted model: real tools, real git repositories, real pytest."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from agent.core.context import SUMMARY_INSTRUCTION
from agent.core.llm import ModelClient
from agent.core.loop import Limits
from agent.core.task_message import task_message
from agent.core.workbench import Workbench
from agent.events import ApprovalAnswer, ApprovalRequested, Compacted, ErrorEvent, Event, ToolFinished
from agent.server.endpoint import Endpoint
from agent.session.build_agent import build_agent
from agent.settings.config import Settings
from tests.scripted_server import ScriptedServer


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.email", "u@x"],
        ["git", "config", "user.name", "U"],
    ):
        subprocess.run(cmd, cwd=path, check=True)
    return path


class Run:
    """One agent over a scripted server, with its events collected."""

    def __init__(
        self,
        server: ScriptedServer,
        workspace: Path,
        approval: str = "full-auto",
        approve=None,
        settings: dict | None = None,
        **kw,
    ) -> None:
        self.server, self.workspace, self.events = server, workspace, []
        self.approval, self.approve, self.kw = approval, approve, kw
        self.settings = settings or {}

    async def __call__(self, task: str = "do the task"):
        client = ModelClient(Endpoint(base_url=self.server.url + "/v1", model="scripted"))
        workbench = Workbench(self.workspace)
        self.agent = await build_agent(
            Settings(approval=self.approval, **self.settings),
            workbench,
            client,
            self.events.append,
            self.approve,
            **self.kw,
        )
        try:
            message = task_message(
                workbench, task, self.agent.actions, self.agent.context, prefix=self.agent.system_prompt
            )
            return await self.agent.run(message, task)  # (the task's own words, as front ends give them)
        finally:
            await client.close()

    def of(self, kind: type[Event]) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    def results(self) -> list[ToolFinished]:
        return self.of(ToolFinished)


PLAN = [
    {"content": "I'll look first.", "tool_calls": [call("list_files")]},
    {"tool_calls": [call("write_file", path="store.py", content="def add(a, b):\n    return a - b\n")]},
    {
        "tool_calls": [
            call(
                "write_file",
                path="test_store.py",
                content="from store import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
            )
        ]
    },
    {
        "tool_calls": [
            call("bash", command=f"{sys.executable} -m pytest -q -p no:cacheprovider test_store.py")
        ]
    },
    {"tool_calls": [call("read_file", path="store.py")]},
    {
        "tool_calls": [
            call("edit_file", path="store.py", old_string="return a - b", new_string="return a + b")
        ]
    },
    {
        "tool_calls": [
            call("bash", command=f"{sys.executable} -m pytest -q -p no:cacheprovider test_store.py")
        ]
    },
    {"content": "Added store.add and its test; pytest passes."},
]


@pytest.mark.slow
async def test_a_scripted_plan_creates_edits_and_tests_a_module_for_real(tmp_path):
    repo = git_repo(tmp_path / "proj")
    with ScriptedServer(PLAN) as server:
        run = Run(server, repo)
        outcome = await run("Create store.add with a test.")
    assert outcome.status == "completed" and outcome.final.startswith("Added store.add")
    results = run.results()
    first_pytest, second_pytest = results[3], results[6]
    assert not first_pytest.ok and "1 failed" in first_pytest.output  # the real pytest saw the bug
    assert second_pytest.ok and "1 passed" in second_pytest.output and "[exit code 0]" in second_pytest.output
    assert (repo / "store.py").read_text() == "def add(a, b):\n    return a + b\n"
    # Each request resent the history unchanged and appended to it: the prefix stays cacheable.
    bodies = server.requests
    assert all(b["tools"] == bodies[0]["tools"] for b in bodies)
    for earlier, later in itertools.pairwise(bodies):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]


async def test_the_system_prompt_carries_agents_md_and_no_dynamic_facts(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Always use tabs.\n")
    with ScriptedServer([{"tool_calls": [call("list_files")]}, {"content": "done"}]) as server:
        await Run(server, tmp_path)()
    system = server.requests[0]["messages"][0]["content"]
    assert "# Project instructions (AGENTS.md)" in system and "Always use tabs." in system
    assert str(tmp_path) not in system and "date:" not in system
    assert "<environment>" in server.requests[0]["messages"][1]["content"]


async def test_cut_off_arguments_become_a_tool_error_and_are_closed_in_the_history(tmp_path):
    cut_off = '{"path": "a.py", "content": "def f(:\\n    ret'
    replies = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": cut_off},
                {"name": "bash", "arguments": "nonsense"},
            ],
            "finish_reason": "length",
        },
        {"content": "giving up"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path)
        outcome = await run()
    assert outcome.status == "completed"
    error = run.results()[0]
    assert (
        not error.ok
        and "not valid JSON" in error.output
        and "write_file(path: string, content: string)" in error.output
    )
    resent = server.requests[1]["messages"][-3]["tool_calls"]
    # What the model wrote stays as the prefix (the server's cache still matches), closed into valid JSON.
    assert resent[0]["function"]["arguments"] == cut_off + '"}'
    assert resent[1]["function"]["arguments"] == "{}"
    assert not (tmp_path / "a.py").exists()


async def test_unknown_tools_missing_fields_and_wrong_types_go_back_to_the_model(tmp_path):
    replies = [
        {
            "tool_calls": [
                call("delete_everything"),
                call("read_file"),
                call("read_file", path="x", limit="lots"),
            ]
        },
        {"content": "ok"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path)
        await run()
    unknown, missing, wrong = (r.output for r in run.results())
    assert "Unknown tool 'delete_everything'. Available tools: bash, read_file" in unknown
    assert "'path': Field required" in missing and "Expected:" in missing
    assert "'limit': Input should be a valid integer" in wrong


async def test_tool_calls_written_as_text_are_run(tmp_path):
    (tmp_path / "hello.txt").write_text("hi there\n")
    tagged = 'Let me read it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "hello.txt"}}\n</tool_call>'
    fenced = 'Now list.\n```json\n{"name": "list_files", "arguments": {}}\n```'
    with ScriptedServer([{"content": tagged}, {"content": fenced}, {"content": "done"}]) as server:
        run = Run(server, tmp_path)
        outcome = await run()
    assert outcome.status == "completed"
    read, listed = run.results()
    assert "hi there" in read.output and "hello.txt" in listed.output
    history = server.requests[1]["messages"]
    assert (
        history[-2]["content"] == "Let me read it."
        and history[-2]["tool_calls"][0]["function"]["name"] == "read_file"
    )


async def test_repeating_the_same_failing_call_three_times_stops_the_task(tmp_path):
    same = {"tool_calls": [call("read_file", path="missing.py")]}
    with ScriptedServer([same, same, same, same, same]) as server:
        run = Run(server, tmp_path)
        outcome = await run()
    assert outcome.status == "repeated" and "3 times" in outcome.error
    assert len(server.requests) == 3
    assert run.of(ErrorEvent)[-1].error == "repeated"


async def test_the_turn_limit_ends_the_task(tmp_path):
    with ScriptedServer(default={"tool_calls": [call("list_files")]}) as server:
        run = Run(server, tmp_path, limits=Limits(max_turns=3))
        outcome = await run()
    assert outcome.status == "limit" and len(server.requests) == 3 and outcome.turns == 3


async def test_a_dangerous_command_is_asked_for_even_in_full_auto(tmp_path):
    asked: list[ApprovalRequested] = []

    async def approve(request: ApprovalRequested) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer("no", "do not push; open a pull request instead")

    replies = [{"tool_calls": [call("bash", command="git push --force origin main")]}, {"content": "ok"}]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path, approval="full-auto", approve=approve)
        await run()
    assert asked and asked[0].summary == "git push --force origin main" and "force-pushes" in asked[0].reason
    assert asked[0].suggested_rule == "git push *"
    result = run.results()[0]
    assert not result.ok and "the user declined: do not push; open a pull request instead" in result.output


async def test_without_anyone_to_ask_a_call_needing_approval_is_refused_with_the_reason(tmp_path):
    replies = [{"tool_calls": [call("write_file", path="x.py", content="x")]}, {"content": "ok"}]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path, approval="ask", approve=None)
        await run()
    result = run.results()[0]
    assert (
        "Not run: it needs approval (ask mode: edits need approval) and nobody can approve" in result.output
    )
    assert not (tmp_path / "x.py").exists()


async def test_always_allows_the_same_kind_of_command_afterwards(tmp_path):
    answers = []

    async def approve(request):
        answers.append(request.summary)
        return ApprovalAnswer("always")

    replies = [
        {"tool_calls": [call("bash", command="touch one two")]},
        {"tool_calls": [call("bash", command="touch one three")]},
        {"content": "ok"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path, approval="ask", approve=approve)
        await run()
    assert answers == ["touch one two"]  # the second matched the new rule "touch one *"
    assert [r.ok for r in run.results()] == [True, True]


async def test_a_checkpoint_is_taken_before_the_first_change_and_undo_restores(tmp_path):
    repo = git_repo(tmp_path / "proj")
    (repo / "keep.py").write_text("original\n")
    replies = [
        {"tool_calls": [call("write_file", path="keep.py", content="changed\n")]},
        {"tool_calls": [call("write_file", path="new.py", content="new\n")]},
        {"content": "done"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, repo)
        await run()
    from tools.git import Checkpoints, open_repo

    checkpoints = Checkpoints(open_repo(repo))
    assert len(checkpoints.list()) == 1  # one per task, before its first change
    checkpoints.undo()
    assert (repo / "keep.py").read_text() == "original\n" and not (repo / "new.py").exists()


async def test_outside_git_the_agent_says_so_once_and_still_works(tmp_path):
    replies = [{"tool_calls": [call("write_file", path="a.txt", content="x")]}, {"content": "done"}]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path)
        outcome = await run()
    notices = [e.message for e in run.events if e.kind == "notice"]
    assert outcome.status == "completed" and (tmp_path / "a.txt").exists()
    assert sum("not a git repository" in n for n in notices) == 1
    assert "git_status" not in [t["function"]["name"] for t in server.requests[0]["tools"]]


@pytest.mark.slow
async def test_interrupting_a_running_tool_kills_it_and_leaves_a_consistent_history(tmp_path):
    marker = tmp_path / "pid"
    replies = [{"tool_calls": [call("bash", command=f"echo $$ > {marker}; sleep 300"), call("list_files")]}]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path)
        task = asyncio.create_task(run())
        while not marker.exists():
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    messages = run.agent.messages
    call_ids = [c["id"] for c in messages[-3]["tool_calls"]]
    assert [m.get("tool_call_id") for m in messages[-2:]] == call_ids
    assert all(m["content"] == "(not run: interrupted)" for m in messages[-2:])
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


async def test_a_huge_tool_output_is_cut_to_fit_the_context(tmp_path):
    (tmp_path / "big.txt").write_text("word " * 30000)
    replies = [{"tool_calls": [call("read_file", path="big.txt")]}, {"content": "done"}]
    with ScriptedServer(replies, n_ctx=6000) as server:
        run = Run(server, tmp_path)
        outcome = await run()
    assert outcome.status == "completed"
    sent = server.requests[1]["messages"][-1]["content"]
    assert "characters left out to fit the context" in sent and len(sent) < 10_000


async def test_old_tool_outputs_are_pruned_so_more_turns_run_than_fit(tmp_path):
    for i in range(10):
        (tmp_path / f"f{i}.txt").write_text(f"file {i} " * 250)
    reads = iter(
        [{"tool_calls": [call("read_file", path=f"f{i}.txt")]} for i in range(10)] + [{"content": "done"}]
    )

    def model(body: dict) -> dict:
        if body["messages"][-1]["content"] == SUMMARY_INSTRUCTION:
            return {"content": "Read files f0 to f3 so far."}
        return next(reads)

    with ScriptedServer(default=model, n_ctx=4000) as server:
        run = Run(server, tmp_path)
        outcome = await run()
    assert outcome.status == "completed" and outcome.turns == 11
    total_output = sum(len(r.output) for r in run.results()) // 4
    assert total_output > 4000  # the task read more than the context holds
    assert run.of(Compacted)
    assert all(b["messages"][0] == server.requests[0]["messages"][0] for b in server.requests)


async def test_an_overflow_with_nothing_left_to_summarise_is_a_clear_error(tmp_path):
    with ScriptedServer([{"overflow": True}]) as server:
        run = Run(server, tmp_path)
        outcome = await run()
    assert outcome.status == "error" and "ContextTooSmall" in outcome.error and "--ctx-size" in outcome.error
    assert len(server.requests) == 1  # no loop of retries


async def test_a_server_overflow_summarises_old_turns_and_retries(tmp_path):
    replies = [
        {"tool_calls": [call("list_files")]},
        {"tool_calls": [call("list_files")]},
        {"tool_calls": [call("list_files")]},
        {"overflow": True},
        {"content": "I listed the files three times."},
        {"content": "done"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path)
        outcome = await run("List the files.")
    assert outcome.status == "completed" and outcome.final == "done"
    compacted = run.of(Compacted)[0]
    assert compacted.messages_summarised > 0 and "the server said" in compacted.reason
    summary_request = server.requests[4]
    assert (
        summary_request["tool_choice"] == "none" and summary_request["tools"] == server.requests[0]["tools"]
    )
    retried = server.requests[5]["messages"]
    assert retried[0] == server.requests[0]["messages"][0]  # the cached prefix survives compaction
    assert "I listed the files three times." in retried[1]["content"]
    assert "List the files." in retried[1]["content"]  # the task itself is kept verbatim
    assert compacted.history == retried[1:]  # what a resumed session will rebuild


async def test_an_overflow_on_the_first_turn_summarises_that_turn_and_goes_on(tmp_path):
    # A small context and one big turn (the tiny model's garbage calls did this in CI): nothing older
    # is left, so the newest turn is summarised too rather than the run stopping with a full context.
    replies = [
        {"tool_calls": [call("list_files"), call("list_files")]},
        {"overflow": True},
        {"content": "I listed the files twice."},
        {"content": "done"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path)
        outcome = await run("List the files.")
    assert outcome.status == "completed" and outcome.final == "done"
    [compacted] = run.of(Compacted)
    assert compacted.messages_summarised == 4  # the task, the call and its two results
    assert compacted.tokens_after < compacted.tokens_before
    retried = server.requests[3]["messages"]
    assert [m["role"] for m in retried] == ["system", "user"]
    assert "I listed the files twice." in retried[1]["content"] and "List the files." in retried[1]["content"]


async def test_a_second_overflow_after_a_compaction_compacts_again(tmp_path):
    replies = [
        *[{"tool_calls": [call("list_files")]}] * 3,
        {"overflow": True},
        {"content": "Listed twice."},
        {"overflow": True},
        {"content": "Listed three times."},
        {"content": "done"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, tmp_path)
        outcome = await run("List the files.")
    assert outcome.status == "completed" and outcome.final == "done"
    assert len(run.of(Compacted)) == 2
    assert "Listed three times." in server.requests[7]["messages"][1]["content"]


def test_close_json_keeps_what_was_written_as_a_prefix():
    from agent.core.history import history_arguments

    assert history_arguments('{"a": "x') == '{"a": "x"}'
    assert history_arguments('{"a": 1, "b": [1, 2') == '{"a": 1, "b": [1, 2]}'
    assert history_arguments('{"a": 1,') == '{"a": 1}'
    assert history_arguments('{"ok": true}') == '{"ok": true}'
    assert history_arguments("[1, 2]") == "{}"
    assert history_arguments("") == "{}"


async def test_interrupting_the_stream_stops_it_and_leaves_no_partial_message(tmp_path):
    slow = {"content": "a very long answer " * 200, "chunk_delay": 0.02}
    with ScriptedServer([slow]) as server:
        run = Run(server, tmp_path)
        task = asyncio.create_task(run())
        while not any(e.kind == "text.delta" for e in run.events):
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
    assert [m["role"] for m in run.agent.messages] == ["system", "user"]  # nothing half-written kept
