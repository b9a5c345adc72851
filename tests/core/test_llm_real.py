"""The model client against the real embedded llama-server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import httpx2
import pytest

from agent.core.llm import Completion, ModelClient
from agent.errors import ContextOverflow, ServerGone
from agent.server.lifecycle import stop
from agent.server.profiles import get_profile
from agent.server.registry import ServerRegistry
from agent.session.connect import endpoint_for
from agent.store.telemetry import parse_server_counters
from tests.conftest import start_profile
from tests.server.test_lifecycle import SEED_PROMPT

pytestmark = pytest.mark.server


def counters(base_url: str) -> dict[str, float]:
    text = httpx2.get(base_url + "/metrics", timeout=5).text
    values = {}
    for name in ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total"):
        match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        values[name] = float(match.group(1))
    return values | parse_server_counters(text)


async def complete(client: ModelClient, content: str, **kw) -> Completion:
    done = None
    async for item in client.stream([{"role": "user", "content": content}], **kw):
        if isinstance(item, Completion):
            done = item
    assert done is not None
    return done


async def complete_messages(client: ModelClient, messages: list[dict], **kw) -> Completion:
    done = None
    async for item in client.stream(messages, **kw):
        if isinstance(item, Completion):
            done = item
    assert done is not None
    return done


def client_for(handle, profile: str = "tiny") -> ModelClient:
    return ModelClient(endpoint_for(get_profile(profile), handle.base_url, None))


async def test_tiny_stats_equal_the_servers_own_accounting_and_have_no_draft_fields(tiny_server):
    client = client_for(tiny_server)
    before = counters(tiny_server.base_url)
    done = await complete(client, "def fibonacci(n):", max_tokens=40)
    after = counters(tiny_server.base_url)
    await client.close()
    s = done.stats
    assert s.prompt_n == after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"]
    assert (
        s.predicted_n == after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"]
    )
    assert s.completion_tokens == s.predicted_n
    # The server's log line for this same request: "eval time = 882.80 ms / 80 tokens".
    log = Path(tiny_server.record.log_path).read_text()
    eval_ms, eval_n = re.findall(r"\s eval time =\s+([\d.]+) ms /\s+(\d+) tokens", log)[-1]
    assert int(eval_n) == s.predicted_n and float(eval_ms) == pytest.approx(s.predicted_ms, abs=0.01)
    assert s.draft_n is None and s.draft_n_accepted is None and s.acceptance is None
    assert s.ttft_s > 0 and s.client_tokens_per_second > 0


async def test_a_stream_stopped_early_keeps_what_stop_kept_and_the_server_stops_generating(tiny_server):
    # The blocks protocol stops an answer that began writing whole a file it was not shown: closing
    # the stream must end llama-server's generation too, or the next request waits behind it (-np 1).
    client = client_for(tiny_server)
    before = counters(tiny_server.base_url)

    def first_line(text: str) -> tuple[str, str] | None:
        return (text[: text.index("\n") + 1], "first line only") if "\n" in text else None

    prompt = "Repeat these lines:\n" + "".join(f"line {i} of the file\n" for i in range(40))
    cut = await complete(client, prompt, max_tokens=3000, temperature=0, stop=first_line)
    after_cut = await complete(client, "def f(x):", max_tokens=8)  # served once the slot is free
    after = counters(tiny_server.base_url)
    await client.close()
    assert cut.stopped == "first line only" and cut.complete
    assert cut.content.endswith("\n") and cut.content.count("\n") == 1
    assert after_cut.stats.predicted_n == 8
    # Left running, the cut answer alone would have been 3,000 tokens (the base model never stops).
    assert after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"] < 500


async def test_an_answer_prefix_is_continued_by_the_real_server_not_answered_anew(tiny_server):
    # The blocks protocol begins an answer for the model (agent/protocols/edit_blocks/protocol.py): the
    # server must render the prefix as the open end of the prompt, not as a finished turn.
    client = client_for(tiny_server)
    messages = [{"role": "user", "content": "Write add.py."}]
    prefix = "add.py\n```python\ndef add(a, b):\n"
    done = await complete_messages(client, messages, prefix=prefix, max_tokens=12, temperature=0)
    await client.close()
    assert done.content.startswith(prefix)

    # The prompt as the server renders a continued answer ends with the prefix, no end of turn after
    # it; the request's prompt is exactly that many tokens (a finished turn would add its markers).
    body = {
        "messages": [*messages, {"role": "assistant", "content": prefix}],
        "continue_final_message": True,
        "add_generation_prompt": False,
    }
    prompt = httpx2.post(tiny_server.base_url + "/apply-template", json=body, timeout=10).json()["prompt"]
    tokens = httpx2.post(
        tiny_server.base_url + "/tokenize",
        json={"content": prompt, "add_special": True, "parse_special": True},
        timeout=10,
    ).json()["tokens"]
    assert prompt.endswith(prefix)
    assert done.stats.prompt_tokens == len(tokens)


async def test_tiny_ngram_draft_figures_match_the_metrics_deltas(tiny_ngram_server):
    client = client_for(tiny_ngram_server, "tiny-ngram")
    before = counters(tiny_ngram_server.base_url)
    done = await complete(client, SEED_PROMPT, max_tokens=120, temperature=0)  # greedy: drafts reliably
    after = counters(tiny_ngram_server.base_url)
    await client.close()
    s = done.stats
    assert s.draft_n is not None and s.draft_n > 0
    assert s.draft_n == after["drafted"] - before["drafted"]
    assert s.draft_n_accepted == after["accepted"] - before["accepted"]
    assert 0 < s.acceptance <= 1 and 0 < s.draft_share <= 1


async def test_a_small_context_server_overflow_maps_to_context_overflow(embedded, tmp_path_factory):
    state = tmp_path_factory.mktemp("small-ctx")
    handle = start_profile("tiny", embedded, state, ctx_size=256)
    try:
        client = client_for(handle)
        with pytest.raises(ContextOverflow) as caught:
            await complete(client, "word " * 600, max_tokens=8)
        await client.close()
    finally:
        stop(handle, ServerRegistry(state))
    assert caught.value.n_ctx == 256 and caught.value.n_prompt_tokens > 256


async def test_killing_the_server_mid_stream_is_server_gone_within_two_seconds(embedded, tmp_path_factory):
    state = tmp_path_factory.mktemp("kill-mid-stream")
    handle = start_profile("tiny", embedded, state)
    client = client_for(handle)
    got_text = asyncio.Event()
    killed_at: list[float] = []

    async def consume() -> None:
        async for item in client.stream([{"role": "user", "content": SEED_PROMPT}], max_tokens=2000):
            if not isinstance(item, Completion):
                got_text.set()

    task = asyncio.create_task(consume())
    try:
        await asyncio.wait_for(got_text.wait(), 30)
        os.killpg(handle.record.pid, signal.SIGKILL)
        killed_at.append(time.monotonic())
        with pytest.raises(ServerGone) as caught:
            await asyncio.wait_for(task, 10)
        assert time.monotonic() - killed_at[0] < 2.0
        assert caught.value.partial
    finally:
        await client.close()
        stop(handle, ServerRegistry(state))
