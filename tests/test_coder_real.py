"""The embedded coder (Qwen2.5-Coder 1.5B, the default profile `coder-ngram`, edit blocks) doing real work: the README's
main job, and the check loop, on the real llama-server. Slow-ish (about a minute each on 2 cores)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.frontends.test_headless import REPO, agent, events_of, sessions, task_file
from tests.test_suite_tasks import git, python3_with_pytest  # noqa: F401

pytestmark = pytest.mark.server


def coder_here(isolated_state: Path, name: str = "coder-ngram") -> str:
    """A built-in coder profile on a free port (a user profile of the same name replaces it): the
    embedded default, `coder-ngram`, unless named. Its n-gram drafts keep the greedy answer the same
    and make the answers that copy what the model was shown about twice as fast: these tests' time."""
    folder = isolated_state.parent / "config" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    text = (REPO / "server_profiles" / f"{name}.toml").read_text()
    text = re.sub(r"(?m)^port = \d+$", f"port = {free_port()}", text)
    (folder / f"{name}.toml").write_text(text)
    return name


def test_the_embedded_coder_solves_the_hello_task_end_to_end(embedded, tmp_path, isolated_state):
    profile = coder_here(isolated_state)
    task = REPO / "examples" / "tasks" / "hello" / "task.md"
    result = agent("run", str(task), "-p", profile, "--workdir", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr
    assert "check `" in result.stderr and "passed" in result.stderr
    [path] = sessions(isolated_state)
    events = events_of(path)
    assert events[-1]["summary"]["check"]["passed"] is True
    assert any(e["type"] == "tool.result" and e["name"] == "write_file" and e["ok"] for e in events)


def test_on_the_real_model_a_failed_check_goes_back_and_the_model_fixes_it(
    embedded, tmp_path, isolated_state
):
    # The task leaves the greeting's wording open; only the check's output says which one is wanted,
    # so the first attempt fails and the model can only pass by reading the check's output.
    profile = coder_here(isolated_state)
    check = (
        "python3 -c \"from greet import greet; r = greet('Ann'); "
        "assert r == 'Bonjour, Ann!', 'greet(Ann) returned %r, but it must return the string Bonjour, Ann!' % r\""
    )
    task = task_file(
        tmp_path, "Create greet.py with a function greet(name) that returns a greeting for that name.",
        approval="full-auto", check=check, sampling={"temperature": 0}, max_turns=4,
    )  # fmt: skip
    work = tmp_path / "work"
    result = agent("run", str(task), "-p", profile, "--workdir", str(work), "--json", timeout=900)
    events = [json.loads(line) for line in result.stdout.splitlines()]
    checks = [e for e in events if e["type"] == "check.result"]
    assert len(checks) >= 2 and not checks[0]["passed"], checks
    assert checks[-1]["passed"] and result.returncode == 0, (checks[-1], result.stderr[-2000:])
    assert "Bonjour" in (work / "greet.py").read_text()


@pytest.mark.timeout(900)
def test_on_the_real_model_a_task_naming_a_function_and_no_path_is_shown_it_and_fixed(
    embedded, tmp_path, isolated_state
):
    """A file of 1,100 lines, too long to show whole, and a task naming the function by its dotted name:
    the first request holds that function's body, and the model's fix lands in it, nowhere else."""
    from tests.core.test_repomap import pathless_library

    profile = coder_here(isolated_state)
    work, _ = pathless_library(tmp_path)
    before = (work / "src/pkg/utils.py").read_text()
    check = "cd src && python3 -c 'from pkg.utils import helper_42; assert helper_42(1) == 849'"
    task = task_file(
        tmp_path, "`pkg.utils.helper_42(value)` subtracts 42 from the value it is given; it must add 42 instead.",
        approval="full-auto", check=check, sampling={"temperature": 0}, max_turns=4, fresh_starts=0,
    )  # fmt: skip
    result = agent("run", str(task), "-p", profile, "--workdir", str(work), timeout=900)
    [path] = sessions(isolated_state)
    first = next(e for e in events_of(path) if e["type"] == "user.message")
    assert "(helper_42: the task names `pkg.utils.helper_42`)" in first["content"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert (work / "src/pkg/utils.py").read_text() == before.replace("value - 42", "value + 42")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.usefixtures("python3_with_pytest")  # the check says python3: this interpreter, with pytest
def test_on_the_real_model_a_generated_task_naming_a_method_and_no_path_is_solved(
    embedded, tmp_path, isolated_state
):
    """examples/planted/semver-version-compare: semver's 944-line version.py, and a task naming
    `semver.Version.compare` and no path. The method comes first in the first request, before the
    file's outline (shown the outline first, the 1.5B wrote it back as its fix), and the fix lands in
    it, nothing outside it changed: the model writes the method at column 0, and the rest of the
    file stays as it stands."""
    from agent.frontends.measure.suite import prepare_workdir

    task = REPO / "examples" / "planted" / "semver-version-compare"
    work = prepare_workdir(task, tmp_path / "work")
    profile = coder_here(isolated_state)
    result = agent("run", str(task / "task.md"), "-p", profile, "--workdir", str(work), timeout=900)
    [path] = sessions(isolated_state)
    first = next(e for e in events_of(path) if e["type"] == "user.message")["content"]
    found = first.index("(Version.compare: the task names `semver.Version.compare`")
    assert found < first.index("The outline of src/semver/version.py")
    assert result.returncode == 0, result.stderr[-3000:]
    diff = git(work, "diff", "--unified=0", "--", "src/semver/version.py")
    assert "+            other = cls(**other)" in diff.splitlines(), diff
    # Every change is inside the method: the file's other 900 lines are as they were.
    method = range(518, 561)  # Version.compare in the starting file
    hunks = [int(h.split()[1].lstrip("-").split(",")[0]) for h in diff.splitlines() if h.startswith("@@")]
    assert hunks and all(start in method for start in hunks), diff
    assert git(work, "status", "--porcelain").split() == ["M", "src/semver/version.py"]
