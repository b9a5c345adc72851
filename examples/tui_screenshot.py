"""docs/tui.svg: the README's picture of the TUI, made by the app itself (Textual's own SVG export)
from the recorded session the snapshot tests use.

    python examples/tui_screenshot.py [docs/tui.svg]
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["AGENT_STATE_DIR"] = tempfile.mkdtemp(prefix="tui-shot-")
os.environ["AGENT_CONFIG_DIR"] = tempfile.mkdtemp(prefix="tui-shot-")

from agent.settings.config import state_dir
from tests.frontends.tui import test_snapshots as recorded
from tests.frontends.tui.helpers import screen_text, wait_for
from tests.scripted_server import ScriptedServer


async def main(out: Path) -> None:
    shutil.rmtree(recorded.WORKSPACE, ignore_errors=True)
    recorded.git_workspace(recorded.WORKSPACE, {"taskstore/store.py": "class Store:\n    pass\n"})
    sessions = state_dir() / "sessions"
    sessions.mkdir(parents=True)
    events = recorded.recorded_session()
    (sessions / f"{recorded.SESSION}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    with ScriptedServer(port=recorded.PORT) as server:
        app = recorded.make_app(recorded.WORKSPACE, base_url=server.url, resume=recorded.SESSION)
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.ready and "turn 4 ·" in screen_text(app))
            edit = next(v for v in app.conversation.query("ToolCallView") if v.call.name == "edit_file")
            edit.action_toggle()
            app.prompt.cursor_blink = False
            await pilot.pause(0.3)
            app.save_screenshot(str(out.name), path=str(out.parent))
    shutil.rmtree(recorded.WORKSPACE, ignore_errors=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/tui.svg").resolve()))
