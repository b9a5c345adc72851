"""The project's check loop over ACP on the embedded coder (1.5B), through the SDK's client: the check
declared in the folder's .agent/config.toml fails the model's first answer, its output goes back, and
the fix passes, each round a tool call the client sees. The task leaves the greeting's wording open and
only the check's output says which one is wanted (as tests/test_coder_real.py does for `agent run`),
so the first round fails and the model passes only by reading it."""

from __future__ import annotations

import json

import acp
import pytest

from agent.settings.trust import trust
from tests.frontends.acp.test_acp import RecordingClient, acp_agent, run, workspace
from tests.session.check_scenario import session_events
from tests.test_coder_real import coder_here

pytestmark = pytest.mark.server

CHECK = (
    "python3 -c \"from greet import greet; r = greet('Ann'); "
    "assert r == 'Bonjour, Ann!', 'greet(Ann) returned %r, but it must return the string Bonjour, Ann!' % r\""
)


def test_on_the_embedded_coder_the_projects_check_fails_goes_back_and_then_passes(
    embedded, tmp_path, isolated_state
):
    profile = coder_here(isolated_state)  # the embedded default (temperature 0), on a free port
    ws = workspace(tmp_path)
    (ws / ".agent").mkdir()
    (ws / ".agent" / "config.toml").write_text(
        f'approval = "full-auto"\nmax_turns = 4\ncheck = {json.dumps(CHECK)}\ncheck_rounds = 3\n'
    )
    trust(ws)
    prompt = "Create greet.py with a function greet(name) that returns a greeting for that name."

    async def main():
        client = RecordingClient()
        async with acp_agent(client, tmp_path, "-p", profile) as (conn, _process):
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block(prompt)])
        return client, reply

    client, reply = run(main(), timeout=900)
    assert reply.stop_reason == "end_turn"
    rounds = [u for u in client.of("tool_call") if u.title.startswith("Check `python3 -c")]
    ends = {u.tool_call_id: u for u in client.of("tool_call_update") if u.tool_call_id.startswith("check-")}
    statuses = [ends[u.tool_call_id].status for u in rounds]
    assert len(statuses) >= 2 and statuses[0] == "failed" and statuses[-1] == "completed", statuses
    assert "must return the string Bonjour, Ann!" in ends[rounds[0].tool_call_id].content[0].content.text
    assert "Bonjour" in (ws / "greet.py").read_text()
    checks = [e["passed"] for e in session_events(isolated_state, ws) if e["type"] == "check.result"]
    assert checks[0] is False and checks[-1] is True
