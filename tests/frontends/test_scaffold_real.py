"""`agent new` on the embedded coder (Qwen2.5-Coder 1.5B, profile `coder`) for real: the whole path, from
an empty folder to the end of the agent part. Whether the 1.5B builds it varies; what must hold either
way is the exit code, the session and the skeleton's commit. A few minutes on 2 cores."""

from __future__ import annotations

import json

import pytest

from tests.frontends.test_scaffold import agent, commits, git_identity  # noqa: F401 (a fixture)
from tests.test_coder_real import coder_here

pytestmark = pytest.mark.server


@pytest.mark.timeout(900)
@pytest.mark.usefixtures("git_identity")
def test_on_the_real_coder_agent_new_runs_to_the_end_and_keeps_the_skeleton(
    embedded, tmp_path, isolated_state
):
    profile = coder_here(isolated_state)
    description = "A command that takes integers as arguments and prints their sum."
    # No fresh start: this is agent new's own path on the real coder, in the time a CI run has for it
    # (fresh starts on a real server: tests/session/test_fresh_starts_real.py).
    result = agent(
        "new", "adder", description, "-t", "python-cli", "-p", profile, "--max-turns", "6",
        "--fresh-starts", "0", cwd=tmp_path, timeout=840,
    )  # fmt: skip
    project = tmp_path / "adder"
    assert result.returncode in (0, 1, 3), result.stderr  # built, check failed, or out of turns
    [session] = sorted((isolated_state / "sessions").glob("*.jsonl"))
    finished = json.loads(session.read_text().splitlines()[-1])
    assert finished["type"] == "session.finished"
    assert finished["summary"]["exit_code"] == result.returncode
    log = commits(project)
    assert log[-1] == "New project adder from the python-cli template"
    assert (project / "pyproject.toml").is_file() and (project / "tests" / "test_cli.py").is_file()
    if result.returncode == 0:
        assert finished["summary"]["check"]["passed"] and len(log) == 2
        assert log[0] == description.rstrip(".")
    else:
        assert len(log) == 1
        assert f"agent run --resume {session.stem}" in result.stdout
