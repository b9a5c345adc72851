"""The real-repository tasks (examples/tasks/real-*) and how agent/frontends/measure/suite.py prepares them.

Each starts from a pinned PyPI sdist. Its check must fail on the prepared starting files, pass with
solution.patch, and fail when the changed function is left empty, when the rest of the named file is
deleted around a correct function, and when the package's tests are made trivial instead. Those tests
download once (into the shared cache) and run the packages' own tests: marked `slow`. The suite's
sdist handling (validation, safe unpacking, the cache) is tested offline on archives built here.
"""

from __future__ import annotations

import ast
import io
import json
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from agent.cli import main
from agent.errors import AgentError, ConfigError
from agent.frontends.measure import suite
from agent.frontends.measure.suite import (
    Source,
    discover,
    prepare_workdir,
    read_source,
    run_suite,
    unpack_sdist,
)
from tests.scripted_server import ScriptedServer
from tests.test_suite_tasks import TASKS, TASKS_DIR, TRIVIAL_TESTS, check, git, python3_with_pytest  # noqa: F401


def proves_its_solution(task: Path, tmp_path: Path) -> None:
    """The task's check fails on its starting files, passes with solution.patch, and leaves no files."""
    workdir = prepare_workdir(task, tmp_path)
    before = check(task, workdir)
    assert before.exit_code not in (0, None), f"the check passes before any work:\n{before.output}"
    git(workdir, "apply", str(task / "solution.patch"))
    after = check(task, workdir)
    assert after.passed, f"the check fails with the reference solution:\n{after.output}"
    status = git(workdir, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert not [line for line in status if line.startswith("??")], "the check leaves no files behind"


REAL_TASKS = {name: task for name, task in TASKS.items() if (task / "source.toml").exists()}

# What each task is about: the file its text names, and the function (Class.method for a method) that
# the reference solution adds or changes there. Large files are the point: a model must edit in place.
NAMED = {
    "real-attrs-fix-number-validators": ("src/attr/validators.py", "_NumberValidator.__call__"),
    "real-attrs-make-function": ("src/attr/_make.py", "field_defaults"),
    "real-click-deprecated-message": ("src/click/core.py", "Command._deprecated_label"),
    "real-click-fix-range-bounds": ("src/click/types.py", "_NumberRangeBase.convert"),
    "real-itsdangerous-rename-want-bytes": ("src/itsdangerous/encoding.py", "to_bytes"),
    "real-requests-fix-netrc-host": ("src/requests/utils.py", "get_netrc_auth"),
    "real-requests-help-flag": ("src/requests/help.py", "main"),
    "real-requests-rename-super-len": ("src/requests/utils.py", "body_length"),
    "real-requests-utils-function": ("src/requests/utils.py", "is_ipv6_address"),
}

# Another function of the same file, one the task does not touch: the package's own tests (or the
# judged behaviour) must notice it broken, or the check would pass a model that damaged the file.
OTHER = {
    "real-attrs-fix-number-validators": "instance_of",
    "real-attrs-make-function": "validate",
    "real-click-deprecated-message": "Command.to_info_dict",
    "real-click-fix-range-bounds": "Choice.convert",
    "real-itsdangerous-rename-want-bytes": "bytes_to_int",
    "real-requests-fix-netrc-host": "parse_dict_header",
    "real-requests-help-flag": "info",
    "real-requests-rename-super-len": "parse_dict_header",
    "real-requests-utils-function": "parse_dict_header",
}


def test_the_yardstick_has_eight_real_tasks_across_four_packages_three_on_files_over_800_lines():
    assert set(REAL_TASKS) == set(NAMED) == set(OTHER), (
        "every real task says which file and function it is about"
    )
    packages = {read_source(task).pypi.split("==")[0] for task in REAL_TASKS.values()}
    assert len(REAL_TASKS) >= 8 and len(packages) >= 4, packages
    for name, task in REAL_TASKS.items():
        assert not (task / "repo").exists() and not (task / "solution").exists(), name
        assert (task / "solution.patch").is_file(), name
        for path in task.iterdir():  # the big files come from PyPI; the task's own files stay small
            assert len(path.read_text().splitlines()) <= 160, f"{path} is too long"
        assert NAMED[name][0] in (task / "task.md").read_text(), f"{name}'s text names its file"


@pytest.fixture(scope="module")
def sizes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """The named files' line counts in the starting files (downloads what the cache lacks)."""
    root = tmp_path_factory.mktemp("sizes")
    return {
        name: len((prepare_workdir(task, root) / NAMED[name][0]).read_text().splitlines())
        for name, task in REAL_TASKS.items()
    }


@pytest.mark.slow
def test_at_least_three_real_tasks_name_a_file_over_800_lines(sizes):
    assert sum(lines > 800 for lines in sizes.values()) >= 3, sizes


def solved(name: str, into: Path) -> Path:
    workdir = prepare_workdir(REAL_TASKS[name], into)
    git(workdir, "apply", str(REAL_TASKS[name] / "solution.patch"))
    return workdir


def function_node(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    scope: list[ast.stmt] = tree.body
    *classes, function = qualname.split(".")
    for name in classes:
        scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == name).body
    return next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == function)


