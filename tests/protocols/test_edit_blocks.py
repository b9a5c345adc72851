"""Edit blocks: a model's answer text read into write, replace and bash actions, and problems for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.protocols.edit_blocks.parser import (
    Action,
    ParsedAnswer,
    open_whole_file_block,
    parse_answer,
    path_from_line,
    to_tool_calls,
)
from tools.bash import BashArgs
from tools.files import EditArgs, WriteArgs

F = "```"


def parse(text: str, cut_off: bool = False) -> ParsedAnswer:
    return parse_answer(text, cut_off=cut_off)


def only_action(text: str) -> Action:
    parsed = parse(text)
    assert parsed.problems == []
    assert len(parsed.actions) == 1
    return parsed.actions[0]


# ---------------------------------------------------------------------------------------------- whole files


@pytest.mark.parametrize(
    "path_line",
    ["hello.py", "`hello.py`", "**hello.py**", "**`hello.py`**", "File: hello.py", "# hello.py", "hello.py:"],
)
def test_a_path_line_then_a_fence_writes_the_whole_file(path_line):
    action = only_action(f"{path_line}\n{F}python\nprint('hi')\n\nx = 1\n{F}\n")
    assert action == Action("write", "hello.py", "print('hi')\n\nx = 1\n")


def test_blank_lines_may_separate_the_path_line_from_its_fence():
    assert only_action(f"src/app.py\n\n\n{F}\nA = 1\n{F}").path == "src/app.py"


@pytest.mark.parametrize(
    "info", ["python src/app.py", "src/app.py", "python:src/app.py", 'python title="src/app.py"']
)
def test_the_path_may_be_the_fences_info_string(info):
    assert only_action(f"Here it is.\n\n{F}{info}\nA = 1\n{F}\n") == Action("write", "src/app.py", "A = 1\n")


def test_a_block_in_the_middle_of_prose_is_read():
    text = f"I will add the function.\n\nmath_utils.py\n{F}python\ndef add(a, b):\n    return a + b\n{F}\n\nThat adds it."
    assert only_action(text) == Action("write", "math_utils.py", "def add(a, b):\n    return a + b\n")


def test_tilde_fences_work_like_backtick_fences():
    assert only_action("a.txt\n~~~\nhello\n```\n~~~\n").content == "hello\n```\n"


def test_an_indented_fence_loses_its_indentation_from_the_content():
    text = f"1. Create it:\n\n   a.py\n   {F}python\n   def f():\n       return 1\n   {F}\n"
    assert only_action(text) == Action("write", "a.py", "def f():\n    return 1\n")


def test_an_empty_file_can_be_written():
    assert only_action(f"pkg/__init__.py\n{F}python\n{F}\n") == Action("write", "pkg/__init__.py", "")


def test_a_path_line_before_a_bash_fence_writes_that_script():
    assert only_action(f"run.sh\n{F}bash\n#!/bin/bash\necho hi\n{F}\n") == Action(
        "write", "run.sh", "#!/bin/bash\necho hi\n"
    )


def test_no_block_means_done():
    parsed = parse("All tests pass now; the task is complete.")
    assert parsed.actions == [] and parsed.problems == [] and parsed.done


# ---------------------------------------------------------------------------------------------- fences


def test_a_fence_closes_only_on_a_line_holding_the_fence_alone():
    text = f"a.py\n{F}python\ns = '{F}'\n{F} not a close\n  {F}  \nafter\n"
    action = parse(text).actions[0]
    assert action.content == f"s = '{F}'\n{F} not a close\n"


def test_a_longer_outer_fence_is_closed_only_by_as_many_backticks():
    text = f"notes.txt\n````\n{F}\ninside\n{F}\n````\n"
    assert only_action(text).content == f"{F}\ninside\n{F}\n"


def test_a_markdown_file_may_hold_fences_with_a_language():
    readme = f"# Tool\n\nInstall:\n\n{F}bash\npip install tool\n{F}\n\nDone.\n"
    assert only_action(f"README.md\n{F}markdown\n{readme}{F}\n") == Action("write", "README.md", readme)


def test_a_markdown_fence_tag_also_allows_nested_fences():
    body = f"Run:\n{F}sh\nmake\n{F}\n"
    assert only_action(f"docs/guide.txt\n{F}md\n{body}{F}\n").content == body


def test_in_other_files_a_fence_line_with_a_language_is_content_and_a_bare_fence_closes():
    text = f"a.py\n{F}python\nDOC = '''\n{F}bash\n{F}\nrest\n"
    assert parse(text).actions[0].content == f"DOC = '''\n{F}bash\n"


def test_an_indented_fence_with_a_language_in_code_is_a_docstrings_example_not_the_end():
    """humanize's apnumber has "```pycon" ... "```" in its docstring; the block ended there."""
    code = f'def apnumber(value):\n    """Examples:\n      {F}pycon\n      >>> apnumber(0)\n      {F}\n    """\n    return 1\n'
    assert only_action(f"humanize/number.py\n{F}python\n{code}{F}\n").content == code


