"""File tools on real files: reads, atomic writes, tolerant edits, listing and search."""

from __future__ import annotations

import difflib
import os
import subprocess
import time
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolError
from tools.edit_matching import nearest_lines, strip_line_numbers
from tools.files import EditArgs, EditFile, ReadArgs, ReadFile, WriteArgs, WriteFile
from tools.search import Grep, GrepArgs, ListArgs, ListFiles
from tools.text_files import short_diff
from tools.workspace import Workspace


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
    await ReadFile().run(ReadArgs(path="run.sh"), ctx)  # only a file read whole is replaced whole
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
    with pytest.raises(ToolError, match=r"matches 2 places in dup.py \(lines 1, 3\)"):
        await EditFile().run(EditArgs(path="dup.py", old_string="x = 1", new_string="x = 3"), ctx)
    assert (ctx.workspace.root / "dup.py").read_text() == original
    await EditFile().run(
        EditArgs(path="dup.py", old_string="x = 1", new_string="x = 3", replace_all=True), ctx
    )
    assert (ctx.workspace.root / "dup.py").read_text() == "x = 3\ny = 2\nx = 3\n"


async def test_an_edit_with_one_uniform_indentation_error_is_matched_and_reindented(ctx):
    put(ctx, "i.py", "def f():\n    if x:\n        return 1\n    return 0\n")
    result = await EditFile().run(
        EditArgs(
            path="i.py", old_string="if x:\n    return 1\n", new_string="if x:\n    y()\n    return 2\n"
        ),
        ctx,
    )
    assert (ctx.workspace.root / "i.py").read_text() == (
        "def f():\n    if x:\n        y()\n        return 2\n    return 0\n"
    )
    assert "matched ignoring indentation" in result.output


async def test_an_over_indented_edit_is_outdented_to_the_file(ctx):
    put(ctx, "o.py", "class A:\n    def f(self):\n        return 1\n")
    await EditFile().run(
        EditArgs(
            path="o.py",
            old_string="            def f(self):\n                return 1",
            new_string="            def f(self):\n                return 2",
        ),
        ctx,
    )
    assert (ctx.workspace.root / "o.py").read_text() == "class A:\n    def f(self):\n        return 2\n"


async def test_indentation_matching_keeps_crlf_line_endings_and_ignores_trailing_spaces(ctx):
    path = ctx.workspace.root / "w.py"
    path.write_bytes(b"def f():\r\n    a = 1   \r\n    b = 2\r\n")
    await EditFile().run(EditArgs(path="w.py", old_string="a = 1\nb = 2\n", new_string="a = 3\nb = 4\n"), ctx)
    assert path.read_bytes() == b"def f():\r\n    a = 3\r\n    b = 4\r\n"


async def test_an_empty_new_string_deletes_the_lines_matched_ignoring_indentation(ctx):
    put(ctx, "d.py", "def f():\n    a = 1\n    b = 2\n    return a\n")
    await EditFile().run(EditArgs(path="d.py", old_string="b = 2\n", new_string=""), ctx)
    assert (ctx.workspace.root / "d.py").read_text() == "def f():\n    a = 1\n    return a\n"


async def test_one_unindented_line_replaced_by_several_indents_them_all(ctx):
    put(ctx, "e.py", "def f():\n    b = 2\n    return b\n")
    await EditFile().run(
        EditArgs(path="e.py", old_string="b = 2\n", new_string="b = 2\nif b:\n    b += 1\n"), ctx
    )
    assert (ctx.workspace.root / "e.py").read_text() == (
        "def f():\n    b = 2\n    if b:\n        b += 1\n    return b\n"
    )


async def test_an_edit_starting_mid_line_keeps_the_rest_of_the_line(ctx):
    put(ctx, "m.py", "def f():\n    return compute(1)\n")
    await EditFile().run(EditArgs(path="m.py", old_string="compute(1)", new_string="compute(2)"), ctx)
    assert (ctx.workspace.root / "m.py").read_text() == "def f():\n    return compute(2)\n"


