"""rename_symbol renames a top-level Python name as a word in the file defining it and the files using
it, through the edit tools' checks, and nowhere else."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.tools.test_dangling_uses import package
from tools.base import ToolContext
from tools.rename_symbol import RenameArgs, RenameSymbol
from tools.shown import READ_STAMPS, SHOWN_WHOLE, file_stamp

USERS = ["pkg/__init__.py", "pkg/encoding.py", "pkg/signer.py", "tests/test_encoding.py"]


@pytest.mark.slow  # the package's tests run in a subprocess
async def test_a_name_is_renamed_in_its_module_and_every_user_and_the_tests_still_pass(ctx: ToolContext):
    package(ctx)
    root = ctx.workspace.root
    result = await RenameSymbol().run(
        RenameArgs(path="pkg/encoding.py", old="want_bytes", new="to_bytes"), ctx
    )
    assert (
        result.ok and result.output == f"Renamed `want_bytes` to `to_bytes`: 6 lines in {', '.join(USERS)}."
    )
    assert result.display["renamed"] == USERS and "+def to_bytes(s):" in result.display["diff"]
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                           cwd=root, capture_output=True, text=True)  # fmt: skip
    assert tests.returncode == 0, tests.stdout
    assert "want_bytes" not in "".join((root / p).read_text() for p in USERS)
    assert (root / "other.py").read_text().count("want_bytes") == 2  # its own: left alone
    assert (root / "local.py").read_text().count("want_bytes") == 2
    assert (root / "README.md").read_text() == "Call `want_bytes` to get bytes.\n"  # not Python


async def test_only_the_defining_files_stamps_are_kept_so_the_others_are_read_again(ctx: ToolContext):
    package(ctx)
    root = ctx.workspace.root
    signer, encoding = root / "pkg/signer.py", root / "pkg/encoding.py"
    ctx.state.setdefault(READ_STAMPS, {})[str(signer)] = file_stamp(signer.stat())
    ctx.state[SHOWN_WHOLE][str(signer)] = file_stamp(signer.stat())
    await RenameSymbol().run(RenameArgs(path="pkg/encoding.py", old="want_bytes", new="to_bytes"), ctx)
    assert ctx.state[SHOWN_WHOLE][str(encoding)] == file_stamp(encoding.stat())
    assert ctx.state[SHOWN_WHOLE][str(signer)] != file_stamp(signer.stat())
    assert ctx.state[READ_STAMPS][str(signer)] != file_stamp(signer.stat())


async def test_a_symlinked_user_and_what_it_points_to_are_left_alone(ctx: ToolContext, tmp_path):
    package(ctx)
    outside = tmp_path / "elsewhere.py"
    outside.write_text("from pkg.encoding import want_bytes\n")
    (ctx.workspace.root / "linked.py").symlink_to(outside)
    result = await RenameSymbol().run(
        RenameArgs(path="pkg/encoding.py", old="want_bytes", new="to_bytes"), ctx
    )
    assert "linked.py" not in result.display["renamed"] and "pkg/signer.py" in result.display["renamed"]
    assert "Left as they were: linked.py (a symbolic link)." in result.output
    assert (ctx.workspace.root / "linked.py").is_symlink()
    assert outside.read_text() == "from pkg.encoding import want_bytes\n"


async def test_a_crlf_user_keeps_its_line_endings(ctx: ToolContext):
    package(ctx)
    signer = ctx.workspace.root / "pkg/signer.py"
    signer.write_bytes(b"from .encoding import want_bytes\r\n\r\nX = want_bytes('a')\r\n")
    await RenameSymbol().run(RenameArgs(path="pkg/encoding.py", old="want_bytes", new="to_bytes"), ctx)
    assert signer.read_bytes() == b"from .encoding import to_bytes\r\n\r\nX = to_bytes('a')\r\n"


async def test_a_name_nothing_uses_a_file_outside_and_not_python_are_refused(ctx: ToolContext, tmp_path):
    package(ctx)
    tool = RenameSymbol()
    for args, said in [
        (RenameArgs(path="pkg/encoding.py", old="nothing", new="something"), "Nothing uses `nothing`"),
        (RenameArgs(path="../elsewhere.py", old="a", new="b"), "outside the workspace"),
        (RenameArgs(path="README.md", old="want_bytes", new="to_bytes"), "is not a Python file"),
        (RenameArgs(path="pkg/encoding.py", old="want_bytes", new="want_bytes"), "already its name"),
    ]:
        with pytest.raises(Exception, match=said):
            await tool.run(args, ctx)
    assert "want_bytes" in (ctx.workspace.root / "pkg/signer.py").read_text()


def test_only_identifiers_are_names():
    with pytest.raises(ValueError):
        RenameArgs(path="a.py", old="a b", new="c")
    with pytest.raises(ValueError):
        RenameArgs(path="a.py", old="a", new="c; rm -rf /")
