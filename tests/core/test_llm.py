"""The model client against the scripted server: streaming, tool calls, stats and every error type."""

from __future__ import annotations

import json

import pytest

from agent.core.llm import (
    BadRequest,
    Completion,
    ContextOverflow,
    Endpoint,
    ModelClient,
    ServerFailure,
    ServerGone,
    ServerLoading,
    continued,
    counting_tail,
    one_copy,
    one_count,
    repeating_tail,
)
from agent.events import ReasoningDelta, TextDelta
from tests.conftest import free_port
from tests.scripted_server import ScriptedServer


async def run(client: ModelClient, messages=None, tools=None, **kw) -> tuple[list, Completion]:
    deltas, completion = [], None
    async for item in client.stream(messages or [{"role": "user", "content": "hi"}], tools, **kw):
        if isinstance(item, Completion):
            completion = item
        else:
            deltas.append(item)
    assert completion is not None
    return deltas, completion


def client_for(server: ScriptedServer, **endpoint) -> ModelClient:
    return ModelClient(Endpoint(base_url=server.url + "/v1", **endpoint))


BASH = [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}
]


async def test_text_streams_as_deltas_and_stats_come_from_timings():
    with ScriptedServer([{"content": "Hello there, world.", "reasoning": "thinking"}]) as server:
        client = client_for(server)
        deltas, done = await run(client)
        await client.close()
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "Hello there, world."
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == "thinking"
    assert done.content == "Hello there, world." and done.reasoning == "thinking"
    assert done.stats.predicted_per_second == 100.0 and done.stats.prompt_per_second == 500.0
    assert done.stats.finish_reason == "stop" and done.complete
    assert done.stats.ttft_s is not None and done.stats.wall_s > 0


async def test_an_answer_prefix_is_sent_as_the_assistants_to_continue_and_begins_the_answer():
    prefix = "src/app.py\n```python\ndef total(items):\n"
    body = "    return sum(items)\n```\n"
    with ScriptedServer([{"content": body}, {"content": prefix + body}]) as server:
        client = client_for(server)
        deltas, done = await run(client, prefix=prefix)
        # ...and a model that begins again with the prefix's path line is not given it twice
        _, again = await run(client, prefix=prefix)
        await client.close()
        sent = server.requests[0]
    assert sent["messages"][-1] == {"role": "assistant", "content": prefix}
    assert sent["continue_final_message"] is True and sent["add_generation_prompt"] is False
    assert "".join(d.text for d in deltas) == prefix + body
    assert done.content == prefix + body and again.content == prefix + body


def test_continued_keeps_a_prefix_once_and_grows_as_the_answer_streams():
    prefix = "a.py\n```python\ndef f():\n"
    assert continued("", "text") == "text"
    assert continued(prefix, "    return 1\n```") == prefix + "    return 1\n```"
    # the prefix written again: kept once, and while it may still be that, the answer is the prefix
    assert continued(prefix, "\na.py\n```python\ndef f():\n    return 1\n```") == prefix + "    return 1\n```"
    assert continued(prefix, "a.py\n```py") == prefix
    # an answer begun anew from the path line with other code is the model's own
    assert continued(prefix, "a.py\n```python\nx = 1\n```") == "a.py\n```python\nx = 1\n```"


async def test_tool_calls_are_assembled_from_fragments():
    args = {"command": "pytest -q tests/test_store.py", "timeout": 30}
    with ScriptedServer(
        [
            {
                "tool_calls": [
                    {"name": "bash", "arguments": args},
                    {"name": "read_file", "arguments": {"path": "a.py"}},
                ]
            }
        ]
    ) as server:
        client = client_for(server)
        _, done = await run(client, tools=BASH)
        await client.close()
    assert [c.name for c in done.tool_calls] == ["bash", "read_file"]
    assert json.loads(done.tool_calls[0].arguments) == args
    assert done.tool_calls[0].id.startswith("call_")
    assert done.stats.finish_reason == "tool_calls"


async def test_tool_choice_is_sent_as_a_string_and_sampling_defaults_apply():
    with ScriptedServer() as server:
        client = client_for(
            server,
            sampling={"temperature": 0.7, "max_tokens": 50, "extra_body": {"top_k": 64}},
            extra_body={"speculative.n_max": 16},
        )
        await run(client, tools=BASH, tool_choice="required", temperature=0.1)
        await client.close()
    body = server.requests[0]
    assert body["tool_choice"] == "required"
    assert body["temperature"] == 0.1 and body["max_tokens"] == 50 and body["top_k"] == 64
    assert body["speculative.n_max"] == 16 and body["cache_prompt"] is True


async def test_draft_fields_give_acceptance_and_draft_share():
    with ScriptedServer(
        [{"content": "x" * 400, "timings": {"draft_n": 80, "draft_n_accepted": 60}}]
    ) as server:
        client = client_for(server)
        _, done = await run(client)
        await client.close()
    assert done.stats.acceptance == 0.75
    assert done.stats.draft_share == 60 / done.stats.predicted_n


