"""ACP and the TUI take the same path through a prompt (LiveSession.prompt): with the project's check
declared in its .agent/config.toml, a first answer that fails it gets its output back, the second
passes, and the work is committed, the same in both, each round shown in the front end's own way
(ACP: a tool call per round with its output; the TUI: lines in the conversation)."""

from __future__ import annotations

import os
import sys

import acp
import pytest

from agent.settings.config import load_settings
from tests.frontends.acp.test_acp import RecordingClient
from tests.frontends.tui.helpers import SIZE, make_app, screen_text, send, wait_for
from tests.scripted_server import ScriptedServer
from tests.session.check_scenario import EXPECTED, PROMPT, SCRIPT, project, what_happened

pytestmark = pytest.mark.slow  # `agent acp` as a process, and the TUI, each through four requests


async def over_acp(workspace, url, tmp_path) -> RecordingClient:
    client = RecordingClient()
    with (tmp_path / "acp-stderr.log").open("ab") as stderr:
        async with acp.spawn_agent_process(
            client, sys.executable, "-m", "agent", "acp", "--base-url", url, env=os.environ.copy(),
            cwd=tmp_path, transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block(PROMPT)])
            assert reply.stop_reason == "end_turn"
    return client


async def test_acp_and_the_tui_check_feed_back_and_commit_alike(tmp_path, isolated_state):
    in_acp, in_tui = project(tmp_path / "acp"), project(tmp_path / "tui")

    with ScriptedServer(SCRIPT) as server:
        client = await over_acp(in_acp, server.url, tmp_path)
        acp_requests = server.requests

    with ScriptedServer(SCRIPT) as server:
        app = make_app(in_tui, base_url=server.url, settings=load_settings(in_tui))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.ready)
            await send(pilot, PROMPT)
            await wait_for(pilot, lambda: app.session.outcomes and not app.busy, what="the prompt's end")
            await wait_for(pilot, lambda: "committed " in screen_text(app), what="the commit's notice")
            shown = screen_text(app)
            await app.session.close()
        tui_requests = server.requests

    acp_result = what_happened(isolated_state, in_acp, acp_requests)
    tui_result = what_happened(isolated_state, in_tui, tui_requests)
    assert acp_result == tui_result
    assert {k: acp_result[k] for k in EXPECTED} == EXPECTED

    # ACP: each round a tool call of its own, running, then its verdict with the check's output.
    checks = [u for u in client.of("tool_call") if u.title.startswith("Check `grep -q 'x = 2' app.py")]
    assert [u.title[-9:] for u in checks] == ["(round 1)", "(round 2)"]
    assert all(u.kind == "execute" and u.status == "in_progress" for u in checks)
    ends = {u.tool_call_id: u for u in client.of("tool_call_update") if u.tool_call_id.startswith("check-")}
    first, second = ends[checks[0].tool_call_id], ends[checks[1].tool_call_id]
    assert first.status == "failed" and second.status == "completed"
    assert "app.py says x is not 2" in first.content[0].content.text
    assert "Its output goes back to the model." in first.content[0].content.text
    assert "committed " in client.text("agent_thought_chunk")

    # The TUI: a line per round as it starts and as it ends, the failure's output under it.
    assert "· round 1 · running…" in shown and "· round 2 · running…" in shown
    assert "failed (exit 1) · round 1 · " in shown and "its output goes back to the model" in shown
    assert "  app.py says x is not 2" in shown and "passed · round 2 · " in shown
