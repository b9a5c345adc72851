"""A template rendered into a project's skeleton, in memory, and the names it is rendered with.

Files named `*.jinja` are rendered and lose the suffix, others are copied as they are; paths are
rendered too. Everything is rendered and checked before the first file is written.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import ConfigError
from agent.frontends.scaffold.templates import BUILTIN_TEMPLATES, Template
from agent.settings.paths import PROJECT_CONFIG

DEFAULT_AGENTS_MD = BUILTIN_TEMPLATES / "default-AGENTS.md.jinja"
PLACEHOLDERS = ("project_name", "package_name", "description", "year")
AUTOESCAPED = (".html", ".htm", ".xml", ".svg")
PROJECT_CONFIG_PATH = PROJECT_CONFIG.as_posix()  # where a project declares its check


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


def jinja_environment(loader_root: Path | None = None):
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

    env = jinja_environment(template.files_dir)
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
        default = jinja_environment(DEFAULT_AGENTS_MD.parent).get_template(DEFAULT_AGENTS_MD.name)
        text = default.render({**values, "check": check, "files": sorted([*files, "AGENTS.md"])})
        files["AGENTS.md"] = RenderedFile("AGENTS.md", text.encode("utf-8"))
    return Skeleton(
        list(files.values()),
        check,
        " ".join(render_text("template.toml: guide", template.spec.guide).split()),
        set(used),
    )


PROJECT_CONFIG_TEXT = """\
# This project's own settings for the agent (`agent doctor` shows them in effect). They apply in a
# trusted folder only (`agent trust`): the check is a command, and a cloned repository's commands must
# not run unasked. `agent new` trusts the folder it makes.
#
# The check runs once the model says a prompt's work is done, in the terminal (`agent`), in editors
# (`agent acp`) and for a task file that names none (`agent run`); a failure's output goes back to the
# model, up to check_rounds times.
check = {check}
check_rounds = 3
"""


def declare_check(skeleton: Skeleton) -> None:
    """The project declares its check in .agent/config.toml, for every session after `agent new`'s own
    (unless the template brings that file itself)."""
    if PROJECT_CONFIG_PATH not in {f.path for f in skeleton.files}:
        # A JSON string is a TOML basic string: the same quotes and escapes.
        text = PROJECT_CONFIG_TEXT.format(check=json.dumps(skeleton.check, ensure_ascii=False))
        skeleton.files.append(RenderedFile(PROJECT_CONFIG_PATH, text.encode("utf-8")))


def _clean_path(rendered: str, template: Template, rel: str) -> str:
    parts = rendered.split("/")
    if not rendered or rendered.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise _template_error(
            template,
            f"the file name {rel}",
            ValueError(f"it renders to {rendered!r}, not a path inside the project"),
        )
    return rendered
