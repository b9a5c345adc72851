"""Load (issue 13, item 8): a 300-turn session through `agent run` on the scripted server, its peak
memory and transcript size, and `--resume` from any point of it.

One module-scoped run makes the transcript; the resume tests cut it. Every request the scripted model
gets is checked for a well-formed history (each tool call answered right after it, arguments JSON
objects), the way a strict server would check it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.core.context import SUMMARY_INSTRUCTION
from agent.session.live import resumed_history
from agent.session.task_run import RESUME_PROMPT
from agent.store.transcripts import SessionRecord, load_session
from tests.scripted_server import ScriptedServer

# A 300-turn session shared by every test here: minutes on 2 cores.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
STEPS = 300
STEP = re.compile(r"step[ _](\d+)")


def malformed(messages: list[dict]) -> str:
    """What a strict server would refuse in a request's messages; '' when nothing."""
    if not messages or messages[0].get("role") != "system":
        return "the first message is not the system prompt"
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            return f"message {i} has the role {role!r}"
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return f"message {i} answers no call of the assistant message before it"
            open_calls.discard(message["tool_call_id"])
            continue
        if open_calls:
            return f"message {i} comes before the results of {sorted(open_calls)}"
        for call in message.get("tool_calls") or []:
            try:
                arguments = json.loads(call["function"]["arguments"])
            except (KeyError, TypeError, ValueError):
                return f"message {i} has a call whose arguments are not JSON"
            if not isinstance(arguments, dict):
                return f"message {i} has a call whose arguments are no object"
            open_calls.add(call["id"])
    return f"the calls {sorted(open_calls)} have no result" if open_calls else ""


