"""docs/configuration.md, written from the models that validate the settings and the server profiles, so
that the reference says what the code accepts: `python -m agent.settings.reference > docs/configuration.md`.
tests/settings/test_reference.py fails when the committed page differs from what this writes.
"""

from __future__ import annotations

import re
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agent.server import profiles
from agent.settings import config, paths
from tools.mcp import MCPServerConfig

WIDTH = 100
COMMAND = "python -m agent.settings.reference > docs/configuration.md"
# The folders' own variables, read in agent/settings/paths.py (their docstrings say what each holds).
FOLDER_VARIABLES = {
    "AGENT_CONFIG_DIR": paths.config_dir,
    "AGENT_STATE_DIR": paths.state_dir,
    "AGENT_CACHE_DIR": paths.cache_dir,
}


def _type_name(annotation: Any) -> str:
    """The TOML spelling of a field's type: what a user writes, not Python's name for it."""
    if annotation is type(None):
        return "unset"
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is Literal:
        return " \\| ".join(f'`"{value}"`' for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"array of {_plural(_type_name(args[0]))}"
    if origin is dict:
        return f"table of {_plural(_type_name(args[1]))}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
    return names.get(annotation, "any value")


def _plural(name: str) -> str:
    for kind in ("array of ", "table of "):
        if name.startswith(kind):
            return f"{kind.split()[0]}s of {name.removeprefix(kind)}"
    return f"({name})" if " or " in name or "|" in name else name + "s"


def _bounds(field: FieldInfo) -> list[str]:
    words = {Ge: ("at least", "ge"), Gt: ("above", "gt"), Le: ("at most", "le"), Lt: ("below", "lt")}
    return [
        f"{said} {getattr(item, name)}"
        for item in field.metadata
        for kind, (said, name) in words.items()
        if isinstance(item, kind)
    ]


def _toml_value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (str, Path)):
        return f'`"{value}"`'
    if isinstance(value, (list, dict)) and not value:
        return "`[]`" if isinstance(value, list) else "`{}`"
    return f"`{value}`"


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        made = field.default_factory()  # type: ignore[call-arg]  # (none here takes the data)
        return "" if isinstance(made, BaseModel) else f"default {_toml_value(made)}"
    if field.default is PydanticUndefined:
        return "required"
    return f"default {_toml_value(field.default)}"


def _table(annotation: Any) -> bool:
    """Whether the field is a table of its own (a model, or an optional one)."""
    kinds = typing.get_args(annotation) or (annotation,)
    return any(isinstance(kind, type) and issubclass(kind, BaseModel) for kind in kinds)


