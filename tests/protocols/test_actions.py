"""The blocks protocol in the loop: an answer's files, edits and bash fences go through the same tool
layer as native calls (permissions, checkpoints, events), and the results come back as one message."""

from __future__ import annotations

import subprocess

import pytest

from agent.events import (
    AssistantMessage,
    Notice,
    PermissionDecided,
    ToolCallStarted,
    UserMessage,
)
from agent.protocols.edit_blocks.prompt import (
    BLOCKS_REMINDER,
    BLOCKS_REMINDER_NAMED,
    PLAN_FIX,
    PLAN_TASK,
    PLAN_TOKENS,
)
from tests.core.test_loop import Run, git_repo
from tests.frontends.test_headless import agent, task_file
from tests.scripted_server import ScriptedServer

FENCE = "```"


def answer(*parts: str) -> dict:
    return {"content": "\n".join(parts)}


WRITE_ADD = answer(
    "I'll create the module.", "", "add.py", f"{FENCE}python", "def add(a, b):", "    return a - b", FENCE
)
FIX_ADD = answer(
    "add.py", f"{FENCE}python", "<<<<<<< SEARCH", "    return a - b", "=======", "    return a + b",
    ">>>>>>> REPLACE", FENCE, "", f"{FENCE}bash", "python3 -c 'from add import add; print(add(2, 3))'", FENCE,
)  # fmt: skip


