"""The lint after each edit, as the edit tools run it: new problems go back with the edit's result,
old ones are not blamed on it, and the project's own lint command counts only what the edit added."""

from __future__ import annotations

import sys

import pytest

from tools.base import ToolContext
from tools.files import EditArgs, EditFile, WriteArgs, WriteFile
from tools.shown import mark_shown_whole


async def test_a_write_with_an_undefined_name_is_applied_and_says_so(ctx: ToolContext):
    result = await WriteFile().run(WriteArgs(path="hello.py", content="def main():\n    prnt('hi')\n"), ctx)
    assert result.ok and (ctx.workspace.root / "hello.py").exists()
    assert "The change is made, but it brings new problems. Fix them:" in result.output
    assert "hello.py:2: undefined name 'prnt'" in result.output
    assert ">  2 |     prnt('hi')" in result.output
    assert result.display["lint"] == ["hello.py:2: undefined name 'prnt'"]


async def test_an_edit_elsewhere_in_an_already_broken_file_is_not_blamed_for_it(ctx: ToolContext):
    path = ctx.workspace.root / "old.py"
    path.write_text("import os\n\nvalue = missing_name\n\ndef f():\n    return 1\n")
    mark_shown_whole(ctx.state, path)
    result = await EditFile().run(EditArgs(path="old.py", old_string="return 1", new_string="return 2"), ctx)
    assert result.ok and "new problems" not in result.output and "lint" not in result.display


async def test_a_clean_edit_says_nothing_more(ctx: ToolContext):
    result = await WriteFile().run(WriteArgs(path="ok.py", content="print('fine')\n"), ctx)
    assert result.ok and "problems" not in result.output


async def test_lint_off_checks_nothing(ctx: ToolContext):
    ctx.lint = False
    result = await WriteFile().run(WriteArgs(path="bad.py", content="def f(:\n"), ctx)
    assert result.ok and "problems" not in result.output


async def test_the_projects_lint_command_reports_only_the_lines_the_edit_added(ctx: ToolContext):
    # A lint that flags every TODO line, with its line number: moved TODOs are not new, a new one is.
    script = ctx.workspace.root / "lint.py"
    script.write_text(
        "import sys\n"
        "for n, line in enumerate(open(sys.argv[1]), 1):\n"
        "    if 'TODO' in line:\n"
        "        print(f'{sys.argv[1]}:{n}:1: W1 a TODO is left: {line.strip()}')\n"
    )
    path = ctx.workspace.root / "m.py"
    path.write_text("# TODO old\nx = 1\n")
    mark_shown_whole(ctx.state, path)
    ctx.lint_command = f"{sys.executable} lint.py {{path}}"
    edit = EditArgs(path="m.py", old_string="x = 1", new_string="\ny = 2  # TODO new")
    result = await EditFile().run(edit, ctx)
    assert f"The project's lint (`{ctx.lint_command}`) reports:" in result.output
    assert "m.py:3:1: W1 a TODO is left: y = 2  # TODO new" in result.output
    assert "TODO old" not in result.output.split("reports:")[1]
    assert result.display["lint"] == ["m.py:3:1: W1 a TODO is left: y = 2  # TODO new"]


@pytest.mark.slow
async def test_a_lint_command_that_hangs_is_stopped_and_said(ctx: ToolContext, monkeypatch):
    import tools.edit_lint

    monkeypatch.setattr(tools.edit_lint, "LINT_TIMEOUT", 1.0)
    ctx.lint_command = "sleep 30; echo"
    result = await WriteFile().run(WriteArgs(path="new.py", content="x = 1\n"), ctx)
    assert result.ok and "(the lint command timed out after 1 s)" in result.output
