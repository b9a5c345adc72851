"""`agent run` as a user runs it: a subprocess, a task file, exit codes, --json, sessions, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from agent.store.transcripts import INTERRUPTED_WHILE_RUNNING
from tests.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "run-events.schema.json").read_text())


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def agent(*args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or REPO, env=os.environ.copy())  # fmt: skip


def task_file(tmp_path: Path, body: str, **front) -> Path:
    lines = ["---", *(f"{k}: {json.dumps(v)}" for k, v in front.items()), "---", body] if front else [body]
    path = tmp_path / "task.md"
    path.write_text("\n".join(lines) + "\n")
    return path


HELLO = [
    {"tool_calls": [call("write_file", path="hello.py", content='print("Hello, world!")\n')]},
    {"tool_calls": [call("bash", command=f"{sys.executable} hello.py")]},
    {"content": "Created hello.py; it prints Hello, world!"},
]
CHECK = f'{sys.executable} hello.py | grep -q "Hello, world!"'


@pytest.mark.slow
def test_a_task_that_passes_its_check_exits_0_with_the_answer_on_stdout(tmp_path):
    work = tmp_path / "work"
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto", check=CHECK, workdir="work")
    with ScriptedServer(HELLO) as server:
        result = agent("run", str(task), "--base-url", server.url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Created hello.py; it prints Hello, world!"
    assert (work / "hello.py").exists()
    assert "check `" in result.stderr and "passed" in result.stderr  # progress and verdict on stderr


@pytest.mark.slow
def test_a_check_that_is_a_whole_script_is_shown_by_its_first_line(tmp_path):
    # The README's first task checks with a hidden heredoc script: it was printed whole, twice.
    script = f"{sys.executable} - <<'HIDDEN'\nimport subprocess\nassert b'Hello' in subprocess.check_output(['{sys.executable}', 'hello.py'])\nHIDDEN"
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto", check=script, workdir="work")
    with ScriptedServer(HELLO) as server:
        result = agent("run", str(task), "--base-url", server.url)
    assert result.returncode == 0, result.stderr
    assert f"check `{sys.executable} - <<'HIDDEN' … (4 lines)` passed" in result.stderr
    assert "import subprocess" not in result.stderr


@pytest.mark.slow
def test_a_failing_check_exits_1(tmp_path):
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto", check="false")
    with ScriptedServer(HELLO) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
    assert result.returncode == 1
    assert "failed (exit 1)" in result.stderr


@pytest.mark.slow
def test_hitting_the_turn_limit_exits_3(tmp_path):
    task = task_file(tmp_path, "Loop forever.", approval="full-auto")
    with ScriptedServer(default={"tool_calls": [call("list_files")]}) as server:
        result = agent(
            "run", str(task), "--base-url", server.url, "--max-turns", "2", "--workdir", str(tmp_path)
        )
    assert result.returncode == 3
    assert "reached the limit of 2 model requests" in result.stderr
    assert len(server.requests) == 2


@pytest.mark.slow
def test_a_time_limit_exits_3(tmp_path):
    task = task_file(tmp_path, "Be slow.", approval="full-auto", time_limit="1s")
    with ScriptedServer(default={"tool_calls": [call("bash", command="sleep 5")]}) as server:
        started = time.monotonic()
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
    assert result.returncode == 3 and time.monotonic() - started < 30
    assert "time limit" in result.stderr


@pytest.mark.slow
def test_json_output_is_one_event_per_line_matching_the_documented_schema(tmp_path):
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto", check=CHECK)
    with ScriptedServer(HELLO) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    types = [e["type"] for e in events]
    assert types[0] == "session.started" and types[-1] == "session.finished"
    for expected in ("turn.started", "tool.call", "tool.result", "turn.completed"):
        assert expected in types
    finished = events[-1]
    assert finished["outcome"] == "completed" and finished["summary"]["check"]["passed"]
    assert finished["summary"]["exit_code"] == 0 and finished["turns"] == 3


@pytest.mark.slow
def test_approvals_never_wait_in_a_headless_run(tmp_path):
    replies = [{"tool_calls": [call("bash", command="git push --force origin main")]}, {"content": "ok"}]
    task = task_file(tmp_path, "Push.", approval="full-auto")
    with ScriptedServer(replies) as server:
        result = agent(
            "run", str(task), "--base-url", server.url, "--json", "--workdir", str(tmp_path), timeout=60
        )
    results = [json.loads(x) for x in result.stdout.splitlines() if '"tool.result"' in x]
    assert "Not run: it needs approval (dangerous: it force-pushes" in results[0]["output"]
    assert result.returncode == 0


@pytest.mark.slow
def test_a_check_script_with_an_apostrophe_in_its_heredoc_is_taken(tmp_path):
    """shlex read `# it's` inside a heredoc as an unclosed quote and refused the task (real-* tasks)."""
    from agent.session.taskfile import check_command_exists

    check_command_exists("python3 - <<'HIDDEN'\n# it's the check\nprint(1)\nHIDDEN", tmp_path)
    check_command_exists("if true; then pytest -q; fi", tmp_path)
    with pytest.raises(Exception, match="'no-such-program' is not installed"):
        check_command_exists("FOO=1 no-such-program --flag", tmp_path)
    with pytest.raises(Exception, match="cannot be parsed"):
        check_command_exists("echo 'unclosed", tmp_path)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "does not exist"),
        (b"", "holds no task"),
        (b"---\napproval: full-auto\n---\n", "holds no task"),
        (b"\xff\xfe not utf-8", "is not UTF-8 text"),
        (b"---\napproval: [unclosed\n---\nDo it.", "front matter is not valid YAML"),
        (b"---\napprovel: full-auto\n---\nDo it.", "unknown field 'approvel'"),
        (b"---\nmax_turns: many\n---\nDo it.", "field 'max_turns'"),
        (b"---\nprofile: gemma5\n---\nDo it.", "unknown profile 'gemma5'"),
        (b"---\ncheck: no-such-program --flag\n---\nDo it.", "'no-such-program' is not installed"),
        (b"---\napproval: full-auto\nDo it.", "no closing '---'"),
    ],
)
def test_bad_task_files_exit_2_with_a_clear_error(tmp_path, content, message):
    path = tmp_path / "task.md"
    if content is not None:
        path.write_bytes(content)
    result = agent("run", str(path), "--workdir", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_an_unknown_profile_lists_the_known_ones(tmp_path):
    path = task_file(tmp_path, "Do it.", profile="gemma5")
    result = agent("run", str(path))
    assert "Known profiles:" in result.stderr and "tiny-ngram" in result.stderr


@pytest.mark.slow
def test_resuming_an_unknown_session_exits_2(tmp_path):
    result = agent("run", "--resume", "20990101-nope")
    assert result.returncode == 2 and "no session '20990101-nope'" in result.stderr


@pytest.mark.slow
def test_a_context_too_small_for_the_prefix_is_a_clear_error_not_a_loop(tmp_path):
    task = task_file(tmp_path, "Do it.", approval="full-auto")
    with ScriptedServer(n_ctx=10) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
    assert result.returncode == 2
    assert "context" in result.stderr and "too small" in result.stderr and "--ctx-size" in result.stderr
    assert len(server.requests) == 1


def sessions(isolated_state: Path) -> list[Path]:
    return sorted((isolated_state / "sessions").glob("*.jsonl"))


def events_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_every_run_is_a_session_with_a_transcript_and_telemetry(tmp_path, isolated_state):
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto")
    with ScriptedServer(HELLO) as server:
        agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
    [path] = sessions(isolated_state)
    kinds = [e["type"] for e in events_of(path)]
    assert kinds[0] == "session.started" and kinds[-1] == "session.finished"
    telemetry = (isolated_state / "telemetry" / path.name).read_text().splitlines()
    assert len(telemetry) == 3 and json.loads(telemetry[0])["tools"][0]["name"] == "write_file"
    listed = agent("sessions", "--json")
    [row] = json.loads(listed.stdout)
    assert row["id"] == path.stem and row["outcome"] == "completed" and row["turns"] == 3


@pytest.mark.slow
def test_sigterm_during_a_run_leaves_a_consistent_transcript(tmp_path, isolated_state):
    marker = tmp_path / "started"
    replies = [{"tool_calls": [call("bash", command=f"touch {marker}; sleep 60")]}]
    task = task_file(tmp_path, "Wait.", approval="full-auto")
    with ScriptedServer(replies) as server:
        proc = subprocess.Popen([sys.executable, "-m", "agent", "run", str(task), "--base-url", server.url,
                                 "--workdir", str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        while not marker.exists():
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err  # 128 + SIGTERM, as a shell reports a process it ended
    [path] = sessions(isolated_state)
    events = events_of(path)
    assert events[-1]["type"] == "session.finished" and events[-1]["outcome"] == "interrupted"
    assert not subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True).stdout


@pytest.mark.slow
def test_kill_9_then_resume_continues_with_nothing_lost(tmp_path, isolated_state):
    marker = tmp_path / "started"
    first = [
        {"tool_calls": [call("write_file", path="notes.txt", content="step one\n")]},
        {"tool_calls": [call("bash", command=f"touch {marker}; sleep 60")]},
    ]
    task = task_file(tmp_path, "Do two steps.", approval="full-auto")
    with ScriptedServer(first) as server:
        proc = subprocess.Popen([sys.executable, "-m", "agent", "run", str(task), "--base-url", server.url,
                                 "--workdir", str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        while not marker.exists():
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # The command it was running has its own process group; its watchdog ends it.
        deadline = time.monotonic() + 10
        while (
            time.monotonic() < deadline
            and subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True).stdout
        ):
            time.sleep(0.1)
        assert not subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True).stdout
    [path] = sessions(isolated_state)
    before = events_of(path)
    pending = [e for e in before if e["type"] == "tool.call"][-1]
    assert not [
        e
        for e in before
        if e["type"] in ("tool.result", "session.finished")
        and e.get("call_id", pending["call_id"]) == pending["call_id"]
    ]

    resume_replies = [{"tool_calls": [call("write_file", path="notes.txt", content="step two\n")]},
                      {"content": "Both steps are done."}]  # fmt: skip
    with ScriptedServer(resume_replies) as server:
        result = agent("run", "--resume", path.stem, "--base-url", server.url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Both steps are done."
    # The resumed run kept the task's approval mode (full-auto): the edit ran without anyone to ask.
    assert (tmp_path / "notes.txt").read_text() == "step two\n"
    after = events_of(path)
    assert after[: len(before)] == before  # appended to, never rewritten
    resumed = next(e for e in after[len(before) :] if e["type"] == "session.started")
    assert resumed["resumed"] and resumed["workspace"] == str(tmp_path)
    sent = server.requests[0]["messages"]
    assert resumed["options"]["approval"] == "full-auto"
    assert "Do two steps." in sent[1]["content"]
    assert any(m.get("role") == "tool" and m["content"].startswith("Created notes.txt") for m in sent)
    # The command had started (it touched the marker): the model is told it may have taken effect.
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": pending["call_id"],
        "content": INTERRUPTED_WHILE_RUNNING.format(name="bash"),
    }


@pytest.mark.slow
def test_a_truncated_last_line_is_tolerated_and_a_corrupt_middle_line_is_not(tmp_path, isolated_state):
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto")
    with ScriptedServer(HELLO) as server:
        agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
    [path] = sessions(isolated_state)
    with path.open("a") as f:
        f.write('{"type": "turn.sta')
    with ScriptedServer([{"content": "again"}]) as server:
        ok = agent("run", "--resume", path.stem, "--base-url", server.url)
    assert ok.returncode == 0, ok.stderr
    lines = path.read_text().splitlines()
    lines[2] = "{not json"
    path.write_text("\n".join(lines) + "\n")
    bad = agent("run", "--resume", path.stem)
    assert bad.returncode == 2 and f"session {path.stem} is corrupt at line 3" in bad.stderr


@pytest.mark.slow
def test_auto_commit_commits_the_changes_with_a_message_that_says_what_changed(tmp_path, isolated_state):
    work = tmp_path / "repo"
    work.mkdir()
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.email", "u@x"],
        ["git", "config", "user.name", "U"],
    ):
        subprocess.run(cmd, cwd=work, check=True)
    config = isolated_state.parent / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("auto_commit = true\n")
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto")
    with ScriptedServer(HELLO) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(work))
    assert result.returncode == 0, result.stderr
    log = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=work, capture_output=True, text=True).stdout
    assert log.startswith("agent: Create hello.py.") and "- hello.py (+1 -0)" in log
    refs = subprocess.run(
        ["git", "for-each-ref", "refs/spec-agent/"], cwd=work, capture_output=True, text=True
    ).stdout
    assert "checkpoints/00001" in refs  # the checkpoint before the first change, for /undo


@pytest.mark.slow
def test_a_server_that_does_not_answer_exits_4(tmp_path):
    from tests.conftest import free_port

    task = task_file(tmp_path, "Do it.", approval="full-auto")
    result = agent(
        "run", str(task), "--base-url", f"http://127.0.0.1:{free_port()}", "--workdir", str(tmp_path)
    )
    assert result.returncode == 4
    assert "nothing answers at http://127.0.0.1:" in result.stderr and "Traceback" not in result.stderr


DEMO_MCP = str(REPO / "tests" / "mcp_servers" / "demo.py")


@pytest.mark.slow
def test_mcp_servers_from_the_front_matter_give_the_model_their_tools(tmp_path):
    front = {"approval": "full-auto", "mcp": {"demo": {"command": sys.executable, "args": [DEMO_MCP]}}}
    replies = [{"tool_calls": [call("mcp__demo__add", a=20, b=22)]}, {"content": "The sum is 42."}]
    task = task_file(tmp_path, "Add 20 and 22 with the demo server.", **front)
    with ScriptedServer(replies) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert any(e["type"] == "notice" and e["message"] == "MCP server demo: 4 tools" for e in events)
    [tool_result] = [e for e in events if e["type"] == "tool.result"]
    assert tool_result["ok"] and tool_result["output"] == "42"
    names = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert names[-4:] == ["mcp__demo__add", "mcp__demo__fail", "mcp__demo__shout", "mcp__demo__slow"]


@pytest.mark.slow
def test_an_mcp_server_that_does_not_start_is_named_and_the_run_goes_on(tmp_path):
    task = task_file(
        tmp_path, "Do it.", approval="full-auto", mcp={"gone": {"command": "/no/such/mcp-server"}}
    )
    with ScriptedServer([{"content": "done without it"}]) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
    assert result.returncode == 0
    assert "MCP server gone did not start: FileNotFoundError" in result.stderr


@pytest.mark.slow
def test_an_invalid_mcp_server_in_the_front_matter_exits_2_naming_it(tmp_path):
    task = task_file(tmp_path, "Do it.", mcp={"both": {"command": "x", "url": "http://h/mcp"}})
    result = agent("run", str(task), "--workdir", str(tmp_path))
    assert result.returncode == 2 and "field 'mcp'" in result.stderr and "either `command`" in result.stderr