def emptied(source: str, qualname: str) -> str:
    """`source` with the function's body (docstring and all) replaced by `pass`."""
    node = function_node(ast.parse(source), qualname)
    lines = source.splitlines(keepends=True)
    start, end = node.body[0].lineno - 1, node.end_lineno
    indent = " " * node.body[0].col_offset
    return "".join([*lines[:start], f"{indent}pass\n", *lines[end:]])


def truncated(source: str, qualname: str) -> str:
    """The first ~20 lines of `source` (up to a whole top-level statement) and the function itself:
    valid Python, so that the check fails for what is missing rather than on a syntax error."""
    tree = ast.parse(source)
    node = function_node(tree, qualname)
    cut = max([n.end_lineno for n in tree.body if n.end_lineno <= 20], default=0)
    lines = source.splitlines(keepends=True)
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    function = textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
    result = "".join(lines[:cut]) + "\n\n" + function
    ast.parse(result)
    return result


@pytest.mark.slow
@pytest.mark.usefixtures("python3_with_pytest")  # checks say python3: this interpreter, with pytest
@pytest.mark.parametrize("name", sorted(REAL_TASKS))
def test_the_check_fails_on_the_starting_files_and_passes_with_the_solution(name, tmp_path):
    proves_its_solution(REAL_TASKS[name], tmp_path)


@pytest.mark.slow
@pytest.mark.usefixtures("python3_with_pytest")  # checks say python3: this interpreter, with pytest
@pytest.mark.parametrize("name", sorted(REAL_TASKS))
def test_the_function_left_empty_fails_the_check(name, tmp_path):
    workdir = solved(name, tmp_path)
    path, function = NAMED[name]
    (workdir / path).write_text(emptied((workdir / path).read_text(), function))
    result = check(REAL_TASKS[name], workdir)
    assert result.exit_code not in (0, None), f"an empty {function} passes:\n{result.output}"


@pytest.mark.slow
@pytest.mark.usefixtures("python3_with_pytest")  # checks say python3: this interpreter, with pytest
@pytest.mark.parametrize("name", sorted(REAL_TASKS))
def test_breaking_another_function_of_the_named_file_fails_the_check(name, tmp_path):
    workdir = solved(name, tmp_path)
    path = NAMED[name][0]
    (workdir / path).write_text(emptied((workdir / path).read_text(), OTHER[name]))
    result = check(REAL_TASKS[name], workdir)
    assert result.exit_code not in (0, None), f"an empty {OTHER[name]} in {path} passes:\n{result.output}"


@pytest.mark.slow
@pytest.mark.usefixtures("python3_with_pytest")  # checks say python3: this interpreter, with pytest
@pytest.mark.parametrize("name", sorted(REAL_TASKS))
def test_deleting_the_rest_of_the_named_file_fails_the_check(name, tmp_path):
    workdir = solved(name, tmp_path)
    path, function = NAMED[name]
    (workdir / path).write_text(truncated((workdir / path).read_text(), function))
    result = check(REAL_TASKS[name], workdir)
    assert result.exit_code not in (0, None), f"{path} cut down to {function} passes:\n{result.output}"


