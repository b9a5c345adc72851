"""`agent new DIR "what to build"`: a project from nothing.

It renders a template into a new folder (the skeleton: build file, tests, lint config, AGENTS.md), makes
it a git repository with one commit, then gives the agent the description with a scaffolding prompt and
the template's check, through `agent run`'s own code path (agent/session/task_run.py), so the check loop, the
--json events, the exit codes and the session with its `--resume` are the same. When the check passes,
the agent's work becomes the second commit.

Templates are data: a folder with `template.toml` (a one-line description, the check, a line of guidance
for the model) and `files/`, rendered with Jinja2. Files named `*.jinja` are rendered and lose the
suffix, others are copied as they are; paths are rendered too. The built-in ones live in
agent/templates/; a user's own in the `templates` folder of the config dir (a same-named one replaces
the built-in). Everything is rendered in memory and checked before the first file is written.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import keyword
import os
import re
import shlex
import shutil
import sys
import time
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.core.checks import run_check
from agent.errors import AgentError, ConfigError
from agent.events import CheckFinished, Event, Notice, SessionFinished, SessionStarted
from agent.frontends.console import show_error
from agent.session.taskfile import check_command_exists
from agent.settings.config import Settings, config_dir, describe_validation_error, state_dir
from agent.store.redact import redact
from agent.store.telemetry import summary_line

BUILTIN_TEMPLATES = Path(__file__).parents[2] / "templates"
DEFAULT_TEMPLATE = "python-package"
DEFAULT_AGENTS_MD = BUILTIN_TEMPLATES / "default-AGENTS.md.jinja"
PLACEHOLDERS = ("project_name", "package_name", "description", "year")
AUTOESCAPED = (".html", ".htm", ".xml", ".svg")
SUBJECT_LIMIT = 72

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


class TemplateSpec(BaseModel):
    """template.toml: what `agent new --list` shows, and how the project is checked."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(description="One line for `agent new --list`.")
    check: str = Field(description="Shell command run in the project; exit 0 means it works.")
    guide: str = Field("", description="A line for the model: where code and tests go, how to run it.")
    tests: str = Field(
        "",
        description="The folder of the project's tests: the agent's work must add or change a test there "
        "(the skeleton's own tests pass without anything built). Empty: any change counts.",
    )


@dataclass
class Template:
    name: str
    root: Path
    spec: TemplateSpec
    source: str  # "built-in", or the folder it was read from

    @property
    def files_dir(self) -> Path:
        return self.root / "files"


@dataclass
class RenderedFile:
    path: str  # relative, with / separators
    data: bytes
    executable: bool = False


@dataclass
class Skeleton:
    files: list[RenderedFile]
    check: str
    guide: str
    placeholders: set[str]  # the ones the template uses


# ---------------------------------------------------------------------------------------- templates


def user_templates_dir() -> Path:
    return config_dir() / "templates"


def _read_template(name: str, root: Path, source: str) -> Template:
    path = root / "template.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path}: not valid TOML", str(exc), "Fix the file or move the template aside."
        ) from exc
    try:
        spec = TemplateSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid template '{name}'",
            describe_validation_error(str(path), exc),
            f"Known fields: {', '.join(TemplateSpec.model_fields)}.",
        ) from exc
    return Template(name, root, spec, source)


def find_templates() -> dict[str, Template | ConfigError]:
    """Every template by name: built-in first, then the user's (replacing a built-in of the same name).
    A template that does not load is kept as its error, so that a listing can show it."""
    found: dict[str, Template | ConfigError] = {}
    for base, builtin in ((BUILTIN_TEMPLATES, True), (user_templates_dir(), False)):
        if not base.is_dir():
            continue
        for root in sorted(p for p in base.iterdir() if (p / "template.toml").is_file()):
            try:
                found[root.name] = _read_template(root.name, root, "built-in" if builtin else str(root))
            except ConfigError as exc:
                found[root.name] = exc
    return found


def load_template(name: str) -> Template:
    templates = find_templates()
    if name not in templates:
        raise ConfigError(
            f"unknown template '{name}'",
            f"Known templates: {', '.join(sorted(templates))}.",
            f"`agent new --list` describes them; your own go in {user_templates_dir()}/<name>/.",
        )
    template = templates[name]
    if isinstance(template, ConfigError):
        raise template
    return template


