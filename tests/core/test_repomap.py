"""Real repositories: what the model is shown of a big one, the guards against destroying code it has
not read, and finished work that counts (issue: the 130-file and 233-file repositories).

The repositories are real git repositories made here, shaped as the ones that broke: a library whose
`utils.py` has 1,100 lines beside a 17-line `tests/utils.py`, and 300 modules with an AGENTS.md.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from agent.core.repomap import named_files, outline, repository_view, text_files
from agent.events import ApprovalAnswer, ApprovalRequested, Notice, PermissionDecided
from agent.protocols.edit_blocks.prompt import partly_reminder
from tests.big_repo import generate
from tests.core.test_loop import Run, git_repo
from tests.frontends.test_headless import agent, task_file
from tests.scripted_server import ScriptedServer
from tools.outline import fence_for

FENCE = "```"


def last_said(request: dict) -> str:
    """The last user message of a request (an answer begun for the model may come after it)."""
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def answer(*parts: str) -> dict:
    return {"content": "\n".join(parts)}


def library(root: Path, functions: int = 140) -> Path:
    """A package like psf/requests: a long src/pkg/utils.py and a short tests/utils.py."""
    git_repo(root)
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    body = ['"""Utilities."""', "import os", ""]
    for i in range(functions):
        body += ["", f"def helper_{i}(value):", f'    """Helper number {i}."""', f"    total = value + {i}"]
        body += [
            f"    total = total * {i + 1}",
            "    if total > 1000:",
            "        return total - 1000",
            "    return total",
        ]
    (root / "src" / "pkg" / "utils.py").write_text("\n".join(body) + "\n")
    (root / "src" / "pkg" / "__init__.py").write_text("from .utils import helper_1\n")
    (root / "tests" / "utils.py").write_text(
        "import contextlib\n\n\ndef override_environ(**kwargs):\n    pass\n"
    )
    return root


# ---------------------------------------------------------------------------------------------- what is shown


def test_a_named_file_is_found_by_its_path_never_by_a_base_name_it_shares(tmp_path):
    root = library(tmp_path / "lib")
    files = text_files(root)
    assert [f.rel for f in named_files(files, "In src/pkg/utils.py, add a function.")] == ["src/pkg/utils.py"]
    assert [f.rel for f in named_files(files, "Fix pkg/utils.py please")] == ["src/pkg/utils.py"]
    assert named_files(files, "add a helper to utils.py") == []  # two files have that name: neither
    assert [f.rel for f in named_files(files, "look at __init__.py")] == ["src/pkg/__init__.py"]  # only one


def test_a_named_file_too_long_is_shown_as_its_outline_and_the_definitions_the_task_names(tmp_path):
    root = library(tmp_path / "lib")
    utils = (root / "src/pkg/utils.py").read_text()
    assert len(utils.splitlines()) > 1000
    task = "In src/pkg/utils.py, add a function `helper_sum` next to `helper_42` that adds two values."
    view = repository_view(root, task, 12_000, fence_for)
    assert "src/pkg/utils.py" not in view.whole  # not shown whole, so it may not be written whole
    assert "has 1,1" in view.text and "you cannot write it whole" in view.text
    start = next(d.start for d in outline("src/pkg/utils.py", utils) if d.name == "helper_42")
    assert f"{start:>6}  def helper_42(value)" in view.text  # the outline, with line numbers
    assert f"Lines {start}-{start + 6} of src/pkg/utils.py (helper_42):" in view.text
    assert '    """Helper number 42."""' in view.text  # that definition whole
    assert "return total - 1000\n    return total\n```" in view.text  # the file's last lines: an anchor
    assert "override_environ" in view.text  # the other utils.py is in the map, not shown as this one


def test_the_view_of_a_repository_of_300_modules_stays_within_its_budget(tmp_path):
    root = git_repo(tmp_path / "big")
    for i in range(300):
        folder = root / f"pkg{i % 12}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text(
            "".join(f"def f{i}_{j}(a, b):\n    return a\n\n" for j in range(30))
        )
    for budget in (3_000, 20_000, 60_000):
        view = repository_view(root, "rename f7_3 in pkg7/mod7.py to first", budget, fence_for)
        assert len(view.text) <= budget + 600, budget  # a few lines of explanation aside
        assert "pkg7/mod7.py" in view.text and "more files are not listed" in view.text


@pytest.mark.parametrize(
    "task",
    [
        None,  # the generated task: `orbit.billing.ledger.proration.prorate_amount(100, 10)` returns 33...
        "When a customer is billed for part of a period, the prorated amount owed for 10 of 30 days comes "
        "out as 33 instead of 33.33.",
    ],
    ids=["dotted-name", "words-only"],
)
def test_a_large_repository_is_searched_in_its_likeliest_files_and_the_rest_listed_by_path(tmp_path, task):
    """Past 2 MB of text, only the likeliest files are outlined and searched: the function the task
    means is still shown whole, first, and the files left unread are listed by path."""
    big = generate(tmp_path / "repo", files=400, commit=False)
    view = repository_view(big.root, task or big.task, 30_000, fence_for)
    assert len(view.text) <= 30_000 + 600
    assert "    share = amount * days // period_days" in view.text
    assert big.path in view.whole or view.definitions[big.path] == ["prorate_amount"]
    namesakes = [view.text.find(f"by whole {unit}s") for unit in ("day", "week")]
    if task is None:  # named with its module: its namesakes elsewhere are not it
        assert namesakes == [-1, -1]
    else:  # described: the namesakes may be meant too, but it shares the most words, so it comes first
        assert all(view.text.index("share = amount * days") < at for at in namesakes if at >= 0)
    assert "docs/" in view.text and "more files are not listed" in view.text


def test_a_small_repository_is_shown_whole_as_before(tmp_path):
    root = git_repo(tmp_path / "small")
    (root / "a.py").write_text("def a():\n    return 1\n")
    (root / "b.md").write_text("# B\n")
    view = repository_view(root, "change a", 10_000, fence_for)
    assert view.whole == ["a.py", "b.md"] and "a.py\n```\ndef a():" in view.text


def test_the_agents_own_folder_is_not_shown_its_check_is_to_pass_not_to_read(tmp_path):
    root = git_repo(tmp_path / "small")
    (root / "a.py").write_text("def a():\n    return 1\n")
    (root / ".agent").mkdir()
    (root / ".agent" / "config.toml").write_text("check = \"python3 -c 'assert a() == 2'\"\n")
    view = repository_view(root, "change a", 10_000, fence_for)
    assert view.whole == ["a.py"] and "assert a() == 2" not in view.text


def test_outlines_come_from_tree_sitter_for_each_language_even_with_a_syntax_error():
    assert [
        d.signature for d in outline("m.py", "class C(B):\n    def m(self, x):\n        pass\ndef f(:\n")
    ][:2] == [
        "class C(B)",
        "def m(self, x)",
    ]
    assert [
        d.name
        for d in outline("m.ts", "interface I { a: number }\nfunction f(a: number): string { return '' }\n")
    ] == ["I", "f"]
    assert [
        d.name for d in outline("m.go", "package m\nfunc F(a int) int { return a }\ntype S struct{}\n")
    ] == ["F", "S"]
    assert [d.name for d in outline("m.rs", "fn f() {}\nstruct S {}\nimpl S { fn m(&self) {} }\n")] == [
        "f",
        "S",
        "S",
        "m",
    ]
    assert outline("notes.txt", "def f(): pass") == []


async def test_the_first_request_fits_a_16k_context_in_a_repository_of_300_modules(tmp_path):
    """The 233-file repository was refused before its first turn: the map alone took 60,000 characters."""
    root = git_repo(tmp_path / "big")
    (root / "AGENTS.md").write_text("# Rules\n" + "Write tests for everything you change.\n" * 300)
    for i in range(300):
        folder = root / f"pkg{i % 12}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text(
            "".join(f"def f{i}_{j}(a, b):\n    return a\n\n" for j in range(40))
        )
    with ScriptedServer([answer("Nothing to do.")], n_ctx=16384) as server:
        run = Run(server, root, actions="blocks")
        outcome = await run("add a one-line docstring to the function f7_3 in pkg7/mod7.py")
        sent = json.dumps(server.requests[0]["messages"])
    assert outcome.status == "completed", outcome.error
    assert len(sent) / 4 < 16384  # the scripted server counts 4 characters a token, as its overflow does
    assert "def f7_3(a, b):" in sent


# ---------------------------------------------------------------------------------------------- no destructive writes


async def test_a_block_holding_only_a_line_of_the_outline_is_told_it_is_no_code(tmp_path):
    """The planted semver task: the 1.5B wrote the outline's first line as its fix, three times."""
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    copied = answer("path/to/utils.py", f"{FENCE}python", "def helper_0(value)", FENCE)
    with ScriptedServer([copied, answer("Done.")], n_ctx=8192) as server:
        run = Run(server, root, actions="blocks")
        await run("`pkg.utils.helper_3(2)` returns the wrong value.")
        told = server.requests[1]["messages"][-1]["content"]
    assert (root / "src/pkg/utils.py").read_text() == before
    assert "holds only `helper_0`, copied from the outline" in told and "Not written" not in told