# ---------------------------------------------------------------------------------------------- cut off


def test_a_block_cut_off_at_max_tokens_is_not_applied():
    text = f"big.py\n{F}python\ndef f():\n    return 1\n"
    parsed = parse(text, cut_off=True)
    assert parsed.actions == []
    assert parsed.problems == [
        "the block for big.py was cut off before its closing fence; it was not applied. "
        "Write it again, or use SEARCH/REPLACE blocks for a smaller change."
    ]


def test_the_blocks_before_the_cut_are_applied():
    text = f"a.py\n{F}\nA = 1\n{F}\n\nb.py\n{F}\nB = "
    parsed = parse(text, cut_off=True)
    assert parsed.actions == [Action("write", "a.py", "A = 1\n")]
    assert parsed.problems[0].startswith("the block for b.py was cut off")


def test_an_unclosed_block_without_a_cut_is_not_applied_either():
    parsed = parse(f"a.py\n{F}python\nA = 1\n")
    assert parsed.actions == []
    assert parsed.problems == [
        "the block for a.py has no closing fence; it was not applied. End every block with a line "
        "holding only its fence (```)."
    ]


def test_a_cut_off_command_is_not_run():
    parsed = parse(f"{F}bash\nrm -rf build && make", cut_off=True)
    assert parsed.actions == []
    assert parsed.problems == [
        "the ```bash command was cut off before its closing fence; it was not run. Write it again."
    ]


def test_search_replace_blocks_in_a_cut_off_fence_are_not_applied():
    text = f"a.py\n{F}python\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nz\n"
    parsed = parse(text, cut_off=True)
    assert parsed.actions == []
    assert parsed.problems[0].startswith("the block for a.py was cut off before its closing fence")


def test_a_stray_fence_line_at_the_end_is_ignored():
    parsed = parse(f"a.py\n{F}\nA = 1\n{F}\n{F}\n")
    assert parsed.actions == [Action("write", "a.py", "A = 1\n")] and parsed.problems == []


# ---------------------------------------------------------------------------------------------- paths


def test_a_fence_without_a_path_is_not_applied():
    parsed = parse(f"Use this:\n\n{F}python\nprint(1)\n{F}\n")
    assert parsed.actions == []
    assert parsed.problems == [
        "a ```python block without a file path was not applied: put the file's path alone on the line "
        "before the fence."
    ]


def test_a_fence_holding_only_a_path_says_so_and_where_the_path_goes():
    """hello, suite run F: ```python / path/to/hello.py / ```, three times, until the repeat guard."""
    parsed = parse(f"{F}python\npath/to/hello.py\n{F}\n")
    assert parsed.actions == [] and parsed.pathless == []
    assert parsed.problems == [
        "the ```python block holds only a path, hello.py, and no content: write hello.py alone on a line, "
        "then a fenced block holding the file's complete content."
    ]
    # One line of code is code, not a path.
    assert "without a file path" in parse(f"{F}python\nprint(1)\n{F}\n").problems[0]


