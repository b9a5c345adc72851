"""`agent new` as a user runs it: a subprocess, real templates, real git repositories, real checks, and
the scripted model server for the agent part."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from agent.frontends.scaffold.git import commit_skeleton
from agent.frontends.scaffold.render import derive_package_name
from agent.frontends.scaffold.task import guarded_check
from agent.session.taskfile import load_task
from tests.core.test_loop import git_repo
from tests.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "run-events.schema.json").read_text())
TEMPLATES = ("python-package", "python-cli", "web-page", "empty")
CHECKS = {
    "python-package": "python3 -m pytest -q",
    "python-cli": "python3 -m pytest -q",
    "web-page": "python3 tests/check_page.py",
    "empty": "test -s README.md && test -s AGENTS.md",
}
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


@pytest.fixture
def git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A global git config of this test's own, with a user: the machine's config plays no part."""
    config = tmp_path / "gitconfig"
    config.write_text("[user]\n\tname = Test User\n\temail = test@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    # The project's check runs `python3`: the one with pytest (this venv's) comes first.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return config


def agent(
    *args: str, cwd: Path, env: dict | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env or os.environ.copy())  # fmt: skip


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True).stdout


def commits(folder: Path) -> list[str]:
    return git(folder, "log", "--format=%s").splitlines()


def user_template(name: str, files: dict[str, str], check: str = "true", description: str = "mine") -> Path:
    root = Path(os.environ["AGENT_CONFIG_DIR"]) / "templates" / name
    (root / "files").mkdir(parents=True)
    (root / "template.toml").write_text(f'description = "{description}"\ncheck = "{check}"\n')
    for rel, text in files.items():
        (root / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "files" / rel).write_text(text)
    return root


# ------------------------------------------------------------------------------ templates, --no-agent


@pytest.mark.slow
@pytest.mark.parametrize("template", TEMPLATES)
def test_every_template_renders_a_project_whose_own_check_passes_in_one_commit(
    tmp_path, git_identity, template
):
    result = agent("new", "demo", "--template", template, "--no-agent", cwd=tmp_path)
    project = tmp_path / "demo"
    assert result.returncode == 0, result.stderr + result.stdout
    assert commits(project) == [f"New project demo from the {template} template"]
    assert git(project, "status", "--porcelain") == ""  # the check's own leftovers are ignored
    assert (project / "AGENTS.md").is_file() and (project / "README.md").is_file()
    assert f"check: `{CHECKS[template]}` passed" in result.stdout
    # The check passes on its own too, outside `agent new`.
    assert subprocess.run(["bash", "-c", CHECKS[template]], cwd=project, capture_output=True).returncode == 0
    author = git(project, "log", "-1", "--format=%an <%ae>").strip()
    assert author == "Test User <test@example.com>"  # the skeleton is the user's commit


@pytest.mark.slow
@pytest.mark.parametrize("template", ["python-package", "python-cli"])
def test_the_python_templates_pass_their_own_lint_config(tmp_path, git_identity, template):
    agent("new", "lint-me", "A tool with a \"quoted\" description that is long enough to pass the line length limit",
          "--template", template, "--no-agent", cwd=tmp_path)  # fmt: skip
    project = tmp_path / "lint-me"
    ruff = [sys.executable, "-m", "ruff"]
    assert subprocess.run([*ruff, "check", "."], cwd=project, capture_output=True).returncode == 0
    assert subprocess.run([*ruff, "format", "--check", "."], cwd=project, capture_output=True).returncode == 0


@pytest.mark.slow
def test_the_cli_template_is_a_command_its_test_runs_as_a_subprocess(tmp_path, git_identity):
    agent("new", "greeter", "--template", "python-cli", "--no-agent", cwd=tmp_path)
    project = tmp_path / "greeter"
    pyproject = (project / "pyproject.toml").read_text()
    assert '[project.scripts]\ngreeter = "greeter.cli:main"' in pyproject
    assert "subprocess.run(" in (project / "tests" / "test_cli.py").read_text()
    run = subprocess.run([sys.executable, "-m", "greeter", "--version"], cwd=project, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(project / "src")})  # fmt: skip
    assert run.stdout.strip() == "greeter 0.1.0"