async def test_a_whole_file_block_over_a_long_file_never_shown_is_refused_and_the_file_kept(tmp_path):
    """The requests case: shown tests/utils.py, the model wrote src/.../utils.py whole from it."""
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    destroy = answer(
        "src/pkg/utils.py", f"{FENCE}python", (root / "tests/utils.py").read_text().rstrip(), "",
        "def helper_sum(a, b):", "    return a + b", FENCE,
    )  # fmt: skip
    with ScriptedServer([destroy, answer("Done.")], n_ctx=8192) as server:
        run = Run(server, root, actions="blocks")
        await run("In src/pkg/utils.py, add a function helper_sum(a, b) that returns a + b.")
        told = server.requests[1]["messages"][-1]["content"]
    assert (root / "src/pkg/utils.py").read_text() == before  # not one line lost
    assert "Not written: src/pkg/utils.py already exists (1,1" in told
    assert "you have not been shown all of it" in told
    # ...and it is shown what it needs of the file, and how to write a new function into it.
    assert "     5  def helper_0(value)" in told and "a new one is added at its end" in told


async def test_an_answer_writing_a_file_never_shown_whole_is_stopped_at_its_first_line(tmp_path):
    """On a CPU the 1.5B spent minutes writing out a 700-line file whose write was then refused: the
    stream now ends at the block's first line of code, and the refusal reaches the model as before."""
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    rewrite = answer("I will rewrite it.", "", "src/pkg/utils.py", f"{FENCE}python", before.rstrip(), FENCE)
    with ScriptedServer([rewrite, answer("Done.")], n_ctx=8192) as server:
        run = Run(server, root, actions="blocks")
        await run("In src/pkg/utils.py, add a function helper_sum(a, b) that returns a + b.")
        kept = server.requests[1]["messages"][-2]["content"]
        told = server.requests[1]["messages"][-1]["content"]
    first_line = before.splitlines()[0]
    # What the history keeps is the answer up to that first line, with its fence closed.
    assert kept == f"I will rewrite it.\n\nsrc/pkg/utils.py\n{FENCE}python\n{first_line}\n{FENCE}\n"
    assert "you have not been shown all of it" in told and "the parts named, then its outline" in told
    assert (root / "src/pkg/utils.py").read_text() == before
    assert any("began writing src/pkg/utils.py whole" in n.message for n in run.of(Notice))


async def test_an_answer_writing_a_new_file_or_one_shown_whole_streams_to_its_end(tmp_path):
    root = git_repo(tmp_path / "r")
    (root / "small.py").write_text("x = 1\n")  # shown whole in the task message
    script = [
        answer(
            *["small.py", f"{FENCE}python", "x = 2", "y = 3", FENCE, ""],
            *["new.py", f"{FENCE}python", "a = 1", "b = 2", FENCE],
        ),
        answer("Done."),
    ]
    with ScriptedServer(script) as server:
        run = Run(server, root, actions="blocks")
        outcome = await run("Set x to 2 and add y = 3 in small.py; create new.py")
    assert outcome.status == "completed", outcome.error
    assert (root / "small.py").read_text() == "x = 2\ny = 3\n"
    assert (root / "new.py").read_text() == "a = 1\nb = 2\n"
    assert not [n for n in run.of(Notice) if "began writing" in n.message]


