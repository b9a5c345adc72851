"""Snapshots of the screens people look at most. Everything on them is pinned: the folder, the server's
port, and a recorded session (its figures are the transcript's, not this machine's timing).

After an intended change of layout: pytest tests/frontends/tui/test_snapshots.py --snapshot-update, then look
at the report's pictures before committing them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent.settings.config import state_dir
from tests.frontends.tui.helpers import git_workspace, make_app, screen_text, send, wait_for
from tests.scripted_server import ScriptedServer

WORKSPACE = Path("/tmp/spec-agent-snapshot")
PORT = 47813
SESSION = "20261203-101500-5a5a"
STATS = [
    {"cache_n": 0, "prompt_n": 1210, "prompt_per_second": 2140.0, "predicted_n": 38, "predicted_per_second": 131.0,
     "draft_n": 30, "draft_n_accepted": 24, "ttft_s": 0.61, "wall_s": 0.9},
    {"cache_n": 1240, "prompt_n": 96, "prompt_per_second": 1980.0, "predicted_n": 112, "predicted_per_second": 142.0,
     "draft_n": 96, "draft_n_accepted": 81, "ttft_s": 0.09, "wall_s": 0.9},
    {"cache_n": 1390, "prompt_n": 64, "prompt_per_second": 1710.0, "predicted_n": 21, "predicted_per_second": 118.0,
     "draft_n": 16, "draft_n_accepted": 11, "ttft_s": 0.07, "wall_s": 0.3},
    {"cache_n": 1470, "prompt_n": 51, "prompt_per_second": 1650.0, "predicted_n": 29, "predicted_per_second": 138.0,
     "draft_n": 24, "draft_n_accepted": 20, "ttft_s": 0.06, "wall_s": 0.3},
]  # fmt: skip
DIFF = """--- a/taskstore/store.py
+++ b/taskstore/store.py
@@ -12,3 +12,6 @@
     def add(self, title: str) -> int:
         self._tasks[self._next] = title
         return self._next
+
+    def delete_task(self, task_id: int) -> bool:
+        return self._tasks.pop(task_id, None) is not None
"""


def recorded_session() -> list[dict]:
    def call(turn, call_id, name, summary, arguments):
        return {
            "type": "tool.call",
            "turn": turn,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "summary": summary,
        }

    def result(turn, call_id, name, output, seconds, display):
        return {
            "type": "tool.result",
            "turn": turn,
            "call_id": call_id,
            "name": name,
            "ok": True,
            "output": output,
            "seconds": seconds,
            "display": display,
        }

    def turn(n):
        return {"type": "turn.completed", "turn": n, "stats": STATS[n - 1]}

    return [
        {"type": "session.started", "session_id": SESSION, "profile": "attach", "model": "scripted", "workspace": str(WORKSPACE), "task": "", "resumed": False, "options": {}},
        {"type": "user.message", "content": "Add a delete_task method to the store and a test for it."},
        {"type": "assistant.message", "turn": 1, "content": "I'll read the store first.", "tool_calls": []},
        call(1, "c1", "read_file", "taskstore/store.py (1-400)", {"path": "taskstore/store.py"}),
        result(1, "c1", "read_file", "class Store: ...", 0.01, {"path": "taskstore/store.py"}),
        turn(1),
        {"type": "assistant.message", "turn": 2, "content": "", "tool_calls": []},
        call(2, "c2", "edit_file", "taskstore/store.py", {"path": "taskstore/store.py"}),
        result(2, "c2", "edit_file", "Edited taskstore/store.py.", 0.02, {"path": "taskstore/store.py", "diff": DIFF}),
        turn(2),
        {"type": "assistant.message", "turn": 3, "content": "", "tool_calls": []},
        call(3, "c3", "bash", "pytest -q", {"command": "pytest -q"}),
        result(3, "c3", "bash", "6 passed in 0.41s\n[exit code 0]", 1.93, {"command": "pytest -q", "exit_code": 0}),
        turn(3),
        {"type": "assistant.message", "turn": 4, "content": "Added `delete_task` and `test_delete_task`; all **6 tests** pass.", "tool_calls": []},
        turn(4),
    ]  # fmt: skip


@pytest.fixture
def snapshot_app(isolated_state):
    shutil.rmtree(WORKSPACE, ignore_errors=True)
    git_workspace(WORKSPACE, {"taskstore/store.py": "class Store:\n    pass\n"})
    sessions = state_dir() / "sessions"
    sessions.mkdir(parents=True)
    (sessions / f"{SESSION}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in recorded_session()))
    bash = {"tool_calls": [{"name": "bash", "arguments": {"command": "git push --force origin main"}}]}
    with ScriptedServer([bash], port=PORT) as server:
        yield make_app(WORKSPACE, base_url=server.url, resume=SESSION, approval="ask")
    shutil.rmtree(WORKSPACE, ignore_errors=True)


async def _ready(pilot) -> None:
    await pilot.pause()
    await wait_for(pilot, lambda: pilot.app.ready and "turn 4 ·" in screen_text(pilot.app))
    pilot.app.prompt.cursor_blink = False
    await pilot.pause()


def test_main_screen(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app, terminal_size=(120, 36), run_before=_ready)


def test_an_expanded_edit(snap_compare, snapshot_app):
    async def run_before(pilot):
        await _ready(pilot)
        from agent.frontends.tui.widgets.tool_call import ToolCallView

        edit = next(v for v in pilot.app.query(ToolCallView) if v.call.name == "edit_file")
        edit.action_toggle()
        await pilot.pause()

    assert snap_compare(snapshot_app, terminal_size=(120, 36), run_before=run_before)


def test_the_approval_prompt(snap_compare, snapshot_app):
    async def run_before(pilot):
        await _ready(pilot)
        await send(pilot, "push it")
        await wait_for(pilot, lambda: pilot.app.query_one("#approval").display)
        await pilot.pause()

    assert snap_compare(snapshot_app, terminal_size=(120, 36), run_before=run_before)


@pytest.mark.slow
def test_the_speed_panel(snap_compare, snapshot_app):
    async def run_before(pilot):
        await _ready(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()

    assert snap_compare(snapshot_app, terminal_size=(120, 36), run_before=run_before)
