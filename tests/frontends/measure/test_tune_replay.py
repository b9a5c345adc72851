"""`agent server tune PROFILE --from-sessions` on the scripted server, a real child process standing in for
llama-server: a session is recorded by a real `agent run`, then replayed on each setup. What each setup's
server received is compared with what the live session sent. The same on the real tiny model:
test_tune_replay_real.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.cli import main
from agent.server.embedded_model import lookup_embedded_model
from agent.server.registry import ServerRegistry
from agent.settings.trust import trust
from agent.store.transcripts import list_session_paths
from tests.conftest import FIXTURES, free_port
from tests.gguf_files import CHAT_TEMPLATE, write_gguf
from tests.scripted_server import llama_server_stand_in

pytestmark = pytest.mark.slow  # each test starts servers (python processes) and runs a session

REPO = Path(__file__).resolve().parents[3]
# The first answer of the recorded session, in each protocol: an action, whose result goes back.
FIRST = {
    "tools": {"tool_calls": [{"name": "list_files", "arguments": {}}]},
    "blocks": {"content": "hello.py\n```python\nprint('hello')\n```\n"},
}
TUNE = ["server", "tune", "fast", "--from-sessions", "--ngram-lengths", "16"]


@pytest.fixture(params=["tools"])
def workspace(request, tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trusted folder with two scripted profiles, `rec` (which records the session) and `fast` (the one
    tuned, whose servers answer $SCRIPTED_REPLIES), and a session recorded by a real `agent run` on `rec`:
    an action, then a last answer."""
    actions = request.param
    binary = llama_server_stand_in(tmp_path / "bin" / "llama-server")
    model = write_gguf(tmp_path / "bin" / "model.gguf", "scripted", chat_template=CHAT_TEMPLATE)
    monkeypatch.setenv("SCRIPTED_HELP", str(FIXTURES / "llama-server-upstream-help.txt"))
    ws = tmp_path / "ws"
    (ws / ".agent" / "profiles").mkdir(parents=True)
    (ws / "notes.txt").write_text("hello\n")
    trust(ws)
    monkeypatch.chdir(ws)
    for name, env in [("rec", {"SCRIPTED_REPLIES": [FIRST[actions], {"content": "Done."}]}), ("fast", {})]:
        env["SCRIPTED_REQUEST_LOG"] = str(tmp_path / f"{name}-requests.jsonl")
        (ws / ".agent" / "profiles" / f"{name}.toml").write_text(
            f'binary = "{binary}"\nmodel = "{model}"\nport = {free_port()}\nstartup_timeout = 30\n'
            f'actions = "{actions}"\n\n[env]\n'
            + "".join(
                f"{k} = {json.dumps(v if isinstance(v, str) else json.dumps(v))}\n" for k, v in env.items()
            )
        )
    (ws / "task.md").write_text("List the files.\n")
    assert main(["run", "task.md", "-p", "rec", "-q", "--approval", "auto-edit"]) == 0
    [session] = list_session_paths(isolated_state)
    assert '"tool.result"' in session.read_text()  # it acted: its second request carries the result
    return ws


def fast_replies(monkeypatch: pytest.MonkeyPatch, replies: list[dict]) -> None:
    """What each setup's server answers, the warm-up first."""
    monkeypatch.setenv("SCRIPTED_REPLIES", json.dumps([{"content": "ok"}, *replies]))


