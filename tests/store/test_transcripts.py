"""Listing the recorded sessions (`recorded_sessions`): newest first, a folder's whichever front end
recorded them, each titled by its task or its first prompt, read from the head of the transcript."""

from __future__ import annotations

import json
from pathlib import Path

from agent.store.transcripts import recorded_sessions, sessions_dir


def transcript(state: Path, session_id: str, workspace: Path, *events: dict, task: str = "") -> None:
    folder = sessions_dir(state)
    folder.mkdir(parents=True, exist_ok=True)
    started = {"type": "session.started", "session_id": session_id, "workspace": str(workspace), "task": task}
    lines = [{**started, "time": 1.0}, *events]
    (folder / f"{session_id}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))


def test_a_folders_sessions_newest_first_each_with_its_title(tmp_path):
    state, here, there = tmp_path / "state", tmp_path / "here", tmp_path / "there"
    here.mkdir()
    note = {"type": "notice", "message": "MCP server x: 2 tools"}
    transcript(state, "20261201-100000-aaaa", here, task="# Add a flag\n\nmore")
    transcript(state, "20261202-100000-bbbb", here, note,
               {"type": "user.message", "content": "<env>\n</env>\nFix it.\n", "typed": "Fix it.\nPlease."})  # fmt: skip
    transcript(state, "20261203-100000-cccc", there, {"type": "user.message", "content": "Elsewhere."})
    transcript(state, "20261204-100000-dddd", here, {"type": "user.message", "content": "note\n\nOld style."})
    transcript(state, "20261205-100000-eeee", here)  # opened, nothing asked yet
    (sessions_dir(state) / "20261206-100000-ffff.jsonl").write_text("not json\n")  # unreadable: left out

    listed = [(s.session_id[-4:], s.title) for s in recorded_sessions(state, here)]
    assert listed == [("eeee", ""), ("dddd", "Old style."), ("bbbb", "Fix it."), ("aaaa", "Add a flag")]
    assert [s.session_id[-4:] for s in recorded_sessions(state)] == ["eeee", "dddd", "cccc", "bbbb", "aaaa"]
    newest = next(recorded_sessions(state, here))
    assert newest.workspace == str(here.resolve()) and newest.updated >= newest.started
    assert list(recorded_sessions(tmp_path / "nothing", here)) == []