def test_a_block_of_outline_lines_is_no_code_and_says_to_write_the_function_whole():
    """planted semver task on an H100 build: path/to/version.py / ```python / the outline's first line /
    ```, refused as a blind whole-file write, then the same answer until the repeat guard."""
    parsed = parse(
        f"path/to/version.py\n{F}python\ndef _comparator(operator: Comparator) -> Comparator\n{F}\n"
    )
    assert parsed.actions == []
    assert parsed.problems == [
        "the block for version.py holds only `_comparator`, copied from the outline: a signature without its "
        "body is not code, so nothing was written. Write the function or class you change whole, from its "
        "`def` or `class` line to the end of its body, with your change in it."
    ]
    # Lines of the outline copied with their numbers, as the next answer did.
    numbered = (
        "def _comparator(operator: Comparator) -> Comparator\n    88  def _cmp(a: T_cmp, b: T_cmp) -> int"
    )
    assert "holds only 2 signatures, copied" in parse(f"v.py\n{F}python\n{numbered}\n{F}\n").problems[0]
    cut = numbered + "\n   163      def __init__( self, major: SupportsInt, minor: SupportsInt = 0, pre"
    assert "holds only 3 signatures, copied" in parse(f"v.py\n{F}python\n{cut}\n{F}\n").problems[0]
    # Code on one line is code, and so is a signature with its body; a block's first line, all that a
    # stream stopped at a blind write keeps, stays a write, which shows the file (stream_stop.py).
    for code in ("def f(): pass", "class A: ...", "def f(x):\n    return x", "class Version:", "def f(a,"):
        assert [a.kind for a in parse(f"m.py\n{F}python\n{code}\n{F}\n").actions] == ["write"], code


def test_a_sentence_ending_with_a_colon_is_not_a_path():
    parsed = parse(f"Here is the updated file:\n{F}python\nprint(1)\n{F}\n")
    assert parsed.actions == []
    assert parsed.problems[0].startswith("a ```python block without a file path was not applied")


@pytest.mark.parametrize(
    "line",
    [
        "Here is the updated file:",
        "Here is the updated main.py:",
        "Save this as hello.py",
        "Output:",
        "python",
        "Done.",
        "x" * 201 + ".py",
        "https://example.com/a.py",
        "<<<<<<< SEARCH",
        "Now run `python test.py`",
    ],
)
def test_lines_that_are_not_paths(line):
    assert path_from_line(line) is None


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ("Makefile", "Makefile"),
        ("Dockerfile:", "Dockerfile"),
        (".gitignore", ".gitignore"),
        ("/etc/passwd", "/etc/passwd"),  # the workspace decides what may be written, not the parser
        ("../outside.py", "../outside.py"),
        ("`docs/My Notes.md`", "docs/My Notes.md"),
        ("### `src/pkg/mod.py`", "src/pkg/mod.py"),
        ("**File: `a/b.py`**", "a/b.py"),
        ("New file: `src/pkg/mod.py`", "src/pkg/mod.py"),
        ("Updated file: a/b.py", "a/b.py"),
    ],
)
def test_lines_that_are_paths(line, path):
    assert path_from_line(line) == path


def test_a_path_line_followed_by_prose_no_longer_names_the_next_fence():
    parsed = parse(f"a.py\nis what I will change.\n{F}python\nA = 1\n{F}\n")
    assert parsed.actions == [] and "without a file path" in parsed.problems[0]


def test_a_file_written_twice_keeps_the_first_version():
    text = f"a.py\n{F}\nA = 1\n{F}\n\n./a.py\n{F}\nA = 2\n{F}\n"
    parsed = parse(text)
    assert parsed.actions == [Action("write", "a.py", "A = 1\n")]
    assert parsed.problems == ["./a.py was written twice in one answer; only the first version was applied."]


def test_a_diff_block_is_refused_with_what_to_write_instead():
    parsed = parse(f"a.py\n{F}diff\n-x = 1\n+x = 2\n{F}\n")
    assert parsed.actions == [] and "SEARCH/REPLACE" in parsed.problems[0]


# ---------------------------------------------------------------------------------------------- SEARCH/REPLACE