@dataclass
class StepModel:
    """The scripted model: step N+1 after the newest tool result that says step N; a summary when asked."""

    steps: int
    problems: list[str] = field(default_factory=list)
    summaries: int = 0
    requests: int = 0

    def __call__(self, body: dict) -> dict:
        messages = body["messages"]
        self.requests += 1
        if problem := malformed(messages):
            self.problems.append(f"request {self.requests}: {problem}")
        last = messages[-1]
        if last.get("role") == "user" and last.get("content") == SUMMARY_INSTRUCTION:
            self.summaries += 1
            return {"content": f"Summary: the steps up to {self._done(messages)} are done."}
        done = self._done(messages)
        if done >= self.steps:
            return {"content": f"All {self.steps} steps are done."}
        n = done + 1
        if n % 10 == 0:
            args = {"path": f"notes/step_{n:03d}.txt", "content": f"step {n}\n" * 20}
            return {"tool_calls": [{"name": "write_file", "arguments": args}]}
        return {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo step {n}; seq 1 120"}}]}

    @staticmethod
    def _done(messages: list[dict]) -> int:
        for message in reversed(messages):
            if message.get("role") == "tool" and (found := STEP.search(message.get("content") or "")):
                return int(found.group(1))
        return 0


@dataclass
class LoadRun:
    code: int
    stdout: str
    stderr: str
    peak_kib: int
    seconds: float
    transcript: Path
    workdir: Path
    model: StepModel


def _run_peak(argv: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, int]:
    """Run `argv` as the only child of a small Python, which reports the child's peak RSS (KiB)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:])\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    *err, last = done.stderr.rstrip("\n").split("\n")
    peak, code = (int(x) for x in last.split())
    return subprocess.CompletedProcess(argv, code, done.stdout, "\n".join(err)), peak


@pytest.fixture(scope="module")
def load_run(tmp_path_factory: pytest.TempPathFactory) -> LoadRun:
    # (module scope: the isolated state of conftest is per test, so this run keeps its own)
    import os

    base = tmp_path_factory.mktemp("load")
    state, workdir = base / "state", base / "work"
    workdir.mkdir()
    task = base / "task.md"
    task.write_text(f"---\napproval: full-auto\n---\nDo the {STEPS} steps, one tool call each.\n")
    model = StepModel(STEPS)
    env_before = {k: os.environ.get(k) for k in ("AGENT_STATE_DIR", "AGENT_CONFIG_DIR")}
    os.environ["AGENT_STATE_DIR"], os.environ["AGENT_CONFIG_DIR"] = str(state), str(base / "config")
    try:
        with ScriptedServer(default=model) as server:
            started = time.monotonic()
            done, peak = _run_peak(
                [sys.executable, "-m", "agent", "run", str(task), "--base-url", server.url, "--workdir",
                 str(workdir), "--max-turns", str(3 * STEPS), "--json"],
                timeout=1500,
            )  # fmt: skip
            seconds = time.monotonic() - started
    finally:
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    [transcript] = sorted((state / "sessions").glob("*.jsonl"))
    return LoadRun(done.returncode, done.stdout, done.stderr, peak, seconds, transcript, workdir, model)


@pytest.mark.timeout(1800)
def test_a_300_turn_session_completes_with_bounded_memory(load_run):
    run = load_run
    assert run.code == 0, run.stderr[-3000:]
    events = [json.loads(line) for line in run.stdout.splitlines()]
    finished = events[-1]
    assert finished["type"] == "session.finished" and finished["outcome"] == "completed"
    assert finished["final"] == f"All {STEPS} steps are done."
    turns = [e for e in events if e["type"] == "turn.completed"]
    results = [e for e in events if e["type"] == "tool.result"]
    compactions = [e for e in events if e["type"] == "compaction"]
    assert len(results) == STEPS and all(r["ok"] for r in results)
    assert len(turns) == STEPS + 1
    assert sorted(p.name for p in (run.workdir / "notes").iterdir()) == [
        f"step_{n:03d}.txt" for n in range(10, STEPS + 1, 10)
    ]
    assert run.model.problems == []  # every request held a history a strict server accepts
    assert compactions and run.model.summaries  # the context filled up and was compacted on the way
    size = run.transcript.stat().st_size
    print(
        f"\n300-turn session: {run.seconds:.0f} s, peak RSS {run.peak_kib / 1024:.0f} MiB, transcript "
        f"{size / 1e6:.2f} MB ({len(run.transcript.read_text().splitlines())} lines), "
        f"{len(compactions)} compactions, {run.model.requests} requests"
    )
    assert run.peak_kib < 400 * 1024  # the agent holds the history, not 300 turns of everything


def _cut_points(lines: list[str]) -> dict[str, int]:
    """Named places to cut the transcript: line counts to keep."""
    kinds = [json.loads(line)["type"] for line in lines]
    first = {kind: kinds.index(kind) for kind in reversed(kinds)}
    compaction = first["compaction"]
    mid_tool = next(i for i in range(len(kinds) // 2, len(kinds)) if kinds[i] == "tool.call")
    return {
        "only-started": 1,
        "after-the-task": first["user.message"] + 1,
        "mid-tool-call": mid_tool + 1,  # the call is written, its result is not
        "after-a-compaction": compaction + 1,
        "before-the-end": len(lines) - 1,
        "whole": len(lines),
    }


def test_the_history_rebuilt_at_every_line_is_one_a_server_accepts(load_run):
    """`--resume` from any point: each prefix of the transcript (a kill -9 may stop it anywhere)
    rebuilds into a history that the loop can send as it is."""
    record = load_session(load_run.transcript.parent.parent, load_run.transcript.stem)
    events = record.events
    bad = []
    for keep in range(1, len(events) + 1):
        history = resumed_history(SessionRecord(record.session_id, record.path, events[:keep]))
        if problem := malformed([{"role": "system", "content": "x"}, *history]):
            bad.append((keep, events[keep - 1]["type"], problem))
    assert not bad, bad[:5]


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "point", ["only-started", "after-the-task", "mid-tool-call", "after-a-compaction", "before-the-end",
              "whole", "torn-line"],
)  # fmt: skip
def test_resume_works_from_any_point_of_the_long_session(load_run, point, tmp_path, isolated_state):
    lines = load_run.transcript.read_text().splitlines()
    if point == "torn-line":  # killed while writing: half a line at the end
        keep = _cut_points(lines)["mid-tool-call"]
        text = "\n".join(lines[:keep]) + "\n" + lines[keep][: len(lines[keep]) // 2]
    else:
        text = "\n".join(lines[: _cut_points(lines)[point]]) + "\n"
    sessions = isolated_state / "sessions"
    sessions.mkdir(parents=True)
    copy = sessions / f"{load_run.transcript.stem}-{point}.jsonl"
    copy.write_text(text)
    expected = resumed_history(load_session(isolated_state, copy.stem))
    model = StepModel(0)  # everything is done: it answers at once
    with ScriptedServer(default=model) as server:
        result = subprocess.run(
            [sys.executable, "-m", "agent", "run", "--resume", copy.stem, "--base-url", server.url],
            capture_output=True, text=True, timeout=300, cwd=REPO,
        )  # fmt: skip
        sent = server.requests[0]["messages"] if server.requests else []
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "All 0 steps are done."
    assert model.problems == []
    # the history as the transcript holds it, after the system prompt; a session that ended on the
    # model's answer gets one user message after it, so that the server is not asked to continue it
    ended_on_answer = (
        bool(expected) and expected[-1]["role"] == "assistant" and not expected[-1].get("tool_calls")
    )
    assert sent[1:] == expected + ([{"role": "user", "content": RESUME_PROMPT}] if ended_on_answer else [])
    # Appended to, and whole: every line is one event (a torn one was dropped before the first append).
    records = [json.loads(line) for line in copy.read_text().splitlines()]
    assert [r for r in records if r["type"] == "session.started"][-1]["resumed"]
    if point == "torn-line":  # and it can be resumed again
        with ScriptedServer(default=StepModel(0)) as server:
            again = subprocess.run(
                [sys.executable, "-m", "agent", "run", "--resume", copy.stem, "--base-url", server.url],
                capture_output=True, text=True, timeout=300, cwd=REPO,
            )  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
    shutil.rmtree(sessions)