async def test_no_draft_fields_means_no_speculation_not_zero_percent():
    with ScriptedServer([{"content": "plain"}]) as server:
        client = client_for(server)
        _, done = await run(client)
        await client.close()
    assert done.stats.draft_n is None and done.stats.acceptance is None and done.stats.draft_share is None
    assert "draft" not in done.stats.summary()


async def test_extra_timing_fields_are_kept():
    extra = {"cache_lcp_n": 120, "cache_source": "slot", "cache_reason": "lcp"}
    with ScriptedServer([{"content": "ok", "timings": extra}]) as server:
        client = client_for(server)
        _, done = await run(client)
        await client.close()
    assert done.stats.timings_extra == extra


async def test_missing_timing_fields_leave_the_figures_unknown():
    with ScriptedServer(
        [{"content": "ok", "timings": {"prompt_per_second": None, "predicted_ms": None}}]
    ) as server:
        client = client_for(server)
        _, done = await run(client)
        await client.close()
    assert done.stats.prompt_per_second is None
    assert done.stats.summary()  # renders without the missing figure


async def test_a_stream_without_a_final_chunk_returns_what_arrived_marked_incomplete():
    with ScriptedServer([{"content": "partial answer", "no_final_chunk": True}]) as server:
        client = client_for(server)
        _, done = await run(client)
        await client.close()
    assert done.content == "partial answer"
    assert not done.complete and not done.stats.has_timings
    assert done.stats.ttft_s is not None  # the client-side figures are still there


async def test_data_lines_that_are_json_but_no_chunk_are_skipped_and_the_answer_is_whole():
    # The client reads chunks as plain JSON (no typed object per token): a proxy's keep-alive or a
    # stray value must not end the stream or reach the answer.
    reply = {"content": "the whole answer", "stray_events": ["42", '"keep-alive"', "[1, 2]", "null"]}
    with ScriptedServer([reply]) as server:
        client = client_for(server)
        deltas, done = await run(client)
        await client.close()
    assert done.content == "the whole answer" and done.complete
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "the whole answer"


async def test_context_overflow_maps_to_its_type_with_token_counts():
    with ScriptedServer(n_ctx=50) as server:
        client = client_for(server)
        with pytest.raises(ContextOverflow) as caught:
            await run(client, [{"role": "user", "content": "x" * 1000}])
        await client.close()
    assert caught.value.n_ctx == 50 and caught.value.n_prompt_tokens > 50