async def test_a_file_read_whole_with_cat_may_then_be_rewritten(tmp_path):
    root = git_repo(tmp_path / "r")
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(30)))
    (root / "filler.txt").write_text("filler\n" * 2000)  # the repository no longer fits: not all shown
    script = [
        answer("big.txt", f"{FENCE}text", "only this", FENCE),  # refused: never shown (the map lists it)
        answer(f"{FENCE}bash", "cat big.txt", FENCE),
        answer("big.txt", f"{FENCE}text", *(f"line {i}" for i in range(30)), "line 30", FENCE),
        answer("Done."),
    ]
    with ScriptedServer(script, n_ctx=4096) as server:
        await Run(server, root, actions="blocks")("Add line 30 at the end of the big text file")
        first = server.requests[1]["messages"][-1]["content"]
    assert "Not written: big.txt" in first
    assert (root / "big.txt").read_text().endswith("line 29\nline 30\n")


REWRITTEN = "".join(f"def keep_{i}():\n    return {i}\n\n\n" for i in range(20))


def read_then_write(content: str) -> list[dict]:
    """The model reads mod.py whole, then writes it whole as `content`, then says it is done."""
    return [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "mod.py"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "mod.py", "content": content}}]},
        {"content": "Done."},
    ]


async def test_a_rewrite_deleting_most_of_a_file_asks_even_in_full_auto(tmp_path):
    root = git_repo(tmp_path / "r")
    (root / "mod.py").write_text(REWRITTEN)
    asked: list[ApprovalRequested] = []

    async def approve(request: ApprovalRequested) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer("no")

    script = read_then_write("def keep_0():\n    return 0\n")
    with ScriptedServer(script) as server:
        run = Run(server, root, approval="full-auto", approve=approve)
        await run("tidy mod.py")
    assert len(asked) == 1 and asked[0].name == "write_file"
    assert "would delete 78 of its 80 lines" in asked[0].reason
    assert (root / "mod.py").read_text() == REWRITTEN


async def test_headless_refuses_a_rewrite_deleting_definitions_the_task_does_not_name(tmp_path):
    root = git_repo(tmp_path / "r")
    (root / "mod.py").write_text(REWRITTEN)
    kept = REWRITTEN.replace("def keep_7():\n    return 7\n\n\n", "")
    script = read_then_write(kept)
    with ScriptedServer(script) as server:
        run = Run(server, root, approval="full-auto", approve=None)  # nobody to ask: a headless run
        await run("make keep_3 return 33")
        told = server.requests[2]["messages"][-1]["content"]
    decided = run.of(PermissionDecided)[-1]
    assert decided.decision == "deny" and "definitions the task does not name: keep_7" in decided.reason
    assert "nobody can approve" in told and "SEARCH/REPLACE" in told
    assert (root / "mod.py").read_text() == REWRITTEN


async def test_a_rewrite_deleting_what_the_task_names_runs_in_full_auto(tmp_path):
    root = git_repo(tmp_path / "r")
    (root / "mod.py").write_text(REWRITTEN)
    renamed = REWRITTEN.replace("keep_7", "first")
    script = read_then_write(renamed)
    with ScriptedServer(script) as server:
        await Run(server, root, approval="full-auto", approve=None)("rename keep_7 to first")
    assert (root / "mod.py").read_text() == renamed


# ---------------------------------------------------------------------------------------------- finished work counts

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
CALC_CHECK = f"{sys.executable} -c 'from calc import add; assert add(2, 3) == 5'"


def calc_task(tmp_path: Path) -> tuple[Path, Path]:
    work = git_repo(tmp_path / "work")
    (work / "calc.py").write_text(BROKEN)
    task = task_file(tmp_path, "Fix add in calc.py.", approval="full-auto", check=CALC_CHECK, workdir="work",
                     max_turns=8, actions="blocks")  # fmt: skip
    return work, task


def test_a_fix_then_repeated_answers_still_passes_its_check_and_exits_0(tmp_path):
    """The held-out task: fixed on turn 1, then pathless blocks until the repeat guard stopped it."""
    work, task = calc_task(tmp_path)
    fix = answer("calc.py", f"{FENCE}python", FIXED.rstrip(), FENCE)
    usage = answer("You can use it like this:", f"{FENCE}python", "print(add(2, 3))", FENCE)
    with ScriptedServer([fix, usage, usage, usage, usage]) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        told = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    checks = [e for e in events if e["type"] == "check.result"]
    assert result.returncode == 0, result.stderr
    assert len(checks) == 1 and checks[0]["passed"]
    assert (work / "calc.py").read_text() == FIXED
    assert not any("check" in t and "failed" in t for t in told)  # never a check that did not run
    assert not any("output above" in t for t in told)


def test_a_fix_then_a_pathless_restatement_is_a_summary_and_the_check_runs(tmp_path):
    _, task = calc_task(tmp_path)
    fix = answer("calc.py", f"{FENCE}python", FIXED.rstrip(), FENCE)
    summary = answer("I fixed add; it now reads:", f"{FENCE}python", "    return a + b", FENCE)
    with ScriptedServer([fix, summary]) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        requests = len(server.requests)
    assert result.returncode == 0, result.stderr
    assert requests == 2  # the summary ended the task: no "not applied" round trip
    assert '"check.result"' in result.stdout


def test_the_end_of_a_run_lists_each_file_by_lines_added_and_deleted(tmp_path):
    work, task = calc_task(tmp_path)
    (work / "notes.txt").write_text("".join(f"note {i}\n" for i in range(40)))
    subprocess_commit(work)
    fix = answer(
        "calc.py", f"{FENCE}python", FIXED.rstrip(), FENCE, "", f"{FENCE}bash", "rm notes.txt", FENCE
    )
    with ScriptedServer([fix, answer("Fixed.")]) as server:
        result = agent("run", str(task), "--base-url", server.url)
    assert result.returncode == 0, result.stderr
    assert "changed 2 files (lines added, deleted):" in result.stderr
    assert "calc.py  +1 -1" in result.stderr
    assert "notes.txt  +0 -40   <- deleted more than it added" in result.stderr


def subprocess_commit(work: Path) -> None:
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=work, check=True)