def test_search_replace_blocks_in_a_fence_apply_in_order():
    text = (
        f"calc.py\n{F}python\n"
        "<<<<<<< SEARCH\ndef add(a, b):\n    return a - b\n=======\ndef add(a, b):\n    return a + b\n>>>>>>> REPLACE\n"
        "\n<<<<<<< SEARCH\nX = 1\n=======\nX = 2\n>>>>>>> REPLACE\n"
        f"{F}\n"
    )
    parsed = parse(text)
    assert parsed.problems == []
    assert parsed.actions == [
        Action(
            "replace",
            "calc.py",
            "",
            "def add(a, b):\n    return a - b\n",
            "def add(a, b):\n    return a + b\n",
        ),
        Action("replace", "calc.py", "", "X = 1\n", "X = 2\n"),
    ]


@pytest.mark.parametrize(
    ("head", "divider", "tail"), [("<<<<<", "=====", ">>>>>"), ("<" * 9, "=" * 9, ">" * 9)]
)
def test_markers_may_have_five_to_nine_characters_and_trailing_spaces(head, divider, tail):
    text = f"a.py\n{F}\n{head} SEARCH  \nold\n{divider}   \nnew\n{tail} REPLACE \n{F}\n"
    assert only_action(text) == Action("replace", "a.py", "", "old\n", "new\n")


def test_search_replace_blocks_without_a_fence_are_read():
    text = "a.py\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n"
    parsed = parse(text)
    assert parsed.problems == []
    assert parsed.actions == [
        Action("replace", "a.py", "", "old\n", "new\n"),
        Action("replace", "a.py", "", "x\n", "y\n"),
    ]


def test_a_path_line_inside_the_fence_names_its_blocks():
    text = f"{F}python\nsrc/a.py\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n{F}\n"
    assert only_action(text).path == "src/a.py"


def test_the_next_fence_of_blocks_right_after_keeps_the_path():
    block = "<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n"
    parsed = parse(f"a.py\n{F}\n{block}{F}\n\n{F}\n{block.replace('old', 'older')}{F}\n")
    assert [a.path for a in parsed.actions] == ["a.py", "a.py"] and parsed.problems == []


def test_search_replace_without_a_path_asks_for_one():
    parsed = parse(f"Change this:\n{F}python\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n{F}\n")
    assert parsed.actions == []
    assert parsed.problems == [
        "a SEARCH/REPLACE block without a file path was not applied: put the file's path alone on the "
        "line before the fence that holds the block."
    ]


def test_a_no_op_search_replace_is_a_problem_not_an_action():
    parsed = parse(f"a.py\n{F}\n<<<<<<< SEARCH\nsame\n=======\nsame\n>>>>>>> REPLACE\n{F}\n")
    assert parsed.actions == []
    assert parsed.problems == [
        "a SEARCH/REPLACE block for a.py has the same text in SEARCH and REPLACE; nothing would change, "
        "so it was skipped."
    ]


def test_an_empty_search_writes_the_replace_text_as_the_whole_file():
    text = f"new.py\n{F}python\n<<<<<<< SEARCH\n=======\nprint('new')\n>>>>>>> REPLACE\n{F}\n"
    assert only_action(text) == Action("write", "new.py", "print('new')\n")


def test_a_whole_file_then_search_replace_for_it_apply_in_order():
    text = f"a.py\n{F}\nA = 1\nB = 2\n{F}\n\na.py\n{F}\n<<<<<<< SEARCH\nB = 2\n=======\nB = 3\n>>>>>>> REPLACE\n{F}\n"
    parsed = parse(text)
    assert [a.kind for a in parsed.actions] == ["write", "replace"] and parsed.problems == []


def test_a_block_without_its_divider_is_refused():
    parsed = parse(f"a.py\n{F}\n<<<<<<< SEARCH\nold\n>>>>>>> REPLACE\n{F}\n")
    assert parsed.actions == []
    assert parsed.problems[0].startswith("a SEARCH/REPLACE block for a.py has no ======= line")


def test_a_bare_block_cut_before_its_end_is_not_applied():
    parsed = parse("a.py\n<<<<<<< SEARCH\nold\n=======\nne", cut_off=True)
    assert parsed.actions == []
    assert "cut off before its >>>>>>> REPLACE line" in parsed.problems[0]


