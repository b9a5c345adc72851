"""The check loop: a failed check goes back to the model until it passes or the rounds run out; the
check itself is bounded in time (its whole process group) and in output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from agent.core.checks import OUTPUT_LIMIT, cap_output, feedback, run_check
from agent.protocols.edit_blocks.prompt import FAILED_DEFINITION_REMINDER
from tests.core.test_loop import git_repo
from tests.frontends.test_headless import agent, call, task_file
from tests.scripted_server import ScriptedServer

WRONG = {"tool_calls": [call("write_file", path="add.py", content="def add(a, b):\n    return a - b\n")]}
RIGHT = {"tool_calls": [call("write_file", path="add.py", content="def add(a, b):\n    return a + b\n")]}
CHECK = f"{sys.executable} -c 'from add import add; assert add(2, 3) == 5, add(2, 3)'"


@pytest.mark.slow
def test_a_failed_check_goes_back_to_the_model_and_its_fix_passes(tmp_path):
    task = task_file(tmp_path, "Write add.py.", approval="full-auto", check=CHECK)
    script = [WRONG, {"content": "Done."}, RIGHT, {"content": "Fixed it."}]
    with ScriptedServer(script) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
        requests = server.requests
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    checks = [e for e in events if e["type"] == "check.result"]
    assert [c["passed"] for c in checks] == [False, True]
    feedback = requests[2]["messages"][-1]
    assert feedback["role"] == "user"
    assert "AssertionError: -1" in feedback["content"]  # the check's own output, not just "failed"
    assert events[-1]["summary"]["check"]["passed"] is True


@pytest.mark.slow
def test_check_rounds_bound_the_retries_and_the_exit_code_follows_the_last_check(tmp_path):
    task = task_file(
        tmp_path, "Write add.py.", approval="full-auto", check=CHECK, check_rounds=1, fresh_starts=0
    )
    wrong_again = {
        "tool_calls": [call("write_file", path="add.py", content="def add(a, b):\n    return 0\n")]
    }
    script = [WRONG, {"content": "Done."}, wrong_again, {"content": "Done."}, wrong_again]
    with ScriptedServer(script, default={"content": "Done."}) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
    assert result.returncode == 1
    checks = [e for e in map(json.loads, result.stdout.splitlines()) if e["type"] == "check.result"]
    assert len(checks) == 2  # the first try and one round of feedback


@pytest.mark.slow
def test_a_stuck_task_starts_afresh_with_the_task_and_the_failing_line_and_its_fix_passes(tmp_path):
    """Its rounds over and the check still failing, the task starts again in a cleared conversation:
    the system prompt, then the task with the line the check fails on, the other way and warmer."""
    task = task_file(
        tmp_path, "Write add.py.", approval="full-auto", check=CHECK, check_rounds=0, fresh_starts=2
    )
    read = {"tool_calls": [call("read_file", path="add.py")]}  # the cleared session has read nothing
    script = [WRONG, {"content": "Done."}, read, RIGHT, {"content": "Fixed it."}]
    with ScriptedServer(script) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
        requests = server.requests
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["passed"] for e in events if e["type"] == "check.result"] == [False, True]
    fresh = requests[2]
    assert [m["role"] for m in fresh["messages"]] == ["system", "user"]  # the conversation cleared
    note = fresh["messages"][-1]["content"]
    assert "Write add.py." in note and "its check failed: AssertionError: -1" in note
    assert "left the files as they are now" in note  # not a git repository: nothing to undo
    assert fresh["temperature"] == 0.5 and fresh["seed"] == 2 and fresh["min_p"] == 0.0
    assert "temperature" not in requests[0] or requests[0]["temperature"] != 0.5
    cleared = [e for e in events if e["type"] == "compaction"]
    assert [e["reason"] for e in cleared] == ["cleared for fresh start 1"]
    assert any("starting afresh (1 of 2)" in e.get("message", "") for e in events)
    assert (tmp_path / "add.py").read_text() == "def add(a, b):\n    return a + b\n"


@pytest.mark.slow
def test_a_fresh_start_in_git_undoes_the_stuck_work_onto_a_branch_deleted_once_a_line_passes(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("the user's notes\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "notes"], cwd=repo, check=True)
    (repo / "draft.txt").write_text("not committed, the user's too\n")
    spoil = {"tool_calls": [call("write_file", path="notes.txt", content="spoiled\n")]}
    task = task_file(tmp_path, "Write add.py.", approval="full-auto", check=CHECK, check_rounds=0)

    def fresh_branches() -> list[str]:
        out = subprocess.run(
            ["git", "branch", "--list", "agent/fresh-starts/*"], cwd=repo, capture_output=True
        )
        return out.stdout.decode().split()

    seen_at_the_fresh_start: dict[str, object] = {}

    def look_then_list(_request: dict) -> dict:  # the fresh line's first request
        seen_at_the_fresh_start.update(
            add=(repo / "add.py").exists(), notes=(repo / "notes.txt").read_text(), branches=fresh_branches()
        )
        return {"tool_calls": [call("list_files")]}

    script = [WRONG, spoil, {"content": "Done."}, look_then_list, RIGHT, {"content": "Fixed it."}]
    with ScriptedServer(script) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(repo), "--json")
        fresh = server.requests[3]["messages"][-1]["content"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    # when the fresh start began: the files as before the task, the stuck work on a branch
    assert seen_at_the_fresh_start["add"] is False
    assert seen_at_the_fresh_start["notes"] == "the user's notes\n"
    [branch] = seen_at_the_fresh_start["branches"]
    assert branch.startswith("agent/fresh-starts/") and branch.endswith("-1")
    assert "Its changes were undone" in fresh and "AssertionError: -1" in fresh
    # the fresh line passed: its work stands, the user's files with it, and the branch is gone
    assert (repo / "add.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (repo / "draft.txt").read_text() == "not committed, the user's too\n"
    assert (repo / "notes.txt").read_text() == "the user's notes\n"
    assert fresh_branches() == []


@pytest.mark.slow
def test_stuck_lines_that_never_pass_leave_their_work_on_branches(tmp_path):
    repo = git_repo(tmp_path / "repo")
    task = task_file(
        tmp_path, "Write add.py.", approval="full-auto", check=CHECK, check_rounds=0, fresh_starts=2
    )
    # (3 lines: a checkpoint of its own, not one made again byte for byte within the same second)
    zero = {
        "tool_calls": [call("write_file", path="add.py", content="def add(a, b):\n    a = 0\n    return 0\n")]
    }
    with ScriptedServer([WRONG, {"content": "Done."}, zero], default={"content": "Done."}) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(repo), "--json")
    assert result.returncode == 1
    out = subprocess.run(["git", "branch", "--list", "agent/fresh-starts/*"], cwd=repo, capture_output=True)
    first, second = sorted(out.stdout.decode().split())
    for branch, kept in ((first, "return a - b"), (second, "a = 0\n    return 0")):  # each line's own work
        shown = subprocess.run(["git", "show", f"{branch}:add.py"], cwd=repo, capture_output=True, text=True)
        assert shown.stdout == f"def add(a, b):\n    {kept}\n"
    assert not (repo / "add.py").exists()  # the last line wrote nothing: the start, as it was
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert any(f"kept as branch {second}" in e.get("message", "") for e in events)


@pytest.mark.slow
def test_fresh_starts_are_bounded_and_none_comes_after_a_passing_check(tmp_path):
    task = task_file(
        tmp_path, "Write add.py.", approval="full-auto", check=CHECK, check_rounds=0, fresh_starts=1
    )
    with ScriptedServer([WRONG], default={"content": "Done."}) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
        assert len(server.requests) == 3  # the line, then one fresh start's one answer
    assert result.returncode == 1
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["passed"] for e in events if e["type"] == "check.result"] == [False, False]
    assert events[-1]["summary"]["check"]["passed"] is False

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    passed_at_once = task_file(fresh, "Write add.py.", approval="full-auto", check=CHECK, fresh_starts=3)
    with ScriptedServer([RIGHT, {"content": "Done."}]) as server:
        result = agent("run", str(passed_at_once), "--base-url", server.url, "--workdir", str(fresh))
        assert len(server.requests) == 2
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_no_check_rounds_means_no_feedback(tmp_path):
    task = task_file(tmp_path, "Write add.py.", approval="full-auto", check=CHECK)
    with ScriptedServer([WRONG], default={"content": "Done."}) as server:
        result = agent(
            "run",
            str(task),
            "--base-url",
            server.url,
            "--workdir",
            str(tmp_path),
            "--check-rounds",
            "0",
            "--fresh-starts",
            "0",
        )
        assert len(server.requests) == 2
    assert result.returncode == 1


@pytest.mark.slow
async def test_a_hanging_check_times_out_and_its_whole_process_group_is_killed(tmp_path):
    pid_file = tmp_path / "child.pid"
    result = await run_check(f"sleep 60 & echo $! > {pid_file}; wait", tmp_path, timeout=1)
    assert result.exit_code is None and not result.passed
    assert "timed out after 1 s" in result.output
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the check's background child outlived the timeout"


async def test_megabytes_of_check_output_are_capped_before_they_reach_the_model(tmp_path):
    command = f"{sys.executable} -c \"print('first line'); print('x' * 5_000_000); print('last line')\""
    result = await run_check(command, tmp_path, timeout=60)
    assert result.passed
    assert len(result.output) < OUTPUT_LIMIT + 200
    assert result.output.startswith("first line") and result.output.rstrip().endswith("last line")
    assert "characters left out" in result.output


def test_cap_output_keeps_short_text_whole():
    assert cap_output("short") == "short"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout
    return bool(state.strip()) and not state.strip().startswith("Z")  # zombies are dead (FACTS.md)


@pytest.mark.slow
def test_in_blocks_mode_a_failed_check_shows_the_changed_files_and_the_format_again(tmp_path):
    task = task_file(tmp_path, "Write add.py.", approval="full-auto", check=CHECK, check_rounds=1)
    wrong = {"content": "add.py\n```python\ndef add(a, b):\n    return a - b\n```"}
    with ScriptedServer([wrong, {"content": "Done."}], default={"content": "Done."}) as server:
        agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--actions", "blocks")
        feedback = server.requests[2]["messages"][-1]["content"]
    assert "AssertionError: -1" in feedback
    assert "add.py now reads:\n```\ndef add(a, b):\n    return a - b\n```" in feedback
    assert feedback.index("add.py now reads:") < feedback.index("AssertionError: -1")  # the failure last
    assert feedback.rstrip().endswith("Nothing changes unless you write the blocks.")


async def test_a_check_of_several_commands_says_which_one_failed(tmp_path):
    command = "true && test -e missing.txt && echo never"
    result = await run_check(command, tmp_path, timeout=30)
    assert not result.passed
    assert result.failed_part == "test -e missing.txt"
    assert result.to_dict()["failed_part"] == "test -e missing.txt"


async def test_a_pytest_check_that_finds_no_tests_says_where_pytest_looks_for_them(tmp_path):
    (tmp_path / "linked_list.py").write_text("def head():\n    return None\n")
    result = await run_check(f"{sys.executable} -m pytest -q -p no:cacheprovider", tmp_path, timeout=60)
    assert result.exit_code == 5
    told = feedback(result, tmp_path).message
    assert "pytest found no tests to run" in told and "`test_*.py`" in told
    assert "Find the cause in the code" not in told  # no code is at fault
    # Any other failure is sent as before.
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert False\n")
    result = await run_check(f"{sys.executable} -m pytest -q -p no:cacheprovider", tmp_path, timeout=60)
    assert result.exit_code == 1
    assert "Find the cause in the code" in feedback(result, tmp_path).message


async def test_a_check_of_one_command_names_no_part(tmp_path):
    result = await run_check("test -e missing.txt", tmp_path, timeout=30)
    assert not result.passed and result.failed_part == ""


async def test_the_failed_part_of_a_heredoc_check_is_its_first_line(tmp_path):
    command = f"true && {sys.executable} - <<'HIDDEN'\nraise SystemExit(3)\nHIDDEN"
    result = await run_check(command, tmp_path, timeout=30)
    assert result.exit_code == 3
    assert result.failed_part == f"{sys.executable} - <<'HIDDEN' (with the 2 lines it reads)"


async def test_bash_still_reports_the_line_of_an_error_in_the_check(tmp_path):
    result = await run_check("true\nno-such-command-here", tmp_path, timeout=30)
    assert result.exit_code == 127
    assert "line 2: no-such-command-here: command not found" in result.output


@pytest.mark.slow
def test_after_a_failed_check_an_answer_that_changes_nothing_is_sent_back_warmer_unchecked(tmp_path):
    task = task_file(tmp_path, "Write add.py.", approval="full-auto", check=CHECK)
    script = [WRONG, {"content": "Done."}, {"content": "It is done."}, RIGHT, {"content": "Fixed it."}]
    with ScriptedServer(script) as server:
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
        requests = server.requests
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [c["passed"] for c in events if c["type"] == "check.result"] == [False, True]
    told = requests[3]["messages"][-1]["content"]
    assert told.startswith("You changed nothing since the check failed")
    assert "AssertionError: -1" in told  # the failure again
    assert (
        requests[3].get("temperature") == 0.7 and requests[3].get("min_p") == 0.0
    )  # min_p: see guards.WARMER
    assert any("changed nothing since the check failed" in e.get("message", "") for e in events)


@pytest.mark.slow
def test_an_answer_repeated_across_check_rounds_is_sampled_warmer(tmp_path):
    task = task_file(
        tmp_path, "Write add.py.", approval="full-auto", check=CHECK, sampling={"temperature": 0}
    )
    wrong_again = {
        "tool_calls": [call("write_file", path="add.py", content="def add(a, b):\n    return b - a\n")]
    }
    script = [WRONG, {"content": "Done."}, wrong_again, {"content": "Done."}, RIGHT, {"content": "Done!"}]
    with ScriptedServer(script) as server:
        agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
        requests = server.requests
    assert requests[3]["temperature"] == 0  # "Done." comes first in round 2...
    assert requests[4]["temperature"] == 0.7  # ...and was given in round 1: the next one is warmer


@pytest.mark.slow
def test_in_blocks_mode_the_line_a_check_points_at_is_marked_with_its_error_in_the_file_shown(tmp_path):
    check = f"{sys.executable} -c 'import add; add.add(2, 3)'"
    task = task_file(tmp_path, "Write add.py.", approval="full-auto", check=check, check_rounds=1)
    wrong = {"content": "add.py\n```python\ndef add(a, b):\n    return {}[a]\n```"}  # no lint finds it
    marked_back = {
        "content": "add.py\n```python\ndef add(a, b):\n    return {}[a]  # <- the check failed here\n```"
    }
    with ScriptedServer([wrong, {"content": "Done."}, marked_back], default={"content": "Done."}) as server:
        agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--actions", "blocks")
        feedback = server.requests[2]["messages"][-1]["content"]
        after_copy = server.requests[3]["messages"][-1]["content"]
    assert feedback.startswith(
        "add.py now reads (the line the check points at is marked):\n```\ndef add(a, b):\n"
        "    return {}[a]  # <- the check failed here: KeyError: 2\n```"
    )
    assert "KeyError: 2" in feedback.split("--- check output ---")[1]  # the output too, after the file
    assert feedback.rstrip().endswith("Nothing changes unless you write the blocks.")
    # The file copied back with the mark is the file unchanged: the mark never reaches the disk.
    assert "add.py is exactly as it was, and the task's check failed on it" in after_copy
    assert (tmp_path / "add.py").read_text() == "def add(a, b):\n    return {}[a]\n"


PADDING = "".join(
    f"# line {n} of a long module, kept to make it too long to show whole\n" for n in range(300)
)


@pytest.mark.slow
def test_in_blocks_mode_a_located_line_outside_any_definition_of_a_long_file_gets_a_search_replace(tmp_path):
    check = f"{sys.executable} -c 'import add'"
    task = task_file(tmp_path, "Fix add.py.", approval="full-auto", check=check, check_rounds=1)
    (tmp_path / "add.py").write_text(f"TABLE = {{}}\nFIRST = TABLE[1]\n{PADDING}")
    with ScriptedServer([{"content": "Done."}], default={"content": "Done."}) as server:
        agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--actions", "blocks")
        feedback = server.requests[1]["messages"][-1]["content"]
    assert "now reads" not in feedback
    assert (
        "The check points at these lines, as they are now:\nadd.py, line 2:\n1| TABLE = {}\n2| FIRST = TABLE[1]"
        in feedback
    )
    assert "<<<<<<< SEARCH" in feedback.split("--- end of check output ---")[1]


def long_add_fixed_in_blocks(tmp_path, task: str, body: str) -> str:
    """A check of tests/test_add.py failing on add.py's `add` (`body`), in a file too long to show
    whole; the scripted model writes `add` fixed once told. Returns the feedback after the failure,
    having checked that the tests are left to their lines and that `add` written whole passed."""
    check = f"PYTHONPATH=. {sys.executable} -m pytest -q -p no:cacheprovider tests/test_add.py"
    task_path = task_file(tmp_path, task, approval="full-auto", check=check, check_rounds=1)
    (tmp_path / "add.py").write_text(f"def add(a, b):\n{body}\n\n\n{PADDING * 10}")  # shown in part
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_add.py").write_text(
        "import add\n\n\ndef test_add():\n    assert add.add(2, 3) == 5\n"
    )
    fixed = {"content": "add.py\n```python\ndef add(a, b):\n    return a + b\n```"}
    with ScriptedServer([{"content": "Done."}, fixed, {"content": "Fixed."}]) as server:
        argv = [
            "run",
            str(task_path),
            "--base-url",
            server.url,
            "--workdir",
            str(tmp_path),
            "--actions",
            "blocks",
        ]
        out = agent(*argv, "--json", "--fresh-starts", "0")
        feedback = server.requests[1]["messages"][-1]["content"]
    assert "test_add.py now reads" not in feedback  # the test: its lines only, in the failure
    assert "tests/test_add.py, line 5 (a test: the fix usually belongs in the code it tests):" in feedback
    assert feedback.rstrip().endswith(FAILED_DEFINITION_REMINDER.format(file="add.py", name="add"))
    assert out.returncode == 0, out.stderr[-2000:]  # the check passed on the definition written whole
    assert (tmp_path / "add.py").read_text() == f"def add(a, b):\n    return a + b\n\n\n{PADDING * 10}"
    return feedback


@pytest.mark.slow
def test_in_blocks_mode_the_definition_a_check_fails_in_is_shown_whole_from_a_long_file_and_asked_whole(
    tmp_path,
):
    # humanize-intcomma: shown the 150-line test file whole and asked for a SEARCH/REPLACE in the
    # 610-line number.py, the 1.5B wrote `intcomma` whole again, broken. Now the function the
    # traceback ends in is what is shown, and asked for whole; the test is left to its lines.
    feedback = long_add_fixed_in_blocks(tmp_path, "`add(2, 3)` raises KeyError.", "    return {}[a]")
    assert feedback.startswith(
        "`add` in add.py now reads (the line the check points at is marked):\n```\ndef add(a, b):\n"
        "    return {}[a]  # <- the check failed here: KeyError: 2\n```"
    )


@pytest.mark.slow
def test_in_blocks_mode_a_failure_located_in_tests_alone_shows_and_asks_for_the_function_the_task_is_about(
    tmp_path,
):
    # humanize-metric on the H100: a wrong value, asserted in the test, points into the test alone.
    # Shown the test file whole and asked for "the complete new file", the 1.5B wrote the 614-line
    # module whole, refused, for the rest of its line. The function the task is about stands in for
    # the code located: shown as it is now, and asked for whole.
    feedback = long_add_fixed_in_blocks(
        tmp_path, "`add(2, 3)` returns -1, it should return 5.", "    return a - b"
    )
    assert feedback.startswith(
        "`add` in add.py, the code the task is about, now reads (the check failed in a test of it):\n```\n"
        "def add(a, b):\n    return a - b\n```"
    )


@pytest.mark.slow
def test_a_failed_check_quotes_the_task_sentence_its_error_is_about(tmp_path):
    # fizzbuzz, 2026-12-06: told only `python3 fizzbuzz.py printed ''`, the 1.5B never added the block
    # the task's third sentence asks for; the sentence now comes with the failure.
    check = f"{sys.executable} -c \"import subprocess; out = subprocess.run(['{sys.executable}', 'greet.py'], capture_output=True, text=True).stdout; assert out, 'python3 greet.py printed nothing'\""
    task = task_file(
        tmp_path,
        "Write greet.py with a function greet(name).\nRunning `python3 greet.py` prints greet('world').\n",
        approval="full-auto",
        check=check,
        check_rounds=1,
    )
    silent = {
        "tool_calls": [call("write_file", path="greet.py", content="def greet(name):\n    return name\n")]
    }
    with ScriptedServer([silent, {"content": "Done."}], default={"content": "Done."}) as server:
        agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path), "--json")
        told = server.requests[2]["messages"][-1]["content"]
    assert "What the task says about this:\n> Running `python3 greet.py` prints greet('world').\n" in told
    assert "Write greet.py" not in told.split("What the task says about this:")[1]  # the one sentence only