@pytest.mark.parametrize("order", ["options-first", "options-last"])
def test_agent_new_takes_options_anywhere_among_its_arguments(tmp_path, order):
    args = ["-t", "python-cli", "--no-agent"]
    argv = ["new", "adder", *args, "A command that adds"] if order == "options-first" else [
        "new", "adder", "A command that adds", *args]  # fmt: skip
    result = agent(*argv, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "adder" / "AGENTS.md").is_file()


def test_a_long_named_file_shows_short_names_the_task_uses_and_the_helpers_they_call(tmp_path):
    """attrs' number validators: the task names `lt`; the bug is in the class `lt` returns."""
    root = git_repo(tmp_path / "v")
    filler = "".join(f"def other_{i}(x):\n    return x\n\n\n" for i in range(400))
    (root / "validators.py").write_text(
        "class _Number:\n    def __call__(self, value):\n        return value > self.bound\n\n\n"
        + filler
        + "def lt(val):\n    return _Number(val)\n"
    )
    view = repository_view(root, "`lt(10)` in validators.py refuses 5: fix it.", 6_000, fence_for)
    assert "of validators.py (lt):" in view.text
    assert "Lines 1-3 of validators.py (_Number):" in view.text and "return value > self.bound" in view.text
    assert "(other_1)" not in view.text


def test_a_named_source_gets_its_room_before_a_named_test_shown_whole(tmp_path):
    """click's range bounds: test_types.py whole, first as the smaller, left no room for the class
    with the bug in types.py. The code the task changes comes first; the tests are its evidence."""
    root = git_repo(tmp_path / "c")
    filler = "".join(f"def other_{i}(x):\n    return x\n\n\n" for i in range(400))
    helper = "class _RangeBase:\n" + "".join(
        f"    def m{i}(self, v):\n        return v < {i}\n\n" for i in range(60)
    )
    (root / "types.py").write_text(helper + "\n\n" + filler + "class IntRange(_RangeBase):\n    pass\n")
    (root / "tests").mkdir()
    (root / "tests/test_types.py").write_text(
        "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(150))
    )
    task = "`IntRange(0, 5)` refuses 0. tests/test_types.py shows it. Fix the bug in types.py."
    view = repository_view(root, task, 9_000, fence_for)
    assert "of types.py (_RangeBase):" in view.text and "return v < 59" in view.text
    assert view.partly[0] == "types.py" and "tests/test_types.py" not in view.whole
    assert view.text.index("types.py has") < view.text.index("tests/test_types.py")


async def test_a_block_for_a_tail_of_a_long_files_path_means_that_file_and_is_refused(tmp_path):
    """The attrs run: `path/to/attrs/validators.py` was written as a new file beside the real one."""
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    block = answer(
        "path/to/pkg/utils.py", f"{FENCE}python", "def helper_sum(a, b):", "    return a + b", FENCE
    )
    with ScriptedServer([block, answer("Done.")], n_ctx=8192) as server:
        await Run(server, root, actions="blocks")("In src/pkg/utils.py, add a function helper_sum(a, b).")
        task = server.requests[0]["messages"][-1]["content"]
        told = server.requests[1]["messages"][-1]["content"]
    assert task.endswith(
        "Act now: to change src/pkg/utils.py, write its path alone on a line, then a fenced block holding "
        "only the functions or classes you change, each complete: as shown above, with your change in it. "
        "They replace the ones in the file, a new one is added at its end, and the rest of the file stays as "
        "it is. To create a new file, write its path, then the complete file in a fenced block. Nothing changes unless you write the "
        "blocks."
    )
    # The tail of the path meant the long file; a block of one new function is added at its end.
    assert "Changed src/pkg/utils.py: added `helper_sum` at the end" in told
    after = (root / "src/pkg/utils.py").read_text()
    assert after == before + "\n\ndef helper_sum(a, b):\n    return a + b\n" and not (root / "pkg").exists()


# humanize-intcomma on 2 cores: `import math` above the fixed function was taken for the file written
# whole and refused; the stream judges such a block at its first definition.
@pytest.mark.parametrize("imports", [[], ["import os", "", ""]], ids=["alone", "below-imports"])
async def test_a_long_files_shown_function_written_anew_replaces_it_and_nothing_else(tmp_path, imports):
    """attrs' validators, 2026-12-06: every attempt wrote the class with the bug as a whole file, and
    each write was refused. A block of only the definitions shown (after any imports) is taken as their
    new version."""
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    fixed = ["def helper_7(value):", '    """Helper number 7."""', "    return os.sep * value"]
    block = answer("src/pkg/utils.py", f"{FENCE}python", *imports, *fixed, FENCE)
    with ScriptedServer([block, answer("Done.")], n_ctx=8192) as server:
        run = Run(server, root, actions="blocks")
        outcome = await run("In src/pkg/utils.py, `helper_7` must return os.sep times its value.")
        told = server.requests[1]["messages"][-1]["content"]
    assert outcome.status == "completed", outcome.error
    assert "Changed src/pkg/utils.py: replaced `helper_7` where it stood" in told
    old = before.split("def helper_7(value):")[1].split("\n\ndef helper_8")[0]
    assert (root / "src/pkg/utils.py").read_text() == before.replace(
        "def helper_7(value):" + old, "\n".join(fixed)
    )
    assert not [n for n in run.of(Notice) if "began writing" in n.message]  # the stream was not cut


async def test_a_block_writing_a_definition_never_shown_is_stopped_at_its_first_line(tmp_path):
    """click's `Command` (310 lines) was too long to show: a block writing it anew is refused whatever
    follows, so it stops at once, as a whole-file block does."""
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    block = answer("src/pkg/utils.py", f"{FENCE}python", "def helper_99(value):", "    return value", FENCE)
    with ScriptedServer([block, answer("Done.")], n_ctx=8192) as server:
        run = Run(server, root, actions="blocks")
        await run("In src/pkg/utils.py, `helper_7` must return its value times 7.")
        kept = server.requests[1]["messages"][-2]["content"]
    assert kept == f"src/pkg/utils.py\n{FENCE}python\ndef helper_99(value):\n{FENCE}\n"
    assert any("began writing src/pkg/utils.py whole" in n.message for n in run.of(Notice))
    assert (root / "src/pkg/utils.py").read_text() == before


