"""Edits fast and off the event loop, and multi_edit, all or nothing (issue 13, item 4).

Speed is measured in examples/bench_edits.py (docs/benchmarks.md); here the nearest lines must be the
right ones, with a bound of seconds that only the old quadratic scan could break, and the event loop
must keep ticking while a tool works.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import threading
import time

import pytest

from agent.events import ToolFinished
from agent.session.build_agent import default_tools
from tests.core.test_loop import Run, call, git_repo
from tests.scripted_server import ScriptedServer
from tools.base import ToolContext, ToolError, ToolRegistry
from tools.edit_matching import nearest_lines
from tools.files import EditArgs, EditFile, MultiEdit, MultiEditArgs
from tools.search import Grep, GrepArgs


def module(functions: int) -> str:
    """Python with many near-identical functions: the hard case for finding the nearest lines."""
    return "".join(
        f"def handler_{i}(request, user_{i}):\n"
        f"    value = compute({i}, request.size * {i % 7})\n"
        f"    return respond(value + {i})\n\n"
        for i in range(functions)
    )


def multi(path: str, *edits: tuple[str, str] | tuple[str, str, bool]) -> MultiEditArgs:
    return MultiEditArgs(
        path=path,
        edits=[
            {"old_string": e[0], "new_string": e[1], "replace_all": e[2] if len(e) > 2 else False}
            for e in edits
        ],
    )


# ---------------------------------------------------------------------------------------------- nearest lines


async def test_a_failed_edit_on_a_10000_line_file_shows_the_right_lines_in_seconds_not_minutes(ctx):
    text = module(2500)
    path = ctx.workspace.root / "handlers.py"
    path.write_text(text)
    lines = text.splitlines()
    assert len(lines) == 10_000
    wanted = lines[7001:7021]  # line 7002 (handler_1750's body) to 7021 (handler_1755's def)
    wanted[0] = wanted[0].replace("request.size", "request.length")  # the model's typos
    wanted[8] = wanted[8].replace("compute", "calc")
    started = time.perf_counter()
    with pytest.raises(ToolError) as caught:
        await EditFile().run(EditArgs(path="handlers.py", old_string="\n".join(wanted), new_string="x"), ctx)
    took = time.perf_counter() - started
    print(f"failed 20-line edit on 10,000 lines: {took * 1000:.0f} ms")
    said = str(caught.value)
    assert "old_string was not found in handlers.py; the file is unchanged." in said
    assert "is at lines 7002-7021:" in said and "(100% similar)" not in said
    assert " 7002|     value = compute(1750, request.size * 0)" in said
    assert " 7021| def handler_1755(request, user_1755):" in said
    assert path.read_text() == text
    assert took < 5  # a sanity bound: the difflib scan took 14 s on 3,000 lines


def test_a_window_with_a_typo_on_every_line_is_found():
    text = module(2500)
    lines = text.splitlines()
    wanted = [line.replace("request", "req").replace("value", "val") for line in lines[4001:4013]]
    shown = nearest_lines(text, "\n".join(wanted))
    assert "is at lines 4002-4013:" in shown


def test_a_long_old_string_is_found_among_likely_windows_when_comparing_all_would_be_slow():
    text = module(2500)
    lines = text.splitlines()
    wanted = lines[5000:5159]  # 159 lines: comparing every window would be 10,000 x 5 KB squared
    wanted = [line.replace("respond", "reply") if n % 10 == 0 else line for n, line in enumerate(wanted)]
    wanted[80] = "    # a comment the model imagined"
    started = time.perf_counter()
    shown = nearest_lines(text, "\n".join(wanted))
    print(f"159-line old_string on 10,000 lines: {(time.perf_counter() - started) * 1000:.0f} ms")
    assert "is at lines 5001-5159:" in shown


def test_text_that_is_nowhere_still_gets_an_answer():
    shown = nearest_lines(module(100), "completely unrelated\nzzz qqq")
    assert shown.startswith("The closest text (") and "is at lines" in shown
    assert nearest_lines("", "x").startswith("The closest text (0% similar) is at lines 1-1")


# ---------------------------------------------------------------------------------------------- off the event loop


async def beats_during(work) -> tuple[float, float, int]:
    """(seconds the work took, the longest gap between heartbeats meanwhile, heartbeats)."""
    ticks: list[float] = []

    async def heartbeat():
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.05)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.12)
    started = time.perf_counter()
    with contextlib.suppress(ToolError):
        await work
    ended = time.perf_counter()
    await asyncio.sleep(0.06)
    beat.cancel()
    during = [started] + [t for t in ticks if started < t < ended] + [ended]
    return ended - started, max(b - a for a, b in itertools.pairwise(during)), len(during) - 2


@pytest.fixture
def slow_files(ctx: ToolContext, monkeypatch) -> ToolContext:
    """A 9.6 MB module (a failed edit searches it all) and a 55 MB log (grep reads it all)."""
    (ctx.workspace.root / "big.py").write_text(module(80_000))
    with open(ctx.workspace.root / "big.log", "wb") as f:
        for start in range(0, 1_000_000, 10_000):
            f.write(b"".join(b"line %08d %s\n" % (i, b"x" * 40) for i in range(start, start + 10_000)))
    monkeypatch.setenv("PATH", str(ctx.workspace.root / "no-bin"))  # no rg: grep searches in Python
    return ctx


def slow_calls(ctx: ToolContext) -> dict:
    lines = module(80_000).splitlines()
    typo = "\n".join(line.replace("request", "req") for line in lines[250_001:250_031])
    return {
        "failed edit": lambda: EditFile().run(EditArgs(path="big.py", old_string=typo, new_string="x"), ctx),
        "failed multi_edit": lambda: MultiEdit().run(
            multi("big.py", ("def handler_7(", "def h7("), (typo, "")), ctx
        ),
        "grep": lambda: Grep().run(GrepArgs(pattern=r"matches\s+nothing|x{41}", ignore_case=True), ctx),
    }


@pytest.mark.slow
@pytest.mark.parametrize("which", ["failed edit", "failed multi_edit", "grep"])
async def test_the_event_loop_keeps_ticking_while_a_tool_works(slow_files, which):
    took, gap, beats = await beats_during(slow_calls(slow_files)[which]())
    print(f"{which}: {took:.2f} s of work, the longest heartbeat gap {gap * 1000:.0f} ms, {beats} beats")
    assert took > 0.25, "the work is too quick to show whether it blocks the loop"
    # A tool on the event loop stops the heartbeat for all of `took`: no beat, one gap as long as the work.
    # A thread shares the GIL, and a loaded 2-core CI machine stretches the 50 ms beat, so what is asserted
    # is the difference between those two shapes, not a beat rate (CI once saw 10 beats where 10.3 were asked).
    assert gap < took / 2, f"the loop stood still for {gap:.2f} s of {took:.2f} s"
    assert beats >= max(3, took / 0.05 / 6), f"{beats} heartbeats in {took:.2f} s"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["failed edit", "grep"])
async def test_esc_cancels_a_slow_tool_at_once(slow_files, which):
    work = slow_calls(slow_files)[which]
    started = time.perf_counter()
    with contextlib.suppress(ToolError):
        await work()
    took = time.perf_counter() - started
    task = asyncio.create_task(work())
    await asyncio.sleep(0.05)
    cancelled_at = time.perf_counter()
    task.cancel()  # what Esc does to the agent's worker
    with pytest.raises(asyncio.CancelledError):
        await task
    answered = time.perf_counter() - cancelled_at
    print(f"{which}: {took:.2f} s of work, cancelled in {answered * 1000:.0f} ms")
    assert took > 0.25 and answered < took / 2


@pytest.mark.slow
def test_a_cancelled_grep_stops_reading_in_the_middle_of_a_big_file(slow_files):
    """Esc returns at once (above), but the thread behind it must stop too, not read 55 MB to the end."""
    regex = re.compile(r"matches\s+nothing|x{41}", re.IGNORECASE)
    args = GrepArgs(pattern=regex.pattern)
    base = slow_files.workspace.root / "big.log"
    started = time.perf_counter()
    Grep._python(regex, args, base, slow_files, threading.Event())
    whole = time.perf_counter() - started
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    started = time.perf_counter()
    Grep._python(regex, args, base, slow_files, stop)
    stopped = time.perf_counter() - started
    print(f"grep of 55 MB: {whole:.2f} s whole, {stopped * 1000:.0f} ms when stopped after 50 ms")
    assert whole > 0.25 and stopped < whole / 2


# ---------------------------------------------------------------------------------------------- multi_edit

SOURCE = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n"


async def test_multi_edit_makes_every_edit_in_order(ctx):
    path = ctx.workspace.root / "shapes.py"
    path.write_text(SOURCE)
    result = await MultiEdit().run(
        multi(
            "shapes.py",
            ("def area(w, h):", "def area(width, height):"),
            ("return w * h", "return width * height"),
            ("def area(width, height):", "def area(width: float, height: float) -> float:"),  # sees edit 1
            ("def ", "async def ", True),
        ),
        ctx,
    )
    assert path.read_text() == (
        "async def area(width: float, height: float) -> float:\n    return width * height\n\n\n"
        "async def perimeter(w, h):\n    return 2 * (w + h)\n"
    )
    assert result.output.startswith("Edited shapes.py: 4 edits, 5 replacements.\n")
    diff = result.display["diff"]
    assert "-def area(w, h):" in diff and "+async def area(width: float, height: float) -> float:" in diff
    assert "+async def perimeter(w, h):" in diff and result.display["path"] == "shapes.py"


async def test_multi_edit_with_one_failing_edit_writes_nothing_and_names_it(ctx):
    path = ctx.workspace.root / "shapes.py"
    path.write_text(SOURCE)
    before = path.stat()
    with pytest.raises(ToolError) as caught:
        await MultiEdit().run(
            multi(
                "shapes.py",
                ("def area(w, h):", "def area(width, height):"),
                ("return w * h", "return width * height"),
                ("return 2 * (w + h)\n    # perimeter", "return 2 * w + 2 * h"),
            ),
            ctx,
        )
    said = str(caught.value)
    assert said.startswith(
        "Edit 3 of 3 failed, so none of them was made and shapes.py is unchanged (line numbers as the "
        "file reads after edits 1-2): old_string was not found in shapes.py"
    )
    assert "is at lines 5-6:" in said and "    6|     return 2 * (w + h)" in said
    assert said.endswith("Fix edit 3 and send all 3 again.")
    assert path.read_text() == SOURCE and path.stat().st_mtime_ns == before.st_mtime_ns


async def test_multi_edit_refuses_an_ambiguous_or_empty_edit_by_number(ctx):
    path = ctx.workspace.root / "shapes.py"
    path.write_text(SOURCE)
    with pytest.raises(
        ToolError, match=r"^Edit 2 of 2 failed.*old_string matches 2 places in shapes.py \(lines 1, 5\)"
    ):
        await MultiEdit().run(multi("shapes.py", ("return w * h", "return w*h"), ("(w, h)", "(a, b)")), ctx)
    with pytest.raises(ToolError, match=r"^Edit 1 of 2 failed.*old_string and new_string are the same"):
        await MultiEdit().run(multi("shapes.py", ("w", "w"), ("h", "H")), ctx)
    assert path.read_text() == SOURCE


async def test_multi_edit_uses_the_same_forgiving_passes_as_edit_file(ctx):
    path = ctx.workspace.root / "shapes.py"
    path.write_text(SOURCE)
    result = await MultiEdit().run(
        multi(
            "shapes.py",
            ("        return w * h\n", "        return w * h  # m2\n"),
            ("6| return 2 * (w + h)", "6| return 0"),
        ),
        ctx,
    )
    assert "    return w * h  # m2\n" in path.read_text() and path.read_text().endswith("    return 0\n")
    assert "edit 1 matched ignoring indentation" in result.output


def test_multi_edit_is_a_default_tool_with_a_schema_the_model_can_fill():
    registry = ToolRegistry(default_tools(with_git=False))
    assert registry.names() == [
        "bash", "read_file", "edit_file", "multi_edit", "write_file", "rename_symbol", "list_files", "grep",
    ]  # fmt: skip
    parsed = registry.parse("multi_edit", '{"path": "a.py", "edits": []}')
    assert (
        parsed.error
        and "'edits'" in parsed.error
        and "multi_edit(path: string, edits: array)" in parsed.error
    )
    schema = next(s for s in registry.schemas() if s["function"]["name"] == "multi_edit")["function"]
    assert schema["parameters"]["required"] == ["path", "edits"]
    item = schema["parameters"]["$defs"]["OneEdit"]
    assert item["required"] == ["old_string", "new_string"]


async def test_multi_edit_through_the_agent_loop_shows_its_diff(tmp_path):
    repo = git_repo(tmp_path / "proj")
    (repo / "shapes.py").write_text(SOURCE)
    edits = [
        {"old_string": "return w * h", "new_string": "return w * h * 1"},
        {"old_string": "return 2 * (w + h)", "new_string": "return 2 * w + 2 * h"},
    ]
    failing = [
        {"old_string": "return w * h", "new_string": "x"},
        {"old_string": "nowhere", "new_string": "y"},
    ]
    replies = [
        {"tool_calls": [call("multi_edit", path="shapes.py", edits=edits)]},
        {"tool_calls": [call("multi_edit", path="shapes.py", edits=failing)]},
        {"content": "done"},
    ]
    with ScriptedServer(replies) as server:
        run = Run(server, repo)
        outcome = await run("tidy the shapes")
    assert outcome.status == "completed"
    done, failed = run.of(ToolFinished)
    assert done.ok and done.name == "multi_edit" and "+    return 2 * w + 2 * h" in done.display["diff"]
    assert not failed.ok and failed.output.startswith("Error: Edit 2 of 2 failed, so none of them was made")
    assert (repo / "shapes.py").read_text() == SOURCE.replace("w * h", "w * h * 1").replace(
        "2 * (w + h)", "2 * w + 2 * h"
    )
    assert any(t["function"]["name"] == "multi_edit" for t in server.requests[0]["tools"])