async def test_indentation_that_differs_line_by_line_is_not_guessed(ctx):
    original = "def f():\n    if x:\n        return 1\n"
    put(ctx, "i.py", original)
    with pytest.raises(ToolError, match="different indentation") as caught:
        await EditFile().run(
            EditArgs(path="i.py", old_string="    if x:\n    return 1", new_string="pass"), ctx
        )
    assert (ctx.workspace.root / "i.py").read_text() == original
    assert "    2|     if x:" in str(caught.value)


async def test_an_ambiguous_loose_match_refuses_instead_of_trying_looser_passes(ctx):
    original = "def a():\n    x = 1\n    y = 2\n\ndef b():\n        x = 1\n        y = 2\n"
    put(ctx, "two.py", original)
    with pytest.raises(ToolError) as caught:
        await EditFile().run(EditArgs(path="two.py", old_string="x = 1\ny = 2", new_string="z = 0"), ctx)
    assert "matches 2 places in two.py ignoring indentation (lines 2, 6)" in str(caught.value)
    assert "matches exactly one" in str(caught.value)
    assert (ctx.workspace.root / "two.py").read_text() == original


async def test_replace_all_applies_to_every_loose_match_each_with_its_own_indentation(ctx):
    put(ctx, "two.py", "def a():\n    x = 1\n\ndef b():\n        x = 1\n")
    result = await EditFile().run(
        EditArgs(path="two.py", old_string="x = 1\n", new_string="x = 2\n", replace_all=True), ctx
    )
    assert "2 replacements" in result.output
    assert (ctx.workspace.root / "two.py").read_text() == "def a():\n    x = 2\n\ndef b():\n        x = 2\n"


async def test_line_numbers_echoed_from_read_file_are_stripped(ctx):
    put(ctx, "n.py", "".join(f"v{i} = {i}\n" for i in range(1, 12)) + "def f():\n    return 1\n")
    listing = (await ReadFile().run(ReadArgs(path="n.py", offset=9, limit=5), ctx)).output
    old = "\n".join(listing.splitlines()[3:5])  # "12| def f():", "13|     return 1"
    assert old.startswith("12| def f():")
    new = "12| def f():\n13|     return 2"
    result = await EditFile().run(EditArgs(path="n.py", old_string=old, new_string=new), ctx)
    assert (ctx.workspace.root / "n.py").read_text().endswith("def f():\n    return 2\n")
    assert "matched without the line numbers" in result.output


async def test_line_numbers_stay_in_a_new_string_that_does_not_carry_them_on_every_line(ctx):
    put(ctx, "n.py", "def f():\n    return 1\n")
    await EditFile().run(
        EditArgs(path="n.py", old_string="1: def f():\n2:     return 1", new_string="def f():\n    return 2"),
        ctx,
    )
    assert (ctx.workspace.root / "n.py").read_text() == "def f():\n    return 2\n"


async def test_line_numbers_and_wrong_indentation_together_are_matched(ctx):
    put(ctx, "n.py", "class A:\n    def f(self):\n        return 1\n")
    result = await EditFile().run(
        EditArgs(
            path="n.py",
            old_string="  2  def f(self):\n  3      return 1",
            new_string="  2  def f(self):\n  3      return 3",
        ),
        ctx,
    )
    assert (ctx.workspace.root / "n.py").read_text() == "class A:\n    def f(self):\n        return 3\n"
    assert "without the line numbers, ignoring indentation" in result.output


@pytest.mark.parametrize(
    ("numbered", "plain"),
    [
        ("  9| a\n 10|     b\n 11| ", "a\n    b\n"),
        ("9 | a\n10 |     b", "a\n    b"),
        ("9: a\n10:     b", "a\n    b"),
        ("     9\ta\n    10\t    b", "a\n    b"),
        ("  9  a\n 10      b", "a\n    b"),
    ],
)
def test_line_number_prefixes_of_common_listings_are_recognised(numbered, plain):
    assert strip_line_numbers(numbered) == plain


def test_text_without_a_number_on_every_line_keeps_its_numbers():
    assert strip_line_numbers("12: a\nb") is None
    assert strip_line_numbers("x = 1\ny = 2") is None


async def test_an_edit_that_would_change_nothing_is_refused(ctx):
    put(ctx, "s.py", "    a = 1\n")  # the same text once its echoed line number is dropped
    with pytest.raises(ToolError, match="nothing changed"):
        await EditFile().run(EditArgs(path="s.py", old_string="1|     a = 1", new_string="    a = 1"), ctx)