def list_templates() -> str:
    templates = find_templates()
    builtin = {p.name for p in BUILTIN_TEMPLATES.iterdir() if (p / "template.toml").is_file()}
    width = max((len(n) for n in templates), default=0)
    lines = []
    for name, template in sorted(templates.items()):
        if isinstance(template, ConfigError):
            lines.append(f"{name:<{width}}  (does not load: {template.why or template.what})")
            continue
        source = template.source
        if source != "built-in" and name in builtin:
            source += " (replaces the built-in)"
        lines.append(f"{name:<{width}}  {template.spec.description}\n{'':<{width}}  from: {source}")
    lines.append(f"\nYour own templates go in {user_templates_dir()}/<name>/ (template.toml and files/).")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------- names


def derive_package_name(project_name: str) -> str:
    """A Python package name from a project name: ASCII, lower case, words joined by `_`, not a
    keyword and not a standard library module (which the tests' `src` path would shadow)."""
    ascii_name = unicodedata.normalize("NFKD", project_name).encode("ascii", "ignore").decode()
    name = re.sub(r"[^0-9A-Za-z]+", "_", ascii_name).strip("_").lower() or "project"
    if name[0].isdigit():
        name = f"project_{name}"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in sys.stdlib_module_names:
        name = f"{name}_pkg"
    return name


def package_name_note(project_name: str, package_name: str) -> str | None:
    if package_name == project_name:
        return None
    base = package_name.removesuffix("_pkg")
    if base != package_name and (keyword.iskeyword(base) or keyword.issoftkeyword(base)):
        return f"'{project_name}' is a Python keyword: the package is named '{package_name}'"
    if base != package_name and base in sys.stdlib_module_names:
        return f"'{project_name}' is a standard library module: the package is named '{package_name}'"
    return f"'{project_name}' is not a valid Python package name: the package is named '{package_name}'"


# ---------------------------------------------------------------------------------------- rendering


def _one_line(value: Any) -> str:
    text = " ".join(str(value).split())
    return "".join(c for c in text if unicodedata.category(c) != "Cc")


def _python_string(value: Any) -> str:
    """A Python string literal quoted as ruff format quotes it: double quotes unless the text has some."""
    text = str(value)
    return repr(text) if '"' in text else json.dumps(text, ensure_ascii=False)


def _environment(loader_root: Path | None = None):
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(loader_root)) if loader_root else None,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=lambda name: bool(name) and name.removesuffix(".jinja").lower().endswith(AUTOESCAPED),
    )
    env.filters["oneline"] = _one_line
    env.filters["toml"] = lambda value: json.dumps(str(value), ensure_ascii=False)  # a TOML basic string
    env.filters["pystr"] = _python_string
    return env


def _template_error(template: Template, where: str, exc: Exception) -> ConfigError:
    line = getattr(exc, "lineno", None)
    return ConfigError(
        f"template '{template.name}' does not render",
        f"{where}{f', line {line}' if line else ''}: {getattr(exc, 'message', None) or exc}",
        f"Fix the template in {template.root}.",
    )