def test_echoed_line_numbers_stay_in_the_search_text():
    text = f"a.py\n{F}\n<<<<<<< SEARCH\n  12| x = 1\n=======\nx = 2\n>>>>>>> REPLACE\n{F}\n"
    assert only_action(text).search == "  12| x = 1\n"


def test_search_text_quoting_half_a_nested_fence_in_markdown_still_parses():
    text = (
        f"README.md\n{F}markdown\n<<<<<<< SEARCH\n{F}bash\npip install old\n=======\n"
        f"{F}bash\npip install new\n>>>>>>> REPLACE\n{F}\n"
    )
    assert only_action(text) == Action(
        "replace", "README.md", "", f"{F}bash\npip install old\n", f"{F}bash\npip install new\n"
    )


# ---------------------------------------------------------------------------------------------- commands


@pytest.mark.parametrize("tag", ["bash", "sh", "shell"])
def test_a_shell_fence_is_one_command(tag):
    assert only_action(f"Let's test.\n{F}{tag}\npytest -q\n{F}\n") == Action("bash", None, "pytest -q")


def test_a_multi_line_script_is_one_command():
    script = 'for f in *.py; do\n  python -m py_compile "$f"\ndone'
    assert only_action(f"{F}bash\n{script}\n{F}\n").content == script


def test_prompts_are_stripped_and_console_output_dropped():
    assert only_action(f"{F}bash\n$ cd src\n$ ls\n{F}\n").content == "cd src\nls"
    assert only_action(f"{F}console\n$ python hello.py\nHello\n$ echo ok\nok\n{F}\n").content == (
        "python hello.py\necho ok"
    )


def test_commands_and_files_keep_their_order():
    text = f"a.py\n{F}\nA = 1\n{F}\n{F}bash\npython a.py\n{F}\nb.py\n{F}\nB = 1\n{F}\n"
    assert [a.kind for a in parse(text).actions] == ["write", "bash", "write"]


# ---------------------------------------------------------------------------------------------- tool calls


def test_actions_become_tool_calls_the_tools_accept():
    actions = [
        Action("write", "a.py", "A = 1\n"),
        Action("replace", "a.py", "", "A = 1\n", "A = 2\n"),
        Action("bash", None, "python a.py"),
    ]
    calls = to_tool_calls(actions)
    assert [(c.id, c.name) for c in calls] == [
        ("block_1", "write_file"),
        ("block_2", "edit_file"),
        ("block_3", "bash"),
    ]
    assert WriteArgs.model_validate_json(calls[0].arguments) == WriteArgs(path="a.py", content="A = 1\n")
    assert EditArgs.model_validate_json(calls[1].arguments) == EditArgs(
        path="a.py", old_string="A = 1\n", new_string="A = 2\n"
    )
    assert BashArgs.model_validate_json(calls[2].arguments) == BashArgs(command="python a.py")
    assert json.loads(calls[1].arguments) == {
        "path": "a.py",
        "old_string": "A = 1\n",
        "new_string": "A = 2\n",
    }


RECORDED_BLOCKS = Path(__file__).parents[1] / "fixtures" / "model_outputs" / "blocks"


@pytest.mark.parametrize("recording", sorted(RECORDED_BLOCKS.glob("*.txt")), ids=lambda p: p.stem)
def test_recorded_answers_of_the_real_model_are_read_as_expected(recording):
    expected = json.loads(recording.with_suffix(".expected.json").read_text())
    parsed = parse_answer(recording.read_text(), cut_off=False)
    assert [{"kind": a.kind, "path": a.path} for a in parsed.actions] == expected["actions"]
    assert len(parsed.problems) == expected["problems"]


def test_a_comment_naming_a_file_on_a_fences_first_line_is_its_path():
    parsed = parse_answer('To create it:\n\n```python\n# hello.py\nprint("Hello, world!")\n```\n')
    assert [(a.kind, a.path, a.content) for a in parsed.actions] == [
        ("write", "hello.py", 'print("Hello, world!")\n')
    ]
    assert not parsed.problems


