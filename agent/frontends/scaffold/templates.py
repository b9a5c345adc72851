"""`agent new`'s templates: where they are found and how template.toml is read.

Templates are data: a folder with `template.toml` (a one-line description, the check, a line of guidance
for the model) and `files/`, rendered with Jinja2 (render.py). The built-in ones live in
agent/templates/; a user's own in the `templates` folder of the config dir (a same-named one replaces
the built-in).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ConfigError
from agent.settings.config import config_dir, describe_validation_error

BUILTIN_TEMPLATES = Path(__file__).parents[2] / "templates"
DEFAULT_TEMPLATE = "python-package"


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
