"""Files the model should not be able to damage: CRLF, no final newline, other encodings, binary, huge
files, symlink loops, files changed behind the model's back, and writes killed half-way (issue 13, item 3).

Every test works on real files in a tmp dir; what a tool must not change is compared byte for byte.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from agent.protocols.edit_blocks.parser import parse_answer, to_tool_calls
from tools.base import ToolContext, ToolError, ToolRegistry
from tools.files import (
    EditArgs,
    EditFile,
    MultiEdit,
    MultiEditArgs,
    ReadArgs,
    ReadFile,
    WriteArgs,
    WriteFile,
)
from tools.search import Grep, GrepArgs, ListArgs, ListFiles
from tools.shown import mark_shown_whole

REPO = Path(__file__).resolve().parents[2]


def put(ctx: ToolContext, rel: str, data: bytes) -> Path:
    path = ctx.workspace.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def shown(ctx: ToolContext, path: Path) -> Path:
    """As if the model had read all of `path`: write_file replaces only files it was shown whole."""
    mark_shown_whole(ctx.state, path)
    return path


def edit(path: str, old: str, new: str, replace_all: bool = False) -> EditArgs:
    return EditArgs(path=path, old_string=old, new_string=new, replace_all=replace_all)


def multi(path: str, *pairs: tuple[str, str]) -> MultiEditArgs:
    return MultiEditArgs(path=path, edits=[{"old_string": o, "new_string": n} for o, n in pairs])


def untouched(path: Path, data: bytes, before: os.stat_result) -> bool:
    now = path.stat()
    return path.read_bytes() == data and (now.st_mtime_ns, now.st_ino) == (before.st_mtime_ns, before.st_ino)


# ---------------------------------------------------------------------------------------------- CRLF

CRLF = b"def f():\r\n    a = 1\r\n    return a\r\n\r\ndef g():\r\n    return 2\r\n"


async def test_an_exact_multi_line_edit_of_a_crlf_file_matches_and_keeps_crlf(ctx):
    path = put(ctx, "w.py", CRLF)
    result = await EditFile().run(
        edit("w.py", "    a = 1\n    return a\n", "    a = 10\n    b = 2\n    return a + b\n"), ctx
    )
    assert path.read_bytes() == CRLF.replace(
        b"    a = 1\r\n    return a\r\n", b"    a = 10\r\n    b = 2\r\n    return a + b\r\n"
    )
    assert "matched" not in result.output  # an exact match, not a looser pass
    assert "\r" not in result.display["diff"]


async def test_a_mid_line_edit_with_new_lines_in_a_crlf_file_writes_crlf(ctx):
    path = put(ctx, "w.py", CRLF)
    await EditFile().run(edit("w.py", "return 2", "x = 2\n    return x"), ctx)
    data = path.read_bytes()
    assert data.endswith(b"def g():\r\n    x = 2\r\n    return x\r\n")
    assert data.count(b"\n") == data.count(b"\r\n")  # not one bare LF


async def test_an_old_string_copied_with_crlf_matches_a_crlf_file(ctx):
    path = put(ctx, "w.py", CRLF)
    await EditFile().run(edit("w.py", "def g():\r\n    return 2\r\n", "def g():\r\n    return 3\r\n"), ctx)
    assert path.read_bytes() == CRLF.replace(b"return 2", b"return 3")


async def test_multi_edit_keeps_crlf(ctx):
    path = put(ctx, "w.py", CRLF)
    await MultiEdit().run(multi("w.py", ("a = 1", "a = 5"), ("return 2", "y = 1\n    return y")), ctx)
    data = path.read_bytes()
    assert b"a = 5\r\n" in data and data.endswith(b"    y = 1\r\n    return y\r\n")
    assert data.count(b"\n") == data.count(b"\r\n")


async def test_write_file_over_a_crlf_file_keeps_crlf_and_says_so(ctx):
    path = shown(ctx, put(ctx, "w.txt", b"one\r\ntwo\r\n"))
    result = await WriteFile().run(WriteArgs(path="w.txt", content="one\ntwo\nthree\n"), ctx)
    assert path.read_bytes() == b"one\r\ntwo\r\nthree\r\n"
    assert "kept its CRLF line endings" in result.output
    assert result.display["diff"].splitlines()[-1] == "+three"


async def test_a_search_replace_block_on_a_crlf_file_keeps_crlf(ctx):
    path = put(ctx, "w.py", CRLF)
    answer = "w.py\n```python\n<<<<<<< SEARCH\ndef g():\n    return 2\n=======\ndef g():\n    return 20\n>>>>>>> REPLACE\n```\n"
    [call] = to_tool_calls(parse_answer(answer).actions)
    parsed = ToolRegistry([EditFile(), WriteFile()]).parse(call.name, call.arguments)
    result = await parsed.tool.run(parsed.args, ctx)
    assert result.ok and path.read_bytes() == CRLF.replace(b"return 2", b"return 20")


async def test_a_file_with_mixed_line_endings_keeps_each_line_s_own(ctx):
    mixed = b"a = 1\r\nb = 2\nc = 3\r\n"
    path = put(ctx, "m.py", mixed)
    await EditFile().run(edit("m.py", "b = 2", "b = 4"), ctx)
    assert path.read_bytes() == b"a = 1\r\nb = 4\nc = 3\r\n"


# ---------------------------------------------------------------------------------------------- no final newline


async def test_an_edit_at_the_end_of_a_file_without_a_final_newline_adds_none(ctx):
    path = put(ctx, "n.py", b"x = 1\ny = 2")
    await EditFile().run(edit("n.py", "y = 2", "y = 3\nz = 4\n"), ctx)
    assert path.read_bytes() == b"x = 1\ny = 3\nz = 4"


async def test_a_crlf_file_without_a_final_newline_keeps_both(ctx):
    path = put(ctx, "n.py", b"x = 1\r\ny = 2")
    await MultiEdit().run(multi("n.py", ("x = 1\n", "x = 0\nw = 9\n"), ("y = 2", "y = 3\n")), ctx)
    assert path.read_bytes() == b"x = 0\r\nw = 9\r\ny = 3"


async def test_write_file_over_a_file_without_a_final_newline_adds_none(ctx):
    path = shown(ctx, put(ctx, "n.txt", b"old"))
    result = await WriteFile().run(WriteArgs(path="n.txt", content="new\ntext\n"), ctx)
    assert path.read_bytes() == b"new\ntext" and "without a final newline" in result.output


async def test_a_file_that_had_a_final_newline_keeps_it(ctx):
    path = put(ctx, "n.py", b"x = 1\n")
    await EditFile().run(edit("n.py", "x = 1\n", "x = 2\n"), ctx)
    assert path.read_bytes() == b"x = 2\n"


# ---------------------------------------------------------------------------------------------- encodings, binary

LATIN1 = "# caf\u00e9 cr\u00e8me\nname = 'Ren\u00e9e'\nvalue = 1\n".encode("latin-1")


async def test_a_latin1_file_is_shown_as_such_and_never_rewritten_as_utf8(ctx):
    path = put(ctx, "legacy.py", LATIN1)
    before = path.stat()
    shown = await ReadFile().run(ReadArgs(path="legacy.py"), ctx)
    assert "1| # caf\ufffd cr\ufffdme" in shown.output and "Not UTF-8 text: line 1" in shown.output
    calls = [
        EditFile().run(edit("legacy.py", "value = 1", "value = 2"), ctx),
        MultiEdit().run(multi("legacy.py", ("value = 1", "value = 2")), ctx),
        WriteFile().run(WriteArgs(path="legacy.py", content="# caf\ufffd\nvalue = 2\n"), ctx),
    ]
    for call in calls:
        with pytest.raises(ToolError) as caught:
            await call
        said = str(caught.value)
        assert "legacy.py is not UTF-8 text (byte 0xE9 on line 1" in said
        assert "It is unchanged" in said and "iconv -f latin1 -t utf-8" in said
    assert untouched(path, LATIN1, before)


async def test_binary_files_are_refused_by_every_tool_that_writes(ctx):
    blob = bytes(range(256)) * 64
    path = put(ctx, "logo.png", blob)
    before = path.stat()
    with pytest.raises(ToolError, match=r"logo.png is a binary file \(16384 bytes\); it cannot be shown"):
        await ReadFile().run(ReadArgs(path="logo.png"), ctx)
    for call in (
        EditFile().run(edit("logo.png", "\x01\x02", "xx"), ctx),
        MultiEdit().run(multi("logo.png", ("\x01\x02", "xx")), ctx),
        WriteFile().run(WriteArgs(path="logo.png", content="text now"), ctx),
    ):
        with pytest.raises(ToolError, match=r"logo.png is a binary file \(16384 bytes\); it is unchanged"):
            await call
    assert untouched(path, blob, before)


async def test_a_utf8_bom_survives_an_edit(ctx):
    path = put(ctx, "bom.py", b"\xef\xbb\xbfx = 1\r\ny = 2\r\n")
    await EditFile().run(edit("bom.py", "y = 2", "y = 3"), ctx)
    assert path.read_bytes() == b"\xef\xbb\xbfx = 1\r\ny = 3\r\n"


async def test_a_lone_surrogate_in_new_text_is_refused_without_touching_the_file(ctx):
    path = put(ctx, "s.py", b"x = 1\n")
    before = path.stat()
    parsed = ToolRegistry([EditFile()]).parse(
        "edit_file", '{"path": "s.py", "old_string": "x = 1", "new_string": "x = \\"\\ud800\\""}'
    )
    with pytest.raises(ToolError, match="half of a UTF-16 surrogate pair"):
        await parsed.tool.run(parsed.args, ctx)
    assert untouched(path, b"x = 1\n", before)


async def test_a_fifo_is_refused_at_once_instead_of_blocking_a_read(ctx):
    fifo = ctx.workspace.root / "pipe"
    os.mkfifo(fifo)
    try:
        with pytest.raises(ToolError, match="not a regular file"):
            await asyncio.wait_for(ReadFile().run(ReadArgs(path="pipe"), ctx), 10)
    except TimeoutError:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # lets the blocked reader go, then fail
        pytest.fail("read_file blocked on a FIFO")
    with pytest.raises(ToolError, match="not a regular file"):
        await asyncio.wait_for(WriteFile().run(WriteArgs(path="pipe", content="x"), ctx), 10)
    assert fifo.is_fifo()


# ---------------------------------------------------------------------------------------------- a 50 MB file


def big_file(path: Path, lines: int) -> None:
    with open(path, "wb") as f:
        for start in range(0, lines, 10_000):
            f.write(
                b"".join(b"line %08d %s\n" % (i, b"x" * 40) for i in range(start, min(lines, start + 10_000)))
            )


async def test_a_50_mb_file_is_paged_without_loading_it(ctx):
    path = ctx.workspace.root / "big.log"
    big_file(path, 1_000_000)  # 1,000,000 lines of 55 bytes: 55 MB
    assert path.stat().st_size > 50_000_000
    tracemalloc.start()
    try:
        first = await ReadFile().run(ReadArgs(path="big.log", limit=3), ctx)
        last = await ReadFile().run(ReadArgs(path="big.log", offset=999_999, limit=5), ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"peak traced memory paging a {path.stat().st_size / 1e6:.0f} MB file: {peak / 1e6:.2f} MB")
    assert peak < 8_000_000  # the file is 55 MB; one chunk is 1 MB
    assert first.output.splitlines() == [
        f"1| line 00000000 {'x' * 40}",
        f"2| line 00000001 {'x' * 40}",
        f"3| line 00000002 {'x' * 40}",
        "(1000000 lines in all; more from offset=4)",
    ]
    assert last.output.splitlines() == [
        f" 999999| line 00999998 {'x' * 40}",
        f"1000000| line 00999999 {'x' * 40}",
    ]
    with pytest.raises(ToolError, match="has 1000000 lines; offset 1000001 is past the end"):
        await ReadFile().run(ReadArgs(path="big.log", offset=1_000_001), ctx)


async def test_a_50_mb_file_on_one_line_is_shown_cut(ctx):
    path = ctx.workspace.root / "min.js"
    with open(path, "wb") as f:
        for _ in range(50):
            f.write(b"var a=1;" * 131072)  # 1 MB a time, no newline anywhere
    tracemalloc.start()
    try:
        result = await ReadFile().run(ReadArgs(path="min.js"), ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000
    assert result.output.startswith("1| var a=1;var a=1;")
    assert result.output.endswith(f"... (line cut: {50 * 1024 * 1024} bytes in all)")
    assert len(result.output) < 20_000


async def test_an_edit_of_a_file_too_big_to_load_is_refused_with_the_way_out(ctx):
    path = ctx.workspace.root / "big.log"
    big_file(path, 320_000)  # 17.6 MB: over the 16 MiB an edit loads
    before = path.stat()
    with pytest.raises(ToolError, match=r"more than edit_file loads .* Change it with bash \(sed -i"):
        await EditFile().run(edit("big.log", "line 00000001", "line one"), ctx)
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    # Nobody can have read it whole, so it is not replaced whole either (the guard of unseen code)...
    with pytest.raises(ToolError, match=r"big.log already exists .* you have not been shown all of it"):
        await WriteFile().run(WriteArgs(path="big.log", content="short now\n"), ctx)
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    # ...unless the model was shown it all (a bash command can print it): then it is, without a diff.
    shown(ctx, path)
    replaced = await WriteFile().run(WriteArgs(path="big.log", content="short now\n"), ctx)
    assert replaced.output.endswith("The old content was too big to diff.")
    assert path.read_bytes() == b"short now\n"
    blob = ctx.workspace.root / "big.bin"
    blob.write_bytes(b"\0" * 17_000_000)
    with pytest.raises(ToolError, match=r"big.bin is a binary file \(17000000 bytes\); it is unchanged"):
        await WriteFile().run(WriteArgs(path="big.bin", content="text\n"), ctx)
    assert blob.stat().st_size == 17_000_000


# ---------------------------------------------------------------------------------------------- symlink loops


@pytest.fixture
def loops(ctx: ToolContext) -> Path:
    root = ctx.workspace.root
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def target():\n    pass\n")
    os.symlink("self", root / "self")  # self -> self
    os.symlink("b", root / "a")  # a -> b -> a
    os.symlink("a", root / "b")
    os.symlink("..", root / "src" / "up")  # a folder loop: src/up/src/up/...
    return root


@pytest.mark.parametrize("git", [False, True], ids=["plain folder", "git repo"])
async def test_a_symlink_loop_is_reported_by_read_list_and_grep_without_hanging(ctx, loops, git, monkeypatch):
    if git:
        subprocess.run(["git", "init", "-q"], cwd=loops, check=True)
    else:
        monkeypatch.setenv("PATH", str(loops / "no-such-bin"))  # no rg: the Python search, which lists loops
    for name, chain in (("self", "self -> self"), ("a", "a -> b -> a"), ("self/x.py", "self -> self")):
        with pytest.raises(ToolError) as caught:
            await asyncio.wait_for(ReadFile().run(ReadArgs(path=name), ctx), 10)
        assert f"'{name}' goes through a symbolic link loop ({chain}), so it names no file" in str(
            caught.value
        )
    listed = await asyncio.wait_for(ListFiles().run(ListArgs(), ctx), 10)
    assert listed.output.splitlines()[0] == "src/app.py"
    assert "left out, leading to no file: a (a symlink loop), b (a symlink loop), self (a symlink loop)" in (
        listed.output
    )
    found = await asyncio.wait_for(Grep().run(GrepArgs(pattern="def target"), ctx), 10)
    assert found.output.splitlines()[0] == "src/app.py:1:def target():"
    if not git:
        assert "left out, leading to no file: a (a symlink loop)" in found.output
    with pytest.raises(ToolError, match="symbolic link loop"):
        await asyncio.wait_for(Grep().run(GrepArgs(pattern="x", path="a"), ctx), 10)


async def test_writes_through_a_symlink_loop_are_refused_and_the_links_stay(ctx, loops):
    for call in (
        WriteFile().run(WriteArgs(path="self", content="x"), ctx),
        EditFile().run(edit("a", "x", "y"), ctx),
        MultiEdit().run(multi("b", ("x", "y")), ctx),
    ):
        with pytest.raises(ToolError, match="symbolic link loop"):
            await asyncio.wait_for(call, 10)
    assert os.readlink(loops / "self") == "self" and os.readlink(loops / "a") == "b"


# ---------------------------------------------------------------------------------------------- changed on disk


async def test_a_file_changed_after_the_model_read_it_is_not_edited(ctx):
    path = put(ctx, "c.py", b"x = 1\ny = 2\n")
    await ReadFile().run(ReadArgs(path="c.py"), ctx)
    time.sleep(0.01)
    path.write_bytes(b"x = 1\ny = 2\nz = 3  # the user's line\n")  # someone else's change
    for call in (
        EditFile().run(edit("c.py", "y = 2", "y = 20"), ctx),
        MultiEdit().run(multi("c.py", ("y = 2", "y = 20")), ctx),
        WriteFile().run(WriteArgs(path="c.py", content="x = 1\ny = 20\n"), ctx),
    ):
        with pytest.raises(ToolError) as caught:
            await call
        said = str(caught.value)
        assert (
            "c.py changed on disk since you last read it" in said and "read it again with read_file" in said
        )
    assert path.read_bytes() == b"x = 1\ny = 2\nz = 3  # the user's line\n"
    await ReadFile().run(ReadArgs(path="c.py"), ctx)  # read again: the edit is made
    await EditFile().run(edit("c.py", "y = 2", "y = 20"), ctx)
    assert path.read_bytes() == b"x = 1\ny = 20\nz = 3  # the user's line\n"


async def test_a_same_size_change_and_a_save_by_rename_are_detected(ctx):
    path = put(ctx, "c.py", b"x = 1\n")
    await ReadFile().run(ReadArgs(path="c.py"), ctx)
    time.sleep(0.01)
    path.write_bytes(b"x = 2\n")  # same size, newer mtime
    with pytest.raises(ToolError, match="changed on disk"):
        await EditFile().run(edit("c.py", "x = 1", "x = 3"), ctx)
    await ReadFile().run(ReadArgs(path="c.py"), ctx)
    stamp = path.stat()
    replacement = path.with_name("c.py.new")
    replacement.write_bytes(b"x = 9\n")
    os.utime(replacement, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same size and mtime, new inode
    os.replace(replacement, path)
    with pytest.raises(ToolError, match="changed on disk"):
        await EditFile().run(edit("c.py", "x = 9", "x = 3"), ctx)


async def test_the_tools_own_edits_do_not_count_as_changes_on_disk(ctx):
    path = put(ctx, "c.py", b"a = 1\nb = 2\n")
    await ReadFile().run(ReadArgs(path="c.py"), ctx)
    await EditFile().run(edit("c.py", "a = 1", "a = 10"), ctx)
    await MultiEdit().run(multi("c.py", ("b = 2", "b = 20")), ctx)
    await WriteFile().run(WriteArgs(path="c.py", content="a = 10\nb = 20\nc = 30\n"), ctx)
    await EditFile().run(edit("c.py", "c = 30", "c = 3"), ctx)
    assert path.read_bytes() == b"a = 10\nb = 20\nc = 3\n"


async def test_a_file_never_read_is_edited_without_a_stamp(ctx):
    """Blocks mode has no read_file: its edits must not be refused for want of a read."""
    path = put(ctx, "c.py", b"a = 1\n")
    await EditFile().run(edit("c.py", "a = 1", "a = 2"), ctx)
    path.write_bytes(b"a = 2\nb = 3\n")
    await EditFile().run(edit("c.py", "b = 3", "b = 4"), ctx)
    assert path.read_bytes() == b"a = 2\nb = 4\n"


# ---------------------------------------------------------------------------------------------- atomic writes

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from tools.base import ToolContext
    from tools.files import WriteArgs, WriteFile
    from tools.shown import mark_shown_whole
    from tools.workspace import Workspace

    root, content = Path(sys.argv[2]), Path(sys.argv[3]).read_text()
    ctx = ToolContext(Workspace(root))
    mark_shown_whole(ctx.state, root / "data.txt")  # as if read: only a file seen whole is rewritten
    print("ready", flush=True)
    while True:
        asyncio.run(WriteFile().run(WriteArgs(path="data.txt", content=content), ctx))
    """
)


