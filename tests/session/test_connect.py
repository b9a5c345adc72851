"""What a session runs on, new or resumed, as every front end picks it: the profile (`session_profile`)
and the action protocol (`resumed_actions`); and the progress a start reports with its log's last line
(`connect(report=...)`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.server.lifecycle import server_log_path
from agent.session.connect import last_log_line, server_log, session_profile
from agent.session.live import resumed_actions
from agent.settings.config import Settings
from agent.store.transcripts import SessionRecord


def record(*started: dict) -> SessionRecord:
    events = [{"type": "session.started", "session_id": "s", "workspace": "/w", **e} for e in started]
    return SessionRecord("s", Path("s.jsonl"), events)


@pytest.mark.parametrize(
    ("named", "url", "resumed", "expected"),
    [
        (None, None, None, ("coder-ngram", None)),  # nothing: the settings' default
        ("tiny", None, None, ("tiny", None)),
        (None, None, record({"profile": "tiny-ngram"}), ("tiny-ngram", None)),  # where it ran
        # It attached with --base-url: a resume attaches there again, not to the attach profile's own URL.
        (None, None, record({"profile": "attach", "base_url": "http://h:1"}), ("attach", "http://h:1")),
        # A profile named now wins, whatever the session ran on; a URL given now too.
        ("tiny", None, record({"profile": "attach", "base_url": "http://h:1"}), ("tiny", None)),
        (None, "http://h:2", record({"profile": "tiny"}), ("attach", "http://h:2")),
        # A later run on a named profile: its URL is the profile's own (latest_started).
        (
            None,
            None,
            record({"profile": "attach", "base_url": "http://h:1"}, {"profile": "tiny"}),
            ("tiny", None),
        ),
    ],
)
def test_the_profile_of_a_new_or_resumed_session(named, url, resumed, expected, tmp_path):
    profile = session_profile(Settings(), tmp_path, named, url, resumed)
    assert (profile.name, profile.base_url if profile.kind == "attach" else None) == expected


def test_a_resumed_session_keeps_the_protocol_it_was_given():
    assert (
        resumed_actions(record({"options": {"actions": "blocks"}})) == "blocks"
    )  # a task's, an editor's pick
    assert (
        resumed_actions(record({"options": {"actions": "blocks"}}, {"options": {}})) == "blocks"
    )  # (the TUI's)
    assert resumed_actions(record({"options": {}})) is None  # its profile's
    assert resumed_actions(record({"options": {"actions": "smoke-signals"}})) is None


def test_the_log_a_start_reports_is_the_one_the_lifecycle_writes(tmp_path, isolated_state):
    profile = session_profile(Settings(), tmp_path, "tiny")
    log = server_log(profile)
    assert log == server_log_path(isolated_state / "logs", "tiny", profile.port)
    assert last_log_line(profile) == ""  # no start yet
    log.parent.mkdir(parents=True)
    log.write_text("$ llama-server ...\nload_tensors: loading model\n")
    assert last_log_line(profile) == "load_tensors: loading model"
