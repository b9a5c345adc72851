"""The task suite (examples/tasks/) and agent/frontends/measure/suite.py, without a model.

Every task's check must fail on its starting files, pass with its reference solution, and not be
fooled by an empty implementation with trivial tests. The suite's runner is tested on recorded
events, on real git repositories and processes, and end to end against the scripted model server.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.core.checks import run_check
from agent.events import (
    AssistantMessage,
    CheckFinished,
    ErrorEvent,
    SessionFinished,
    SessionStarted,
    ToolCallStarted,
    ToolFinished,
    TurnCompleted,
    TurnStarted,
    UserMessage,
)
from agent.frontends.headless import Printer
from agent.frontends.measure.suite import (
    TIMED_OUT,
    TaskScore,
    discover,
    format_table,
    parse_events,
    prepare_workdir,
    read_results,
    result_from_events,
    run_in_group,
    run_suite,
    run_suite_task,
)
from agent.session.taskfile import check_command_exists, load_task
from agent.store.telemetry import TurnStats, summarise_turns
from tests.scripted_server import ScriptedServer

TASKS_DIR = Path(__file__).resolve().parents[1] / "examples" / "tasks"
TASKS = {task.name: task for task in discover(TASKS_DIR)}
# The small tasks start from repo/ (or nothing) and have solution/; the real-repository ones start
# from a PyPI sdist (source.toml) and are proved by tests/test_real_tasks.py.
SMALL_TASKS = {name: task for name, task in TASKS.items() if not (task / "source.toml").exists()}
CHECK_TIMEOUT = 120
TRIVIAL_TESTS = "".join(f"def test_{i}():\n    pass\n\n\n" for i in range(5))


@pytest.fixture
def python3_with_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks say `python3 -m pytest`: make that this interpreter, as `agent bench --tasks` does."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))


def starting_files(task: Path, into: Path) -> Path:
    if (task / "repo").is_dir():
        shutil.copytree(task / "repo", into)
    else:
        into.mkdir()
    return into


def lay_over(source: Path, workdir: Path, content=None) -> None:
    """Copy `source`'s files into `workdir`; with `content`, write content(relative path) instead."""
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        target = workdir / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            shutil.copy2(path, target)
        else:
            target.write_text(content(path.relative_to(source)))


def is_test_file(path: Path) -> bool:
    return path.name.startswith("test_") and path.suffix == ".py"


def check(task: Path, workdir: Path):
    command = load_task(task / "task.md").spec.check
    check_command_exists(command, workdir)  # what `agent run` does before it starts
    return asyncio.run(run_check(command, workdir, CHECK_TIMEOUT))


# The suite itself


def test_the_suite_has_the_users_own_tasks_and_at_least_twelve_in_all():
    assert {"hello", "linked-list", "task-store", "kv-report"} <= set(SMALL_TASKS)
    assert len(SMALL_TASKS) >= 12


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_front_matter_parses_and_has_a_check(name):
    task = load_task(TASKS[name] / "task.md")
    assert task.spec.check and task.body
    assert task.spec.approval == "full-auto"
    assert task.spec.max_turns and task.spec.time_limit
    assert task.spec.profile is None and task.spec.workdir is None  # the suite's caller decides those


@pytest.mark.parametrize("name", sorted(SMALL_TASKS))
def test_the_tasks_files_are_small(name):
    for path in TASKS[name].rglob("*"):
        if path.is_file() and path.name != "task.md":
            assert len(path.read_text().splitlines()) <= 90, f"{path} is too long for a small model's task"
    assert (TASKS[name] / "solution").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL_TASKS))
def test_the_check_fails_on_the_starting_files_and_passes_with_the_solution(
    name, tmp_path, python3_with_pytest
):
    task = TASKS[name]
    workdir = starting_files(task, tmp_path / "work")
    before = check(task, workdir)
    assert before.exit_code not in (0, None), f"the check passes before any work:\n{before.output}"
    lay_over(task / "solution", workdir)
    after = check(task, workdir)
    assert after.passed, f"the check fails with the reference solution:\n{after.output}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL_TASKS))
def test_an_empty_implementation_with_trivial_tests_fails_the_check(name, tmp_path, python3_with_pytest):
    task = TASKS[name]
    workdir = starting_files(task, tmp_path / "work")
    lay_over(task / "solution", workdir, lambda path: TRIVIAL_TESTS if is_test_file(path) else "")
    result = check(task, workdir)
    assert result.exit_code not in (0, None), f"an empty implementation passes:\n{result.output}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL_TASKS))
