"""File tools on real files: reads, atomic writes, exact edits, listing and search."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolError
from tools.files import (
    EditArgs,
    EditFile,
    Grep,
    GrepArgs,
    ListArgs,
    ListFiles,
    ReadArgs,
    ReadFile,
    WriteArgs,
    WriteFile,
)
from tools.workspace import Workspace


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(Workspace(root))


def put(ctx: ToolContext, rel: str, text: str) -> Path:
    path = ctx.workspace.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def test_read_file_numbers_lines_and_pages(ctx):
    put(ctx, "a.py", "".join(f"line {i}\n" for i in range(1, 11)))
    result = await ReadFile().run(ReadArgs(path="a.py", offset=3, limit=2), ctx)
    assert result.output.splitlines()[:2] == ["3| line 3", "4| line 4"]
    assert "more from offset=5" in result.output


async def test_read_file_refuses_binary_files(ctx):
    (ctx.workspace.root / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ToolError, match="binary file"):
        await ReadFile().run(ReadArgs(path="blob.bin"), ctx)


async def test_read_file_caps_huge_lines(ctx):
    put(ctx, "big.txt", ("x" * 1000 + "\n") * 400)
    result = await ReadFile().run(ReadArgs(path="big.txt", limit=400), ctx)
    assert "stopped at" in result.output and len(result.output) < 300_000


async def test_write_file_creates_parents_and_reports_a_diff(ctx):
    result = await WriteFile().run(WriteArgs(path="pkg/sub/mod.py", content="x = 1\n"), ctx)
    assert (ctx.workspace.root / "pkg/sub/mod.py").read_text() == "x = 1\n"
    assert result.output.startswith("Created pkg/sub/mod.py") and "+x = 1" in result.display["diff"]


async def test_write_file_is_atomic_and_keeps_the_mode(ctx):
    path = put(ctx, "run.sh", "echo old\n")
    path.chmod(0o755)
    await WriteFile().run(WriteArgs(path="run.sh", content="echo new\n"), ctx)
    assert path.read_text() == "echo new\n" and path.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in path.parent.iterdir()] == ["run.sh"]  # no temp file left behind


async def test_edit_replaces_exactly_one_match_and_returns_a_diff(ctx):
    put(ctx, "m.py", "def f():\n    return 1\n")
    result = await EditFile().run(EditArgs(path="m.py", old_string="return 1", new_string="return 2"), ctx)
    assert (ctx.workspace.root / "m.py").read_text() == "def f():\n    return 2\n"
    assert "-    return 1" in result.output and "+    return 2" in result.output


async def test_a_failed_edit_leaves_the_file_byte_identical_and_shows_the_nearest_lines(ctx):
    original = b"def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    path = ctx.workspace.root / "calc.py"
    path.write_bytes(original)
    stat = path.stat()
    with pytest.raises(ToolError) as caught:
        await EditFile().run(
            EditArgs(path="calc.py", old_string="def sub(a, b):\n    return a-b", new_string="x"), ctx
        )
    assert path.read_bytes() == original and path.stat().st_mtime_ns == stat.st_mtime_ns
    text = str(caught.value)
    assert "not found in calc.py; the file is unchanged" in text
    assert "lines 5-6" in text and "    5| def sub(a, b):" in text


async def test_an_ambiguous_edit_changes_nothing_and_names_the_lines(ctx):
    original = "x = 1\ny = 2\nx = 1\n"
    put(ctx, "dup.py", original)
    with pytest.raises(ToolError, match=r"matches 2 times in dup.py \(lines 1, 3\)"):
        await EditFile().run(EditArgs(path="dup.py", old_string="x = 1", new_string="x = 3"), ctx)
    assert (ctx.workspace.root / "dup.py").read_text() == original
    await EditFile().run(
        EditArgs(path="dup.py", old_string="x = 1", new_string="x = 3", replace_all=True), ctx
    )
    assert (ctx.workspace.root / "dup.py").read_text() == "x = 3\ny = 2\nx = 3\n"


async def test_an_edit_with_wrong_indentation_says_so(ctx):
    put(ctx, "i.py", "def f():\n    if x:\n        return 1\n")
    with pytest.raises(ToolError, match="different indentation"):
        await EditFile().run(EditArgs(path="i.py", old_string="if x:\n    return 1", new_string="pass"), ctx)


async def test_paths_outside_the_workspace_are_refused(ctx, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    for path in ("../secret.txt", str(tmp_path / "secret.txt")):
        with pytest.raises(ToolError, match="outside the workspace"):
            await ReadFile().run(ReadArgs(path=path), ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        await WriteFile().run(WriteArgs(path="../evil.txt", content="x"), ctx)
    assert not (tmp_path / "evil.txt").exists()


async def test_a_symlink_that_escapes_is_refused(ctx, tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f.txt").write_text("outside")
    os.symlink(tmp_path / "outside", ctx.workspace.root / "link")
    with pytest.raises(ToolError, match="through a symlink"):
        await ReadFile().run(ReadArgs(path="link/f.txt"), ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        await EditFile().run(EditArgs(path="link/f.txt", old_string="outside", new_string="pwned"), ctx)
    assert (tmp_path / "outside" / "f.txt").read_text() == "outside"


async def test_extra_roots_are_allowed_when_the_user_says_so(tmp_path):
    root, extra = tmp_path / "ws", tmp_path / "shared"
    root.mkdir()
    extra.mkdir()
    (extra / "notes.md").write_text("shared notes\n")
    ctx = ToolContext(Workspace(root, [extra]))
    result = await ReadFile().run(ReadArgs(path=str(extra / "notes.md")), ctx)
    assert "shared notes" in result.output


async def test_list_files_respects_gitignore_in_a_repo(ctx):
    subprocess.run(["git", "init", "-q"], cwd=ctx.workspace.root, check=True)
    put(ctx, ".gitignore", "build/\n*.log\n")
    put(ctx, "src/a.py", "")
    put(ctx, "build/out.o", "")
    put(ctx, "debug.log", "")
    result = await ListFiles().run(ListArgs(), ctx)
    assert result.output.splitlines() == [".gitignore", "src/a.py"]


async def test_list_files_respects_gitignore_outside_git_and_filters_by_glob(ctx):
    put(ctx, ".gitignore", "dist/\n")
    put(ctx, "pkg/a.py", "")
    put(ctx, "pkg/b.txt", "")
    put(ctx, "dist/x.py", "")
    put(ctx, "node_modules/m.js", "")
    result = await ListFiles().run(ListArgs(pattern="**/*.py"), ctx)
    assert result.output.splitlines() == ["pkg/a.py"]


async def test_grep_finds_lines_with_numbers_and_skips_ignored_files(ctx):
    put(ctx, ".gitignore", "gen/\n")
    put(ctx, "a.py", "import os\ndef target():\n    pass\n")
    put(ctx, "gen/b.py", "def target(): ...\n")
    result = await Grep().run(GrepArgs(pattern=r"def target"), ctx)
    assert result.output == "a.py:2:def target():"


async def test_grep_reports_a_bad_regex(ctx):
    with pytest.raises(ToolError, match="Invalid regular expression"):
        await Grep().run(GrepArgs(pattern="("), ctx)
