"""An edit that takes a top-level Python name away is told where the workspace still uses it, and an edit
that renamed it gets the one command that renames the rest, which then works for real."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tools.base import TASK_TEXT, ToolContext
from tools.dangling_uses import renamed
from tools.files import EditArgs, EditFile, WriteArgs, WriteFile
from tools.rename_symbol import rename_call
from tools.shown import mark_shown_whole

ENCODING = 'def want_bytes(s):\n    return s.encode() if isinstance(s, str) else s\n\n\nPREFIX = b"x"\n'


def package(ctx: ToolContext) -> None:
    """A package whose helper is imported and called from two modules and a test, and two modules
    with a `want_bytes` of their own, top-level and local (their uses are not the package's)."""
    root = ctx.workspace.root
    (root / "pkg").mkdir()
    (root / "tests").mkdir()
    files = {
        "pkg/__init__.py": "from .encoding import want_bytes as want_bytes\n",
        "pkg/encoding.py": ENCODING,
        "pkg/signer.py": "from .encoding import want_bytes\n\n\ndef sign(v):\n    return want_bytes(v) + b'.'\n",
        "tests/test_encoding.py": "from pkg.encoding import want_bytes\n\n\ndef test_it():\n"
        "    assert want_bytes('a') == b'a'\n",
        "other.py": "def want_bytes(v):\n    return bytes(v)\n\n\nprint(want_bytes([1]))\n",
        "README.md": "Call `want_bytes` to get bytes.\n",
        "local.py": "def f():\n    want_bytes = b''\n    return want_bytes\n",  # a local of its own
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    mark_shown_whole(ctx.state, root / "pkg/encoding.py")


@pytest.mark.slow  # the package's tests run in a subprocess
async def test_a_rename_in_one_file_lists_every_use_left_and_its_command_renames_them(ctx: ToolContext):
    package(ctx)
    root = ctx.workspace.root
    edit = EditArgs(path="pkg/encoding.py", old_string="def want_bytes(s):", new_string="def to_bytes(s):")
    result = await EditFile().run(edit, ctx)
    assert result.ok and "The change is made, but it brings new problems." in result.output
    assert "`want_bytes` is no longer defined in pkg/encoding.py, but 5 lines in 3 files still use it:" in (
        result.output
    )
    for line in ("pkg/__init__.py:1: from .encoding import want_bytes as want_bytes",
                 "pkg/signer.py:5: return want_bytes(v) + b'.'",
                 "tests/test_encoding.py:5: assert want_bytes('a') == b'a'"):  # fmt: skip
        assert line in result.output
    for other in ("other.py", "local.py", "README.md"):  # their own want_bytes; not Python
        assert other not in result.output
    command = result.display["rename_command"]
    assert command == (
        "sed -i 's/\\bwant_bytes\\b/to_bytes/g' pkg/__init__.py pkg/signer.py tests/test_encoding.py"
    )
    assert (
        f"It is now `to_bytes`. This command renames every use left, in all 3 files:\n```bash\n{command}\n```"
        in (result.output)
    )
    assert (
        "pkg/signer.py:5: uses `want_bytes`, which pkg/encoding.py no longer defines"
        in result.display["lint"]
    )

    subprocess.run(["bash", "-c", command], cwd=root, check=True)
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                           cwd=root, capture_output=True, text=True)  # fmt: skip
    assert tests.returncode == 0, tests.stdout
    assert "want_bytes" not in "".join((root / p).read_text() for p in ("pkg/__init__.py", "pkg/signer.py"))
    assert (root / "other.py").read_text().count("want_bytes") == 2  # not the package's: left alone


async def test_a_name_taken_away_without_a_new_one_is_listed_without_a_command(ctx: ToolContext):
    package(ctx)
    edit = EditArgs(path="pkg/encoding.py", old_string=ENCODING.split("\n\n\n")[0] + "\n", new_string="")
    result = await EditFile().run(edit, ctx)
    assert "`want_bytes` is no longer defined in pkg/encoding.py, but 5 lines in 3 files" in result.output
    assert "rename_command" not in result.display and "```bash" not in result.output


async def test_a_name_nobody_else_uses_and_a_first_write_say_nothing(ctx: ToolContext):
    package(ctx)
    result = await EditFile().run(
        EditArgs(path="pkg/encoding.py", old_string="PREFIX", new_string="MARK"), ctx
    )
    assert result.ok and "problems" not in result.output
    result = await WriteFile().run(WriteArgs(path="pkg/new.py", content="def want_bytes():\n    pass\n"), ctx)
    assert result.ok and "no longer defined" not in result.output


async def test_a_file_left_unparsable_gets_its_syntax_error_and_no_guess_at_renames(ctx: ToolContext):
    package(ctx)
    edit = EditArgs(path="pkg/encoding.py", old_string="def want_bytes(s):", new_string="def to_bytes(s:")
    result = await EditFile().run(edit, ctx)
    assert "pkg/encoding.py:1:" in result.output and "no longer defined" not in result.output


def test_a_rename_is_one_definition_replaced_by_one_of_the_same_kind():
    assert renamed("def a(): pass\n", "def b(): pass\n") == (["a"], "b")
    assert renamed("def a(): pass\n", "class B: pass\n") == (["a"], None)
    assert renamed("def a(): pass\ndef c(): pass\n", "def b(): pass\n") == (["a", "c"], None)
    assert renamed("X = 1\ny: int = 2\n", "Z = 1\ny: int = 2\n") == (["X"], "Z")
    assert renamed("def a(): pass\n", "def a(): pass\ndef b(): pass\n") == ([], None)
    assert renamed("def a(:\n", "def b(): pass\n") == ([], None)  # nothing to compare with


async def test_a_rename_the_task_asks_for_is_proposed_as_a_call_and_the_edit_writes_no_other_file(
    ctx: ToolContext,
):
    package(ctx)
    root = ctx.workspace.root
    others = {p: p.read_text() for p in root.rglob("*.py") if p.name != "encoding.py"}
    ctx.state[TASK_TEXT] = "Rename the function `want_bytes` in pkg/encoding.py to `to_bytes`, everywhere."
    edit = EditArgs(path="pkg/encoding.py", old_string="def want_bytes(s):", new_string="def to_bytes(s):")
    result = await EditFile().run(edit, ctx)
    assert result.ok and "problems" not in result.output and "rename_command" not in result.display
    assert result.output.endswith(
        "The task renames `want_bytes` to `to_bytes`, so its other uses (5 lines in 3 files) are renamed "
        "next, by rename_symbol."
    )
    assert result.followups == [rename_call("pkg/encoding.py", "want_bytes", "to_bytes")]
    assert {p: p.read_text() for p in others} == others  # the lint wrote nothing: the call will


async def test_a_rename_of_a_name_the_edited_file_still_uses_is_no_lint_problem_when_proposed(
    ctx: ToolContext,
):
    package(ctx)
    (ctx.workspace.root / "pkg/encoding.py").write_text(
        ENCODING + "\n\ndef twice(s):\n    return want_bytes(s) * 2\n"
    )
    mark_shown_whole(ctx.state, ctx.workspace.root / "pkg/encoding.py")
    ctx.state[TASK_TEXT] = "Rename `want_bytes` to `to_bytes`."
    edit = EditArgs(path="pkg/encoding.py", old_string="def want_bytes(s):", new_string="def to_bytes(s):")
    result = await EditFile().run(edit, ctx)
    assert "problems" not in result.output and "lint" not in result.display and result.followups


async def test_a_rename_the_task_does_not_name_is_only_suggested(ctx: ToolContext):
    package(ctx)
    ctx.state[TASK_TEXT] = "Tidy pkg/encoding.py."
    edit = EditArgs(path="pkg/encoding.py", old_string="def want_bytes(s):", new_string="def as_bytes(s):")
    result = await EditFile().run(edit, ctx)
    assert "rename_command" in result.display and not result.followups
    assert "from .encoding import want_bytes" in (ctx.workspace.root / "pkg/signer.py").read_text()
