"""The planted-bug tasks (examples/planted/) and their generator, examples/plant_bugs.py.

The generator is tested offline on a tiny package built here: what each mutation kind changes, that a
task's text names the function and no path, and that the same seed gives the same tasks. Every
committed task is proved as the real-repository ones are (tests/test_real_tasks.py): its check fails on
the prepared starting files and passes with solution.patch; and tests made trivial do not pass it, since
the check restores the package's tests as they were at the start. Those download the pinned sdists once
(into the shared cache) and run the packages' own tests: marked `slow`.
"""

from __future__ import annotations

import difflib
import importlib.util
import io
import json
import re
import shutil
import sys
import tarfile
import textwrap
import tomllib
from pathlib import Path

import pytest

from agent.cli import main
from agent.frontends.measure.suite import discover, prepare_workdir, read_source
from agent.session.taskfile import load_task
from tests.scripted_server import ScriptedServer
from tests.test_real_tasks import proves_its_solution
from tests.test_suite_tasks import TRIVIAL_TESTS, check, git, python3_with_pytest  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "plant_bugs.py"
PLANTED_DIR = ROOT / "examples" / "planted"
PLANTED = {task.name: task for task in discover(PLANTED_DIR)}


def _load_plant_bugs():
    spec = importlib.util.spec_from_file_location("plant_bugs", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["plant_bugs"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


plant_bugs = _load_plant_bugs()
GENERATED = {name: task for name, task in PLANTED.items() if task.joinpath("source.toml").read_text().startswith(plant_bugs.MARKER)}  # fmt: skip
FEATURES = {name: task for name, task in PLANTED.items() if name not in GENERATED}


def body(task: Path) -> str:
    return load_task(task / "task.md").body


def package_of(task: Path) -> str:
    source = read_source(task)
    assert source is not None
    return source.pypi.split("==")[0]


# The committed tasks


def test_at_least_thirty_planted_bugs_from_six_packages_and_three_to_five_features():
    packages = {package_of(task) for task in GENERATED.values()}
    assert len(GENERATED) >= 30 and len(packages) >= 6, (len(GENERATED), packages)
    assert 3 <= len(FEATURES) <= 5, sorted(FEATURES)
    assert {package_of(task) for task in FEATURES.values()} <= {p.name for p in plant_bugs.PACKAGES}
    for name, task in PLANTED.items():
        files = {p.name for p in task.iterdir()}
        assert files == {"source.toml", "solution.patch", "task.md"} | (
            {"setup.patch"} if name in GENERATED else set()
        )
        assert name.startswith(f"{package_of(task)}-")


def test_the_packages_are_used_nowhere_else_in_the_project():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [
        *project["dependencies"],
        *(r for group in project["optional-dependencies"].values() for r in group),
    ]
    used = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}
    used |= {"attrs", "click", "requests", "itsdangerous"}  # the real-* tasks' packages
    used |= {s.pypi.split("==")[0] for t in (ROOT / "examples" / "tasks").iterdir() if (s := read_source(t))}
    assert not {p.name for p in plant_bugs.PACKAGES} & used


def test_agent_bench_tasks_finds_every_planted_task():
    folders = sorted(p.name for p in PLANTED_DIR.iterdir() if p.is_dir())
    assert sorted(PLANTED) == folders and "README.md" in {p.name for p in PLANTED_DIR.iterdir()}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_task_text_names_no_path_and_is_short(name):
    task = PLANTED[name]
    text = body(task)
    assert "/" not in text and ".py" not in text, text
    assert 1 <= len(re.findall(r"[.!?](\s|$)", text)) <= 4, text  # 1-4 sentences
    spec = load_task(task / "task.md").spec
    assert spec.approval == "full-auto" and spec.max_turns == 20 and spec.time_limit == 900
    assert spec.sampling.temperature == 0 and spec.check


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_a_planted_bug_names_its_function_by_its_dotted_name(name):
    comment = (GENERATED[name] / "source.toml").read_text().splitlines()[0]
    dotted = re.search(r"mutation in (\S+)$", comment)
    assert dotted, comment
    assert re.search(rf"`(list\()?{re.escape(dotted[1])}\b", body(GENERATED[name])), body(GENERATED[name])


@pytest.mark.slow
@pytest.mark.usefixtures("python3_with_pytest")  # checks say python3: this interpreter, with pytest
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_check_fails_on_the_starting_files_and_passes_with_the_solution(name, tmp_path):
    proves_its_solution(PLANTED[name], tmp_path)


@pytest.mark.slow
def test_agent_bench_tasks_runs_a_planted_task_against_the_scripted_model(tmp_path, capsys):
    # The model fixes the comparison with one bash command; `agent run` then runs the hidden check.
    fix = "sed -i 's/(base\\*\\*exp)))) > base:/(base**exp)))) >= base:/' src/humanize/filesize.py"
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": fix}}]}, {"content": "Fixed."}]
    with ScriptedServer(script) as server:
        argv = [
            "bench",
            "--base-url",
            server.url,
            "--tasks",
            str(PLANTED_DIR),
            "--task",
            "humanize-naturalsize",
        ]
        assert main([*argv, "--json", "--task-timeout", "300"]) == 0
    [result] = json.loads(capsys.readouterr().out)["attach"]
    assert result["name"] == "humanize-naturalsize"
    assert result["solved"] and result["checks"] == 1 and result["turns"] == 2, result


def _one_per_package() -> list[str]:
    first: dict[str, str] = {}
    for name in sorted(PLANTED):
        first.setdefault(package_of(PLANTED[name]), name)
    return sorted(first.values())


@pytest.mark.slow
@pytest.mark.usefixtures("python3_with_pytest")
@pytest.mark.parametrize("name", _one_per_package())
def test_tests_made_trivial_instead_of_the_fix_fail_the_check(name, tmp_path):
    task = PLANTED[name]
    workdir = prepare_workdir(task, tmp_path)
    tests = re.search(r"TESTS = .*'(\S+\.py)'", (task / "task.md").read_text())
    assert tests, "the check names its test file"
    (workdir / tests[1]).write_text(TRIVIAL_TESTS)
    git(workdir, "commit", "-qam", "tests made trivial")  # as an agent's checkpoint would
    result = check(task, workdir)
    assert result.exit_code not in (0, None), f"trivial tests pass the check:\n{result.output}"


# The generator, on a tiny package built here (no network)

TINY = {
    "src/tiny/__init__.py": '''\
        """A tiny package for the generator's tests."""

        from tiny.sizes import parse_size


        def clamp(value, low, high):
            if value < low:
                return low
            elif value > high:
                return high
            return value


        def greet(name, punctuation="!"):
            text = "Hello, " + name
            text += punctuation
            return text
        ''',
    "src/tiny/sizes.py": '''\
        def parse_size(text):
            """The bytes in "3 B" or "1 KiB"."""
            number, unit = text.split()
            if unit == "B":
                return int(number)
            if unit == "KiB":
                return int(number) * 1024
            raise ValueError("unknown unit " + unit)
        ''',
    "tests/test_tiny.py": """\
        import pytest

        from tiny import clamp, greet, parse_size


        def test_clamp():
            assert clamp(5, 0, 10) == 5
            assert clamp(-1, 0, 10) == 0
            assert clamp(0, 0, 10) == 0
            assert clamp(11, 0, 10) == 10
            assert clamp(10, 0, 10) == 10


        def test_greet():
            assert greet("Ann") == "Hello, Ann!"
            assert greet("Bob", "?") == "Hello, Bob?"


        def test_parse_size():
            assert parse_size("1 KiB") == 1024
            assert parse_size("3 B") == 3
            with pytest.raises(ValueError):
                parse_size("1 MiB")
        """,
}
TINY_PACKAGE = plant_bugs.Package("tiny==1.0", "tiny", "src", ("tests/test_tiny.py",))


def tiny_tree(where: Path) -> Path:
    for name, text in TINY.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(textwrap.dedent(text))
    return where


def changed(before: str, after: str) -> list[str]:
    """The lines removed (-) and added (+) from `before` to `after`."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_each_mutation_kind_changes_what_it_should(tmp_path):
    source = textwrap.dedent(TINY["src/tiny/__init__.py"])
    every_line = set(range(1, 100))
    found = plant_bugs.mutations(source, "src/tiny/__init__.py", "clamp", every_line)
    by_kind = {
        kind: [changed(source, m.source) for m in found if m.kind == kind] for kind in plant_bugs.KINDS
    }
    assert by_kind["comparison"] == [
        ["-    if value < low:", "+    if value <= low:"],
        ["-    elif value > high:", "+    elif value >= high:"],
    ]
    assert by_kind["branch"] == [
        ["-    if value < low:", "-        return low", "-    elif value > high:", "+    if value > high:"],
        ["-    elif value > high:", "-        return high"],
    ]
    assert by_kind["line"] == [
        ["-        return low", "+        pass"],
        ["-        return high", "+        pass"],
    ]
    assert by_kind["constant"] == []
    greet = plant_bugs.mutations(source, "src/tiny/__init__.py", "greet", every_line)
    assert [(m.kind, changed(source, m.source)) for m in greet] == [
        ("constant", ['-    text = "Hello, " + name', '+    text = "hello, " + name']),
        ("line", ['-    text = "Hello, " + name']),
        ("line", ["-    text += punctuation"]),
    ]
    sizes = textwrap.dedent(TINY["src/tiny/sizes.py"])
    constants = [changed(sizes, m.source) for m in plant_bugs.mutations(sizes, "f", "parse_size", every_line) if m.kind == "constant"]  # fmt: skip
    assert ["-        return int(number) * 1024", "+        return int(number) * 1025"] in constants
    assert ["-        return int(number) * 1024", "+        return int(number) * 1023"] in constants
    assert ['-    if unit == "KiB":', '+    if unit == "kiB":'] in constants
    # Only lines the tests ran are mutated; the docstring never is.
    only = plant_bugs.mutations(source, "src/tiny/__init__.py", "clamp", {8})  # `return low`
    assert [(m.kind, m.line, m.what) for m in only] == [("line", 8, "`return low` removed")]
    assert all("The bytes" not in "".join(changed(sizes, m.source)) for m in plant_bugs.mutations(sizes, "f", "parse_size", every_line))  # fmt: skip
    for mutation in [*found, *greet]:
        compile(mutation.source, "tiny.py", "exec")


def plant_tiny(where: Path, seed: int) -> list:
    tree = tiny_tree(where / "tree")
    return plant_bugs.plant(
        TINY_PACKAGE, tree, seed, count=3, log=lambda line: None, scratch=where / "scratch"
    )


@pytest.fixture(scope="module")
def tiny_tasks(tmp_path_factory: pytest.TempPathFactory) -> list:
    return plant_tiny(tmp_path_factory.mktemp("tiny"), seed=1)


def test_a_planted_task_names_the_dotted_function_the_call_and_no_path(tiny_tasks):
    assert len(tiny_tasks) == 3
    assert {task.dotted for task in tiny_tasks} <= {"tiny.clamp", "tiny.greet", "tiny.parse_size"}
    assert "tiny.parse_size" in {task.dotted for task in tiny_tasks}  # re-exported: the public name
    for task in tiny_tasks:
        assert task.dotted in task.text and "/" not in task.text and ".py" not in task.text, task.text
        assert re.search(r"`tiny\.\w+\(.*\)`", task.text), task.text  # the call, as code
        assert "should" in task.text, task.text
        assert task.setup_patch.startswith(f"diff --git a/{task.mutation.file}")


def test_the_same_seed_gives_the_same_tasks(tiny_tasks, tmp_path):
    again = plant_tiny(tmp_path, seed=1)

    def summary(tasks):
        return [(t.name, t.text, t.setup_patch, t.solution_patch) for t in tasks]

    assert summary(again) == summary(tiny_tasks)


@pytest.mark.usefixtures("python3_with_pytest")
def test_a_written_task_is_discovered_prepared_and_proved_offline(tiny_tasks, tmp_path, monkeypatch):
    # The tiny package's sdist in the cache, so that prepare_workdir downloads nothing.
    monkeypatch.setenv("AGENT_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "sdists" / "tiny-1.0"
    folder.mkdir(parents=True)
    with tarfile.open(folder / "tiny-1.0.tar.gz", "w:gz") as tf:
        for name, text in TINY.items():
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(f"tiny-1.0/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    out = tmp_path / "planted"
    for task in tiny_tasks:
        plant_bugs.write_task(task, out, seed=1)
    (out / "hand-written").mkdir()
    (out / "hand-written" / "task.md").write_text("Do it.\n")
    assert [p.name for p in discover(out)] == sorted([t.name for t in tiny_tasks] + ["hand-written"])
    assert plant_bugs.generated(out) == sorted(out / t.name for t in tiny_tasks)  # never a hand-written one
    task = out / tiny_tasks[0].name
    assert " ".join(body(task).split()) == " ".join(tiny_tasks[0].text.split())
    workdir = prepare_workdir(task, tmp_path / "work")
    before = check(task, workdir)
    assert before.exit_code not in (0, None), before.output
    assert (
        "tests/test_tiny.py" in before.output and str(tmp_path) not in before.output
    )  # paths as in the workdir
    git(workdir, "apply", str(task / "solution.patch"))
    after = check(task, workdir)
    assert after.passed, after.output
    shutil.rmtree(workdir)