async def test_blocks_write_edit_and_run_then_a_plain_answer_ends_the_task(tmp_path):
    repo = git_repo(tmp_path / "repo")
    with ScriptedServer([WRITE_ADD, FIX_ADD, answer("add.py now adds.")]) as server:
        run = Run(server, repo, actions="blocks")
        outcome = await run()
        requests = server.requests
    assert outcome.status == "completed"
    assert (repo / "add.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert all("tools" not in body for body in requests)  # no schemas: the template says nothing of JSON
    assert [e.name for e in run.of(ToolCallStarted)] == ["write_file", "edit_file", "bash"]
    assert all(r.ok for r in run.results())
    feedback = requests[2]["messages"][-1]
    assert feedback["role"] == "user"
    assert "$ python3 -c" in feedback["content"] and "\n5" in feedback["content"]  # the command's output
    assert "add.py now reads:" in feedback["content"]  # the edited file, fresh
    history_roles = [m["role"] for m in requests[2]["messages"]]
    assert "tool" not in history_roles  # the model's own text stays as it wrote it
    assert requests[1]["messages"][2] == {"role": "assistant", "content": WRITE_ADD["content"]}


async def test_the_blocks_system_prompt_is_stable_and_the_repository_is_in_the_task(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "greet.py").write_text("def greet(name):\n    return 'hi ' + name\n")
    with ScriptedServer([answer("Nothing to do.")]) as server:
        await Run(server, repo, actions="blocks")("Make greet say hello.")
        body = server.requests[0]
    system, task = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "SEARCH/REPLACE" in system and "greet" not in system  # the prefix holds no repository facts
    assert "greet.py\n```\ndef greet(name):" in task
    assert task.index("greet.py\n```") < task.index("Make greet say hello.") < task.index("Act now:")


async def test_a_fence_without_a_path_is_not_applied_and_the_model_is_told(tmp_path):
    repo = git_repo(tmp_path / "repo")
    no_path = answer("Here is the code:", f"{FENCE}python", "print('hi')", FENCE)
    with ScriptedServer([no_path, answer("Done.")]) as server:
        outcome = await Run(server, repo, actions="blocks")()
        feedback = server.requests[1]["messages"][-1]["content"]
    assert outcome.status == "completed"
    assert list(repo.iterdir()) == [repo / ".git"]  # nothing was written
    assert "Not applied:" in feedback and "path" in feedback


async def test_a_fence_without_a_path_names_the_file_its_definitions_belong_to(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "notes.py").write_text("class Note:\n    pass\n\n\ndef load(path):\n    return []\n")
    snippet = answer("Fix:", f"{FENCE}python", "class Note:", "    tags = None", FENCE)
    with ScriptedServer([snippet, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")()
        feedback = server.requests[1]["messages"][-1]["content"]
    assert "looks like a change to notes.py" in feedback
    assert (repo / "notes.py").read_text().startswith("class Note:\n    pass")  # nothing applied


async def test_a_fence_without_a_path_names_the_file_its_async_function_belongs_to(tmp_path):
    repo = git_repo(tmp_path / "repo")
    original = "async def fetch(url):\n    return None\n\n\ndef parse(text):\n    return text\n"
    (repo / "fetch.py").write_text(original)
    snippet = answer("Fix:", f"{FENCE}python", "async def fetch(url):", "    return url", FENCE)
    with ScriptedServer([snippet, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")()
        feedback = server.requests[1]["messages"][-1]["content"]
    assert "looks like a change to fetch.py" in feedback
    assert (repo / "fetch.py").read_text() == original  # a snippet: not taken for the whole file


async def test_quoted_output_in_an_untagged_fence_is_not_taken_for_a_file(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "test_a.py").write_text("def test_a():\n    assert False\n")
    echo = answer("It failed:", FENCE, "    def test_a():", ">       assert False", FENCE)
    with ScriptedServer([echo, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")()
        feedback = server.requests[1]["messages"][-1]["content"]
    assert "looks like a change" not in feedback


async def test_a_path_outside_the_workspace_is_refused_and_the_model_is_told(tmp_path):
    repo = git_repo(tmp_path / "repo")
    outside = answer("../evil.py", f"{FENCE}python", "x = 1", FENCE)
    with ScriptedServer([outside, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")
        await run()
        feedback = server.requests[1]["messages"][-1]["content"]
    assert not (tmp_path / "evil.py").exists()
    assert not run.results()[0].ok
    assert "Failed to change ../evil.py" in feedback and "outside" in feedback


async def test_a_whole_file_block_cut_off_at_max_tokens_is_never_applied(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "big.py").write_text("KEEP = 1\n")
    cut = {"content": "big.py\n```python\nKEEP = 2\ndef half(", "finish_reason": "length"}
    with ScriptedServer([cut, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")
        await run()
        feedback = server.requests[1]["messages"][-1]["content"]
    assert (repo / "big.py").read_text() == "KEEP = 1\n"
    assert run.results() == []
    assert "cut off" in feedback


async def test_a_dangerous_bash_block_meets_the_same_rules_as_a_native_call(tmp_path):
    repo = git_repo(tmp_path / "repo")
    danger = answer(f"{FENCE}bash", "sudo rm -rf /tmp/nothing-here", FENCE)
    with ScriptedServer([danger, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")  # full-auto, and nobody to ask
        await run()
    decided = run.of(PermissionDecided)
    assert decided and decided[0].decision == "deny"
    assert "needs approval" in decided[0].reason


async def test_blocks_take_a_checkpoint_before_the_first_change(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("one\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=repo, check=True)
    with ScriptedServer([answer("a.txt", FENCE, "two", FENCE), answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")
        await run()
    assert any("checkpoint" in n.message for n in run.of(Notice))
    assert (repo / "a.txt").read_text() == "two\n"


async def test_a_rewrite_identical_to_the_file_counts_as_done(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "a.py").write_text("x = 1\n")
    same = answer("The file is already right:", "", "a.py", f"{FENCE}python", "x = 1", FENCE)
    with ScriptedServer([same]) as server:
        run = Run(server, repo, actions="blocks")
        outcome = await run()
    assert outcome.status == "completed" and run.results() == []


async def test_tool_calls_mode_corrects_code_written_as_prose_a_bounded_number_of_times(tmp_path):
    repo = git_repo(tmp_path / "repo")

    def prose(n: int) -> dict:
        return answer(
            f"Put this in add.py ({n}):", f"{FENCE}python", "def add(a, b):", "    return a + b", FENCE
        )

    with ScriptedServer([prose(1), prose(2), prose(3)]) as server:
        run = Run(server, repo)
        outcome = await run()
        corrections = [m for m in run.of(UserMessage) if "never executed" in m.content]
    assert len(corrections) == 2  # then the prose is taken as the answer
    assert any("--actions blocks" in n.message for n in run.of(Notice))  # the user is offered the switch
    assert outcome.status == "completed" and len(server.requests) == 3
    assert not (repo / "add.py").exists()  # code in prose is never run
    assert run.of(AssistantMessage)


async def test_a_looping_answer_is_cut_and_kept_once(tmp_path):
    repo = git_repo(tmp_path / "repo")
    loop = answer("Tests:", *["assert f(1) == 1"] * 200)
    with ScriptedServer([loop, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")
        await run()
        kept = server.requests[1]["messages"][2]["content"]
    assert any("repeating itself" in n.message for n in run.of(Notice))
    assert kept.count("assert f(1) == 1") <= 2


CLI = [
    "cli.py", f"{FENCE}python", "import argparse", "", "", "def main(argv=None):",
    "    parser = argparse.ArgumentParser(description='Sum integers.')",
    "    parser.add_argument('numbers', nargs='+', type=int)",
    "    print(sum(parser.parse_args(argv).numbers))", "    return 0", FENCE, "",
    "__main__.py", f"{FENCE}python", "from cli import main", "", "raise SystemExit(main())", FENCE, "",
]  # fmt: skip


async def test_files_written_again_and_again_in_one_answer_are_cut_after_the_first_copy(tmp_path):
    # The 1.5B in `agent new`: two files, then the same two again, until max_tokens (2048 a turn).
    repo = git_repo(tmp_path / "repo")
    unit = "\n".join(CLI) + "\n"
    with ScriptedServer([{"content": unit * 8}, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")
        await run()
        kept = server.requests[1]["messages"][2]["content"]
        told = server.requests[1]["messages"][3]["content"]
    streamed = sum(len(e.text) for e in run.events if e.kind == "text.delta")
    assert streamed < 3.5 * len(unit)  # the stream was closed during the third copy, not read to its end
    assert kept == unit  # one whole copy: no half-written block to refuse
    assert "Go on with the task" in told and "Not applied" not in told  # the files were written: no failure
    assert (repo / "cli.py").read_text() == "\n".join(CLI[2:10]) + "\n"
    assert any("repeating itself" in n.message for n in run.of(Notice))


async def test_a_long_passage_written_twice_apart_is_not_a_loop(tmp_path):
    # Moving a function: its text once in the SEARCH of one file and once in another file, not back to back.
    repo = git_repo(tmp_path / "repo")
    moved = [line for i in range(8) for line in (f"def helper_{i}(value):", f"    return value * {i}", "")]
    (repo / "a.py").write_text("\n".join(moved) + "\n")
    move = answer(
        "a.py", f"{FENCE}python", "<<<<<<< SEARCH", *moved, "=======", "from b import *", ">>>>>>> REPLACE",
        FENCE, "", "b.py", f"{FENCE}python", *moved, FENCE,
    )  # fmt: skip
    with ScriptedServer([move, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")
        await run()
    assert not any("repeating itself" in n.message for n in run.of(Notice))
    assert (repo / "a.py").read_text() == "from b import *\n"
    assert (repo / "b.py").read_text() == "\n".join(moved) + "\n"


async def test_the_prompts_example_folder_and_bare_names_of_existing_files_are_understood(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "util.py").write_text("X = 1\n")
    echoed = answer(
        "path/to/hello.py", f"{FENCE}python", "print('hi')", FENCE, "", "util.py", FENCE, "X = 2", FENCE
    )
    with ScriptedServer([echoed, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")()
    assert (repo / "hello.py").read_text() == "print('hi')\n"
    assert (repo / "pkg" / "util.py").read_text() == "X = 2\n"
    assert not (repo / "path").exists() and not (repo / "util.py").exists()


async def test_an_unknown_path_is_the_file_of_that_name_that_the_task_names(tmp_path):
    """attrs has src/attr/validators.py (the code) and src/attrs/validators.py (a re-export): asked to
    fix the first, the 1.5B wrote `path/to/attrs/validators.py`, whose tail is the second's."""
    repo = git_repo(tmp_path / "repo")
    for package, text in (
        ("attr", "def lt(bound):\n    return bound\n"),
        ("attrs", "from attr.validators import *\n"),
    ):
        (repo / "src" / package).mkdir(parents=True)
        (repo / "src" / package / "validators.py").write_text(text)
    edit = answer(
        "path/to/attrs/validators.py", f"{FENCE}python", "<<<<<<< SEARCH", "    return bound", "=======",
        "    return -bound", ">>>>>>> REPLACE", FENCE,
    )  # fmt: skip
    with ScriptedServer([edit, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")("Fix the bug in `src/attr/validators.py`.")
    assert (repo / "src" / "attr" / "validators.py").read_text() == "def lt(bound):\n    return -bound\n"
    assert (repo / "src" / "attrs" / "validators.py").read_text() == "from attr.validators import *\n"


async def test_an_answer_repeated_word_for_word_is_retried_warmer_then_stops_the_task(tmp_path):
    repo = git_repo(tmp_path / "repo")
    same = answer(f"{FENCE}bash", "echo again", FENCE)
    with ScriptedServer(default=same) as server:
        outcome = await Run(server, repo, actions="blocks")()
        temperatures = [body.get("temperature") for body in server.requests]
    assert outcome.status == "repeated" and len(temperatures) == 3
    assert temperatures == [None, None, 0.7]  # the profile's own temperature, until the answer repeats


async def test_two_failing_answers_given_in_turn_stop_the_task(tmp_path):
    """Run T (real attrs task): the 1.5B sent two refused answers in turn, A B A A B B A..., for 13
    turns; no answer came three times in a row, and no call failed three times in a row. Three answers
    in a row that each repeat an earlier one stop the line (and a stuck attempt then starts afresh)."""
    repo = git_repo(tmp_path / "repo")
    first, second = (answer(f"{FENCE}bash", f"echo {word}; exit 1", FENCE) for word in ("one", "two"))
    with ScriptedServer([first, second, first, first, second, answer("Done.")]) as server:
        outcome = await Run(server, repo, actions="blocks")()
        assert len(server.requests) == 5
    assert outcome.status == "repeated" and "last 3 answers each repeated an earlier one" in outcome.error


async def test_three_answers_in_a_row_that_apply_nothing_stop_the_task_though_each_is_worded_anew(tmp_path):
    """Sampled warmer, the 1.5B sends the same file back unchanged with other words around it: no two
    answers alike, so the word-for-word guard never fires; three refused answers in a row do."""
    repo = git_repo(tmp_path / "repo")
    (repo / "stats.py").write_text("def median(xs):\n    return xs[len(xs) // 2]\n")
    copy = ["stats.py", f"{FENCE}python", "def median(xs):", "    return xs[len(xs) // 2]", FENCE]
    script = [answer(f"Here is the fix, take {n}.", "", *copy) for n in (1, 2, 3, 4)]
    with ScriptedServer(script) as server:
        outcome = await Run(server, repo, actions="blocks")()
        assert len(server.requests) == 3
    assert outcome.status == "repeated" and "last 3 answers could be applied" in outcome.error
    assert (repo / "stats.py").read_text() == "def median(xs):\n    return xs[len(xs) // 2]\n"

    # an answer that applies something starts the count again
    fix = answer(
        "stats.py", f"{FENCE}python", "def median(xs):", "    return sorted(xs)[len(xs) // 2]", FENCE
    )
    pathless = answer("Try it:", "", f"{FENCE}python", "print(median([3, 1, 2]))", FENCE)  # refused: no path
    with ScriptedServer([script[0], script[1], fix, pathless, pathless, answer("Done.")]) as server:
        outcome = await Run(server, repo, actions="blocks")()
    assert outcome.status == "completed", outcome.error


async def test_after_a_failure_the_changed_files_are_shown_whole_and_a_same_rewrite_is_no_fix(tmp_path):
    repo = git_repo(tmp_path / "repo")
    write = answer(
        "t.py", f"{FENCE}python", "assert 1 == 2", FENCE, "", f"{FENCE}bash", "python3 t.py", FENCE
    )
    same = answer("t.py", f"{FENCE}python", "assert 1 == 2", FENCE)
    with ScriptedServer([write, same, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")()
        after_failure, after_same = (server.requests[i]["messages"][-1]["content"] for i in (1, 2))
    assert "AssertionError" in after_failure and "t.py now reads:" in after_failure
    assert "Act now:" in after_failure  # the format, again, next to where the model writes
    assert "t.py is exactly as it was, and the last command or edit failed" in after_same


async def test_a_first_answer_that_copies_a_file_back_unchanged_is_not_taken_as_done(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "stats.py").write_text("def median(xs):\n    return xs[len(xs) // 2]\n")
    copied = answer("stats.py", f"{FENCE}python", "def median(xs):", "    return xs[len(xs) // 2]", FENCE)
    with ScriptedServer([copied, answer("Done.")]) as server:
        outcome = await Run(server, repo, actions="blocks")()
        told = server.requests[1]["messages"][-1]["content"]
    assert outcome.status == "completed" and len(server.requests) == 2
    assert "stats.py is exactly as it was, so nothing is done yet" in told


async def told_after(first: dict, repo, task: str = "do the task") -> str:
    """What the blocks protocol tells the model after `first`, in a task it then ends with "Done."."""
    with ScriptedServer([first, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")(task)
        return server.requests[1]["messages"][-1]["content"]


async def test_a_syntax_error_and_an_undefined_name_go_back_in_the_same_turn(tmp_path):
    repo = git_repo(tmp_path / "repo")
    two = answer(
        "calc.py", f"{FENCE}python", "def add(a, b:", "    return a + b", FENCE, "",
        "main.py", f"{FENCE}python", "from calc import add", "print(ad(1, 2))", FENCE,
    )  # fmt: skip
    told = await told_after(two, repo)
    assert "calc.py:1:" in told and "never closed" in told  # the syntax error, with its line
    assert "main.py:2: undefined name 'ad'" in told
    # ...and written on its line in the file shown, where the model copies from
    assert "print(ad(1, 2))  # <- the lint found a problem here: undefined name 'ad'" in told
    assert "Fix what failed." in told  # a lint problem is a failure to fix, though the files are written
    assert (repo / "calc.py").exists() and (repo / "main.py").exists()


async def test_a_pathless_snippet_about_a_named_file_gets_that_file_named_back(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "test_fizz.py").write_text("def test_one():\n    assert fizz(1) == '1'\n")
    snippet = answer("In `test_fizz.py`, add at the top:", f"{FENCE}python", "from fizz import fizz", FENCE)
    with ScriptedServer([snippet, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")()
        feedback = server.requests[1]["messages"][-1]["content"]
    assert "looks like a change to test_fizz.py" in feedback


async def test_restating_a_changed_file_without_its_path_ends_the_task(tmp_path):
    repo = git_repo(tmp_path / "repo")
    write = answer("a.py", f"{FENCE}python", "x = 1", FENCE)
    summary = answer("a.py now holds:", "", f"{FENCE}python", "x = 1", FENCE)
    with ScriptedServer([write, summary]) as server:
        outcome = await Run(server, repo, actions="blocks")()
        assert len(server.requests) == 2
    assert outcome.status == "completed"


async def test_the_instructions_example_copied_into_an_answer_is_not_written(tmp_path):
    """implement-docstring: `path/to/example.py` with `return 43`, beside the real change."""
    repo = git_repo(tmp_path / "repo")
    both = answer(
        "path/to/example.py", f"{FENCE}python", "def example():", "    return 43", FENCE, "",
        "path/to/test_add.py", f"{FENCE}python", "def test_add():", "    assert 1 + 1 == 2", FENCE,
    )  # fmt: skip
    told = await told_after(both, repo, "Add a test of add to test_add.py.")
    assert (repo / "test_add.py").exists() and not (repo / "example.py").exists()
    assert "the path/to/example.py block is the instructions' example" in told
    # A project that has its own example.py gets the block, as any other file.
    (repo / "example.py").write_text("def example():\n    return 42\n")
    with ScriptedServer([both, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")()
    assert (repo / "example.py").read_text() == "def example():\n    return 43\n"


async def test_an_answer_opening_with_the_example_writes_none_of_the_new_files_it_invents(tmp_path):
    """kv-report, 2026-12-06: the example, then another_file.py, a_third_file.py... each written."""
    repo = git_repo(tmp_path / "repo")
    junk = answer(
        "path/to/example.py", f"{FENCE}python", "def example():", "    return 43", FENCE, "",
        "path/to/another_file.py", f"{FENCE}python", "def another_function():", "    return 'hello'", FENCE, "",
        "path/to/a_third_file.py", f"{FENCE}python", "def third_function():", "    return 123", FENCE, "",
        "path/to/kv_report.py", f"{FENCE}python", "class KeyValueStore:", "    pass", FENCE,
    )  # fmt: skip
    with ScriptedServer([junk, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks")("Write a key-value store in `kv_report.py`.")
        told = server.requests[1]["messages"][-1]["content"]
    assert not any((repo / name).exists() for name in ("example.py", "another_file.py", "a_third_file.py"))
    assert (repo / "kv_report.py").exists()  # the file the task names is work, example or not
    assert "opened with the instructions' example (path/to/example.py)" in told
    assert "(another_file.py, a_third_file.py): none of them was written" in told


# The plan step (`plan_first`): asked where the change goes before the blocks.
PLAN_FIRST = {"plan_first": True}


@pytest.mark.slow
@pytest.mark.parametrize("setting", [None, False])
def test_a_profile_asks_for_the_plan_step_and_the_setting_overrides_it(tmp_path, isolated_state, setting):
    """The embedded coder's profiles say `plan_first = true`; `plan_first = false` in config.toml wins."""
    config = isolated_state.parent / "config"
    (config / "profiles").mkdir(parents=True)
    work = tmp_path / "work"
    task = task_file(tmp_path, "Create hello.py.", approval="full-auto", workdir="work")
    if setting is not None:
        (config / "config.toml").write_text(f"plan_first = {str(setting).lower()}\n")
    write = answer("hello.py", f"{FENCE}python", 'print("hi")', FENCE)
    with ScriptedServer([write, write, answer("Done.")]) as server:
        (config / "profiles" / "small.toml").write_text(
            f'description = "a small model"\nbase_url = "{server.url}"\nactions = "blocks"\nplan_first = true\n'
        )
        result = agent("run", str(task), "-p", "small")
        asked = server.requests[0]["messages"][-1]["content"]
    assert result.returncode == 0, result.stderr
    assert asked.rstrip().endswith(PLAN_TASK) is (setting is None)
    assert (work / "hello.py").read_text() == 'print("hi")\n'


async def test_the_plan_asked_for_first_is_not_applied_nor_its_command_run_and_the_blocks_follow(tmp_path):
    repo = git_repo(tmp_path / "repo")
    (repo / "duration.py").write_text(
        "def total(parts):\n    t = 0\n    for p in parts:\n        t = p\n    return t\n"
    )
    plan = answer(
        "Line 4 is wrong:", f"{FENCE}python", "        t = p", FENCE, "It must add:", f"{FENCE}python",
        "# duration.py", "def total(parts):", "    t += p", FENCE, "Then I will run:", f"{FENCE}bash",
        "touch ran-before-the-fix", FENCE,
    )  # fmt: skip
    fixed = answer(
        "duration.py", f"{FENCE}python", "def total(parts):", "    t = 0", "    for p in parts:", "        t += p",
        "    return t", FENCE,
    )  # fmt: skip
    with ScriptedServer([plan, fixed, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks", settings=PLAN_FIRST)
        outcome = await run()
        asked, after_plan = (server.requests[i]["messages"][-1]["content"] for i in (0, 1))
        history = server.requests[1]["messages"]
    assert asked.rstrip().endswith(PLAN_TASK)
    assert outcome.status == "completed"
    assert "t += p" in (repo / "duration.py").read_text()
    # The plan's sketches (a fence labelled `# duration.py` among them) were not taken for blocks,
    # and its command did not run.
    # The request for the blocks names the file the plan is about (not the format's example path).
    assert after_plan == "Now make that change. " + BLOCKS_REMINDER_NAMED.format(files="duration.py")
    assert not (repo / "ran-before-the-fix").exists()
    assert history[-2] == {"role": "assistant", "content": plan["content"]}  # the plan stays, next to it
    assert [e.name for e in run.of(ToolCallStarted)] == ["write_file"]


async def test_the_plan_given_again_after_the_change_is_done_but_not_before_it(tmp_path):
    """cli-flag, dataclass-field: the change made, the 1.5B gave its plan again, sketches and all,
    until the repeat guard ended the task before the check could judge the change."""
    repo = git_repo(tmp_path / "repo")
    (repo / "add.py").write_text("def add(a, b):\n    return a - b\n")
    plan = answer(
        "`return a - b` must read:", f"{FENCE}python", "    return a + b", FENCE, "Then run:",
        f"{FENCE}bash", "echo ran >> runs.txt", FENCE,
    )  # fmt: skip
    fixed = answer("add.py", f"{FENCE}python", "def add(a, b):", "    return a + b", FENCE)
    with ScriptedServer([plan, plan, fixed, plan]) as server:
        run = Run(server, repo, actions="blocks", settings=PLAN_FIRST)
        outcome = await run()
        told = [body["messages"][-1]["content"] for body in server.requests]
    # Before any change, the plan again is no change: its sketch is refused and its command run, as
    # without the plan step.
    assert "Not applied" in told[2] and "without a file path" in told[2]
    assert outcome.status == "completed" and len(told) == 4
    assert (repo / "add.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (repo / "runs.txt").read_text() == "ran\n"  # after the change, the plan's command is not run
    assert any("described its change again" in n.message for n in run.of(Notice))


async def test_an_answer_that_writes_at_once_is_read_as_blocks_and_a_plan_is_capped(tmp_path):
    repo = git_repo(tmp_path / "repo")
    with ScriptedServer([WRITE_ADD, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks", settings=PLAN_FIRST)()
        assert len(server.requests) == 2  # no plan step: the file was written at once
    assert (repo / "add.py").exists()
    # A plan cut at its token cap, in the middle of a file it began, is a plan: nothing is written.
    (repo / "big.py").write_text("KEEP = 1\n")
    cut = {
        "content": "I will change KEEP:\nbig.py\n```python\nKEEP = 2\ndef half(",
        "finish_reason": "length",
    }
    with ScriptedServer([cut, answer("Done.")]) as server:
        await Run(server, repo, actions="blocks", settings=PLAN_FIRST)()
        told = server.requests[1]["messages"][-1]["content"]
        caps = [body.get("max_tokens") for body in server.requests]
    assert told.startswith("Now make that change.")
    assert (repo / "big.py").read_text() == "KEEP = 1\n"
    assert caps[0] == PLAN_TOKENS and caps[1] != PLAN_TOKENS


async def test_a_pathless_block_holding_every_definition_of_the_one_changed_file_is_that_file(tmp_path):
    """csv-totals: the 1.5B wrote its right fix three times without the path line."""
    repo = git_repo(tmp_path / "repo")
    (repo / "other.py").write_text("def unrelated():\n    return 1\n")
    first = answer("report.py", f"{FENCE}python", "def totals(path):", "    return csv.reader(path)", FENCE)
    pathless = answer(
        "Import csv first, and read the file:", f"{FENCE}python", "import csv", "", "", "def totals(path):",
        "    return csv.reader(open(path))", FENCE,
    )  # fmt: skip
    with ScriptedServer([first, pathless, answer("Done.")]) as server:
        run = Run(server, repo, actions="blocks")
        outcome = await run()
        told = server.requests[2]["messages"][-1]["content"]
    assert outcome.status == "completed"
    assert (repo / "report.py").read_text().startswith("import csv\n")
    assert "csv.reader(open(path))" in (repo / "report.py").read_text()
    assert "Not applied" not in told and "Wrote report.py" in told
    assert (repo / "other.py").read_text() == "def unrelated():\n    return 1\n"
    assert [e.name for e in run.of(ToolCallStarted)] == ["write_file", "write_file"]


def test_with_the_plan_step_a_failed_check_asks_for_the_cause_first_then_for_the_blocks(tmp_path):
    from agent.core.check_output import CheckFailure
    from agent.core.llm import Completion, TurnStats
    from agent.protocols.edit_blocks.protocol import BlockActions
    from tools.base import ToolContext
    from tools.workspace import Workspace

    (tmp_path / "add.py").write_text("def add(a, b):\n    return a - b\n")
    failure = CheckFailure("The task is not done yet: its check failed.\n", "", "Find the cause.", [], "")
    off, on = BlockActions(tmp_path), BlockActions(tmp_path)
    on.plan_first = True
    assert off.after_failed_check(failure, ToolContext(Workspace(tmp_path))).endswith(
        BLOCKS_REMINDER
    )  # the default: the blocks at once
    assert on.after_failed_check(failure, ToolContext(Workspace(tmp_path))).endswith(PLAN_FIX)
    plan = Completion("`return a - b` must read `return a + b`.", "", [], TurnStats())
    read = on.read(plan, None)
    # a plan that names no file, in a session that changed none, for a task that names none: the format
    assert read.calls == [] and read.followup == "Now make that change. " + BLOCKS_REMINDER
    assert on.request_overrides() == {}  # the cap was for the plan only
    for name in ("b.py", "c.py", "d.py"):
        (tmp_path / name).write_text("X = 1\n")
    on.new_task("Fix add in add.py.")
    on.after_failed_check(failure, ToolContext(Workspace(tmp_path)))
    read = on.read(plan, None)  # no file in the plan: the task's
    assert read.followup == "Now make that change. " + BLOCKS_REMINDER_NAMED.format(files="add.py")
    on.after_failed_check(failure, ToolContext(Workspace(tmp_path)))
    many = Completion("Change add.py, b.py, c.py and d.py.", "", [], TurnStats())
    assert on.read(many, None).followup == "Now make that change. " + BLOCKS_REMINDER  # no one change
    # a new source file the plan names is named; a data file, the format's example, `e.g.` are not
    (tmp_path / "sales.csv").write_text("date,category,amount\n")
    on.after_failed_check(failure, ToolContext(Workspace(tmp_path)))
    plan = Completion(
        "Create `report.py` reading `sales.csv` (e.g. with csv.DictReader), not path/to/example.py.",
        "", [], TurnStats(),
    )  # fmt: skip
    assert on.read(plan, None).followup == "Now make that change. " + BLOCKS_REMINDER_NAMED.format(
        files="report.py"
    )


def renaming_repo(tmp_path) -> tuple:
    """A module whose function another module imports, and the answer renaming it in its own file."""
    repo = git_repo(tmp_path / "repo")
    (repo / "enc.py").write_text("def want_bytes(s):\n    return s.encode()\n")
    (repo / "sign.py").write_text("from enc import want_bytes\n\nprint(want_bytes('a'))\n")
    rename = answer(
        "enc.py", f"{FENCE}python", "<<<<<<< SEARCH", "def want_bytes(s):", "=======", "def to_bytes(s):",
        ">>>>>>> REPLACE", FENCE,
    )  # fmt: skip
    return repo, rename


async def test_a_rename_in_one_file_is_answered_with_the_command_that_renames_every_use_left(tmp_path):
    repo, rename = renaming_repo(tmp_path)
    command = "sed -i 's/\\bwant_bytes\\b/to_bytes/g' sign.py"
    with ScriptedServer([rename, answer(f"{FENCE}bash", command, FENCE), answer("Renamed.")]) as server:
        outcome = await Run(server, repo, actions="blocks")("give want_bytes a clearer name, everywhere")
        told = server.requests[1]["messages"][-1]["content"]
    assert "`want_bytes` is no longer defined in enc.py, but 2 lines in 1 file still use it:" in told
    # The command last, where the model starts writing: it copies the nearest block.
    assert told.endswith(
        f"Act now: to rename every use left, run this bash block:\n{FENCE}bash\n{command}\n{FENCE}\n"
        "Nothing changes unless you write the block. When the task is done, answer without any block."
    )
    assert outcome.status == "completed"
    assert (repo / "sign.py").read_text() == "from enc import to_bytes\n\nprint(to_bytes('a'))\n"


async def test_a_rename_the_task_asks_for_is_carried_to_every_use_in_full_auto(tmp_path):
    repo, rename = renaming_repo(tmp_path)
    with ScriptedServer([rename, answer("Renamed.")]) as server:
        outcome = await Run(server, repo, actions="blocks")("Rename want_bytes to to_bytes everywhere.")
        told = server.requests[1]["messages"][-1]["content"]
    assert "so its other uses (2 lines in 1 file) are renamed next, by rename_symbol." in told
    assert "Renamed `want_bytes` to `to_bytes`: 2 lines in sign.py." in told
    assert "Go on with the task." in told and "Fix what failed" not in told
    assert outcome.status == "completed"
    assert (repo / "sign.py").read_text() == "from enc import to_bytes\n\nprint(to_bytes('a'))\n"