def render(template: Template, values: dict[str, Any]) -> Skeleton:
    """The whole skeleton in memory. A placeholder the template uses but nobody defines is named
    (with every file that uses it) before anything is written."""
    import jinja2
    from jinja2 import meta

    env = _environment(template.files_dir)
    sources: list[tuple[str, Path]] = []  # (path as written in the template, file)
    if template.files_dir.is_dir():
        for path in sorted(p for p in template.files_dir.rglob("*") if p.is_file()):
            if "__pycache__" not in path.parts:
                sources.append((path.relative_to(template.files_dir).as_posix(), path))

    parsed: dict[str, Any] = {}  # where it is -> its parsed template
    used: dict[str, set[str]] = {}
    texts = [("template.toml: check", template.spec.check), ("template.toml: guide", template.spec.guide)]
    texts += [(f"the file name {rel}", rel) for rel, _ in sources]
    for where, text in texts:
        try:
            parsed[where] = env.parse(text)
        except jinja2.TemplateSyntaxError as exc:
            raise _template_error(template, where, exc) from exc
    for rel, path in sources:
        if not rel.endswith(".jinja"):
            continue
        try:
            parsed[rel] = env.parse(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise _template_error(template, rel, ValueError("not UTF-8 text")) from exc
        except jinja2.TemplateSyntaxError as exc:
            raise _template_error(template, rel, exc) from exc
    for where, tree in parsed.items():
        for name in meta.find_undeclared_variables(tree):
            used.setdefault(name, set()).add(where)
    undefined = {name: wheres for name, wheres in used.items() if name not in values}
    if undefined:
        lines = [
            f"{{{{ {name} }}}} in {', '.join(sorted(wheres))}" for name, wheres in sorted(undefined.items())
        ]
        raise ConfigError(
            f"template '{template.name}' uses a placeholder that is not defined: {', '.join(sorted(undefined))}",
            "\n".join(lines) + f"\nKnown placeholders: {', '.join(PLACEHOLDERS)}. Nothing was written.",
            f"Fix the template in {template.root}.",
        )

    def render_text(where: str, text: str) -> str:
        try:
            return env.from_string(text).render(values)
        except jinja2.TemplateError as exc:
            raise _template_error(template, where, exc) from exc

    files: dict[str, RenderedFile] = {}
    for rel, path in sources:
        target = _clean_path(render_text(f"the file name {rel}", rel).removesuffix(".jinja"), template, rel)
        if rel.endswith(".jinja"):
            try:
                data = env.get_template(rel).render(values).encode("utf-8")
            except jinja2.TemplateError as exc:
                raise _template_error(template, rel, exc) from exc
        else:
            data = path.read_bytes()
        if target in files:
            raise _template_error(template, rel, ValueError(f"a second file renders to {target}"))
        files[target] = RenderedFile(target, data, os.access(path, os.X_OK))
    check = render_text("template.toml: check", template.spec.check).strip()
    if "AGENTS.md" not in files:
        default = _environment(DEFAULT_AGENTS_MD.parent).get_template(DEFAULT_AGENTS_MD.name)
        text = default.render({**values, "check": check, "files": sorted([*files, "AGENTS.md"])})
        files["AGENTS.md"] = RenderedFile("AGENTS.md", text.encode("utf-8"))
    return Skeleton(
        list(files.values()),
        check,
        " ".join(render_text("template.toml: guide", template.spec.guide).split()),
        set(used),
    )


def _clean_path(rendered: str, template: Template, rel: str) -> str:
    parts = rendered.split("/")
    if not rendered or rendered.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise _template_error(
            template,
            f"the file name {rel}",
            ValueError(f"it renders to {rendered!r}, not a path inside the project"),
        )
    return rendered


# ------------------------------------------------------------------------------------ the skeleton


@dataclass
class Written:
    files: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # already there (with --force): left as they were


def folder_entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def check_folder(folder: Path, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} exists and is not a folder", fix="Give a new folder's path.")
    entries = folder_entries(folder)
    if entries and not force:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise ConfigError(
            f"{folder} is not empty (it holds {shown})",
            "`agent new` starts a project in a new or empty folder.",
            "Give another folder, or --force to add the template's files next to what is there "
            "(an existing file is never overwritten).",
        )


def write_skeleton(skeleton: Skeleton, folder: Path) -> Written:
    """Write the files; one that is already there, or whose path leads out of the folder (a symlink),
    is left alone and reported."""
    folder.mkdir(parents=True, exist_ok=True)
    root = folder.resolve()
    written = Written()
    for item in skeleton.files:
        target = folder / item.path
        inside = target.resolve().is_relative_to(root)
        if not inside or target.exists() or target.is_symlink() or _blocked_parent(target, folder):
            written.kept.append(item.path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as handle:  # exclusive: never overwrites, even in a race
            handle.write(item.data)
        if item.executable:
            target.chmod(target.stat().st_mode | 0o111)
        written.files.append(item.path)
    return written


def _blocked_parent(target: Path, folder: Path) -> bool:
    parent = target.parent
    while parent != folder:
        if parent.exists() and not parent.is_dir():
            return True
        parent = parent.parent
    return False


# --------------------------------------------------------------------------------------------- git


def require_git() -> None:
    if shutil.which("git") is None:
        raise ConfigError(
            "git is not installed (no `git` on PATH)",
            "`agent new` makes the project a git repository and commits the skeleton and the agent's work.",
            "Install git (e.g. `apt install git`), then run `agent new` again.",
        )


def _git_config(repo, key: str) -> str:
    from git import GitCommandError

    try:
        return repo.git.config("--get", key).strip()
    except GitCommandError:
        return ""


def ensure_identity(repo) -> str | None:
    """Commits need a name and an email. Without them (in git's config or its environment variables),
    set a project-local identity and say so."""
    env = os.environ
    has_name = bool(_git_config(repo, "user.name")) or bool(
        env.get("GIT_AUTHOR_NAME") and env.get("GIT_COMMITTER_NAME")
    )
    has_email = bool(_git_config(repo, "user.email")) or bool(
        env.get("EMAIL") or (env.get("GIT_AUTHOR_EMAIL") and env.get("GIT_COMMITTER_EMAIL"))
    )
    if has_name and has_email:
        return None
    try:
        import getpass

        login = re.sub(r"[^A-Za-z0-9._-]", "", getpass.getuser()) or "spec-agent"
    except (KeyError, OSError):
        login = "spec-agent"
    missing = []
    with repo.config_writer("repository") as config:
        if not has_name:
            config.set_value("user", "name", login)
            missing.append(f"user.name = {login}")
        if not has_email:
            config.set_value("user", "email", f"{login}@localhost")
            missing.append(f"user.email = {login}@localhost")
    return (
        f"git has no {' and no '.join(m.split(' =')[0] for m in missing)} set: committing with a project-local "
        f"identity ({', '.join(missing)} in {Path(repo.git_dir) / 'config'}); "
        "`git config --global user.name NAME` and `user.email EMAIL` set yours"
    )


def commit_skeleton(folder: Path, paths: list[str], subject: str, body: str) -> tuple[str, list[str]]:
    """`git init` (harmless in a repository already there) and a commit of exactly the files written:
    nothing the folder held before, and nothing staged before, goes into it."""
    import git

    from tools.git import without_hooks

    notes = []
    repo = without_hooks(git.Repo.init(folder))  # the agent's own commit runs no hook (issue #26)
    identity = ensure_identity(repo)
    if identity:
        notes.append(identity)
    if not paths:
        raise AgentError(f"nothing to commit in {folder}: every file of the template was already there")
    with repo.git.custom_environment(GIT_LITERAL_PATHSPECS="1"):
        repo.git.add("-f", "--", *paths)  # -f: the template's files belong in it, even if ignored
        try:
            repo.git.commit("-q", "--no-verify", "-m", subject, "-m", body, "--", *paths)
        except git.GitCommandError as exc:
            raise AgentError(
                f"git could not commit the skeleton in {folder}",
                (exc.stderr or str(exc)).strip()[-1500:],
                "The files are written; fix the cause (commit signing, say) and commit them yourself.",
            ) from exc
    return repo.head.commit.hexsha, notes


def commit_agent_work(folder: Path, since: str, subject: str) -> str | None:
    """The agent's files (changed since the skeleton) as one commit; the notice, None if it changed none."""
    from tools.git import Checkpoints, open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    if repo is None:
        return None
    done = Checkpoints(repo).commit_changes(subject, since)
    return done.notice if done else None


def commit_subject(description: str) -> str:
    line = next((ln.strip() for ln in description.splitlines() if ln.strip()), "the project")
    if len(line) > SUBJECT_LIMIT:
        return line[: SUBJECT_LIMIT - 3].rsplit(" ", 1)[0].rstrip(",.;:") + "..."
    return line.rstrip(".")


def changes_since(folder: Path, sha: str) -> list[str]:
    """'A path' / 'M path' / 'D path' for what differs from `sha` in the working tree (untracked too)."""
    from tools.git import Checkpoints, open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    if repo is None:
        return []
    out = Checkpoints(repo).diff_since(sha, "--name-status", "--no-renames")
    return [" ".join(line.split("\t", 1)) for line in out.splitlines() if line.strip()]


def branch_log(folder: Path, limit: int = 5) -> list[str]:
    from tools.git import open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    if repo is None or not repo.head.is_valid():
        return []
    return repo.git.log(f"--max-count={limit}", "--format=%h %s").splitlines()


def commit_count(folder: Path) -> int:
    from tools.git import open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    return int(repo.git.rev_list("--count", "HEAD")) if repo is not None and repo.head.is_valid() else 0


# --------------------------------------------------------------------------------------- the task


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
    env = _environment()
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


# ------------------------------------------------------------------------------------------- output


class Output:
    """Progress lines for people on stderr, or `agent run`'s notice events with --json."""

    def __init__(self, json_lines: bool) -> None:
        from agent.frontends.headless import (
            Printer,  # (lazy: agent run's front end and the session core behind it)
        )

        self.json_lines = json_lines
        self.printer = Printer(json_lines, quiet=False)

    def say(self, message: str) -> None:
        if self.json_lines:
            self.printer(Notice(message))
        else:
            print(message, file=sys.stderr, flush=True)

    def event(self, event: Event) -> None:
        self.printer(event)

    def summary(self, lines: list[str]) -> None:
        if self.json_lines:
            self.printer(Notice("\n".join(lines)))
        else:
            print("\n".join(lines), flush=True)


class RunObserver:
    """What `agent new` needs from the run's events: the session, and how it ended."""

    def __init__(self) -> None:
        self.session_id = ""
        self.finished: SessionFinished | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, SessionStarted):
            self.session_id = event.session_id
        elif isinstance(event, SessionFinished):
            self.finished = event


@dataclass
class Report:
    folder: Path
    template: str
    written: Written
    skeleton_sha: str
    check: dict[str, Any] | None = None  # CheckResult.to_dict()
    agent: str = ""  # how the agent part ended: "", completed, failed, limit, error, interrupted
    exit_code: int = 0
    session_id: str = ""
    run_summary: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    task_file: Path | None = None
    agent_commit: str | None = None
    check_shown: str = ""  # the template's check, when the command run adds the guard (guarded_check)
    tests: str = ""  # the folder the guard wants a test of the agent's in

    def lines(self) -> list[str]:
        lines = [f"new project: {self.folder} (template {self.template})"]
        changes = changes_since(self.folder, self.skeleton_sha)
        since = f"; since then (A added, M changed, D deleted): {len(changes)}" if changes else ""
        lines.append(f"  files: {len(self.written.files)} from the template{since}")
        lines += [f"    {change}" for change in changes[:20]]
        if self.written.kept:
            lines.append(f"  kept as they were (already there): {', '.join(self.written.kept)}")
        if self.check:
            code = self.check["exit_code"]
            verdict = "passed" if self.check["passed"] else f"failed (exit {code})" if code else "timed out"
            guard = ""
            if self.check_shown:
                guard = f", with a test of the agent's in {self.tests}/" if self.tests else ", with a change"
            lines.append(f"  check: `{self.check_shown or self.check['command']}` {verdict}{guard}")
        elif self.agent:
            lines.append("  check: did not run (the agent did not finish)")
        log = branch_log(self.folder)
        lines.append(f"  commits: {commit_count(self.folder)}")
        lines += [f"    {entry}" for entry in log]
        if self.agent:
            run_figures = summary_line(self.run_summary) if self.run_summary else "no turns"
            lines.append(f"  agent: {self.agent} · {run_figures} · {_duration(self.seconds)} in all")
        if self.error:
            lines.append(f"  stopped: {self.error}")
        if self.agent and self.exit_code != 0:
            lines.append("  the skeleton and its commit are kept; to continue:")
            if self.session_id:
                lines.append(f"    agent run --resume {self.session_id}")
            elif self.task_file:
                lines.append(f"    agent run {self.task_file}")
        elif self.session_id:
            lines.append(f"  session {self.session_id}: agent stats {self.session_id}")
        return lines


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


# ------------------------------------------------------------------------------------------ command


@dataclass
class Plan:
    folder: Path
    template: Template
    values: dict[str, Any]
    skeleton: Skeleton
    notes: list[str]


def plan_project(args: argparse.Namespace, settings: Settings) -> Plan:
    """Everything that can be refused, refused before anything is written."""
    if not args.dir:
        raise ConfigError(
            "give the new project's folder", fix='agent new DIR "what to build"  |  agent new --list'
        )
    if not args.no_agent and not (args.description or "").strip():
        raise ConfigError(
            "say what to build",
            fix=f'agent new {args.dir} "a command that ..."  (or --no-agent for the skeleton alone)',
        )
    if args.tui and (args.json or args.no_agent):
        raise ConfigError("--tui opens the interactive session: it does not go with --json or --no-agent")
    folder = Path(args.dir).expanduser().absolute()
    template = load_template(args.template or DEFAULT_TEMPLATE)
    project_name = folder.resolve().name if folder.exists() else folder.name
    package_name = derive_package_name(project_name)
    description = (args.description or "").strip() or f"{project_name}, a new project."
    values = {
        "project_name": project_name,
        "package_name": package_name,
        "description": description,
        "year": datetime.date.today().year,
    }
    skeleton = render(template, values)
    if args.check:
        skeleton.check = args.check
    notes = []
    if "package_name" in skeleton.placeholders and (note := package_name_note(project_name, package_name)):
        notes.append(note)
    require_git()
    check_folder(folder, args.force)
    check_command_exists(skeleton.check, Path.cwd())
    if not args.no_agent:
        from agent.session.connect import resolve_profile  # (lazy: the server layer, only with an agent part)

        resolve_profile(settings, args.profile, args.base_url, folder)
    return Plan(folder, template, values, skeleton, notes)


def cmd_new(args: argparse.Namespace, settings: Settings) -> int:
    if args.list:
        print(list_templates())
        return 0
    try:
        return _new(args, settings)
    except AgentError as exc:
        if args.json:
            print(
                json.dumps({"type": "error", "error": "config", "message": redact(str(exc)), "fatal": True}),
                flush=True,
            )
        raise


def _new(args: argparse.Namespace, settings: Settings) -> int:
    started = time.monotonic()
    plan = plan_project(args, settings)
    out = Output(args.json)
    for note in plan.notes:
        out.say(note)
    folder, skeleton = plan.folder, plan.skeleton

    written = write_skeleton(skeleton, folder)
    for path in written.kept:
        out.say(f"kept {path}: it was already there, so the template's {path} was not written")
    subject = f"New project {plan.values['project_name']} from the {plan.template.name} template"
    body = f"Made by `agent new`. What it is for:\n\n{plan.values['description']}"
    sha, notes = commit_skeleton(folder, written.files, subject, body)
    for note in notes:
        out.say(note)
    out.say(
        f"created {folder}: {len(written.files)} files from the template {plan.template.name}, commit {sha[:10]}"
    )
    report = Report(folder, plan.template.name, written, sha)

    if args.no_agent:
        result = asyncio.run(run_check(skeleton.check, folder))
        out.event(
            CheckFinished(1, result.command, result.passed, result.exit_code, result.output, result.seconds)
        )
        report.check = result.to_dict()
        report.exit_code = 0 if result.passed else 1
        if not result.passed and not args.json:
            print(result.output.strip()[-3000:], file=sys.stderr)
        out.summary(report.lines())
        return report.exit_code

    if plan.template.name == "empty" and not args.check:
        out.say(
            f"the empty template's check only asks for a README: `{skeleton.check}`; --check CMD decides better"
        )
    body_text = task_body(plan.template, skeleton, plan.values)
    if args.tui:
        return _in_tui(args, settings, plan, body_text, report, out, started)
    approval = args.approval or "full-auto"  # a new folder, made for this: nothing of the user's to guard
    report.check_shown, report.tests = skeleton.check, plan.template.spec.tests if not args.check else ""
    check = guarded_check(skeleton.check, sha, report.tests)
    report.task_file = write_task_file(folder, body_text, check, approval, args)
    _run_headless(args, settings, report, out)
    if report.exit_code == 0:
        report.agent_commit = commit_agent_work(folder, sha, commit_subject(plan.values["description"]))
        if report.agent_commit:
            out.say(report.agent_commit)
    report.seconds = time.monotonic() - started
    out.summary(report.lines())
    return report.exit_code


def _run_headless(args: argparse.Namespace, settings: Settings, report: Report, out: Output) -> None:
    """The agent part, as `agent run TASK --workdir DIR` runs it (agent/session/task_run.py): the same session,
    check loop, events and exit codes, its events shown as `agent run` shows them."""
    # (lazy, like the TUI below: the session core and the model client, only when the agent works)
    from agent.frontends.headless import explain, print_json_error
    from agent.session.task_run import EXIT, TaskRequest, run_task_blocking

    request = TaskRequest(
        task=report.task_file, workdir=report.folder, profile=args.profile, base_url=args.base_url,
        max_turns=args.max_turns,
        auto_commit=False,  # on success `agent new` makes the second commit itself, with what was built
    )  # fmt: skip
    seen = RunObserver()

    def emit(event: Event) -> None:
        out.event(event)
        seen(event)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        result = run_task_blocking(request, settings, emit, None if args.json else say)
    except AgentError as exc:  # the server did not start: the skeleton stays, the summary says so
        if args.json:
            print_json_error(exc)
        else:
            show_error(exc)
        report.exit_code, report.error = exc.exit_code, exc.what
    else:
        if result is None:
            print("terminated", file=sys.stderr)
            report.exit_code = EXIT["terminated"]
        else:
            report.exit_code = result.exit_code
            if not args.json and result.outcome and result.outcome.final:
                print(redact(result.outcome.final))
            if not args.json:
                explain(result)
    report.session_id = seen.session_id
    if seen.finished is not None:
        report.agent = seen.finished.outcome
        report.check = seen.finished.summary.get("check")
        report.run_summary = seen.finished.summary
        report.error = report.error or seen.finished.summary.get("error", "")
    else:
        report.agent = "error"


def _in_tui(
    args: argparse.Namespace,
    settings: Settings,
    plan: Plan,
    body: str,
    report: Report,
    out: Output,
    started: float,
) -> int:
    """The agent part in the TUI: the task waits in the prompt (Enter sends it); once the session is
    left, the check runs, and when it passes the work is committed."""
    from agent.frontends.tui.session import (  # (lazy: Textual, only with --tui)
        InteractiveSession,
        SessionOptions,
    )

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise ConfigError("--tui needs a terminal", fix="Leave out --tui to build the project headless.")
    options = SessionOptions(
        profile=args.profile, base_url=args.base_url, approval=args.approval, max_turns=args.max_turns
    )
    session = InteractiveSession(settings, plan.folder, options, emit_ui=lambda _e: None, approve=None)
    app = new_project_app(session, body)
    try:
        app.run()
    finally:
        session.disconnect()
    report.check_shown, report.tests = plan.skeleton.check, plan.template.spec.tests if not args.check else ""
    check = guarded_check(plan.skeleton.check, report.skeleton_sha, report.tests)
    return after_interactive(session, report, check, plan.values["description"], out, started)


def after_interactive(
    session, report: Report, check: str, description: str, out: Output, started: float
) -> int:
    """Once the TUI is left: the check, the commit when it passes, the summary. Exit 0: it passed."""
    report.session_id = session.session_id
    report.agent = "completed" if session.outcomes else "not started"
    if session.recorder is not None:
        report.run_summary = session.recorder.summary()
    result = asyncio.run(run_check(check, report.folder))
    out.event(
        CheckFinished(1, result.command, result.passed, result.exit_code, result.output, result.seconds)
    )
    report.check = result.to_dict()
    report.exit_code = 0 if result.passed else 1
    if result.passed:
        report.agent_commit = commit_agent_work(
            report.folder, report.skeleton_sha, commit_subject(description)
        )
        if report.agent_commit:
            out.say(report.agent_commit)
    report.seconds = time.monotonic() - started
    out.summary(report.lines())
    return report.exit_code


def new_project_app(session, task: str):
    """The TUI with the scaffolding task already in its prompt."""
    import inspect

    from agent.frontends.tui.app import AgentApp  # (lazy: Textual, only with --tui)

    class NewProjectApp(AgentApp):
        # Textual looks for a relative CSS_PATH next to the subclass's module: name AgentApp's own file.
        CSS_PATH = str(Path(inspect.getfile(AgentApp)).parent / str(AgentApp.CSS_PATH))

        def on_mount(self) -> None:
            # Textual calls every class's on_mount along the MRO: AgentApp's own runs too.
            self.prompt.load_text(task)

    return NewProjectApp(session)