@pytest.mark.slow
def test_a_writer_killed_at_random_points_leaves_the_old_file_or_the_new_one(ctx, tmp_path):
    root = ctx.workspace.root
    old = "".join(f"old line {i:07d}\n" for i in range(400_000))  # 7.2 MB
    new = "".join(f"new line {i:07d} and more\n" for i in range(400_000))  # 9.6 MB
    (tmp_path / "new.txt").write_text(new)
    target = root / "data.txt"
    target.write_text(old)
    target.chmod(0o640)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = random.Random(13)
    outcomes = {"old": 0, "new": 0}
    for _ in range(12):
        target.write_text(old)
        proc = subprocess.Popen(
            [sys.executable, str(script), str(REPO), str(root), str(tmp_path / "new.txt")],
            stdout=subprocess.PIPE,
        )
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.25))  # somewhere inside a write, or between two
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        data = target.read_bytes()
        assert data in (old.encode(), new.encode()), f"a mix of {len(data)} bytes after a kill"
        outcomes["old" if data == old.encode() else "new"] += 1
        assert target.stat().st_mode & 0o777 == 0o640
    print(f"after 12 kills: {outcomes}")
    assert sum(outcomes.values()) == 12
    # temp files of the killed writers are cleared by the next write to the file
    shown(ctx, target)
    asyncio.run(WriteFile().run(WriteArgs(path="data.txt", content="final\n"), ctx))
    assert sorted(p.name for p in root.iterdir()) == ["data.txt"]
    assert target.read_text() == "final\n" and target.stat().st_mode & 0o777 == 0o640


async def test_a_new_file_gets_the_umask_mode_not_the_temp_file_s(ctx):
    mask = os.umask(0o022)
    try:
        await WriteFile().run(WriteArgs(path="new.py", content="x = 1\n"), ctx)
    finally:
        os.umask(mask)
    assert (ctx.workspace.root / "new.py").stat().st_mode & 0o777 == 0o644


async def test_a_temp_file_of_a_live_writer_is_left_alone(ctx):
    live = ctx.workspace.root / f".data.txt.{os.getppid()}.abcd1234.tmp"
    live.write_text("someone else's write in progress")
    await WriteFile().run(WriteArgs(path="data.txt", content="x\n"), ctx)
    assert live.exists()


def test_kill_test_writer_writes_through_the_tool(tmp_path):
    """The writer the kill test uses really writes (else the kill test would prove nothing)."""
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "new.txt").write_text("written by the tool\n")
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(REPO), str(root), str(tmp_path / "new.txt")], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 20
        while not (root / "data.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert (root / "data.txt").read_text() == "written by the tool\n"