async def test_a_shown_definition_arriving_several_lines_a_chunk_is_judged_by_its_first_line(tmp_path):
    """A server may send several tokens a chunk (an answer begun for the model comes whole): the stream
    stop judged the last line that had arrived, a docstring, stopped the answer there, and the function
    cut after its docstring replaced the whole one."""
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    fixed = [
        "def helper_7(value):",
        '    """Helper number 7."""',
        "    total = value * 7",
        "    return total",
    ]
    head = f"src/pkg/utils.py\n{FENCE}python\n{fixed[0]}\n{fixed[1]}\n"  # the first chunk, to the docstring
    reply = {**answer("src/pkg/utils.py", f"{FENCE}python", *fixed, FENCE), "chunk_size": len(head)}
    with ScriptedServer([reply, answer("Done.")], n_ctx=8192) as server:
        run = Run(server, root, actions="blocks")
        outcome = await run("In src/pkg/utils.py, `helper_7` must return its value times 7.")
    assert outcome.status == "completed", outcome.error
    assert not [n for n in run.of(Notice) if "began writing" in n.message]
    old = before.split("def helper_7(value):")[1].split("\n\ndef helper_8")[0]
    assert (root / "src/pkg/utils.py").read_text() == before.replace(
        "def helper_7(value):" + old, "\n".join(fixed)
    )


async def test_a_refused_block_arriving_several_lines_a_chunk_keeps_only_its_first_line(tmp_path):
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    lines = ["# the helpers, fixed", "def helper_7(value):", '    """Helper number 7."""']
    head = f"src/pkg/utils.py\n{FENCE}python\n" + "".join(f"{line}\n" for line in lines)
    reply = {
        **answer("src/pkg/utils.py", f"{FENCE}python", *lines, "    return 7", FENCE),
        "chunk_size": len(head),
    }
    with ScriptedServer([reply, answer("Done.")], n_ctx=8192) as server:
        run = Run(server, root, actions="blocks")
        await run("In src/pkg/utils.py, `helper_7` must return its value times 7.")
        kept = server.requests[1]["messages"][-2]["content"]
    assert kept == f"src/pkg/utils.py\n{FENCE}python\n# the helpers, fixed\n{FENCE}\n"
    assert (root / "src/pkg/utils.py").read_text() == before


async def test_a_block_of_definitions_that_runs_on_is_stopped_and_refused(tmp_path):
    root = library(tmp_path / "lib")
    before = (root / "src/pkg/utils.py").read_text()
    pick = random.Random(7).choice  # varied lines: a loop of one line would be cut as a repetition
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "lambda", "rho"]
    steps = [f"    {pick(words)}_{pick(words)} = {pick(words)}(value, {pick(words)})" for _ in range(300)]
    long = ["def helper_7(value):", *steps, "    return value"]
    with ScriptedServer([answer("src/pkg/utils.py", f"{FENCE}python", *long, FENCE), answer("Done.")],
                        n_ctx=16384) as server:  # fmt: skip
        run = Run(server, root, actions="blocks")
        await run("In src/pkg/utils.py, `helper_7` must return its value times 7.")
        kept = server.requests[1]["messages"][-2]["content"]
    assert kept.count("\n") < 160 and steps[-1] not in kept
    assert any("over 150 lines of definitions" in n.message for n in run.of(Notice))
    assert (root / "src/pkg/utils.py").read_text() == before


async def test_headless_refuses_a_small_readme_written_as_its_new_section_alone(tmp_path):
    # readme-usage, 2026-12-06: asked to add a Usage section to an 11-line README, the 1.5B wrote the
    # section alone; under 20 lines, no guard caught it, and the title and the licence were gone.
    root = git_repo(tmp_path / "r")
    readme = "# todo\n\nA tiny to-do list.\n\n## Install\n\nNothing to install.\n\n## License\n\nMIT\n"
    (root / "README.md").write_text(readme)
    section = "## Usage\n\n```sh\npython3 todo.py list\n```\n"
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": section}}]},
        {"content": "Done."},
    ]
    with ScriptedServer(script) as server:
        run = Run(server, root, approval="full-auto", approve=None)
        await run("Add a `## Usage` section to README.md, right after the `## Install` section.")
        told = server.requests[2]["messages"][-1]["content"]
    decided = run.of(PermissionDecided)[-1]
    assert decided.decision == "deny"
    assert "would delete sections the task does not name: License, todo" in decided.reason
    assert "SEARCH/REPLACE" in told and "with them kept" in told
    assert (root / "README.md").read_text() == readme


async def test_a_rename_may_rename_the_definitions_built_on_the_renamed_name(tmp_path):
    # rename-function, 2026-12-06 (run G): test_calc_total_applies_the_discount became
    # test_order_total_applies_the_discount, and the guard refused it as a deletion.
    root = git_repo(tmp_path / "r")
    tests = "from pricing import calc_total\n\n\ndef test_calc_total_adds():\n    assert calc_total([1, 2]) == 3\n"
    (root / "mod.py").write_text(tests)
    renamed = tests.replace("calc_total", "order_total")
    with ScriptedServer(read_then_write(renamed)) as server:
        await Run(server, root, approval="full-auto", approve=None)(
            "Rename the function `calc_total` in `pricing.py` to `order_total`, and update every place that uses it."
        )
    assert (root / "mod.py").read_text() == renamed


# ---------------------------------------------------------------------------------------------- found, not named


def test_a_task_naming_a_function_and_no_path_is_shown_that_functions_body(tmp_path):
    root = library(tmp_path / "lib")
    task = "`pkg.helper_42(5)` returns 235 but it should return the total minus 1000 when it is over 1000."
    view = repository_view(root, task, 12_000, fence_for)
    start = next(
        d.start
        for d in outline("src/pkg/utils.py", (root / "src/pkg/utils.py").read_text())
        if d.name == "helper_42"
    )
    assert (
        f"Lines {start}-{start + 6} of src/pkg/utils.py (helper_42: the task names `pkg.helper_42`)"
        in view.text
    )
    assert '    """Helper number 42."""' in view.text
    assert view.partly == ["src/pkg/utils.py"] and view.definitions["src/pkg/utils.py"] == ["helper_42"]
    assert view.text.index("helper_42: the task names") < view.text.index("The other files")
    # The code before the outline: a small model copies the first code it sees (semver's outline
    # line, written back three times as the fix of Version.compare).
    assert view.text.index("helper_42: the task names") < view.text.index("The outline of src/pkg/utils.py")


