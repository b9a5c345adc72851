"""One prompt, one way (agent/session/live.py, `LiveSession.prompt`): the task message, the project's check
loop, cancellation, the changes and the auto-commit, as the TUI and ACP both get them; and the slash
commands they share (agent/session/slash_commands.py). On the scripted model server, in process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agent.core.context import SUMMARY_INSTRUCTION
from agent.errors import AgentError
from agent.events import CheckFinished, ErrorEvent, Event, Notice
from agent.session import slash_commands
from agent.session.connect import resolve_profile
from agent.session.live import LiveSession, SessionSetup, open_session
from agent.settings.config import load_settings
from tests.scripted_server import ScriptedServer
from tests.session.check_scenario import CHECK, EXPECTED, PROMPT, SCRIPT, project, what_happened


@asynccontextmanager
async def live_session(workspace: Path, url: str, events: list[Event]) -> AsyncIterator[LiveSession]:
    settings = load_settings(workspace)
    profile = resolve_profile(settings, None, url, workspace)
    setup = SessionSetup(settings, workspace, profile, "a test", mcp_servers={})
    async with open_session(setup, events.append) as live:
        yield live


def notices(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


async def test_the_projects_check_fails_its_output_goes_back_the_fix_passes_and_is_committed(
    tmp_path, isolated_state
):
    ws = project(tmp_path / "ws")
    events: list[Event] = []
    with ScriptedServer(SCRIPT) as server:
        async with live_session(ws, server.url, events) as live:
            result = await live.prompt(PROMPT)
            live.finish("completed")
        requests = server.requests
    assert result.outcome.status == "completed" and result.check.passed
    assert result.changes == [{"path": "app.py", "added": 1, "deleted": 0}]
    assert result.committed.startswith("committed ")
    happened = what_happened(isolated_state, ws, requests)
    assert {k: happened[k] for k in EXPECTED} == EXPECTED
    # The first prompt carries the environment note; the failure goes back as more of the same task.
    first = requests[0]["messages"][-1]["content"]
    assert "<environment>" in first and first.rstrip().endswith(PROMPT)
    assert [m["role"] for m in requests[2]["messages"]].count("user") == 2


async def test_a_prompt_with_no_check_declared_behaves_as_before(tmp_path, isolated_state):
    ws = project(tmp_path / "ws", check=None)
    events: list[Event] = []
    with ScriptedServer(SCRIPT[:2]) as server:
        async with live_session(ws, server.url, events) as live:
            result = await live.prompt(PROMPT)
        assert len(server.requests) == 2
    assert result.check is None and not [e for e in events if isinstance(e, CheckFinished)]
    assert (ws / "app.py").read_text() == "x = 1\n"  # unchecked, so committed as it is
    assert any(n.startswith("committed ") for n in notices(events))


async def test_an_untrusted_folders_check_does_not_run_and_the_user_is_told_once(tmp_path, isolated_state):
    ws = project(tmp_path / "ws", trusted=False)
    events: list[Event] = []
    with ScriptedServer(default={"content": "Done."}) as server:
        async with live_session(ws, server.url, events) as live:
            await live.prompt("Hello.")
            await live.prompt("Again.")
        assert len(server.requests) == 2
    assert not [e for e in events if isinstance(e, CheckFinished)]
    told = [n for n in notices(events) if "declares the check" in n]
    assert (
        len(told) == 1 and f"`{CHECK}`" in told[0] and "not trusted" in told[0] and "agent trust" in told[0]
    )
    assert not any(n.startswith("committed ") for n in notices(events))  # its auto_commit is ignored too


async def test_the_settings_are_read_again_at_each_prompt(tmp_path, isolated_state):
    ws = project(tmp_path / "ws", check=None)
    events: list[Event] = []
    with ScriptedServer([*SCRIPT[:2], *SCRIPT[2:]]) as server:
        async with live_session(ws, server.url, events) as live:
            first = await live.prompt("Write app.py.")
            config = ws / ".agent" / "config.toml"
            config.write_text(config.read_text() + f'check = "{CHECK}"\n')  # declared between two prompts
            second = await live.prompt("Now make x two.")
            config.write_text("check = [not toml")  # half edited: the last good settings go on
            third = await live.prompt("Anything else?")
    assert first.check is None and second.check.passed and third.check.passed
    assert any("the settings did not read" in n for n in notices(events))


async def test_a_cancelled_prompt_says_interrupted_and_the_conversation_goes_on(tmp_path, isolated_state):
    ws = project(tmp_path / "ws", check=None)
    events: list[Event] = []
    script = [{"content": "word " * 2000, "chunk_delay": 0.01}, {"content": "Still here."}]
    with ScriptedServer(script) as server:
        async with live_session(ws, server.url, events) as live:
            running = asyncio.create_task(live.prompt("Talk."))
            while not any(e.kind == "text.delta" for e in events):
                await asyncio.sleep(0.01)
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            assert live.interrupted
            after = await live.prompt("Are you there?")
            assert not live.interrupted
    assert [e.error for e in events if isinstance(e, ErrorEvent)] == ["interrupted"]
    assert after.outcome.final == "Still here."


async def test_the_shared_commands_undo_diff_stats_compact_and_clear(tmp_path, isolated_state):
    ws = project(tmp_path / "ws", check=None)
    (ws / ".agent" / "config.toml").write_text('approval = "auto-edit"\n')
    events: list[Event] = []
    script = [
        SCRIPT[0], {"content": "Wrote it."}, {"content": "Nothing else."},
        {"content": "They wrote app.py."},  # the summary /compact asks for
        {"content": "Hello again."},
    ]  # fmt: skip
    with ScriptedServer(script) as server:
        async with live_session(ws, server.url, events) as live:
            with pytest.raises(AgentError, match="nothing to undo"):
                slash_commands.undo(live.workbench)
            assert await slash_commands.compact(live.agent) == (False, "nothing to compact yet")
            await live.prompt("Write app.py.")
            assert "+x = 1" in slash_commands.diff(live.workbench)
            await live.prompt("Anything else?")
            stats = slash_commands.stats_lines(live.session_id, live.recorder.stats)
            assert stats[0].startswith(f"session {live.session_id}: 3 turns")
            done, said = await slash_commands.compact(live.agent)
            assert done and said.startswith("compacted the conversation")
            assert "They wrote app.py." in live.agent.messages[1]["content"]
            assert slash_commands.undo(live.workbench).startswith("restored the checkpoint taken")
            assert not (ws / "app.py").exists() and slash_commands.diff(live.workbench) == ""
            live.clear()
            await live.prompt("Hi.")
        requests = server.requests
    assert requests[3]["messages"][-1]["content"] == SUMMARY_INSTRUCTION  # what /compact asked the model
    # After /clear the conversation starts afresh: the system prompt and a first prompt's task message.
    assert [m["role"] for m in requests[4]["messages"]] == ["system", "user"]
    assert "<environment>" in requests[4]["messages"][1]["content"]  # (a first prompt's note wraps it)