@pytest.mark.slow
@pytest.mark.usefixtures("python3_with_pytest")  # checks say python3: this interpreter, with pytest
@pytest.mark.parametrize("name", sorted(REAL_TASKS))
def test_trivial_tests_instead_of_the_change_fail_the_check(name, tmp_path):
    workdir = prepare_workdir(REAL_TASKS[name], tmp_path)
    for test_file in (workdir / "tests").rglob("test_*.py"):
        test_file.write_text(TRIVIAL_TESTS)
    result = check(REAL_TASKS[name], workdir)
    assert result.exit_code not in (0, None), f"trivial tests pass the check:\n{result.output}"


def test_emptied_and_truncated_keep_valid_python_and_the_function():
    source = "import os\n\n\nclass A:\n    def f(self):\n        '''Doc.'''\n        return 1\n\n\nX = 2\n"
    assert "return 1" not in emptied(source, "A.f") and "        pass\n" in emptied(source, "A.f")
    short = truncated(source * 5, "A.f")
    assert short.startswith("import os") and short.rstrip().endswith("return 1")


# The sdist machinery, offline


def sdist(path: Path, files: dict[str, str], top: str = "pkg-1.0") -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def cached_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source_toml: str) -> Path:
    """A task whose sdist (pkg==1.0) is already in the cache, so that no download happens."""
    monkeypatch.setenv("AGENT_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "sdists" / "pkg-1.0"
    folder.mkdir(parents=True)
    files = {"src/pkg/__init__.py": "VALUE = 1\n", "tests/test_heavy.py": "", "docs/big.txt": "x\n"}
    sdist(folder / "pkg-1.0.tar.gz", files)
    task = tmp_path / "real-pkg-task"
    task.mkdir()
    (task / "task.md").write_text("Do it.\n")
    (task / "source.toml").write_text(source_toml)
    return task


def test_a_cached_sdist_is_unpacked_without_its_top_folder_stripped_patched_and_committed(
    tmp_path, monkeypatch
):
    task = cached_task(tmp_path, monkeypatch, 'pypi = "pkg==1.0"\nstrip = ["tests/test_heavy.py", "docs"]\n')
    (task / "setup.patch").write_text(
        "--- a/src/pkg/__init__.py\n+++ b/src/pkg/__init__.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"
    )
    workdir = prepare_workdir(task, tmp_path / "work")
    assert sorted(p.name for p in workdir.iterdir()) == [".git", "src", "tests"]
    assert (workdir / "src/pkg/__init__.py").read_text() == "VALUE = 2\n"  # the planted change
    assert (
        git(workdir, "status", "--porcelain") == ""
        and len(git(workdir, "log", "--oneline").splitlines()) == 1
    )


def test_stripping_a_path_the_sdist_does_not_hold_is_refused(tmp_path, monkeypatch):
    task = cached_task(tmp_path, monkeypatch, 'pypi = "pkg==1.0"\nstrip = ["tests/test_hevy.py"]\n')
    with pytest.raises(ConfigError, match=r"strip names tests/test_hevy.py, which pkg==1.0 does not hold"):
        prepare_workdir(task, tmp_path / "work")
    assert list((tmp_path / "work").iterdir()) == []


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('pypi = "pkg>=1.0"\n', "must pin one version"),
        ('pypi = "pkg==1.0"\nstrip = ["../outside"]\n', "relative paths"),
        ('pypi = "pkg==1.0"\nstirp = ["docs"]\n', "unknown keys stirp"),
        ("pypi = \n", "cannot read"),
    ],
)
def test_a_bad_source_toml_is_refused_by_name(tmp_path, text, error):
    (tmp_path / "source.toml").write_text(text)
    with pytest.raises(ConfigError, match=error) as caught:
        read_source(tmp_path)
    assert "source.toml" in str(caught.value)


def test_read_source_reads_the_pin_and_the_paths_to_strip():
    assert read_source(TASKS_DIR / "real-itsdangerous-rename-want-bytes") == Source(
        "itsdangerous==2.2.0",
        ("tests/test_itsdangerous/test_timed.py", "tests/test_itsdangerous/test_url_safe.py"),
    )
    assert read_source(TASKS_DIR / "hello") is None


@pytest.mark.parametrize("member", ["../evil.py", "/tmp/evil.py"])
def test_an_archive_member_outside_its_folder_is_refused(tmp_path, member):
    tar = sdist(tmp_path / "bad.tar.gz", {member: "x"}, top="")
    with pytest.raises(AgentError, match="outside its folder"):
        unpack_sdist(tar, tmp_path / "tar")
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as zf:
        zf.writestr(member, "x")
    with pytest.raises(AgentError, match="outside its folder"):
        unpack_sdist(tmp_path / "bad.zip", tmp_path / "zip")
    assert not (tmp_path / "evil.py").exists() and not Path("/tmp/evil.py").exists()