def test_a_short_file_holding_the_code_found_is_shown_whole_with_why(tmp_path):
    root = library(tmp_path / "lib")
    (root / "src/pkg/sizes.py").write_text(
        'def parse_size(text):\n    """Read "1 KiB" as bytes."""\n    return int(text.split()[0]) * 1000\n'
    )
    view = repository_view(root, 'parse_size("1 KiB") returns 1000, it should be 1024', 12_000, fence_for)
    assert "src/pkg/sizes.py (`parse_size`: the task names `parse_size`" in view.text
    assert "src/pkg/sizes.py" in view.whole  # so it may be written whole


def with_classes(root: Path, short_methods: int, long_methods: int) -> Path:
    """library() with src/pkg/caches.py: a short class `Ring` and a long class `Ledger`, both keeping
    their state in `self._slots`, set up in `__init__`."""
    lines = ['"""Caches."""', ""]
    for name, methods in (("Ring", short_methods), ("Ledger", long_methods)):
        lines += [
            "",
            f"class {name}:",
            "    def __init__(self, size):",
            "        self._slots = [None] * size",
            "",
        ]
        for i in range(methods):
            lines += [
                f"    def put_{i}(self, key, value):",
                f"        self._slots[key % {i + 2}] = value",
                "",
            ]
    lines += [f"\ndef unrelated_{i}(x):\n    return x + {i}\n" for i in range(200)]
    (root / "src/pkg/caches.py").write_text("\n".join(lines) + "\n")
    return root


def test_a_found_method_comes_with_its_short_class_whole_and_a_long_classs_init(tmp_path):
    # A method reads and writes its class's state, which its own lines do not show: shown
    # LRUCache.__setitem__ alone, the 1.5B wrote it around attributes LRUCache never had.
    root = with_classes(library(tmp_path / "lib"), short_methods=3, long_methods=40)
    view = repository_view(
        root, "`pkg.caches.Ring.put_1(3, 'x')` stores 'x' in the wrong slot.", 12_000, fence_for
    )
    assert view.definitions["src/pkg/caches.py"][:2] == ["Ring.put_1", "Ring"]
    method = view.text.index("(Ring.put_1: the task names `pkg.caches.Ring.put_1`)")
    ring = view.text.index(
        "(Ring: `put_1` belongs to it: its state and its other members):\n```\nclass Ring:\n"
    )
    assert method < ring < view.text.index("The outline of src/pkg/caches.py")
    assert "def put_2(self, key, value):" in view.text[ring:]

    view = repository_view(
        root, "`pkg.caches.Ledger.put_30(3, 'x')` stores 'x' in the wrong slot.", 12_000, fence_for
    )
    assert view.definitions["src/pkg/caches.py"][:2] == ["Ledger.put_30", "Ledger.__init__"]
    assert "(Ledger.__init__: where `Ledger` sets up the state `put_30` uses):" in view.text
    assert "self._slots[key % 31] = value" not in view.text  # put_29's body: the outline lists the rest


def pathless_library(tmp_path: Path, functions: int = 140) -> tuple[Path, Path]:
    """library() with a bug planted in helper_42, and a task that names the function, never its file."""
    work = library(tmp_path / "work", functions)
    utils = work / "src/pkg/utils.py"
    utils.write_text(utils.read_text().replace("    total = value + 42\n", "    total = value - 42\n"))
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=work, check=True)
    check = f"cd src && {sys.executable} -c 'from pkg.utils import helper_42; assert helper_42(1) == 849'"
    task = task_file(tmp_path, "`pkg.utils.helper_42(1)` returns -41 * 43, it should return 849.", approval="full-auto",
                     check=check, workdir="work", max_turns=6, actions="blocks", fresh_starts=0)  # fmt: skip
    return work, task


# pathless_library's helper_42 with its planted bug fixed: what a model's right answer writes.
FIXED_HELPER_42 = (
    'def helper_42(value):\n    """Helper number 42."""\n    total = value + 42\n    total = total * 43\n'
    "    if total > 1000:\n        return total - 1000\n    return total"
)


def test_headless_a_pathless_task_shows_the_function_and_its_rewrite_alone_fixes_it(tmp_path):
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    with ScriptedServer(
        [answer("src/pkg/utils.py", f"{FENCE}python", FIXED_HELPER_42, FENCE), answer("Done.")], n_ctx=8192
    ) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        first = server.requests[0]["messages"][-1]["content"]
    assert "(helper_42: the task names `pkg.utils.helper_42`)" in first and "    total = value - 42" in first
    # ...and the reminder, last, names it: told only the format, the 1.5B wrote the format's example.
    assert first.rstrip().endswith(partly_reminder(["src/pkg/utils.py"], ("src/pkg/utils.py", "helper_42")))
    assert "the code found first is `helper_42` in src/pkg/utils.py" in first
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert (work / "src/pkg/utils.py").read_text() == before.replace(
        "value - 42", "value + 42"
    )  # nothing else


def test_headless_after_the_formats_example_a_file_shown_in_part_is_asked_for_by_its_functions(tmp_path):
    """On the GPU the 1.5B's first answer to 11 of 33 planted tasks was the system prompt's example. The
    answer back asked for "the complete new file", which a file shown in part may not get: it is asked
    for by its functions, as the task message did."""
    _, task = pathless_library(tmp_path)
    example = answer("path/to/example.py", f"{FENCE}python", "def example():", "    return 42", FENCE)
    with ScriptedServer([example, answer("Done.")], n_ctx=8192) as server:
        agent("run", str(task), "--base-url", server.url, "--json")
        told = last_said(server.requests[1])
    assert "instructions' example of the format" in told
    assert partly_reminder(["src/pkg/utils.py"], ("src/pkg/utils.py", "helper_42")) in told
    assert "the complete new file" not in told


