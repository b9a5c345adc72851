"""The agent loop on the real embedded llama-server: real malformed tool calls, real prompt cache."""

from __future__ import annotations

import itertools
import sys

import pytest

from agent.core.checks import work_until_checked
from agent.core.llm import ModelClient
from agent.core.loop import Limits
from agent.core.task_message import task_message
from agent.core.workbench import Workbench
from agent.events import ErrorEvent, ToolFinished, TurnCompleted
from agent.server.profiles import get_profile
from agent.session.build_agent import build_agent
from agent.session.connect import endpoint_for
from agent.settings.config import Settings

pytestmark = pytest.mark.server


async def session(server, workspace, tool_choice: str, tasks: list[str], max_turns: int = 3):
    events: list = []
    client = ModelClient(endpoint_for(get_profile("tiny"), server.base_url, None))
    workbench = Workbench(workspace)
    agent = await build_agent(Settings(approval="full-auto"), workbench, client, events.append, None,
                              limits=Limits(max_turns=max_turns), tool_choice=tool_choice)  # fmt: skip
    agent.request_overrides = {"temperature": 0}  # greedy: the same (malformed) calls on every run
    outcomes = [await agent.run(task_message(workbench, task)) for task in tasks]
    await client.close()
    return outcomes, events


async def test_real_malformed_tool_calls_become_tool_errors_and_the_session_carries_on(tiny_server, tmp_path):
    # Gemma 4's template with tool_choice "required" makes the base model emit real tool calls whose
    # arguments are nonsense or cut off at max_tokens (FACTS.md).
    outcomes, events = await session(tiny_server, tmp_path, "required", ["List the files.", "Run the tests."])
    errors = [e for e in events if isinstance(e, ToolFinished) and not e.ok]
    assert errors and all(
        e.output.startswith(("Error:", "Not run:")) or "[exit code" in e.output for e in errors
    )
    # Every request after the malformed calls was accepted: no HTTP 500 "Failed to parse tool call arguments".
    assert not [
        e for e in events if isinstance(e, ErrorEvent) and e.error in ("server_failure", "bad_request")
    ]
    assert all(o.status in ("completed", "limit", "repeated") for o in outcomes)
    turns = [e for e in events if isinstance(e, TurnCompleted)]
    assert len(turns) >= 2


async def test_each_request_reuses_the_whole_previous_prompt_from_the_cache(tiny_server, tmp_path):
    _, events = await session(tiny_server, tmp_path, "auto", ["Say hello.", "Say it again.", "Once more."])
    stats = [e.stats for e in events if isinstance(e, TurnCompleted)]
    assert len(stats) == 3
    for before, after in itertools.pairwise(stats):
        # The prefix and the history are resent byte for byte, so the server only processes what is new.
        assert after.cache_n >= before.cache_n + before.prompt_n
        assert after.cache_reuse >= 0.9


async def test_a_failed_check_reaches_the_real_model_with_the_task_sentence_it_is_about(
    tiny_server, tmp_path
):
    events: list = []
    client = ModelClient(endpoint_for(get_profile("tiny"), tiny_server.base_url, None))
    workbench = Workbench(tmp_path)
    agent = await build_agent(Settings(approval="full-auto"), workbench, client, events.append, None,
                              limits=Limits(max_turns=4), tool_choice="none")  # fmt: skip
    agent.request_overrides = {"temperature": 0, "max_tokens": 24}
    task = "Write greet.py with a function greet(name).\nRunning `python3 greet.py` prints hello world.\n"
    check = f"{sys.executable} -c \"assert False, 'python3 greet.py printed nothing'\""
    _, result = await work_until_checked(
        agent, task_message(workbench, task), check, tmp_path, rounds=1, emit=events.append
    )
    await client.close()
    assert result is not None and not result.passed
    told = [
        m["content"]
        for m in agent.messages
        if m["role"] == "user" and "What the task says" in str(m["content"])
    ]
    assert told and "> Running `python3 greet.py` prints hello world.\n" in told[0]
    # ...and the real server answered it: a turn after the failure.
    assert [e for e in events if isinstance(e, TurnCompleted)][-1].turn >= 2