@pytest.mark.parametrize("outer", ["```", "```python"])
def test_a_path_line_and_a_fence_written_inside_a_fence_are_the_blocks_path(outer):
    """The 1.5B wrote `inflection/__init__.py` and ```python inside a fence, 42 times in one GPU run."""
    parsed = parse_answer(
        f"{outer}\ninflection/__init__.py\n```python\ndef ordinal(n):\n    return 'th'\n```\n"
    )
    assert [(a.kind, a.path, a.content) for a in parsed.actions] == [
        ("write", "inflection/__init__.py", "def ordinal(n):\n    return 'th'\n")
    ]
    assert not parsed.problems
    # ...but a sentence above an inner fence is no path
    parsed = parse_answer("```python\nThis line should be changed to:\n```python\nx = 1\n```\n")
    assert not parsed.actions and len(parsed.problems) == 1


def test_an_ordinary_first_line_comment_is_not_a_path():
    parsed = parse_answer("```python\n# compute the total\nx = 1\n```\n")
    assert not parsed.actions and len(parsed.problems) == 1


# ---------------------------------------------------------------------------------------------- while streaming


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (f"Here is the fix.\n\nsrc/attr/validators.py\n{F}python\n# SPDX\n", "src/attr/validators.py"),
        (f"src/a.py\n{F}python\n\nimport os\n", "src/a.py"),  # blank lines first: the first code line
        (f"{F}python\n# src/a.py\nimport os\n", "src/a.py"),  # the label comment names it
        (f"{F}python src/a.py\nimport os\n", "src/a.py"),  # the info string names it
    ],
)
def test_a_whole_file_block_is_seen_at_its_first_line_of_code(text, path):
    kept, found = open_whole_file_block(text)
    assert found == path
    assert kept == text + F + "\n"  # the answer so far, the block closed
    assert parse_answer(kept).actions[-1].path == path


@pytest.mark.parametrize(
    "text",
    [
        f"src/a.py\n{F}python\n<<<<<<< SEARCH\n",  # an edit, not a whole file
        f"src/a.py\n{F}python\nimp",  # the first line is not complete yet
        f"src/a.py\n{F}python\n\n",  # no code yet
        f"{F}python\nimport os\n",  # no path: the reader refuses it anyway
        f"run:\n{F}bash\nls\n",  # a command
        f"README.md\n{F}markdown\n# Title\n",  # Markdown holds fences of its own
        f"src/a.py\n{F}python\nimport os\n{F}\nDone.\n",  # closed: nothing to stop
        f"src/a.py\n{F}python\n" + "".join(f"x{i} = {i}\n" for i in range(8)),  # begun long ago
    ],
)
def test_nothing_else_is_taken_for_a_whole_file_block_being_written(text):
    assert open_whole_file_block(text) is None


def test_the_answer_begun_for_the_model_is_the_found_definitions_head_as_it_stands(tmp_path):
    from agent.protocols.edit_blocks.feedback import Feedback
    from agent.protocols.edit_blocks.project import ProjectFiles, TaskProgress
    from tools.workspace import Workspace

    (tmp_path / "m.py").write_text(
        "import x\n\nclass C:\n    @property\n    def size(\n        self,\n    ) -> int:\n"
        "        '''Doc.'''\n        return 1\n\n    def one(self): return 1\n\n@deco\ndef top(a):\n    return a\n"
    )
    progress = TaskProgress(partly=["m.py"])
    feedback = Feedback(ProjectFiles(Workspace(tmp_path)), progress)

    def opening(name: str) -> str:
        progress.focus = ("m.py", name)
        return feedback.focus_opening()

    # a member's decorators and whole signature; a class to its first member's decorators
    assert (
        opening("C.size") == "m.py\n```python\n    @property\n    def size(\n        self,\n    ) -> int:\n"
    )
    assert opening("C") == "m.py\n```python\nclass C:\n"
    assert opening("top") == "m.py\n```python\n@deco\ndef top(a):\n"
    assert opening("C.one") == "" and opening("nope") == ""  # a one-line definition; none found
    progress.partly = []  # shown whole: a block of the function alone would replace the whole file
    assert opening("top") == ""
