"""Task files and what a run depends on, broken on purpose (issue 13, item 7): front matter as editors
really save it (CRLF, a UTF-8 BOM, empty blocks), `--resume` of a session attached by URL, a check that
leaves processes behind, and a server whose /v1/models or /props fails for a while or for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.core.checks import run_check
from agent.core.llm import ModelClient
from agent.errors import ConfigError
from agent.server.admin import ServerAdmin
from agent.server.endpoint import Endpoint
from agent.session.taskfile import load_task, parse_task
from tests.conftest import free_port
from tests.frontends.test_headless import agent, call
from tests.scripted_server import ScriptedServer, _Handler

REPO = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------------------------------ front matter

FRONT = ["approval: full-auto", "check: test -f done.txt", "max_turns: 7"]
BODY = ["Do it.", "", "Second line; a rule follows.", "---", "Last line."]


def _task_bytes(newline: str, bom: bool, front: list[str] | None = FRONT, body: list[str] = BODY) -> bytes:
    lines = (["---", *front, "---"] if front is not None else []) + body
    return (b"\xef\xbb\xbf" if bom else b"") + (newline.join(lines) + newline).encode()


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["LF", "CRLF"])
@pytest.mark.parametrize("bom", [False, True], ids=["no-BOM", "BOM"])
def test_front_matter_is_read_whatever_the_line_endings_and_a_bom(tmp_path, newline, bom):
    path = tmp_path / "task.md"
    path.write_bytes(_task_bytes(newline, bom))
    task = load_task(path)
    assert task.spec.approval == "full-auto" and task.spec.check == "test -f done.txt"
    assert task.spec.max_turns == 7
    assert task.body == "\n".join(BODY)  # no CR, no BOM, no front matter in the task


@pytest.mark.parametrize(
    "text",
    [
        "---\n---\nDo it.\n",
        "---\n\n---\nDo it.\n",
        "---\r\n---\r\nDo it.\r\n",
        "---  \n# only a comment\n---\nDo it.",
    ],
    ids=["empty", "blank-line", "empty-CRLF", "comment-only"],
)
def test_an_empty_front_matter_block_is_no_settings_not_an_error(text):
    spec, body = parse_task(text, "task.md")
    assert spec.model_dump(exclude_defaults=True) == {} and body == "Do it."


@pytest.mark.parametrize(
    "text, message",
    [
        ("---\r\napproval: full-auto\r\nDo it.\r\n", "no closing '---'"),
        ("\ufeff---\napproval: full-auto\nDo it.\n", "no closing '---'"),
        ("---\n- a\n- list\n---\nDo it.\n", "must be a mapping"),
        ("---\r\napproval: [unclosed\r\n---\r\nDo it.", "not valid YAML"),
        ("\ufeff---\r\napprovel: full-auto\r\n---\r\nDo it.", "unknown field 'approvel'"),
    ],
)
def test_broken_front_matter_is_still_an_error_with_any_line_ending(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_task(text, "task.md")


def test_a_utf16_task_file_is_named_as_such(tmp_path):
    path = tmp_path / "task.md"
    path.write_bytes("---\napproval: full-auto\n---\nDo it.\n".encode("utf-16"))
    with pytest.raises(ConfigError, match="not UTF-8") as error:
        load_task(path)
    assert "UTF-16" in str(error.value.why)


# Printable text: YAML itself refuses raw control characters, and PyYAML reads no surrogate escapes.
PRINTABLE = st.characters(
    codec="utf-8", exclude_categories=("Cc", "Cs", "Co", "Cn"), exclude_characters="\ufeff"
)
KEYS = {
    "approval": st.sampled_from(["ask", "auto-edit", "full-auto", "read-only"]),
    "max_turns": st.integers(1, 10_000),
    "check": st.text(PRINTABLE, min_size=1).map(lambda s: " ".join(s.split()) or "true"),
    "check_rounds": st.integers(0, 9),
    "tool_choice": st.sampled_from(["auto", "required"]),
}
BODY_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\r\ufeff"), min_size=1).filter(
    lambda s: s.strip() and not s.lstrip().startswith("-")
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    front=st.fixed_dictionaries({}, optional=KEYS),
    body=BODY_TEXT,
    newline=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
    blank_lines=st.integers(0, 2),
)
def test_any_front_matter_survives_any_line_ending_and_a_bom(front, body, newline, bom, blank_lines):
    """Property: what a task file says is what the run gets, however the editor saved it."""
    lines = [
        "---",
        *(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in front.items()),
        "---",
    ]
    lines += [""] * blank_lines + body.split("\n")
    text = ("\ufeff" if bom else "") + newline.join(lines) + newline
    spec, parsed_body = parse_task(text, "task.md")
    assert spec.model_dump(exclude_defaults=True, exclude_none=True) == front
    assert parsed_body == body.strip()


@pytest.mark.slow
def test_a_crlf_task_file_with_a_bom_keeps_its_approval_and_check_through_agent_run(tmp_path):
    """Before: the BOM hid the front matter, so the check was never run and the task text held it."""
    path = tmp_path / "task.md"
    path.write_bytes(_task_bytes("\r\n", True, body=["Create done.txt."]))
    replies = [{"tool_calls": [call("write_file", path="done.txt", content="yes\n")]}, {"content": "Done."}]
    with ScriptedServer(replies) as server:
        result = agent("run", str(path), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
        sent = server.requests[0]["messages"]
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [check] = [e for e in events if e["type"] == "check.result"]
    assert check["passed"] and check["command"] == "test -f done.txt"
    assert events[0]["options"]["approval"] == "full-auto"
    task_message = next(m["content"] for m in sent if m["role"] == "user")
    assert "Create done.txt." in task_message
    assert "approval:" not in task_message and "\ufeff" not in task_message and "\r" not in task_message


# ------------------------------------------------------------------------------------- --resume by URL


def _sessions(state: Path) -> list[Path]:
    return sorted((state / "sessions").glob("*.jsonl"))


@pytest.mark.slow
def test_resume_of_a_base_url_session_reconnects_to_that_url(tmp_path, isolated_state):
    task = tmp_path / "task.md"
    task.write_text("---\napproval: full-auto\n---\nSay hello.\n")
    with ScriptedServer([{"content": "Hello."}, {"content": "Hello again."}]) as server:
        first = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
        assert first.returncode == 0, first.stderr
        [path] = _sessions(isolated_state)
        started = json.loads(path.read_text().splitlines()[0])
        assert started["base_url"] == server.url
        resumed = agent("run", "--resume", path.stem, timeout=60)  # no --base-url this time
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip() == "Hello again."
        assert len(server.requests) == 2  # the resumed turn reached the same server
    assert "8910" not in resumed.stderr


@pytest.mark.slow
def test_resume_of_a_session_attached_by_agent_base_url_reconnects_too(tmp_path, isolated_state):
    task = tmp_path / "task.md"
    task.write_text("Say hello.\n")
    with ScriptedServer([{"content": "Hello."}, {"content": "Again."}]) as server:
        env = {**os.environ, "AGENT_BASE_URL": server.url}
        first = subprocess.run([sys.executable, "-m", "agent", "run", str(task), "--workdir", str(tmp_path)],
                               capture_output=True, text=True, timeout=120, cwd=REPO, env=env)  # fmt: skip
        assert first.returncode == 0, first.stderr
        [path] = _sessions(isolated_state)
        resumed = agent("run", "--resume", path.stem, timeout=60)  # AGENT_BASE_URL is gone now
        assert resumed.returncode == 0, resumed.stderr
        assert len(server.requests) == 2


@pytest.mark.slow
def test_resume_with_a_new_base_url_goes_there_instead(tmp_path, isolated_state):
    task = tmp_path / "task.md"
    task.write_text("Say hello.\n")
    with ScriptedServer([{"content": "Hello."}]) as old:
        assert agent("run", str(task), "--base-url", old.url, "--workdir", str(tmp_path)).returncode == 0
    [path] = _sessions(isolated_state)
    with ScriptedServer([{"content": "From the new one."}]) as new:
        resumed = agent("run", "--resume", path.stem, "--base-url", new.url, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip() == "From the new one." and len(new.requests) == 1
    last_start = [json.loads(x) for x in path.read_text().splitlines() if '"session.started"' in x][-1]
    assert last_start["resumed"] and last_start["base_url"] == new.url


# ------------------------------------------------------------------------------------------- the check


def _marked(marker: str) -> list[str]:
    pids = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    alive = []
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.append(pid)
    return alive


def _left_behind(marker: str, settle: float = 5.0) -> list[str]:
    deadline = time.monotonic() + settle
    while (pids := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


@pytest.fixture
def marker() -> Iterator[str]:
    name = f"check-child-{uuid.uuid4().hex}"
    yield name
    for pid in _marked(name):  # only after a failure: the processes this test started, by marker
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), 9)


def _sleeper(marker: str) -> str:
    return f'{sys.executable} -c "import time; time.sleep(120)" {marker}'


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        "{s} & {s} & wait",  # children in the check's group
        "bash -c '{s} & wait' & wait",  # a grandchild
        "bash -c 'trap \"\" TERM; {s}' & wait",  # one that ignores SIGTERM
        "setsid {s} & wait",  # one that left the group
    ],
    ids=["children", "grandchild", "deaf-to-term", "setsid"],
)
async def test_a_check_that_times_out_leaves_no_process_behind(tmp_path, marker, shape):
    started = time.monotonic()
    result = await run_check(shape.format(s=_sleeper(marker)), tmp_path, timeout=1.5)
    assert time.monotonic() - started < 15  # the setsid child once held the pipe: a 120 s hang
    assert result.exit_code is None and "timed out after 2 s" in result.output
    assert not _left_behind(marker)


async def test_a_check_that_passes_but_leaves_a_background_child_does_not_leave_it_running(tmp_path, marker):
    result = await run_check(
        f"{_sleeper(marker)} > /dev/null 2>&1 & echo started; exit 0", tmp_path, timeout=60
    )
    assert result.passed and result.output.strip() == "started"
    assert not _left_behind(marker)


async def test_a_background_child_holding_the_output_does_not_turn_a_pass_into_a_timeout(tmp_path, marker):
    started = time.monotonic()
    result = await run_check(f"{_sleeper(marker)} & echo ran; exit 0", tmp_path, timeout=60)
    assert result.passed and "ran" in result.output
    assert time.monotonic() - started < 15
    assert not _left_behind(marker)


@pytest.mark.slow
def test_agent_run_leaves_no_process_of_its_check_behind(tmp_path, marker):
    task = tmp_path / "task.md"
    task.write_text(f"---\napproval: full-auto\ncheck: '{_sleeper(marker)} & true'\n---\nDo nothing.\n")
    with ScriptedServer([{"content": "Nothing to do."}]) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert not _left_behind(marker)


# -------------------------------------------------------------------------------- /v1/models and /props


class _FaultyHandler(_Handler):
    """The scripted server, with GET paths that fail: `faults[path]` is a status for every request, or
    a list of statuses for the first requests (then it answers)."""

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        plan = self.server.faults.get(self.path)
        status = (plan.pop(0) if plan else None) if isinstance(plan, list) else plan
        if status:
            self._json(status, {"error": {"code": status, "message": "injected", "type": "server_error"}})
            return
        super().do_GET()


@contextlib.contextmanager
def faulty_server(faults: dict, script: list[dict] | None = None, **kw) -> Iterator[ScriptedServer]:
    server = ScriptedServer(script, **kw)
    server.httpd.RequestHandlerClass = _FaultyHandler
    server.httpd.faults, server.httpd.seen = faults, []
    with server:
        yield server


def _run_json(server: ScriptedServer, tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    task = tmp_path / "task.md"
    task.write_text("Say hello.\n")
    result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
    return result, [json.loads(line) for line in result.stdout.splitlines()]


def _notices(events: list[dict]) -> list[str]:
    return [e["message"] for e in events if e["type"] == "notice"]


@pytest.mark.slow
def test_props_missing_is_announced_with_the_context_assumed(tmp_path):
    with faulty_server({"/props": 404}, [{"content": "Hello."}]) as server:
        result, events = _run_json(server, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "the server did not report its context size (/props: HTTP 404); assuming 32768 tokens" in _notices(
        events
    )


@pytest.mark.slow
def test_models_missing_is_announced_with_the_name_used(tmp_path):
    with faulty_server({"/v1/models": 404}, [{"content": "Hello."}]) as server:
        result, events = _run_json(server, tmp_path)
        sent_model = server.requests[0]["model"]
    assert result.returncode == 0, result.stderr
    assert events[0]["model"] == "default" and sent_model == "default"
    assert any(
        n.startswith("the server did not name its model (/v1/models: HTTP 404)") for n in _notices(events)
    )


@pytest.mark.slow
def test_lookups_failing_for_a_while_are_retried_and_nothing_falls_back(tmp_path):
    faults = {"/props": [503, 502], "/v1/models": [503, 500]}
    with faulty_server(faults, [{"content": "Hello."}], n_ctx=12345) as server:
        result, events = _run_json(server, tmp_path)
        seen = [path for path, _ in server.httpd.seen]
    assert result.returncode == 0, result.stderr
    assert events[0]["model"] == "scripted-model"
    assert not [n for n in _notices(events) if "did not" in n]
    assert seen.count("/props") == 3 and seen.count("/v1/models") >= 3


async def test_props_is_asked_with_the_api_key_llama_server_wants_there():
    with faulty_server({}) as server:
        admin = ServerAdmin(Endpoint(base_url=server.url + "/v1", api_key="sk-test-key"))
        try:
            assert await admin.context_size(999) == 32768
        finally:
            await admin.close()
        assert ("/props", "Bearer sk-test-key") in server.httpd.seen
    assert admin.take_notices() == []


@pytest.mark.slow
async def test_a_server_that_never_answers_props_falls_back_and_says_why():
    admin = ServerAdmin(Endpoint(base_url=f"http://127.0.0.1:{free_port()}/v1"))
    try:
        assert await admin.context_size(4096) == 4096
    finally:
        await admin.close()
    [note] = admin.take_notices()
    assert note.startswith("the server did not report its context size (/props: ConnectError")
    assert note.endswith("assuming 4096 tokens")


def test_an_attached_server_that_comes_up_a_moment_late_is_still_reached(tmp_path):
    """`--base-url` to a server that is restarting: the first connection is refused, a retry gets in."""
    from agent.server.profiles import attach_profile
    from agent.session.connect import _check_reachable
    from agent.settings.config import Settings

    port = free_port()
    holder: dict = {}

    def start_late() -> None:
        time.sleep(0.3)
        holder["server"] = ScriptedServer(port=port).__enter__()

    thread = threading.Thread(target=start_late)
    thread.start()
    try:
        _check_reachable(attach_profile(f"http://127.0.0.1:{port}"), Settings().api_key)
    finally:
        thread.join()
        holder["server"].__exit__(None, None, None)


@pytest.mark.slow
def test_model_name_lookup_does_not_block_a_session_when_it_keeps_failing(tmp_path):
    async def lookup() -> tuple[str, list[str]]:
        with faulty_server({"/v1/models": 500}) as server:
            client = ModelClient(Endpoint(base_url=server.url + "/v1"))
            try:
                started = time.monotonic()
                name = await client.model_name()
                assert time.monotonic() - started < 10
                return name, client.server.take_notices()
            finally:
                await client.close()

    name, notes = asyncio.run(lookup())
    assert name == "default" and notes and "HTTP 500" in notes[0]


@pytest.mark.server
async def test_the_real_server_with_an_api_key_gives_its_context_size(embedded, tmp_path):
    """llama-server wants the key on /props too (401 without it): the size it reports is used, not 32768."""
    from agent.server.lifecycle import stop
    from agent.server.registry import ServerRegistry
    from tests.conftest import start_profile

    state = tmp_path / "server-state"
    handle = start_profile("tiny", embedded, state, api_key="sk-fault-test")
    try:
        client = ModelClient(Endpoint(base_url=handle.base_url + "/v1", api_key="sk-fault-test"))
        try:
            n_ctx = await client.server.context_size(1234)
            model = await client.model_name()
        finally:
            await client.close()
    finally:
        stop(handle, ServerRegistry(state))
    assert n_ctx != 1234 and n_ctx >= 2048 and model != "default"
    assert client.server.take_notices() == []