@pytest.mark.slow
async def test_a_loading_server_is_waited_for():
    loading = {"status": 503, "error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    with ScriptedServer([loading, loading, {"content": "ready now"}]) as server:
        client = client_for(server)
        _, done = await run(client)
        await client.close()
    assert done.content == "ready now" and len(server.requests) == 3


async def test_a_bad_request_is_not_retried():
    bad = {
        "status": 400,
        "error": {"code": 400, "message": "invalid tool schema", "type": "invalid_request_error"},
    }
    with ScriptedServer([bad]) as server:
        client = client_for(server)
        with pytest.raises(BadRequest, match="invalid tool schema"):
            await run(client)
        await client.close()
    assert len(server.requests) == 1


async def test_a_non_json_error_body_is_reported_with_its_text():
    with ScriptedServer([{"raw_error": "<html>Bad Gateway</html>", "status": 502}]) as server:
        client = client_for(server)
        with pytest.raises(ServerFailure, match="HTTP 502: <html>Bad Gateway</html>"):
            await run(client)
        await client.close()


async def test_a_connection_cut_mid_stream_is_server_gone_with_partial_output():
    with ScriptedServer([{"content": "a long answer that will be cut", "die_after_chunks": 3}]) as server:
        client = client_for(server)
        with pytest.raises(ServerGone) as caught:
            await run(client)
        await client.close()
    assert caught.value.partial
    assert len(server.requests) == 1  # never re-sent once text reached the user


async def test_nothing_listening_is_server_gone_quickly():
    import time

    client = ModelClient(Endpoint(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m"))
    started = time.monotonic()
    with pytest.raises(ServerGone) as caught:
        await run(client)
    await client.close()
    assert not caught.value.partial
    assert time.monotonic() - started < 5


async def test_each_request_awaits_the_request_gate_with_its_body_before_it_is_sent():
    seen: list[tuple[int, dict]] = []
    with ScriptedServer([{"content": "one"}, {"content": "two"}]) as server:

        async def gate(request: dict) -> None:
            seen.append((len(server.requests), request))  # requests the server had when the gate was asked

        client = ModelClient(Endpoint(base_url=server.url + "/v1", model="m"), request_gate=gate)
        await run(client, [{"role": "user", "content": "first"}], temperature=0.5)
        await run(client, [{"role": "user", "content": "second"}])
        await client.close()
    assert [count for count, _ in seen] == [0, 1]
    first = seen[0][1]
    assert first == {"model": "m", **{k: v for k, v in server.requests[0].items() if k != "model"}}
    assert first["messages"] == [{"role": "user", "content": "first"}] and first["temperature"] == 0.5


async def test_server_counters_come_from_metrics_when_timings_lack_them():
    """A vLLM-style server: no draft fields in timings, draft counters on /metrics."""
    replies = [
        {"content": "warm", "counters": {"draft_tokens": 10, "accepted": 5}},
        {"content": "x" * 200, "counters": {"draft_tokens": 40, "accepted": 30}},
    ]
    with ScriptedServer(replies) as server:
        client = client_for(server, metrics_url=server.url + "/metrics")
        await run(client)
        _, done = await run(client)
        await client.close()
    assert done.stats.draft_n is None
    assert (done.stats.metrics_draft_n, done.stats.metrics_draft_accepted) == (40, 30)
    assert done.stats.acceptance == 0.75


@pytest.mark.slow
async def test_loading_forever_gives_up_as_loading_after_the_budget():
    loading = {"status": 503, "error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    with ScriptedServer(default=loading) as server:
        client = ModelClient(Endpoint(base_url=server.url + "/v1"), loading_wait=1.0)
        with pytest.raises(ServerLoading, match="Loading model"):
            await run(client)
        await client.close()
    assert len(server.requests) > 1


async def test_a_tool_call_cut_off_at_max_tokens_arrives_as_written_with_finish_reason_length():
    cut = '{"path": "a.py", "content": "def f(x):\\n    return'
    with ScriptedServer(
        [{"tool_calls": [{"name": "write_file", "arguments": cut}], "finish_reason": "length"}]
    ) as server:
        client = client_for(server)
        _, done = await run(client, tools=BASH)
        await client.close()
    assert done.tool_calls[0].arguments == cut  # parsing and repair are the loop's job, with the raw text
    assert done.stats.finish_reason == "length"


def test_a_count_that_runs_on_is_a_loop_and_code_that_differs_by_more_than_numbers_is_not():
    head = "report.py\n```python\ndef test_kv():\n    store = Store()\n"
    count = "".join(f'    store.set("user:{i}", "user{i}")\n' for i in range(1, 140))
    unit = counting_tail(head + count + '    store.set("us')
    # One unit kept, less what it shares with the text before it (as `one_copy` says).
    kept = one_count(head + count, unit) if unit else ""
    assert kept.startswith(head + '    store.set("user:1", "user1"') and "user:2" not in kept
    files = "".join(f"path/to/file{i}.py\n```python\ndef f{i}():\n    return {i}\n```\n\n" for i in range(70))
    assert counting_tail(head + files) is not None  # whole blocks, numbered: 70 files of nothing
    assert counting_tail(head + count[:1400]) is None  # about 40 lines: may be a real table
    # Code whose lines differ by more than their numbers is no count, nor two long functions that do.
    words = "".join(f"    assert name({i}) == {chr(97 + i % 26) * (1 + i % 7)!r}\n" for i in range(200))
    long = "def test_case_{0}():\n" + "".join(
        f"    assert add({{0}}, {i}) == {{0}} + {i}\n" for i in range(12)
    )
    assert counting_tail(words) is None and counting_tail(long.format(1) + long.format(2)) is None


async def test_an_answer_that_counts_on_is_cut_and_said_to_repeat():
    count = "".join(f'    store.set("user:{i}", "user{i}")\n' for i in range(1, 400))
    with ScriptedServer([{"content": "a.py\n```python\n" + count}]) as server:
        client = client_for(server)
        _, done = await run(client)
        await client.close()
    assert done.content.startswith('a.py\n```python\n    store.set("user:1", "user1"')
    assert "user:2" not in done.content
    assert done.repetition and not done.complete


def test_a_loop_is_a_short_unit_four_times_or_a_long_unit_twice_in_a_row():
    code = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(60))  # long, no loop
    assert repeating_tail(code) is None
    short = "x = compute(1)\n" * 10  # 150 characters: twice is normal code, 4 times over 800 is a loop
    assert repeating_tail(code + short * 2) is None and repeating_tail(code + short * 6) == 15
    block = "a.py\n```python\n" + code[:400] + "```\n\n"
    assert repeating_tail(code + block) is None
    assert repeating_tail(code + block * 2) == len(block)
    assert repeating_tail(code + block * 2 + block[:100]) == len(block)  # caught at any point of the copy
    # One whole copy; the blank line it shares with the text before it may go from its end.
    assert one_copy(code + block * 2 + block[:100], len(block)).rstrip() == (code + block).rstrip()
