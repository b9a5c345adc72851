"""`agent acp` on the real embedded llama-server with the tiny model, through the SDK's client: the
server started by the session (with progress), a streamed prompt, the figures as measured by llama.cpp."""

from __future__ import annotations

import acp
import pytest

from tests.frontends.acp.test_acp import RecordingClient, acp_agent, run, transcripts, workspace
from tests.frontends.test_headless_real import tiny_profile

pytestmark = pytest.mark.server


def test_a_session_on_the_tiny_model_streams_an_answer_and_its_measured_figures(
    embedded, tmp_path, isolated_state
):
    profile = tiny_profile(isolated_state, "tiny-acp", 4096)
    (isolated_state.parent / "config" / "config.toml").write_text("max_turns = 2\n")
    ws = workspace(tmp_path)

    async def main():
        client = RecordingClient()  # (a tool call the base model happens to write is rejected)
        async with acp_agent(client, tmp_path, "-p", profile) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Say hello.")])
        return client, session, reply

    client, session, reply = run(main(), timeout=400)  # a cold start on a loaded 2-core box
    assert reply.stop_reason in ("end_turn", "max_turn_requests")
    progress = [p for method, p in client.extensions if method == "spec-agent/server_progress"]
    assert progress and progress[-1]["phase"] == "ready"
    assert client.of("agent_message_chunk") or client.of("tool_call")  # the model said something
    usage = client.of("usage_update")[-1]
    figures = usage.field_meta["spec-agent/figures"]
    assert usage.size == 4096 and 0 < usage.used <= usage.size
    assert figures["generation_tokens_per_second"] > 0 and figures["prefill_tokens_per_second"] > 0
    [events] = transcripts(isolated_state)
    assert events[0]["session_id"] == session.session_id and events[-1]["type"] == "session.finished"
