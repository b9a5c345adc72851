"""examples/compare_aider.py without Aider or a model: the commands it builds and Aider's token lines."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

import pytest

from agent.session.taskfile import Task, load_task, parse_task

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "compare_aider.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("compare_aider", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task(text: str) -> Task:
    spec, body = parse_task(text, "task.md")
    return Task(spec, body, None)


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_aider_command_points_aider_at_the_server_with_whole_files_and_no_questions(compare, tmp_path):
    command, _ = compare.aider_command(
        Path("/venv/bin/aider"), "qwen", "http://127.0.0.1:8930", task("Create `hello.py`."), tmp_path,
        tmp_path / "work" / "hello",
    )  # fmt: skip
    assert command[0] == "/venv/bin/aider"
    assert option(command, "--model") == "openai/qwen"
    assert option(command, "--openai-api-base") == "http://127.0.0.1:8930/v1"
    assert option(command, "--edit-format") == "whole"
    assert option(command, "--message") == "Create `hello.py`."
    for flag in ("--yes-always", "--no-auto-commits", "--no-check-update", "--no-analytics", "--no-pretty"):
        assert flag in command
    assert "--test-cmd" not in command and "--auto-test" not in command  # no check, no test loop


def test_the_base_url_may_already_name_v1(compare, tmp_path):
    command, _ = compare.aider_command(
        Path("aider"), "m", "http://127.0.0.1:8930/v1/", task("x"), tmp_path, tmp_path / "w"
    )
    assert option(command, "--openai-api-base") == "http://127.0.0.1:8930/v1"


def test_the_check_becomes_aiders_test_command_in_a_script_beside_the_workdir(compare, tmp_path):
    workdir = tmp_path / "aider" / "hello"
    command, _ = compare.aider_command(
        Path("aider"), "m", "http://h:1", task("---\ncheck: python3 hello.py\n---\nDo it."), tmp_path, workdir
    )
    assert option(command, "--test-cmd") == f"bash {tmp_path / 'aider' / 'hello.aider.check.sh'}"
    assert command.index("--auto-test") < command.index("--message")
    for name in ("--chat-history-file", "--input-history-file"):  # the model never sees them
        assert Path(option(command, name)).parent == workdir.parent


def test_the_files_the_task_names_follow_the_message(compare, tmp_path):
    for name in ("notes.py", "test_notes.py", "other.py", "pkg/util.py", ".git/config"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    text = "Change `notes.py` and pkg/util.py. Run `python3 -m pytest`."
    command, files = compare.aider_command(Path("aider"), "m", "http://h:1", task(text), tmp_path, tmp_path)
    assert files == ["notes.py", "pkg/util.py"]  # not test_notes.py: its name only contains notes.py
    assert command[-4:] == ["--message", text, *files]


def test_a_task_starting_from_nothing_names_no_files(compare, tmp_path):
    assert compare.files_named("Create `hello.py`.", tmp_path / "repo") == []


def test_tokens_are_summed_over_aiders_lines_with_their_suffixes(compare):
    output = (
        "Tokens: 735 sent, 9 received.\n"
        "Applied edit to hello.py\n"
        "Tokens: 1.1k sent, 1.0k cache hit, 1.2k received. Cost: $0.00 message, $0.00 session.\n"
        "Tokens: 12k sent, 2.5k cache write, 300 received.\n"
    )
    assert compare.parse_tokens(output) == (735 + 1100 + 12000, 9 + 1200 + 300)


def test_no_token_line_gives_none(compare):
    assert compare.parse_tokens("Aider v0.86.2\nModel: openai/m with whole edit format\n") is None


def test_dry_run_prints_both_commands_and_runs_nothing(compare, tmp_path, capsys):
    workroot = tmp_path / "runs"
    argv = ["--base-url", "http://127.0.0.1:8930", "--task", "cli-flag", "--dry-run", "--model", "qwen"]
    assert compare.main([*argv, "--workroot", str(workroot)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "# cli-flag (timeout 420 s)"  # the task's time_limit (5m) + 2 min
    assert lines[1].startswith(f"(cd {workroot / 'aider' / 'cli-flag'} && ")
    aider = shlex.split(out[out.index("&& ") + 3 : out.rindex(")")])  # the message spans lines
    body = load_task(SCRIPT.parent / "tasks" / "cli-flag" / "task.md").body
    assert aider[-3:] == ["--message", body, "countlines.py"]
    agent = shlex.split(lines[-1])
    assert agent[:4] == [sys.executable, "-m", "agent", "run"]
    assert agent[-4:] == ["--base-url", "http://127.0.0.1:8930", "--actions", "blocks"]
    assert not workroot.exists()