@pytest.mark.slow
def test_the_web_page_check_says_which_ran_and_fails_on_broken_html(tmp_path, git_identity):
    agent("new", "page", "--template", "web-page", "--no-agent", cwd=tmp_path)
    project = tmp_path / "page"
    check = [sys.executable, "tests/check_page.py"]
    passed = subprocess.run(check, cwd=project, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout
    browser = any(shutil.which(name) for name in BROWSERS)
    assert "html.parser" in passed.stdout
    if browser:
        assert "loaded index.html in headless" in passed.stdout
    else:
        assert "no headless browser installed" in passed.stdout and "parsed only" in passed.stdout
    page = project / "index.html"
    page.write_text(page.read_text().replace("</main>", '<img src="missing.png" alt="">'))
    failed = subprocess.run(check, cwd=project, capture_output=True, text=True)
    assert failed.returncode == 1
    assert "missing.png links a file that does not exist" in failed.stdout
    assert "</body> comes before <main>" in failed.stdout and "check failed" in failed.stdout


def test_list_shows_every_template_with_where_it_comes_from(tmp_path):
    mine = user_template("mine", {"notes.md.jinja": "{{ project_name }}\n"}, description="my own template")
    user_template("empty", {"README.md": "x\n"}, description="my empty")
    broken = Path(os.environ["AGENT_CONFIG_DIR"]) / "templates" / "broken"
    broken.mkdir()
    (broken / "template.toml").write_text('descripton = "typo"\ncheck = "true"\n')
    result = agent("new", "--list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout
    for name in ("python-package", "python-cli", "web-page"):
        assert name in lines
    assert "A Python package: pyproject (hatchling), src/ layout, pytest, ruff config\n" in lines
    assert f"my own template\n{' ' * 16}from: {mine}" in lines
    assert "my empty" in lines and "(replaces the built-in)" in lines
    assert "broken" in lines and "does not load" in lines and "descripton" in lines


@pytest.mark.slow
def test_a_users_template_renders_paths_and_contents_and_gets_an_agents_md(tmp_path, git_identity):
    user_template(
        "mine",
        {
            "{{ package_name }}/info.txt.jinja": "{{ project_name }} / {{ description }} / {{ year }}\n",
            "raw.txt": "{{ kept as it is }}\n",
        },
        check="test -f my_thing/info.txt",
    )
    result = agent("new", "my-thing", "a thing", "--template", "mine", "--no-agent", cwd=tmp_path)
    project = tmp_path / "my-thing"
    assert result.returncode == 0, result.stderr
    import datetime

    assert (
        project / "my_thing" / "info.txt"
    ).read_text() == f"my-thing / a thing / {datetime.date.today().year}\n"
    assert (project / "raw.txt").read_text() == "{{ kept as it is }}\n"
    agents = (project / "AGENTS.md").read_text()
    assert "test -f my_thing/info.txt" in agents and "my_thing/info.txt" in agents and "raw.txt" in agents


@pytest.mark.slow
def test_the_project_declares_its_check_for_later_sessions_and_a_folder_made_here_is_trusted(
    tmp_path, git_identity
):
    from agent.settings.config import load_settings
    from agent.settings.trust import is_trusted

    result = agent(
        "new", "demo", "--template", "empty", "--check", "test -s README.md", "--no-agent", cwd=tmp_path
    )
    project = tmp_path / "demo"
    assert result.returncode == 0, result.stderr
    assert ".agent/config.toml" in git(project, "ls-files").split()  # in the skeleton's commit
    assert 'check = "test -s README.md"' in (project / ".agent" / "config.toml").read_text()
    assert is_trusted(project) and f"trusted {project}" in result.stderr
    assert load_settings(project).check == "test -s README.md"  # what `agent` and editors then run

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    result = agent("new", "busy", "--template", "empty", "--no-agent", "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not is_trusted(busy) and f"agent trust {busy}" in result.stderr  # files of before: the user judges
    assert load_settings(busy).check is None


# --------------------------------------------------------------------------------------- bad input


@pytest.mark.slow
def test_a_non_empty_folder_is_refused_and_left_as_it_was(tmp_path, git_identity):
    project = tmp_path / "busy"
    project.mkdir()
    (project / "notes.txt").write_text("mine\n")
    result = agent("new", "busy", "--no-agent", cwd=tmp_path)
    assert result.returncode == 2
    assert "is not empty (it holds notes.txt)" in result.stderr and "--force" in result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]


@pytest.mark.slow
def test_with_force_a_file_in_the_way_is_kept_and_only_the_templates_files_are_committed(
    tmp_path, git_identity
):
    project = tmp_path / "busy"
    project.mkdir()
    (project / "README.md").write_text("my own readme\n")
    (project / "secrets.txt").write_text("not for git\n")
    result = agent("new", "busy", "--no-agent", "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (project / "README.md").read_text() == "my own readme\n"
    assert "kept README.md: it was already there" in result.stderr
    assert "kept as they were (already there): README.md" in result.stdout
    tracked = git(project, "ls-files").split()
    assert "pyproject.toml" in tracked and "AGENTS.md" in tracked
    assert "README.md" not in tracked and "secrets.txt" not in tracked


def test_the_skeleton_s_commit_runs_no_hook_of_the_folder_s_repository(tmp_path, git_identity):
    project = git_repo(tmp_path / "busy")  # `agent new --force` in a repository that has hooks
    for name in ("pre-commit", "commit-msg", "post-commit", "post-index-change"):
        hook = project / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\ntouch {tmp_path}/{name}-ran\nexit 1\n")
        hook.chmod(0o755)
    git(project, "config", "core.fsmonitor", f"touch {tmp_path}/fsmonitor-ran")
    (project / "a.txt").write_text("a\n")
    sha, _ = commit_skeleton(project, ["a.txt"], "skeleton", "the template's files")
    assert commits(project) == ["skeleton"] and git(project, "rev-parse", "HEAD").strip() == sha
    assert sorted(p.name for p in tmp_path.glob("*-ran")) == []


def test_an_unknown_template_is_refused_with_the_known_ones(tmp_path, git_identity):
    result = agent("new", "x", "--template", "rust-crate", "--no-agent", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unknown template 'rust-crate'" in result.stderr
    assert "Known templates: empty, python-cli, python-package, web-page." in result.stderr
    assert not (tmp_path / "x").exists()


def test_an_undefined_placeholder_is_named_before_anything_is_written(tmp_path, git_identity):
    user_template("bad", {"LICENSE.jinja": "(c) {{ year }} {{ author }}\n", "{{ licence }}.txt": "x\n"})
    result = agent("new", "x", "--template", "bad", "--no-agent", cwd=tmp_path)
    assert result.returncode == 2
    assert "uses a placeholder that is not defined: author, licence" in result.stderr
    assert "{{ author }} in LICENSE.jinja" in result.stderr
    assert "{{ licence }} in the file name {{ licence }}.txt" in result.stderr
    assert "Known placeholders: project_name, package_name, description, year" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_name_that_is_not_a_package_name_gets_a_derived_one_and_says_so(tmp_path, git_identity):
    result = agent("new", "2 Fast-Tools!", "--template", "python-package", "--no-agent", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (
        "'2 Fast-Tools!' is not a valid Python package name: the package is named 'project_2_fast_tools'"
        in (result.stderr)
    )
    assert (tmp_path / "2 Fast-Tools!" / "src" / "project_2_fast_tools" / "__init__.py").is_file()
    assert 'name = "project-2-fast-tools"' in (tmp_path / "2 Fast-Tools!" / "pyproject.toml").read_text()


@pytest.mark.parametrize(
    "project, package",
    [
        ("my-app", "my_app"),
        ("My App!", "my_app"),
        ("ok_name", "ok_name"),
        ("123go", "project_123go"),
        ("class", "class_pkg"),
        ("json", "json_pkg"),
        ("Ünïcödé", "unicode"),
        ("---", "project"),
    ],
)
def test_package_names_are_derived_valid_and_clear_of_keywords_and_the_standard_library(project, package):
    assert derive_package_name(project) == package
    assert package.isidentifier()


@pytest.mark.slow
def test_without_git_on_path_nothing_is_written(tmp_path, git_identity):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    result = agent("new", "x", "--no-agent", cwd=tmp_path, env={**os.environ, "PATH": str(empty_bin)})
    assert result.returncode == 2
    assert "git is not installed (no `git` on PATH)" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_git_without_a_name_or_email_commits_with_a_project_local_identity_and_says_so(
    tmp_path, git_identity
):
    git_identity.write_text("")  # no user at all
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    result = agent("new", "x", "--no-agent", cwd=tmp_path, env=env)
    project = tmp_path / "x"
    assert result.returncode == 0, result.stderr
    assert (
        "git has no user.name and no user.email set: committing with a project-local identity"
        in result.stderr
    )
    name = git(project, "config", "--local", "user.name").strip()
    assert git(project, "config", "--local", "user.email").strip() == f"{name}@localhost"
    assert git(project, "log", "-1", "--format=%an <%ae>").strip() == f"{name} <{name}@localhost>"


def test_a_description_is_needed_unless_there_is_no_agent(tmp_path, git_identity):
    result = agent("new", "x", cwd=tmp_path)
    assert result.returncode == 2 and "say what to build" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_an_unknown_profile_is_refused_before_anything_is_written(tmp_path, git_identity):
    result = agent("new", "x", "build it", "-p", "gemma5", cwd=tmp_path)
    assert result.returncode == 2 and "unknown profile 'gemma5'" in result.stderr
    assert not (tmp_path / "x").exists()


# -------------------------------------------------------------------------- the agent part (scripted)

SOLUTION = REPO / "examples" / "tasks" / "linked-list" / "solution"
LINKED_LIST = "Write a Python doubly linked list module with 5 pytest tests."


@pytest.mark.slow
def test_the_scripted_model_builds_the_seeds_linked_list_and_git_holds_two_commits(tmp_path, git_identity):
    module = (SOLUTION / "linked_list.py").read_text()
    tests = (SOLUTION / "test_linked_list.py").read_text().replace("from linked_list", "from dll.linked_list")
    replies = [
        {"tool_calls": [call("write_file", path="src/dll/linked_list.py", content=module)]},
        {"tool_calls": [call("write_file", path="tests/test_linked_list.py", content=tests)]},
        {"tool_calls": [call("bash", command="python3 -m pytest -q")]},
        {"content": "Built a doubly linked list in src/dll/linked_list.py with its tests."},
    ]
    with ScriptedServer(replies) as server:
        result = agent("new", "dll", LINKED_LIST, "--base-url", server.url, cwd=tmp_path)
    project = tmp_path / "dll"
    assert result.returncode == 0, result.stderr + result.stdout
    assert commits(project) == [LINKED_LIST.rstrip("."), "New project dll from the python-package template"]
    second = git(project, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(second) == ["src/dll/linked_list.py", "tests/test_linked_list.py"]
    assert git(project, "status", "--porcelain") == ""
    pytest_run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"], cwd=project, capture_output=True, text=True
    )
    assert pytest_run.returncode == 0 and "6 passed" in pytest_run.stdout  # the template's test and the 5
    # The model was given the description, the scaffolding steps and the template's check.
    task = server.requests[0]["messages"][-1]["content"]
    assert LINKED_LIST in task and "small verified steps" in task and "`python3 -m pytest -q`" in task
    assert "src/dll/" in task  # the template's guide
    summary = result.stdout
    assert "check: `python3 -m pytest -q` passed, with a test of the agent's in tests/" in summary
    assert "commits: 2" in summary
    assert "A src/dll/linked_list.py" in summary and "agent: completed · 4 turns" in summary


@pytest.mark.slow
def test_with_attempts_the_attempt_whose_check_passes_is_the_projects_second_commit(tmp_path, git_identity):
    module = (SOLUTION / "linked_list.py").read_text()
    tests = (SOLUTION / "test_linked_list.py").read_text().replace("from linked_list", "from dll.linked_list")
    steps = {
        1: [{"tool_calls": [call("write_file", path="src/dll/linked_list.py", content=module)]}],  # no test
        2: [
            {"tool_calls": [call("write_file", path="src/dll/linked_list.py", content=module)]},
            {"tool_calls": [call("write_file", path="tests/test_linked_list.py", content=tests)]},
        ],
    }

    def reply(body: dict) -> dict:
        done = sum(m["role"] == "assistant" for m in body["messages"])
        script = steps[body.get("seed") or 1]
        return script[done] if done < len(script) else {"content": "Done."}

    with ScriptedServer(default=reply) as server:
        result = agent("new", "dll", LINKED_LIST, "--base-url", server.url, "--attempts", "2", cwd=tmp_path)
    project = tmp_path / "dll"
    assert result.returncode == 0, result.stderr + result.stdout
    assert commits(project) == [LINKED_LIST.rstrip("."), "New project dll from the python-package template"]
    second = git(project, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(second) == ["src/dll/linked_list.py", "tests/test_linked_list.py"]
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "worktree", "list").count("\n") == 1  # the project's own, no attempt's
    assert "attempt 2 passed its check first" in result.stderr


@pytest.mark.slow
def test_when_the_agent_hits_its_limit_the_skeleton_and_its_commit_stay(
    tmp_path, git_identity, isolated_state
):
    with ScriptedServer(default={"tool_calls": [call("list_files")]}) as server:
        result = agent("new", "x", "build it", "--base-url", server.url, "--max-turns", "2", cwd=tmp_path)
    project = tmp_path / "x"
    assert result.returncode == 3, result.stderr
    assert commits(project) == ["New project x from the python-package template"]
    [session] = sorted((isolated_state / "sessions").glob("*.jsonl"))
    assert "the skeleton and its commit are kept; to continue:" in result.stdout
    assert f"agent run --resume {session.stem}" in result.stdout
    assert (
        "agent: limit · 2 turns" in result.stdout and "reached the limit of 2 model requests" in result.stdout
    )
    started = json.loads(session.read_text().splitlines()[0])
    assert started["options"]["check"].startswith("python3 -m pytest -q && ")  # a resume keeps the check


@pytest.mark.slow
def test_when_the_check_still_fails_at_the_end_nothing_more_is_committed(tmp_path, git_identity):
    broken = call("write_file", path="tests/test_more.py", content="def test_more():\n    assert 1 == 2\n")
    with ScriptedServer([{"tool_calls": [broken]}], default={"content": "Done."}) as server:
        result = agent("new", "x", "build it", "--base-url", server.url, cwd=tmp_path)
        requests = server.requests
    project = tmp_path / "x"
    assert result.returncode == 1, result.stderr
    assert commits(project) == ["New project x from the python-package template"]
    assert "check: `python3 -m pytest -q` failed (exit 1)" in result.stdout
    # The work, "Done." (the check fails), "Done." again (nothing changed: told so, not checked again),
    # and a third "Done." in a row ends that line; the check judges the work once more.
    assert requests[3]["messages"][-1]["content"].startswith("You changed nothing since the check failed")
    # Then it starts afresh: the work goes onto a branch, the skeleton is back, the conversation cleared.
    assert [m["role"] for m in requests[4]["messages"]] == ["system", "user"]
    assert "Its changes were undone" in requests[4]["messages"][-1]["content"]
    branches = subprocess.run(
        ["git", "branch", "--list", "agent/fresh-starts/*"], cwd=project, capture_output=True, text=True
    ).stdout.split()
    assert len(branches) == 1 and f"kept as branch {branches[0]}" in result.stdout + result.stderr
    kept = subprocess.run(
        ["git", "show", f"{branches[0]}:tests/test_more.py"], cwd=project, capture_output=True
    )
    assert kept.stdout.decode() == "def test_more():\n    assert 1 == 2\n"  # the work, kept
    assert not (project / "tests" / "test_more.py").exists()


@pytest.mark.slow
def test_with_no_fresh_starts_the_stuck_work_stays_in_the_working_tree(tmp_path, git_identity):
    broken = call("write_file", path="tests/test_more.py", content="def test_more():\n    assert 1 == 2\n")
    with ScriptedServer([{"tool_calls": [broken]}], default={"content": "Done."}) as server:
        result = agent("new", "x", "build it", "--base-url", server.url, "--fresh-starts", "0", cwd=tmp_path)
        assert len(server.requests) == 4  # the line's work, and three "Done.": no fresh start
    project = tmp_path / "x"
    assert result.returncode == 1, result.stderr
    assert commits(project) == ["New project x from the python-package template"]
    assert "A tests/test_more.py" in result.stdout  # left in the working tree, for the resume


@pytest.mark.slow
def test_when_the_server_is_not_there_the_skeleton_stays_and_the_task_can_be_run_later(
    tmp_path, git_identity
):
    result = agent("new", "x", "build it", "--base-url", "http://127.0.0.1:9", cwd=tmp_path)
    project = tmp_path / "x"
    assert result.returncode == 4
    assert commits(project) == ["New project x from the python-package template"]
    line = next(ln for ln in result.stdout.splitlines() if ln.strip().startswith("agent run "))
    task = load_task(Path(line.split()[-1]))  # a task file `agent run` reads as it is
    assert task.spec.check.startswith("python3 -m pytest -q && ") and task.spec.workdir == str(project)
    assert task.body.startswith("build it\n") and task.spec.approval == "full-auto"


@pytest.mark.slow
@pytest.mark.parametrize(
    "template, replies, feedback",
    [
        # The skeleton's own tests pass without anything built: a test of the model's own is wanted.
        (
            "python-package",
            [
                {
                    "tool_calls": [
                        call("write_file", path="src/x/add.py", content="def add(a, b):\n    return a - b\n")
                    ]
                }
            ],
            # ... and is shown the test file to extend (told only "add a test", the 1.5B did not)
            "No test of yours yet. Write tests/test_x.py out whole, with one more test function: it runs "
            "what you built as a user would, with an input from the task, and checks what it prints.\n\n"
            "tests/test_x.py now reads:\n```\n",
        ),
        # A template without a tests folder wants a change at least.
        ("empty", [], "Nothing is built yet: every file is still as the template made it."),
    ],
)
def test_a_model_that_says_done_without_building_and_testing_fails_the_check(
    tmp_path, git_identity, template, replies, feedback
):
    with ScriptedServer(replies, default={"content": "Done: it is built."}) as server:
        result = agent("new", "x", "build it", "-t", template, "--base-url", server.url, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert feedback in server.requests[len(replies) + 1]["messages"][-1]["content"]
    assert "failed (exit 1), with" in result.stdout
    assert commits(tmp_path / "x") == [f"New project x from the {template} template"]


def test_the_guard_shows_the_first_test_file_not_a_conftest_and_names_one_when_there_is_none(tmp_path):
    def guard_says(files: dict[str, str]) -> str:
        repo = git_repo(tmp_path / f"r{len(list(tmp_path.iterdir()))}")
        (repo / "tests").mkdir()
        for name, text in files.items():
            (repo / name).write_text(text)
        git = ["git", "-C", str(repo)]
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "skeleton"], check=True)
        sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        run = subprocess.run(
            ["bash", "-c", guarded_check("true", sha, "tests")], cwd=repo, capture_output=True, text=True
        )
        assert run.returncode == 1, run
        return run.stdout

    said = guard_says({"tests/conftest.py": "import os\n", "tests/test_a.py": "def test_a():\n    pass\n"})
    assert (
        "Write tests/test_a.py out whole" in said and "tests/test_a.py now reads:\n```\ndef test_a():" in said
    )
    said = guard_says({"README.md": "x\n"})
    assert "Write tests/test_it.py out whole" in said and "now reads" not in said


@pytest.mark.slow
def test_json_output_is_agent_runs_events_with_notices_for_the_skeleton(tmp_path, git_identity):
    test = "def test_notes():\n    assert True\n"
    replies = [
        {"tool_calls": [call("write_file", path="tests/test_notes.py", content=test)]},
        {"content": "Done."},
    ]
    with ScriptedServer(replies) as server:
        result = agent("new", "x", "build it", "--base-url", server.url, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    types = [e["type"] for e in events]
    before = events[: types.index("session.started")]
    assert before and all(e["type"] == "notice" for e in before)
    assert any(e["message"].startswith("created ") for e in before)
    assert "check.result" in types
    finished = next(e for e in events if e["type"] == "session.finished")
    assert finished["summary"]["exit_code"] == 0 and finished["summary"]["check"]["passed"]
    assert types[-1] == "notice" and events[-1]["message"].startswith("new project: ")


# --------------------------------------------------------------------------------------------- TUI


@pytest.mark.slow
async def test_with_tui_the_task_waits_in_the_prompt_and_after_it_the_check_decides_the_commit(
    tmp_path, git_identity, capsys
):
    from agent.frontends.scaffold.command import after_interactive, new_project_app
    from agent.frontends.scaffold.report import Output, Report
    from agent.frontends.scaffold.skeleton import Written
    from agent.frontends.tui.session import InteractiveSession, SessionOptions
    from agent.settings.config import Settings
    from tests.frontends.tui.helpers import SIZE, wait_for

    project = tmp_path / "x"
    agent("new", "x", "--no-agent", cwd=tmp_path)
    task = "Build a greeter.\n\nWork in small verified steps."
    replies = [{"tool_calls": [call("write_file", path="greet.txt", content="hi\n")]}, {"content": "Done."}]
    with ScriptedServer(replies) as server:
        session = InteractiveSession(
            Settings(),
            project,
            SessionOptions(base_url=server.url, approval="full-auto"),
            lambda _e: None,
            None,
        )
        app = new_project_app(session, task)
        async with app.run_test(size=SIZE) as pilot:
            assert app.prompt.text == task
            await wait_for(pilot, lambda: app.ready, what="the server")
            await pilot.press("enter")
            await wait_for(pilot, lambda: bool(session.outcomes), what="the task's end")
        await session.close()
        session.disconnect()
    assert server.requests[0]["messages"][-1]["content"].endswith(task)
    assert (project / "greet.txt").read_text() == "hi\n"
    skeleton = git(project, "rev-parse", "HEAD").strip()
    report = Report(project, "python-package", Written(files=["pyproject.toml"]), skeleton)
    code = await asyncio.to_thread(
        after_interactive, session, report, "python3 -m pytest -q", "Build a greeter.", Output(False), 0.0
    )
    assert code == 0
    assert commits(project) == ["Build a greeter", "New project x from the python-package template"]
    assert git(project, "show", "--name-only", "--format=", "HEAD").split() == ["greet.txt"]
    out = capsys.readouterr().out
    assert "check: `python3 -m pytest -q` passed" in out and f"session {session.session_id}" in out
