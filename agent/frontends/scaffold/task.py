"""The agent part's task: the scaffolding prompt, the check guarded against a skeleton left as it was,
and the `agent run` task file they are written to."""

from __future__ import annotations

import argparse
import datetime
import shlex
from pathlib import Path
from typing import Any

from agent.frontends.scaffold.render import Skeleton, derive_package_name, jinja_environment
from agent.frontends.scaffold.templates import Template
from agent.settings.config import state_dir

# Small verified steps: small models finish when each step ends in a check they can read. Short, so
# that the embedded coder's 16k context keeps room for the files and a few rounds of check output.
SCAFFOLD_PROMPT = """\
{{ description }}

Build this in the new project `{{ project_name }}`, made from the {{ template }} template (AGENTS.md \
says how to run and test it). {{ guide }}

Work in small verified steps:
1. Write a test for one small part of it.
2. Write the code for that part.
3. Run the check, `{{ check }}`, read its output and fix what fails.
4. Repeat until all of it is built and the check passes.
Keep the tests that are there passing. When the check passes, say in one sentence what you built."""


def guarded_check(check: str, skeleton_sha: str, tests: str = "") -> str:
    """The agent part's check: the template's, and a change since the skeleton, in the tests folder
    when the template names one. The skeleton passes its own check, so without this a model that says
    "done" without acting would pass, and so would one that wrote code but no test of it (both habits
    of the embedded 1.5B, docs/benchmarks.md). A failure says why, for the model to read, and shows
    the test file to extend: told only "add a test", the 1.5B wrote its code file again, unchanged."""
    where = f" -- {shlex.quote(tests)}" if tests else ""
    unchanged = (
        f"git diff --quiet {skeleton_sha[:12]}{where} && "
        f'test -z "$(git ls-files --others --exclude-standard{where})"'
    )
    if not tests:
        message = "Nothing is built yet: every file is still as the template made it."
        return f"{check} && ! {{ {unchanged} && echo {shlex.quote(message)}; }}"
    say = (
        "No test of yours yet. Write $f out whole, with one more test function: it runs what you "
        "built as a user would, with an input from the task, and checks what it prints."
    )
    show = (
        # The first test file (not a conftest.py or __init__.py that sorts before it).
        f"f=$(git ls-files{where} | grep -m 1 '/test[^/]*$'); f=${{f:-{shlex.quote(tests)}/test_it.py}}; "
        f'echo "{say}"; '
        'if [ -f "$f" ]; then printf \'\\n%s now reads:\\n```\\n\' "$f"; cat "$f"; echo \'```\'; fi'
    )
    return f"{check} && ! {{ {unchanged} && {{ {show}; }}; }}"


def task_body(template: Template, skeleton: Skeleton, values: dict[str, Any]) -> str:
    env = jinja_environment()
    return (
        env.from_string(SCAFFOLD_PROMPT)
        .render({**values, "template": template.name, "guide": skeleton.guide, "check": skeleton.check})
        .strip()
    )


def write_task_file(folder: Path, body: str, check: str, approval: str, args: argparse.Namespace) -> Path:
    """The task as an `agent run` task file, kept in the state dir: the run reads it, and it can be run
    again (`agent run FILE`) when the agent part never started."""
    import yaml

    front: dict[str, Any] = {"approval": approval, "workdir": str(folder), "check": check}
    if args.profile:
        front["profile"] = args.profile
    if args.max_turns:
        front["max_turns"] = args.max_turns
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = state_dir() / "new" / f"{stamp}-{derive_package_name(folder.name)}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\n{yaml.safe_dump(front, sort_keys=False, allow_unicode=True)}---\n{body}\n", encoding="utf-8"
    )
    return path