def test_nearest_lines_finds_a_near_miss_in_a_3000_line_file():
    text = "".join(
        f"def handler_{i}(request, user_{i}):\n    value = compute({i}, request.size * {i % 7})\n"
        f"    return respond(value + {i})\n\n"
        for i in range(750)
    )
    assert len(text.splitlines()) == 3000
    lines = text.splitlines()
    wanted = lines[2001:2021]  # from handler_500's body (line 2002) to handler_505's def
    wanted[0] = wanted[0].replace("request.size", "request.length")  # the model's typos
    wanted[8] = wanted[8].replace("compute", "calc")
    assert wanted != lines[2001:2021]
    started = time.perf_counter()
    shown = nearest_lines(text, "\n".join(wanted))
    print(f"nearest_lines on 3000 lines, 20-line old_string: {time.perf_counter() - started:.3f} s")
    assert "is at lines 2002-2021" in shown and "(100% similar)" not in shown
    assert " 2021| def handler_505(request, user_505):" in shown


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


# ---------------------------------------------------------------------------------------------- paging, diffs, writes


@pytest.mark.parametrize(
    ("data", "offset", "limit", "expected"),
    [
        (b"a\nb", 1, 5, "1| a\n2| b"),  # no final newline: the last line still counts
        (b"a\r\nb\r\n", 1, 5, "1| a\n2| b"),  # CRLF shown without the \r
        (b"a\nb\nc\n", 2, 1, "2| b\n(3 lines in all; more from offset=3)"),
        (b"a\nb\nc\n", 3, 9, "3| c"),
        (b"", 1, 5, "(empty file)"),
        (b"a\x0cb\n", 1, 5, "1| a\x0cb"),  # a form feed is not a line break, as for grep and editors
    ],
)
async def test_read_file_pages_lines_as_editors_count_them(ctx, data, offset, limit, expected):
    (ctx.workspace.root / "f.txt").write_bytes(data)
    result = await ReadFile().run(ReadArgs(path="f.txt", offset=offset, limit=limit), ctx)
    assert result.output == expected


async def test_a_first_line_over_the_read_cap_is_shown_cut_not_skipped_forever(ctx):
    (ctx.workspace.root / "one.txt").write_bytes(b"y" * 400_000 + b"\nnext\n")
    result = await ReadFile().run(ReadArgs(path="one.txt"), ctx)
    first, *rest = result.output.splitlines()
    assert first.startswith("1| yyyy") and first.endswith("... (line cut: 400001 bytes in all)")
    assert rest == ["2| next"]


async def test_nearest_lines_and_grep_number_lines_as_read_file_does(ctx, monkeypatch):
    monkeypatch.setenv("PATH", str(ctx.workspace.root / "no-bin"))  # the Python grep
    put(ctx, "f.py", "a = 1\x0c\r\nb = 2\r\nc = 3\r\ntarget = 4\r\n")
    listing = (await ReadFile().run(ReadArgs(path="f.py"), ctx)).output
    assert "4| target = 4" in listing
    assert (await Grep().run(GrepArgs(pattern="target"), ctx)).output == "f.py:4:target = 4"
    with pytest.raises(ToolError, match=r"(?s)is at lines 4-4:.*    4\| target = 4"):
        await EditFile().run(EditArgs(path="f.py", old_string="targett = 4", new_string="x"), ctx)


@pytest.mark.parametrize(
    "change",
    [
        lambda lines: lines.__setitem__(2500, "changed\n"),
        lambda lines: lines.__setitem__(0, "first\n"),
        lambda lines: lines.append("appended\n"),
        lambda lines: (lines.__setitem__(10, "ten\n"), lines.__delitem__(4000), lines.insert(4500, "new\n")),
    ],
    ids=["middle", "first line", "end", "three places"],
)
def test_short_diff_of_a_big_file_equals_difflib_s_whole_diff(change):
    before = [f"line {i}\n" for i in range(5000)]
    after = list(before)
    change(after)
    whole = "".join(difflib.unified_diff(before, after, "a/f", "b/f", n=2))
    assert short_diff("".join(before), "".join(after), "f", max_lines=1000) == whole
