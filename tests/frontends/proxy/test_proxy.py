"""The recording proxy on the scripted model server: bytes passed through unchanged, turns recorded per
conversation, and the faults (a server gone mid-answer, a client gone, malformed JSON, a prompt over the
context, two clients at once) passed through as the server gave them, each recorded.
tests/frontends/proxy/test_proxy_real.py does the same with the real llama-server and the SDKs."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import openai
import pytest

from agent.frontends.proxy.command import Proxied, serving
from agent.server.endpoint import Endpoint
from agent.server.profiles import attach_profile
from agent.session.connect import Connection
from agent.store.telemetry import read_jsonl
from agent.store.transcripts import list_session_paths, load_session
from tests.conftest import free_port
from tests.scripted_server import ScriptedServer

CREATED = 1_700_000_000


def attached(server: ScriptedServer) -> Connection:
    return Connection(
        Endpoint(base_url=server.url + "/v1", metrics_url=server.url + "/metrics"), attach_profile(server.url)
    )


@contextlib.asynccontextmanager
async def through_proxy(server: ScriptedServer) -> AsyncIterator[tuple[Proxied, openai.AsyncOpenAI]]:
    """The proxy in front of `server`, and an OpenAI SDK client pointed at it."""
    async with (
        serving(attached(server), free_port(), quiet=True) as proxied,
        openai.AsyncOpenAI(base_url=proxied.openai_base_url, api_key="x", max_retries=0) as client,
    ):
        yield proxied, client


def sessions(state: Path) -> list:
    return [load_session(state, p.stem) for p in list_session_paths(state)]


def telemetry(state: Path, session_id: str) -> list[dict]:
    return read_jsonl(state / "telemetry" / f"{session_id}.jsonl")


def chat(text: str, stream: bool = True, **more) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "stream": stream, **more}


async def raw_post(url: str, body: dict | bytes) -> tuple[int, dict[str, str], bytes]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with (
        httpx2.AsyncClient(timeout=30) as client,
        client.stream("POST", url, content=content, headers={"content-type": "application/json"}) as reply,
    ):
        return reply.status_code, dict(reply.headers), b"".join([c async for c in reply.aiter_raw()])


@pytest.mark.parametrize("stream", [True, False])
async def test_an_answer_passes_through_byte_for_byte_and_is_recorded(isolated_state: Path, stream: bool):
    script = [{"content": "def add(a, b):\n    return a + b\n", "created": CREATED}]
    body = chat("write add", stream, stream_options={"include_usage": True} if stream else None)
    with ScriptedServer(list(script)) as direct:
        direct_reply = await raw_post(direct.url + "/v1/chat/completions", body)
    with ScriptedServer(list(script)) as server:
        async with serving(attached(server), free_port(), quiet=True) as proxied:
            proxied_reply = await raw_post(proxied.url + "/v1/chat/completions", body)
        assert server.requests == [body]  # the request arrived as the client wrote it
    assert proxied_reply[0] == direct_reply[0] == 200
    assert proxied_reply[2] == direct_reply[2]
    assert proxied_reply[1]["content-type"] == direct_reply[1]["content-type"]
    [record] = sessions(isolated_state)
    assert record.started["task"] == "write add"
    assert record.started["options"]["via"] == "proxy"
    assert record.turns == 1
    [turn] = telemetry(isolated_state, record.session_id)
    assert turn["via"] == "proxy"
    assert turn["stats"]["predicted_n"] > 0 and turn["stats"]["predicted_per_second"] == 100.0
    assert record.finished and record.finished["outcome"] == "completed"


async def test_a_conversation_continues_in_its_session_and_another_opens_its_own(isolated_state: Path):
    with ScriptedServer(default={"content": "ok"}) as server:
        async with through_proxy(server) as (_proxied, client):
            first = [{"role": "system", "content": "You help."}, {"role": "user", "content": "one"}]
            await client.chat.completions.create(model="m", messages=first)
            await client.chat.completions.create(
                model="m",
                messages=[*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "two"}],
            )
            await client.chat.completions.create(
                model="m", messages=[first[0], {"role": "user", "content": "another task"}]
            )
            # Its own id keeps a client's requests together whatever their messages.
            for text in ("a", "b"):
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": text}], user="u1"
                )
    found = {r.started["task"]: r.turns for r in sessions(isolated_state)}
    assert found == {"one": 2, "another task": 1, "a": 2}


async def test_a_cache_break_in_a_proxied_conversation_is_explained(isolated_state: Path):
    system = {"role": "system", "content": "You are a helpful assistant. " * 40}
    first = [system, {"role": "user", "content": "first question " * 30}]
    changed = [{"role": "system", "content": "Today is another day. " + system["content"]}, *first[1:]]
    with ScriptedServer(default={"content": "ok"}) as server:
        async with through_proxy(server) as (_proxied, client):
            await client.chat.completions.create(model="m", messages=first, user="c")
            await client.chat.completions.create(
                model="m",
                messages=[*changed, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "q"}],
                user="c",
            )
    [record] = sessions(isolated_state)
    turns = telemetry(isolated_state, record.session_id)
    assert turns[0]["stats"]["cache_break"] is None
    assert "changed the system prompt" in turns[1]["stats"]["cache_break"]


async def test_a_server_that_dies_mid_answer_ends_the_clients_stream_and_the_turn_is_recorded(
    isolated_state: Path,
):
    script = [{"content": "a long answer " * 20, "die_after_chunks": 3}, {"content": "fine"}]
    with ScriptedServer(script) as server:
        async with through_proxy(server) as (_proxied, client):
            with pytest.raises(openai.APIError):
                stream = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "go"}], stream=True
                )
                async for _ in stream:
                    pass
            again = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "go"}]
            )
            assert again.choices[0].message.content == "fine"
    events = [e for r in sessions(isolated_state) for e in r.events]
    errors = [e["message"] for e in events if e["type"] == "error"]
    assert len(errors) == 1 and "closed the connection mid-answer" in errors[0]
    assert sum(1 for e in events if e["type"] == "turn.completed") == 1


async def hang_up(proxied: Proxied, once: bytes = b"") -> None:
    """A streamed chat request through the proxy whose client hangs up as soon as `once` has arrived
    (by default, with the first bytes); back once the proxy has recorded the turn."""
    async with (
        httpx2.AsyncClient(timeout=30) as client,
        client.stream("POST", proxied.openai_base_url + "/chat/completions", json=chat("go")) as reply,
    ):
        received = b""
        async for chunk in reply.aiter_raw():
            received += chunk
            if once in received:
                break
    for _ in range(100):
        if not proxied.sessions.in_flight:
            break
        await asyncio.sleep(0.05)
    assert not proxied.sessions.in_flight


async def test_a_client_that_hangs_up_closes_the_servers_stream_and_is_recorded(isolated_state: Path):
    with ScriptedServer([{"content": "word " * 400, "chunk_delay": 0.02}]) as server:
        async with serving(attached(server), free_port(), quiet=True) as proxied:
            await hang_up(proxied)  # after the first bytes
    events = [e for r in sessions(isolated_state) for e in r.events]
    assert [e["message"] for e in events if e["type"] == "error"] == ["turn 1: the client hung up mid-answer"]


async def test_a_client_that_hangs_up_once_the_answer_ended_has_a_whole_turn(isolated_state: Path):
    # As Codex does: it stops reading at the API's last event, while the server still holds the stream.
    with ScriptedServer([{"content": "a short answer", "linger": 2.0}]) as server:
        async with serving(attached(server), free_port(), quiet=True) as proxied:
            await hang_up(proxied, once=b"[DONE]")
    [record] = sessions(isolated_state)
    assert not [e for e in record.events if e["type"] == "error"]
    [turn] = telemetry(isolated_state, record.session_id)
    assert turn["stats"]["predicted_n"] > 0


async def test_malformed_json_and_a_prompt_over_the_context_get_the_servers_own_answer(isolated_state: Path):
    with ScriptedServer([{"overflow": True}], n_ctx=64) as server:
        async with serving(attached(server), free_port(), quiet=True) as proxied:
            bad = await raw_post(
                proxied.openai_base_url + "/chat/completions", b'{"model": "m", "messages": ['
            )
            over = await raw_post(
                proxied.openai_base_url + "/chat/completions", chat("x " * 500, stream=False)
            )
        bad_direct = await raw_post(server.url + "/v1/chat/completions", b'{"model": "m", "messages": [')
    assert bad[0] == bad_direct[0] and bad[2] == bad_direct[2]
    assert over[0] >= 400 and b"context" in over[2]
    [record] = sessions(isolated_state)  # the malformed one has no conversation to belong to
    errors = [e["message"] for e in record.events if e["type"] == "error"]
    assert len(errors) == 1 and "context" in errors[0]


async def test_two_clients_at_once_are_two_sessions_and_both_answers_arrive_whole(isolated_state: Path):
    with ScriptedServer(default={"content": "answer " * 30, "chunk_delay": 0.01}) as server:
        async with through_proxy(server) as (_proxied, client):

            async def ask(text: str) -> str:
                stream = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": text}], stream=True
                )
                return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

            answers = await asyncio.gather(ask("first client"), ask("second client"))
    assert answers == ["answer " * 30] * 2
    records = sessions(isolated_state)
    assert sorted(r.started["task"] for r in records) == ["first client", "second client"]
    assert all(r.turns == 1 for r in records)


async def test_a_server_that_is_down_gets_a_clear_502_in_the_apis_error_shape(isolated_state: Path):
    port = free_port()
    connection = Connection(
        Endpoint(base_url=f"http://127.0.0.1:{port}/v1"), attach_profile(f"http://127.0.0.1:{port}")
    )
    async with serving(connection, free_port(), quiet=True) as proxied:
        status, _, body = await raw_post(proxied.openai_base_url + "/chat/completions", chat("hi"))
    assert status == 502
    assert "did not answer" in json.loads(body)["error"]["message"]


async def test_the_proxys_port_in_use_is_refused_with_what_to_do(isolated_state: Path):
    import socket

    with socket.socket() as taken, ScriptedServer() as server:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(Exception, match=f"port {port} is in use"):
            async with serving(attached(server), port, quiet=True):
                pass