def test_an_archive_without_one_top_folder_is_refused(tmp_path):
    tar = sdist(tmp_path / "flat.tar.gz", {"a.py": "", "b.py": ""}, top="")
    with pytest.raises(AgentError, match="one top folder"):
        unpack_sdist(tar, tmp_path / "out")


def test_a_link_out_of_the_archive_is_refused(tmp_path):
    with tarfile.open(tmp_path / "link.tar.gz", "w:gz") as tf:
        info = tarfile.TarInfo("pkg-1.0/passwd")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(AgentError):
        unpack_sdist(tmp_path / "link.tar.gz", tmp_path / "out")


# Downloads (PyPI)


@pytest.mark.slow
def test_the_sdist_is_downloaded_once_and_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_CACHE_DIR", str(tmp_path / "cache"))
    downloads = []
    real_download = suite._pip_download

    def counting(pin: str, into: Path) -> None:
        downloads.append(pin)
        real_download(pin, into)

    monkeypatch.setattr(suite, "_pip_download", counting)
    task = REAL_TASKS["real-itsdangerous-rename-want-bytes"]
    first = prepare_workdir(task, tmp_path / "work")
    [archive] = (tmp_path / "cache" / "sdists" / "itsdangerous-2.2.0").iterdir()
    stamp = archive.stat().st_mtime_ns
    second = prepare_workdir(task, tmp_path / "work")
    assert downloads == ["itsdangerous==2.2.0"]
    assert archive.stat().st_mtime_ns == stamp
    assert (first / "src/itsdangerous/encoding.py").read_text() == (
        second / "src/itsdangerous/encoding.py"
    ).read_text()
    assert not (first / "tests/test_itsdangerous/test_timed.py").exists()  # stripped


@pytest.mark.slow
def test_a_failed_download_says_what_failed_why_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_CACHE_DIR", str(tmp_path / "cache"))
    task = tmp_path / "real-nothing"
    task.mkdir()
    (task / "task.md").write_text("Do it.\n")
    (task / "source.toml").write_text('pypi = "itsdangerous==999.0.0"\n')
    with pytest.raises(AgentError) as caught:
        prepare_workdir(task, tmp_path / "work")
    error = caught.value
    assert "could not download itsdangerous==999.0.0" in str(error)
    assert "999.0.0" in error.why and "pip download" in error.fix
    assert list((tmp_path / "cache" / "sdists").iterdir()) == []  # nothing half-written is cached
    assert not (tmp_path / "work" / "real-nothing").exists()
    with pytest.raises(AgentError, match="could not download"):  # before the suite's first task
        run_suite([TASKS["hello"], task], ["--base-url", "http://127.0.0.1:9"], tmp_path / "suite")
    assert not (tmp_path / "suite").exists()


def test_real_tasks_are_picked_by_glob():
    assert [p.name for p in discover(TASKS_DIR, ["real-*"])] == sorted(REAL_TASKS)
    assert not set(REAL_TASKS) & {p.name for p in discover(TASKS_DIR, ["hello", "cli-*"])}
    assert {p.name for p in discover(TASKS_DIR, ["!real-*"])} == set(TASKS) - set(REAL_TASKS)


@pytest.mark.slow
def test_agent_bench_tasks_runs_a_real_task_picked_by_glob_against_the_scripted_model(tmp_path, capsys):
    # The model renames with one bash command; `agent run` then runs the hidden check in the workdir.
    rename = "grep -rl want_bytes src tests | xargs sed -i 's/\\bwant_bytes\\b/to_bytes/g'"
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": rename}}]}, {"content": "Renamed."}]
    with ScriptedServer(script) as server:
        argv = ["bench", "--base-url", server.url, "--tasks", str(TASKS_DIR), "--task", "real-itsdangerous-*"]
        assert main([*argv, "--json", "--task-timeout", "300"]) == 0
    [result] = json.loads(capsys.readouterr().out)["attach"]
    assert result["name"] == "real-itsdangerous-rename-want-bytes"
    assert result["solved"] and result["checks"] == 1 and result["turns"] == 2, result