@pytest.mark.parametrize("begins_again", [False, True])
def test_headless_after_the_formats_example_alone_the_next_answer_begins_as_the_function_found(
    tmp_path, begins_again
):
    """8 of 91 stuck lines of one GPU run ended on the format's example written three times. The next
    answer is begun for the model (an assistant message it continues): the function found first's path
    line, fence and signature. The 1.5B, so begun, wrote the whole block again from its path line."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    example = answer("path/to/example.py", f"{FENCE}python", "def example():", "    return 42", FENCE)
    opening = f"src/pkg/utils.py\n{FENCE}python\ndef helper_42(value):\n"
    rest = FIXED_HELPER_42.split("\n", 1)[1] + f"\n{FENCE}\n"
    with ScriptedServer(
        [example, answer(opening + rest if begins_again else rest), answer("Done.")], n_ctx=8192
    ) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        second = server.requests[1]
    assert second["messages"][-1] == {"role": "assistant", "content": opening}
    assert second["continue_final_message"] is True
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert (work / "src/pkg/utils.py").read_text() == before.replace("value - 42", "value + 42")


def test_headless_the_formats_example_code_under_a_real_path_is_not_written(tmp_path):
    """cachetools-lrucache-setitem on 2 cores: `def example(): return 42` under the task's real path,
    added at the end of src/cachetools/__init__.py. It is the format copied: nothing is written."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    example = answer("src/pkg/utils.py", f"{FENCE}python", "def example():", "    return 42", FENCE)
    with ScriptedServer([example, answer("Done.")], n_ctx=8192) as server:
        agent("run", str(task), "--base-url", server.url, "--json")
        told = last_said(server.requests[1])
    assert "the block holding `def example()` is the instructions' example" in told
    assert (work / "src/pkg/utils.py").read_text() == before
    # ...and shown again the code found first, last before the ask: the 1.5B copies the last code it
    # was shown, and shown only the format again it wrote the example again (boltons-bits-getitem).
    code = told.index("`helper_42` in src/pkg/utils.py now reads:\n```\ndef helper_42(value):")
    assert code < told.index("Fix what failed.") and "    total = value - 42" in told[code:]


def test_headless_the_tasks_function_under_the_examples_path_goes_to_its_file(tmp_path):
    """tabulate-2 on the GPU: `path/to/example.py` holding `def tabulate(...)`, the function the task
    message showed from tabulate/__init__.py, was dropped as the example. It goes to that file."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    with ScriptedServer(
        [answer("path/to/example.py", f"{FENCE}python", FIXED_HELPER_42, FENCE), answer("Done.")], n_ctx=8192
    ) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert (work / "src/pkg/utils.py").read_text() == before.replace("value - 42", "value + 42")
    assert not (work / "example.py").exists() and not (work / "path").exists()


def test_headless_the_tasks_function_written_without_a_path_goes_to_the_file_shown_in_part(tmp_path):
    """cachetools-lrucache-setitem on 2 cores: "Here's the updated `LRUCache.__setitem__` method:" and
    the method, with no path. For a file shown in part, its functions are the format asked for."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    prose = answer(
        "The bug is the sign. Here's the updated `helper_42` function:",
        "",
        f"{FENCE}python",
        FIXED_HELPER_42,
        FENCE,
    )
    with ScriptedServer([prose, answer("Done.")], n_ctx=8192) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert (work / "src/pkg/utils.py").read_text() == before.replace("value - 42", "value + 42")


def test_headless_the_fix_given_again_beside_the_example_once_it_landed_is_done(tmp_path):
    """boltons-bits-getitem on 2 cores: the example under the real path, then the fixed method with no
    path, which was applied; then the same answer again, refused as "exactly as they are" and asked
    for once more. Given again once it landed, the change is the work told: the check runs."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    both = answer("src/pkg/utils.py", f"{FENCE}python", "def example():", "    return 42", FENCE, "",
                  "Fixed:", "", f"{FENCE}python", FIXED_HELPER_42, FENCE)  # fmt: skip
    with ScriptedServer([both, both, answer("Done.")], n_ctx=8192) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        asked = len(server.requests)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert asked == 2  # the second answer ended the task; the check passed
    assert (work / "src/pkg/utils.py").read_text() == before.replace("value - 42", "value + 42")


def test_headless_a_method_under_its_name_as_the_path_line_goes_to_its_file(tmp_path):
    """cachetools-lfucache-setitem on 2 cores: `LFUCache.__setitem__:` above the fence, and a file of
    that name was created. It is the name of the method the task message showed: its file."""
    work = git_repo(tmp_path / "work")
    filler = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(300))
    store = "class Store:\n    def total(self):\n        return self.a - self.b\n\n\n"
    (work / "store.py").write_text(store + filler)
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=work, check=True)
    task = task_file(tmp_path, "`store.Store.total()` gives a minus b, it should give their sum.", approval="full-auto",
                     workdir="work", max_turns=3, actions="blocks", fresh_starts=0)  # fmt: skip
    labelled = answer(
        "Store.total:", f"{FENCE}python", "def total(self):", "    return self.a + self.b", FENCE
    )
    with ScriptedServer([labelled, answer("Done.")], n_ctx=8192) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert (work / "store.py").read_text() == store.replace("a - self.b", "a + self.b") + filler
    assert not list(work.glob("Store*"))


def test_headless_a_pathless_block_of_the_tasks_class_goes_to_its_file_and_keeps_its_other_methods(tmp_path):
    """cachetools-lrucache-peek on the H100: "I will add the `peek` method to the `LRUCache` class" and
    `class LRUCache(Cache):` holding `peek` alone, with no path. No file defines `peek`, so it was
    refused for its missing path until the line was stopped. The class the task message found first
    decides its file, and the block adds its method to the class."""
    work = git_repo(tmp_path / "work")
    filler = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(300))
    store = "class Store:\n    def __init__(self):\n        self.a, self.b = 2, 3\n\n    def total(self):\n        return self.a + self.b\n\n\n"
    (work / "store.py").write_text(store + filler)
    (work / "shop.py").write_text("class Shop:\n    def __init__(self):\n        self.items = []\n" + filler)
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=work, check=True)
    check = f"{sys.executable} -c 'from store import Store; assert Store().double() == 10 and Store().total() == 5'"
    task = task_file(tmp_path, "Please add a `double()` method to `store.Store`: twice its `total()`.", check=check,
                     approval="full-auto", workdir="work", max_turns=3, actions="blocks", fresh_starts=0)  # fmt: skip
    pathless = answer(
        "I will add the `double` method to the `Store` class:", "", f"{FENCE}python", "class Store:",
        "    def double(self):", "        return 2 * self.total()", FENCE,
    )  # fmt: skip
    with ScriptedServer([pathless, answer("Done.")], n_ctx=8192) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        told = server.requests[1]["messages"][-1]["content"] if len(server.requests) > 1 else ""
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr + told
    double = "    def double(self):\n        return 2 * self.total()\n"
    assert (work / "store.py").read_text() == store.replace(
        "self.b\n\n\n", "self.b\n\n" + double + "\n\n"
    ) + filler
    assert (
        (work / "shop.py")
        .read_text()
        .startswith("class Shop:\n    def __init__(self):\n        self.items = []\n")
    )


def test_headless_a_fix_given_with_its_path_then_again_without_is_written_once(tmp_path):
    """boltons-onetoone-init on 2 cores: the fixed method under its path, then "The whole method is now
    as follows:" and the same block without one. Taken as a second write, it was refused as changing
    nothing, the answer was reported as a failure after its fix had landed, and the line went on."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    both = answer("src/pkg/utils.py", f"{FENCE}python", FIXED_HELPER_42, FENCE, "",
                  "The whole function is now as follows:", "", f"{FENCE}python", FIXED_HELPER_42, FENCE)  # fmt: skip
    with ScriptedServer([both, answer("Done.")], n_ctx=8192) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        told = server.requests[1]["messages"][-1]["content"]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert "Failed" not in told and "Not applied" not in told and told.startswith("Wrote src/pkg/utils.py")
    assert (work / "src/pkg/utils.py").read_text() == before.replace("value - 42", "value + 42")