def requests_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("workspace", ["tools", "blocks"], indirect=True)
def test_the_recorded_requests_are_replayed_as_sent_on_each_setup(
    workspace, isolated_state, tmp_path, capsys, monkeypatch
):
    # the recorded first answer comes back, the last does not; drafts are counted
    first = FIRST["blocks" if (workspace / "hello.py").is_file() else "tools"]
    fast_replies(
        monkeypatch, [first, {"content": "Another answer.", "timings": {"draft_n": 8, "draft_n_accepted": 6}}]
    )
    out = tmp_path / "out"
    assert main([*TUNE, "--last", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr()

    doc = json.loads((out / "results.json").read_text())
    assert [r["setup"]["label"] for r in doc["results"]] == ["none", "ngram-mod n16", "ngram-simple n16"]
    for r in doc["results"]:
        assert r["status"] == "measured", r
        assert r["requests"] == 2 and r["same_answers"] == 1
        assert r["turn_s"] > 0 and r["acceptance"] == 0.75
        # Per kind of turn, the same requests again: each is one that copies what was shown, or new.
        assert sum(k["requests"] for k in r["by_kind"].values()) == 2 and set(r["by_kind"]) <= {
            "copies",
            "new",
        }
    assert doc["settings"]["from_sessions"] == [] and doc["settings"]["last"] == 1

    # What the live session sent, each setup's server received again: the same messages (the system
    # prompt and the tools rebuilt), at temperature 0, each limited to its recorded answer's length.
    live = requests_of(tmp_path / "rec-requests.jsonl")
    [session] = list_session_paths(isolated_state)
    events = [json.loads(line) for line in session.read_text().splitlines()]
    lengths = [e["stats"]["predicted_n"] for e in events if e["type"] == "turn.completed"]
    replayed = requests_of(tmp_path / "fast-requests.jsonl")
    assert len(replayed) == 3 * 3  # per setup: the warm-up and the two requests
    for setup in range(3):
        warmup, *again = replayed[3 * setup : 3 * setup + 3]
        assert "Write a Python function" in warmup["messages"][0]["content"]
        for sent, resent, length in zip(live, again, lengths, strict=True):
            assert resent["messages"] == sent["messages"]
            assert resent.get("tools") == sent.get("tools")  # (blocks send none)
            assert resent["temperature"] == 0 and resent["max_tokens"] == length and resent["stream"]

    assert "[1/2]" in printed.err and "[2/2]" in printed.err and "another answer" in printed.err
    tuned = isolated_state.parent / "config" / "profiles" / "fast-tuned.toml"
    assert "On 2 recorded requests replayed" in tuned.read_text()
    assert "s/turn" in printed.out and "1/2" in printed.out
    assert not ServerRegistry(isolated_state).running()


def test_a_session_recorded_against_another_model_is_refused(workspace, isolated_state, tmp_path, capsys):
    # the session as `agent run -p tiny` would have recorded it: on the tiny Gemma, newer than the other
    [session] = list_session_paths(isolated_state)
    lines = session.read_text().splitlines()
    other = session.with_name("29991231-235959-beef.jsonl")
    started = {**json.loads(lines[0]), "session_id": other.stem, "profile": "tiny", "model": "tiny"}
    other.write_text("\n".join([json.dumps(started), *lines[1:]]) + "\n")

    assert main([*TUNE, "--last", "2"]) == 2
    err = capsys.readouterr().err
    assert "session 29991231-235959-beef was recorded against another model than profile 'fast'" in err
    gemma = lookup_embedded_model("tiny").file_name
    assert f"recorded against '{gemma}' (profile 'tiny'); 'fast' serves 'model.gguf'" in err
    assert not (tmp_path / "fast-requests.jsonl").exists()  # refused before any server started
    assert not (isolated_state.parent / "config" / "profiles").exists()  # no tuned profile


def test_ctrl_c_stops_the_server_and_writes_no_profile(workspace, isolated_state, tmp_path, monkeypatch):
    fast_replies(monkeypatch, [{**FIRST["tools"], "delay": 60}])  # Ctrl+C comes while this one is worked on
    log = tmp_path / "fast-requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", *TUNE], cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.exists() and len(log.read_text().splitlines()) == 2):
        time.sleep(0.1)
    [server] = ServerRegistry(isolated_state).running()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err

    assert not ServerRegistry(isolated_state).running()
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)  # stopped, and reaped by the tune that started it
    assert not (isolated_state.parent / "config" / "profiles").exists()  # nothing written, not even half
