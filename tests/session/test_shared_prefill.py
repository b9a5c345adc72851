"""The attempts' shared prefill on the scripted server: each attempt's client is opened with its
`request_gate`; the first request prefills slot 0 alone, slot 0 is copied to the others, and only then
does any attempt's request go. The real server's figures: tests/session/test_attempts_real.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from agent.core.llm import Completion, ModelClient
from agent.server.endpoint import Endpoint
from agent.session.shared_prefill import SharedPrefill
from tests.scripted_server import ScriptedServer


def connection_to(server: ScriptedServer, folder) -> SimpleNamespace:
    """A connection to a server started with slots and a slot folder (what SharedPrefill reads of it)."""
    argv = ["llama-server", "-np", "3", "--slot-save-path", str(folder)]
    return SimpleNamespace(
        endpoint=Endpoint(base_url=server.url + "/v1", model="m"),
        handle=SimpleNamespace(record=SimpleNamespace(argv=argv)),
        profile=SimpleNamespace(speculative=None),
    )


async def ask(client: ModelClient, text: str) -> Completion:
    async for item in client.stream([{"role": "user", "content": text}]):
        if isinstance(item, Completion):
            return item
    raise AssertionError("no completion")


async def test_the_first_request_prefills_one_slot_which_is_copied_before_any_request_goes(tmp_path):
    copied_when_asked: list[int] = []

    def answer(body: dict) -> dict:
        if body.get("stream"):  # an attempt's request: how many slot actions were done by then
            copied_when_asked.append(len(server.model.slot_actions))
        return {"content": "Done."}

    notices: list[str] = []
    with ScriptedServer(default=answer) as server:
        shared = SharedPrefill(
            connection_to(server, tmp_path), 3, "run-1", lambda e: notices.append(e.message)
        )
        assert shared.request_gate is not None
        clients = [ModelClient(Endpoint(base_url=server.url + "/v1", model="m"), request_gate=shared.request_gate)
                   for _ in range(3)]  # fmt: skip
        try:
            await asyncio.gather(*(ask(client, "the shared task") for client in clients))
            await ask(clients[0], "a later request")  # goes at once: no second prefill
        finally:
            for client in clients:
                await client.close()
            await shared.close()
    prefill, *asked = server.requests
    assert (prefill["stream"], prefill["max_tokens"], prefill["id_slot"]) == (False, 1, 0)
    assert prefill["messages"] == [{"role": "user", "content": "the shared task"}]
    assert [request.get("stream") for request in asked] == [True] * 4
    assert server.model.slot_actions == [(0, "save", "run-1.bin"), (1, "restore", "run-1.bin"),
                                         (2, "restore", "run-1.bin")]  # fmt: skip
    assert copied_when_asked == [3, 3, 3, 3]
    assert [n for n in notices if n.startswith("one prefill of")] and "serves the 3 attempts" in notices[0]


async def test_a_failed_prefill_is_said_and_the_requests_go_as_before(tmp_path):
    notices: list[str] = []
    with ScriptedServer([{"status": 500}, {"content": "Done."}]) as server:
        shared = SharedPrefill(
            connection_to(server, tmp_path), 2, "run-2", lambda e: notices.append(e.message)
        )
        client = ModelClient(
            Endpoint(base_url=server.url + "/v1", model="m"), request_gate=shared.request_gate
        )
        try:
            done = await ask(client, "the task")
        finally:
            await client.close()
            await shared.close()
    assert done.content == "Done."
    assert server.model.slot_actions == []
    assert notices and notices[0].startswith(
        "the attempts prefill their prompts each: sharing one prefill failed"
    )


def test_no_gate_where_the_server_cannot_share_a_prefill(tmp_path):
    with ScriptedServer() as server:
        connection = connection_to(server, tmp_path)
        assert SharedPrefill(connection, 1, "one slot", print).request_gate is None
        connection.handle.record.argv = ["llama-server", "-np", "2"]  # no slot folder
        assert SharedPrefill(connection, 2, "no folder", print).request_gate is None
        connection.handle.record.argv = ["llama-server", "-np", "2", "--slot-save-path", str(tmp_path)]
        connection.profile.speculative = SimpleNamespace(draft_model="draft.gguf")
        assert SharedPrefill(connection, 2, "a draft", print).request_gate is None