def test_headless_code_without_a_path_for_a_file_shown_in_part_is_asked_for_by_its_functions(tmp_path):
    """A block of a file's function and a new one, with no path, where neither is the function the task
    is about: not guessed at, but asked for with its path and in the form a file shown in part takes."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    sketch = answer("Like this:", "", f"{FENCE}python", "def helper_41(value):", "    return fix(value)", "",
                    "", "def fix(value):", "    return value + 42", FENCE)  # fmt: skip
    with ScriptedServer([sketch, answer("Done.")], n_ctx=8192) as server:
        agent("run", str(task), "--base-url", server.url, "--json")
        told = server.requests[1]["messages"][-1]["content"]
    said = "looks like a change to src/pkg/utils.py: write `src/pkg/utils.py` alone on a line, then the functions"
    assert said in told and "the whole new file" not in told
    assert (work / "src/pkg/utils.py").read_text() == before


def test_headless_a_pathless_block_holding_the_tasks_function_and_a_new_helper_goes_to_its_file(tmp_path):
    """inflection-parameterize on the H100: `parameterize` with its fix calling a new helper, written
    below it, with no path; no file defines the helper, so it was refused for its path three times.
    The function the task message found first decides the file, and the helper is added at its end."""
    work, task = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    fixed = FIXED_HELPER_42.replace("total = value + 42", "total = plus_42(value)")
    block = answer("Like this:", "", f"{FENCE}python", fixed, "", "", "def plus_42(value):",
                   "    return value + 42", FENCE)  # fmt: skip
    with ScriptedServer([block, answer("Done.")], n_ctx=8192) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    helper = "\n\n\ndef plus_42(value):\n    return value + 42\n"
    assert (work / "src/pkg/utils.py").read_text() == before.replace(
        "total = value - 42", "total = plus_42(value)"
    ).rstrip("\n") + helper


def test_headless_a_blind_whole_write_is_answered_with_the_file_and_the_next_answer_lands(tmp_path):
    """Blocks protocol: the model writes a short file it was never shown; it is shown it, then fixes it."""
    work = git_repo(tmp_path / "work")
    (work / "pkg").mkdir()
    for i in range(60):  # too much to show whole, and nothing in the task points at calc.py
        (work / "pkg" / f"mod{i}.py").write_text(
            "".join(f"def f{j}(x):\n    return x * {j}\n\n\n" for j in range(30))
        )
    (work / "pkg/calc.py").write_text("def total(a, b):\n    return a - b\n\n\ndef keep():\n    return 1\n")
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=work, check=True)
    check = f"{sys.executable} -c 'from pkg.calc import total, keep; assert total(2, 3) == 5 and keep() == 1'"
    task = task_file(tmp_path, "Adding two numbers gives their difference.", approval="full-auto", check=check,
                     workdir="work", max_turns=6, actions="blocks", fresh_starts=0)  # fmt: skip
    blind = answer("pkg/calc.py", f"{FENCE}python", "def total(a, b):", "    return a + b", FENCE)
    whole = answer(
        "pkg/calc.py",
        f"{FENCE}python",
        "def total(a, b):\n    return a + b\n\n\ndef keep():\n    return 1",
        FENCE,
    )
    with ScriptedServer([blind, whole, answer("Done.")]) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        told = server.requests[1]["messages"][-1]["content"]
    assert "Here it is whole, as it is now" in told and "def keep():\n    return 1" in told
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert (
        work / "pkg/calc.py"
    ).read_text() == "def total(a, b):\n    return a + b\n\n\ndef keep():\n    return 1\n"


def test_headless_a_write_file_call_of_an_unread_file_is_answered_with_its_content(tmp_path):
    """Tool-calls protocol: the same, through write_file."""
    work = git_repo(tmp_path / "work")
    (work / "calc.py").write_text("def total(a, b):\n    return a - b\n\n\ndef keep():\n    return 1\n")
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=work, check=True)
    check = f"{sys.executable} -c 'from calc import total, keep; assert total(2, 3) == 5 and keep() == 1'"
    task = task_file(tmp_path, "Adding two numbers gives their difference.", approval="full-auto", check=check,
                     workdir="work", max_turns=6, fresh_starts=0)  # fmt: skip
    fixed = "def total(a, b):\n    return a + b\n\n\ndef keep():\n    return 1\n"
    script = [
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"path": "calc.py", "content": "def total(a, b):\n    return a + b\n"},
                }
            ]
        },
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "calc.py", "content": fixed}}]},
        {"content": "Fixed total."},
    ]
    with ScriptedServer(script) as server:
        result = agent("run", str(task), "--base-url", server.url, "--json")
        told = [m for m in server.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Here it is whole, as it is now" in told and "def keep():\n    return 1" in told
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert (work / "calc.py").read_text() == fixed
