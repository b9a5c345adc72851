"""A session's settings as the client's pickers (ACP's session config options, stabilized in 2026): the
profile (which server and speculative setup), the approval mode and the action protocol. Picking
another profile switches servers as /profile does; the answer and the session's updates say what runs."""

from __future__ import annotations

import acp
import pytest

from agent.server.registry import ServerRegistry
from tests.frontends.acp.test_acp import RecordingClient
from tests.frontends.acp.test_acp_commands import Wire, acp_agent, git_folder, run
from tests.frontends.tui.conftest import scripted_profile  # noqa: F401 (a fixture: workspace profiles)
from tests.session.check_scenario import session_events

pytestmark = pytest.mark.slow  # `agent acp` as a process, and scripted servers as real child processes


def current(options) -> dict[str, str]:
    return {o.id: o.current_value for o in options}


def test_picking_a_profile_starts_its_server_stops_the_first_and_every_pick_is_reported(
    tmp_path,
    isolated_state,
    scripted_profile,  # noqa: F811 (the fixture imported above)
):
    ws = git_folder(tmp_path / "ws")
    scripted_profile(ws, "one", default={"content": "Answer from one."})
    scripted_profile(ws, "two", default={"content": "Answer from two."})
    registry = ServerRegistry(isolated_state)

    async def main():
        client, wire = RecordingClient(), Wire()
        said = {}
        async with acp_agent(client, tmp_path, wire, "-p", "one") as conn:
            new = await conn.new_session(cwd=str(ws), mcp_servers=[])
            sid = new.session_id

            async def pick(config_id: str, value: str):
                before = len(client.text())
                answer = await conn.set_config_option(config_id=config_id, session_id=sid, value=value)
                said[(config_id, value)] = client.text()[before:]
                return current(answer.config_options)

            await conn.prompt(session_id=sid, prompt=[acp.text_block("Question one.")])
            [first] = registry.running()
            picked = {"mode": await pick("mode", "full-auto"), "nine": await pick("profile", "nine")}
            picked["two"] = await pick("profile", "two")
            running = [(r.profile, r.pid) for r in registry.running()]
            picked["blocks"] = await pick("actions", "blocks")
            reply = await conn.prompt(session_id=sid, prompt=[acp.text_block("Question two.")])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/profile one")])  # the command's way
            with pytest.raises(acp.RequestError) as unknown:
                await conn.set_config_option(config_id="speed", session_id=sid, value="fast")
        return client, new, first, picked, said, running, reply, unknown.value

    client, new, first, picked, said, running, reply, unknown = run(main(), timeout=180)
    # session/new reports the three pickers, each at what the session runs on.
    assert current(new.config_options) == {"profile": "one", "mode": "ask", "actions": "tools"}
    profiles = {o.id: o for o in new.config_options}["profile"]
    assert {"one", "two", "tiny"} <= {c.value for c in profiles.options} and profiles.category == "model"
    # The mode picker is the mode: the client hears it in both shapes.
    assert picked["mode"]["mode"] == "full-auto"
    assert [u.current_mode_id for u in client.of("current_mode_update")] == ["full-auto"]
    # An unknown profile changes nothing, and says why; a known one switches servers.
    assert picked["nine"]["profile"] == "one" and "unknown profile 'nine'" in said[("profile", "nine")]
    assert picked["two"] == {"profile": "two", "mode": "full-auto", "actions": "tools"}
    assert said[("profile", "two")].startswith("Switched to the profile two")
    assert running == [("two", running[0][1])] and running[0][1] != first.pid  # one stopped, two runs
    # The action protocol: on the same server, the conversation carried, the mode kept.
    assert picked["blocks"] == {"profile": "two", "mode": "full-auto", "actions": "blocks"}
    assert reply.stop_reason == "end_turn" and "Answer from two." in client.text()
    # /profile typed as a command switches too, and the pickers follow (config_option_update).
    assert current(client.of("config_option_update")[-1].config_options)["profile"] == "one"
    assert unknown.code == -32602
    events = session_events(isolated_state, ws)  # one session, continued on each server and protocol
    started = [(e["profile"], e["resumed"], e["options"].get("actions")) for e in events if e["type"] == "session.started"]  # fmt: skip
    assert started == [
        ("one", False, None),
        ("two", True, None),
        ("two", True, "blocks"),
        ("one", True, "blocks"),
    ]
    prompts = [e["typed"] or e["content"] for e in events if e["type"] == "user.message"]
    assert prompts == ["Question one.", "Question two."]