def _wrapped(text: str, rest: str = "") -> str:
    return textwrap.fill(
        text,
        WIDTH,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def field_lines(
    model: type[BaseModel], *, env: dict[str, str] | None = None, skip: tuple[str, ...] = ()
) -> str:
    """One bullet per field of `model`: its name, TOML type, bounds, default, environment variable and
    description (the field's own, from the model)."""
    variables = {field: var for var, field in (env or {}).items()}
    bullets = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        facts = [_type_name(field.annotation), *_bounds(field)]
        facts.append(_default(field))
        description = field.description or ""
        if name in variables:
            facts.append(f"environment `{variables[name]}`")
            description = description.replace(f" ({variables[name]})", "")  # said among the facts
        head = f"- **`{name}`** ({', '.join(f for f in facts if f)})"
        if not description and _table(field.annotation):
            description = f"The `[{name}]` table, below."
        bullets.append(_wrapped(f"{head}: {description}" if description else head, rest="  "))
    return "\n".join(bullets)


def _paragraphs(docstring: str | None, *, summary: bool = True) -> str:
    """A docstring as Markdown paragraphs, each wrapped to the page's width; without its first line when
    the page's heading already says it."""
    paragraphs = textwrap.dedent(docstring or "").strip().split("\n\n")
    return "\n\n".join(_wrapped(" ".join(p.split())) for p in paragraphs[0 if summary else 1 :])


def _doc_of(model: type[BaseModel]) -> str:
    return _paragraphs(model.__doc__)


def _builtin_profiles() -> str:
    rows = ["| profile | what it runs | speculation | actions |", "|---|---|---|---|"]
    for path in sorted(profiles.builtin_profiles_dir().glob("*.toml"), key=lambda p: p.stem):
        profile = profiles.load_profile_file(path)
        spec = profile.spec_label if profile.kind != "attach" else "(the server's)"
        rows.append(f"| `{profile.name}` | {profile.description} | {spec} | {profile.actions} |")
    return "\n".join(rows)


def _folder_variables() -> str:
    lines = []
    for variable, function in FOLDER_VARIABLES.items():
        said = re.sub(rf"\s*\({variable}\)\.?$", ".", " ".join((function.__doc__ or "").split()))
        lines.append(_wrapped(f"- `{variable}`: {said}", rest="  "))
    return "\n".join(lines)


def _setting_variables() -> str:
    return "\n".join(f"- `{var}`: the `{field}` setting." for var, field in config.ENV_FIELDS.items())


def _bullets(*items: str) -> str:
    return "\n".join(_wrapped(f"- {item}", rest="  ") for item in items)


def _block(text: str) -> str:
    """A section of the page: prose is wrapped to the page's width; lists, tables, code and headings are
    written as they come."""
    return text if text.startswith(("#", "-", "|", "```", "<!--")) else _paragraphs(text)


def configuration_page() -> str:
    """The whole of docs/configuration.md."""
    sections = [
        "# Configuration reference",
        f"<!-- Written by `{COMMAND}` from agent/settings/config.py and agent/server/profiles.py; "
        "tests/settings/test_reference.py fails when this file differs from what it writes. Change a "
        "field's description in its model, then run the command. -->",
        "Two kinds of file configure the agent: **settings** (`config.toml`: how the agent works) and "
        "**server profiles** (one TOML file per way of running or reaching a model server). A task "
        "file's front matter overrides some of them for one run of `agent run` (an example: "
        "[README](../README.md#2-headless-agent-run-taskmd)). Which profile to use, and how to measure "
        "one: [tuning.md](tuning.md).",
        "## Where settings come from",
        _paragraphs(config.__doc__, summary=False),
        _bullets(
            "Your file: `config.toml` in the config folder (`~/.config/spec-agent/` on Linux, or "
            "`$AGENT_CONFIG_DIR`).",
            f"A project's file: `{paths.PROJECT_CONFIG}` in the project, read only once you trust the "
            "folder (`agent trust`).",
            "`agent doctor` shows the settings in effect.",
        ),
        "## Settings (`config.toml`)",
        _doc_of(config.Settings),
        field_lines(config.Settings, env=config.ENV_FIELDS),
        "### `[permissions]`",
        _doc_of(config.PermissionRules),
        field_lines(config.PermissionRules),
        "```toml\n"
        'approval = "auto-edit"\n'
        "[permissions.allow]\n"
        'bash = ["pytest *", "ruff *"]\n'
        "[permissions.ask]\n"
        'bash = ["git push *"]\n'
        "```",
        "### `[mcp_servers.NAME]`",
        _doc_of(MCPServerConfig),
        field_lines(MCPServerConfig),
        "## Environment variables",
        "Each of these sets the setting of that name, over both files:",
        _setting_variables(),
        "And where the agent keeps its files:",
        _folder_variables(),
        "## Server profiles",
        _paragraphs(profiles.__doc__, summary=False),
        "Your own profiles go in the `profiles/` folder of the config folder "
        "(`~/.config/spec-agent/profiles/NAME.toml`), and a profile's name is its file's name; `agent server profiles` "
        "lists what can start here.",
        _doc_of(profiles.ServerProfile),
        field_lines(profiles.ServerProfile, skip=("name", "source")),
        "### `[speculative]`",
        _doc_of(profiles.Speculative),
        field_lines(profiles.Speculative),
        "### `[sampling]`",
        _doc_of(profiles.Sampling),
        field_lines(profiles.Sampling),
        "### The built-in profiles",
        "The files in `server_profiles/`; each says in its comments why it is set as it is.",
        _builtin_profiles(),
    ]
    return "\n\n".join(_block(section) for section in sections) + "\n"


if __name__ == "__main__":
    sys.stdout.write(configuration_page())
