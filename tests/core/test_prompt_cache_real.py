"""Why the prompt cache broke, named on the real embedded llama-server with the tiny Gemma 3, whose
sliding-window layers can roll back only to a checkpoint. (The pure rules: test_prompt_cache.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core.llm import Completion, ModelClient
from agent.server.launch_plan import MachinePaths, plan_launch
from agent.server.lifecycle import ServerHandle, start, stop
from agent.server.profiles import get_profile
from agent.server.registry import ServerRegistry
from agent.session.connect import endpoint_for
from tests.conftest import free_port

pytestmark = pytest.mark.server

SYSTEM = {"role": "system", "content": "You are a helpful assistant who writes Python. " * 30}


def tiny_with(paths: MachinePaths, state: Path, *args: str) -> ServerHandle:
    profile = get_profile("tiny")
    profile = profile.model_copy(update={"args": [*profile.args, *args]})
    return start(
        plan_launch(profile, paths, port=free_port()), ServerRegistry(state), state / "logs", timeout=120
    )


@pytest.fixture(scope="module")
def plain_tiny(embedded, tmp_path_factory) -> Iterator[ServerHandle]:
    """The server's host-memory prompt cache off: a second client's request then evicts ours (-np 1),
    as it does on a machine without the RAM to spare."""
    state = tmp_path_factory.mktemp("cache-state")
    handle = tiny_with(embedded, state, "--cache-ram", "0")
    yield handle
    stop(handle, ServerRegistry(state))


def client_of(handle: ServerHandle) -> ModelClient:
    return ModelClient(endpoint_for(get_profile("tiny"), handle.base_url, None, handle.record.log_path))


async def ask(client: ModelClient, messages: list[dict], **kw) -> Completion:
    async for item in client.stream(messages, max_tokens=24, temperature=0, **kw):
        if isinstance(item, Completion):
            return item
    raise AssertionError("no completion")


async def three_turns(client: ModelClient, words: int = 30) -> list[dict]:
    """A conversation that only appends, asked three times: the cache holds from the second on."""
    messages = [SYSTEM, {"role": "user", "content": "Write a function that adds numbers. " * words}]
    for n in range(3):
        done = await ask(client, messages)
        if n:
            assert done.stats.cache_break is None, done.stats.summary()
            assert done.stats.cache_n > 0
        messages += [
            {"role": "assistant", "content": done.content},
            {"role": "user", "content": f"More {n}. " * words},
        ]
    return messages


async def test_a_held_cache_names_nothing_and_a_changed_system_prompt_is_named_in_the_figures_line(
    plain_tiny,
):
    client = client_of(plain_tiny)
    try:
        messages = await three_turns(client)
        messages[0] = {"role": "system", "content": "You are a careful assistant who writes Python. " * 30}
        done = await ask(client, messages)
    finally:
        await client.close()
    assert done.stats.cache_break.endswith("tokens lost: the agent changed the system prompt")
    assert f"({done.stats.cache_break})" in done.stats.summary()


async def test_a_second_client_on_the_one_slot_is_named(plain_tiny):
    client, other = client_of(plain_tiny), client_of(plain_tiny)
    try:
        messages = await three_turns(client)
        await ask(other, [{"role": "user", "content": "Something else entirely. " * 30}])
        done = await ask(client, messages)
    finally:
        await client.close()
        await other.close()
    assert "another client used the server" in done.stats.cache_break, done.stats.summary()
    assert done.stats.cache_n < 100


@pytest.mark.parametrize("verbosity", [[], ["-lv", "4"]], ids=["default-log", "trace-log"])
async def test_a_sliding_window_model_that_cannot_roll_back_is_named(embedded, tmp_path, verbosity):
    # Without context checkpoints, Gemma 3's sliding-window layers cannot go back further than their
    # window (512 tokens): a change early in a long prompt costs all of it. At the default verbosity the
    # server does not say so, and the cause is inferred; its trace log (-lv 4) says it outright.
    handle = tiny_with(embedded, tmp_path, "--cache-ram", "0", "--ctx-checkpoints", "0", *verbosity)
    client = client_of(handle)
    try:
        messages = await three_turns(client, words=120)
        messages[1] = {"role": "user", "content": messages[1]["content"] + "Thanks."}
        done = await ask(client, messages)
    finally:
        await client.close()
        stop(handle, ServerRegistry(tmp_path))
    why = done.stats.cache_break
    assert done.stats.cache_n == 0
    assert "the agent changed message 2 (user)" in why
    if verbosity:
        assert "sliding-window or hybrid layers forced a full re-process (server log)" in why
    else:
        assert "the server kept only 0 of the ~" in why