def test_weakening_the_tests_instead_of_fixing_the_code_fails_the_check(name, tmp_path, python3_with_pytest):
    task = TASKS[name]
    workdir = starting_files(task, tmp_path / "work")
    tests = {p.relative_to(task / "solution") for p in (task / "solution").rglob("test_*.py")}
    for path in [*workdir.rglob("test_*.py"), *(workdir / p for p in tests)]:
        path.write_text(TRIVIAL_TESTS)
    result = check(task, workdir)
    assert result.exit_code not in (0, None), f"trivial tests pass the check:\n{result.output}"


# agent/frontends/measure/suite.py


def test_discover_sorts_the_task_folders_and_refuses_unknown_names(tmp_path):
    for name in ("b", "a", "not-a-task"):
        (tmp_path / name).mkdir()
    for name in ("b", "a"):
        (tmp_path / name / "task.md").write_text("Do it.")
    assert [p.name for p in discover(tmp_path)] == ["a", "b"]
    assert [p.name for p in discover(tmp_path, ["b"])] == ["b"]
    with pytest.raises(Exception, match="no task named zzz"):
        discover(tmp_path, ["zzz"])


def test_discover_takes_globs_and_refuses_one_that_matches_nothing(tmp_path):
    for name in ("real-a", "real-b", "small"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task.md").write_text("Do it.")
    assert [p.name for p in discover(tmp_path, ["real-*"])] == ["real-a", "real-b"]
    assert [p.name for p in discover(tmp_path, ["small", "real-b", "*-b"])] == ["real-b", "small"]
    with pytest.raises(Exception, match=r"no task named nope-\*"):
        discover(tmp_path, ["real-*", "nope-*"])
    assert [p.name for p in discover(tmp_path, ["!real-*"])] == ["small"]
    assert [p.name for p in discover(tmp_path, ["real-*", "!*-a"])] == ["real-b"]
    with pytest.raises(Exception, match=r"no task named !nope-\*"):
        discover(tmp_path, ["!nope-*"])


def git(workdir: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=workdir, capture_output=True, text=True, check=True).stdout


def test_prepare_workdir_commits_the_starting_files_in_a_fresh_repository(tmp_path):
    workdir = prepare_workdir(TASKS["rename-function"], tmp_path)
    assert sorted(p.name for p in workdir.iterdir() if p.name != ".git") == [
        "orders.py",
        "pricing.py",
        "test_orders.py",
    ]
    assert git(workdir, "status", "--porcelain") == ""
    assert len(git(workdir, "log", "--oneline").splitlines()) == 1
    again = prepare_workdir(TASKS["rename-function"], tmp_path)
    assert again != workdir and again.parent == tmp_path  # a second run never reuses the first one's folder


def test_a_task_without_starting_files_gets_an_empty_repository_with_a_commit(tmp_path):
    workdir = prepare_workdir(TASKS["hello"], tmp_path)
    assert [p.name for p in workdir.iterdir()] == [".git"]
    assert git(workdir, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def recorded_run(capsys: pytest.CaptureFixture[str]) -> str:
    """What `agent run --json` prints for a two-turn session whose check passed."""
    stats = [
        TurnStats.from_timings(
            {"cache_n": 0, "prompt_n": 2000, "prompt_per_second": 150.0, "predicted_n": 120,
             "predicted_per_second": 20.0, "draft_n": 60, "draft_n_accepted": 30},
            completion_tokens=120, wall_s=20.0,
        ),
        TurnStats.from_timings(
            {"cache_n": 1900, "prompt_n": 100, "prompt_per_second": 140.0, "predicted_n": 30,
             "predicted_per_second": 22.0, "draft_n": 20, "draft_n_accepted": 10},
            completion_tokens=30, wall_s=3.0,
        ),
    ]  # fmt: skip
    call = {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "{}"}}
    check = {
        "command": "python3 -m pytest -q",
        "exit_code": 0,
        "passed": True,
        "output": "1 passed",
        "seconds": 0.7,
    }
    events = [
        SessionStarted("20250101-abcdef", "coder-ngram", "qwen2.5-coder-1.5b", "/tmp/w", "Create hello.py"),
        UserMessage("Create hello.py"),
        TurnStarted(1),
        AssistantMessage(1, "", tool_calls=[call]),
        ToolCallStarted(1, "c1", "write_file", {"path": "hello.py", "content": "print(1)"}, "hello.py"),
        ToolFinished(1, "c1", "write_file", True, "wrote hello.py", 0.01),
        TurnCompleted(1, stats[0]),
        TurnStarted(2),
        AssistantMessage(2, "Done."),
        TurnCompleted(2, stats[1]),
        CheckFinished(1, check["command"], True, 0, check["output"], 0.7),
        SessionFinished(
            "completed", 2, "Done.", {**summarise_turns(stats), "exit_code": 0, "check": check, "error": ""}
        ),
    ]
    printer = Printer(json_lines=True, quiet=False)
    for event in events:
        printer(event)
    return capsys.readouterr().out


def test_a_finished_session_gives_its_summary_figures(capsys):
    events = parse_events("not json\n" + recorded_run(capsys))
    assert events[0]["type"] == "session.started" and events[-1]["type"] == "session.finished"
    result = result_from_events("hello", events, 0, 31.5)
    assert result == TaskScore(
        name="hello", solved=True, exit_code=0, turns=2, seconds=31.5, output_tokens=150, gen_tok_s=21.0,
        acceptance=0.5, cache_reuse=0.475, session_id="20250101-abcdef", error="", checks=1,
    )  # fmt: skip


def test_a_failed_check_is_the_reason_given(capsys):
    events = parse_events(recorded_run(capsys))
    events[-1]["summary"].update(
        exit_code=1,
        check={"command": "x", "exit_code": 1, "passed": False, "output": "E\nAssertionError: 6 != 3"},
    )
    result = result_from_events("cli-flag", events, 1, 10.0)
    assert not result.solved and result.error == "check failed (exit 1): AssertionError: 6 != 3"


def test_a_run_that_died_keeps_the_turns_it_finished(capsys):
    events = [e for e in parse_events(recorded_run(capsys)) if e["type"] != "session.finished"]
    events.append(ErrorEvent("server", "the model server failed: connection refused").to_json())
    result = result_from_events("hello", events, 4, 12.0, stderr="Traceback ...\n")
    assert not result.solved and result.exit_code == 4
    assert result.turns == 2 and result.output_tokens == 150 and result.acceptance == 0.5
    assert result.error == "the model server failed: connection refused"


def test_with_attempts_the_winners_session_and_the_applied_change_count(capsys):
    run = parse_events(recorded_run(capsys))
    loser = [{**e, "attempt": 1} for e in run]
    loser[-1] = {**loser[-1], "outcome": "cancelled", "summary": {"turns": 9, "exit_code": None}}
    winner = [{**e, "attempt": 2, **({"session_id": "20250101-winner"} if e["type"] == "session.started" else {})}
              for e in run]  # fmt: skip
    applied = [{"path": "add.py", "added": 2, "deleted": 0}]
    done = {"type": "attempts.finished", "winner": 2, "attempts": [], "changes": applied}
    result = result_from_events("hello", [*loser[:3], *winner, loser[-1], done], 0, 20.0)
    assert result.solved and result.turns == 2 and result.session_id == "20250101-winner"
    assert (result.lines_added, result.lines_deleted) == (2, 0)


def test_format_table_has_a_column_group_per_label_and_the_solved_count():
    results = {
        "coder-ngram": [
            TaskScore("cli-flag", True, 0, turns=3, seconds=52, gen_tok_s=20.4, cache_reuse=0.91),
            TaskScore("hello", False, 1, turns=8, seconds=301, gen_tok_s=19.0, acceptance=0.45),
        ],
        "coder/blocks": [TaskScore("hello", True, 0, turns=1, seconds=12, gen_tok_s=44)],
    }
    lines = format_table(results).splitlines()
    assert "coder-ngram" in lines[0] and "coder/blocks" in lines[0]
    columns = ["result", "turns", "time", "tok/s", "draft", "cache"]
    assert lines[1].replace("│", "").split() == ["task", *columns, *columns]
    cli_flag = next(line for line in lines if line.startswith("cli-flag"))
    assert cli_flag.split("│")[1].split() == ["✓", "3", "52s", "20", "–", "91%"]
    assert cli_flag.split("│")[2].split() == ["–"]  # not run with that label
    hello = next(line for line in lines if line.startswith("hello"))
    assert hello.split("│")[1].split() == ["✗", "1", "8", "301s", "19", "45%", "–"]
    assert lines[-1].split("│")[1].strip() == "solved 1/2" and lines[-1].split("│")[2].strip() == "solved 1/1"


@pytest.mark.slow
def test_a_command_past_its_timeout_is_stopped_with_its_whole_group():
    # The shell ignores SIGTERM (and so does its child): only the SIGKILL after the grace ends them.
    command = ["bash", "-c", "trap '' TERM; sleep 60 & echo $!; wait"]
    started = time.monotonic()
    code, stdout, _, timed_out = run_in_group(command, timeout=1, grace=0.5)
    assert timed_out and code == -9 and time.monotonic() - started < 30
    child = int(stdout.split()[0])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and "Z" not in _state(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child), "the background child survived"


@pytest.mark.slow
def test_interrupting_the_suite_stops_the_running_task_with_its_whole_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    runner = (
        "import sys; from agent.frontends.measure.suite import run_in_group; "
        f"run_in_group(['bash', '-c', 'sleep 60 & echo $! > {pid_file}; wait'], timeout=60, grace=0.5)"
    )
    suite = subprocess.Popen([sys.executable, "-c", runner], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    suite.send_signal(signal.SIGINT)
    assert suite.wait(30) != 0
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and "Z" not in _state(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child), "the task's child outlived the suite"


@pytest.mark.slow
def test_two_tasks_run_at_once_with_jobs_and_ctrl_c_stops_both_runs_and_what_they_started(tmp_path):
    # Each run's model answers with a sleep of a duration no other process has (the sandbox hides
    # the test's folders and pids, not the processes): two such sleeps at once proves the runs
    # overlap, and Ctrl+C must end both, not only the agents.
    seconds = f"60.{os.getpid()}{time.monotonic_ns() % 10**6}"
    sleep = {"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep {seconds}"}}]}
    runner = (
        "import sys; from pathlib import Path; from agent.frontends.measure.suite import run_suite; "
        f"run_suite([Path({str(TASKS['hello'])!r}), Path({str(TASKS['fizzbuzz'])!r})], "
        f"['--base-url', sys.argv[1]], Path({str(tmp_path / 'work')!r}), timeout=120, jobs=2)"
    )
    with ScriptedServer(default=sleep) as server:
        suite = subprocess.Popen([sys.executable, "-c", runner, server.url], stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while len(_sleeping(seconds)) < 2 and time.monotonic() < deadline and suite.poll() is None:
                time.sleep(0.1)
            overlapped = len(_sleeping(seconds)) == 2
        finally:
            suite.send_signal(signal.SIGINT)
            code = suite.wait(60)
        assert overlapped, f"the two runs did not overlap: {suite.stderr.read().decode()[-2000:]}"
        assert code != 0
    deadline = time.monotonic() + 10
    while _sleeping(seconds) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _sleeping(seconds), "a run's command outlived the suite"


def _sleeping(seconds: str) -> list[int]:
    """The live processes running `sleep SECONDS`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ours = entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{seconds}\0".encode()
            if ours and _state(int(entry.name)) != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rindex(")") + 2]


def write(path: str, content: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


@pytest.mark.slow
def test_run_suite_solves_hello_against_the_scripted_model_and_records_it(tmp_path):
    script = [write("hello.py", 'print("Hello, world!")\n'), {"content": "Created hello.py."}]
    seen = []
    with ScriptedServer(script) as server:
        [result] = run_suite(
            [TASKS["hello"]], ["--base-url", server.url], tmp_path / "work", tmp_path / "out" / "r.jsonl",
            timeout=120, progress=seen.append,
        )  # fmt: skip
    assert result.solved, result
    assert result.exit_code == 0 and result.turns == 2 and result.checks == 1 and result.session_id
    assert result.output_tokens > 0 and result.gen_tok_s and result.seconds > 0
    assert seen == [result] and read_results(tmp_path / "out" / "r.jsonl")[0].session_id == result.session_id
    assert (tmp_path / "work" / "hello" / "hello.py").exists()


@pytest.mark.slow
def test_a_task_whose_check_keeps_failing_is_not_solved(tmp_path):
    script = [write("hello.py", 'print("Hello")\n'), {"content": "Done."}]
    with ScriptedServer(script, default={"content": "Done."}) as server:
        workdir = prepare_workdir(TASKS["hello"], tmp_path)
        result = run_suite_task(TASKS["hello"], workdir, ["--base-url", server.url], timeout=120)
    assert not result.solved and result.exit_code == 1
    assert result.checks >= 1 and result.error.startswith("check failed (exit 1)")


@pytest.mark.slow
def test_a_task_past_the_suite_timeout_is_stopped_and_reported(tmp_path):
    slow = {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}
    with ScriptedServer(default=slow) as server:
        workdir = prepare_workdir(TASKS["hello"], tmp_path)
        result = run_suite_task(TASKS["hello"], workdir, ["--base-url", server.url], timeout=3)
    assert not result.solved and result.exit_code == TIMED_OUT
    assert result.error == "stopped by the suite after 3 s"
