"""The task-file format of `agent run` (and `agent new`, `agent bench --tasks`): a Markdown task with
optional YAML front matter (profile, workdir, limits, approval, sampling, a `check` command), read with
the line endings, BOMs and mistakes people's editors make, and refused with the key and file named.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from frontmatter.default_handlers import YAMLHandler
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.errors import ConfigError, ExitCode
from agent.protocols.registry import protocol_names
from agent.settings import FRESH_STARTS
from agent.settings.config import describe_validation_error
from tools.approval import MODES_IN_WORDS, ApprovalMode
from tools.mcp import parse_servers
from tools.shell_parser import parse


class SamplingOverrides(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    seed: int | None = None


class TaskSpec(BaseModel):
    """The front matter of a task file. Unknown keys are refused by name."""

    model_config = ConfigDict(extra="forbid")

    profile: str | None = Field(None, description="Server profile to run the task on.")
    workdir: str | None = Field(None, description="Where the agent works; relative to the task file.")
    max_turns: int | None = Field(
        None, ge=1, description=f"Model requests before stopping (exit {ExitCode.LIMIT.value})."
    )
    time_limit: float | None = Field(
        None, gt=0, description=f"Seconds, or '90s', '10m', '1h' (exit {ExitCode.LIMIT.value})."
    )
    approval: ApprovalMode | None = Field(None, description=f"{MODES_IN_WORDS}.")
    sampling: SamplingOverrides = Field(default_factory=SamplingOverrides)
    tool_choice: Literal["auto", "required"] | None = Field(None, description="Sent to the server as is.")
    check: str | None = Field(
        None, description="Shell command run in the workdir afterwards; exit 0 = success."
    )
    check_rounds: int | None = Field(
        None, ge=0, description="Times a failed check goes back to the model to fix (default 3)."
    )
    fresh_starts: int | None = Field(
        None,
        ge=0,
        description=f"Times a stuck task starts afresh, its check still failing (default {FRESH_STARTS}).",
    )
    actions: str | None = Field(
        None,
        description="How the model acts: an action protocol's name (native tool calls, or edit blocks "
        "written as text; agent/protocols/registry.py lists them).",
    )
    lint: str | None = Field(
        None, description="The project's lint command, run on each file the model edits ({path}: the file)."
    )
    attempts: int | None = Field(
        None, ge=1, le=16,
        description="Attempts at once, each in its own git worktree; the first whose check passes wins.",
    )  # fmt: skip
    mcp: dict[str, Any] | None = Field(
        None, description="MCP servers for this task, as in .mcp.json: {name: {command, args, env} or {url}}."
    )

    @field_validator("actions")
    @classmethod
    def _protocol(cls, value: str | None) -> str | None:
        if value is not None and value not in protocol_names():
            raise ValueError(f"Input should be one of {', '.join(repr(n) for n in protocol_names())}")
        return value

    @field_validator("mcp")
    @classmethod
    def _mcp_servers(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            parse_servers(value)  # a ValidationError here names the server and the field
        return value

    @field_validator("time_limit", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
            if not match:
                raise ValueError("use seconds, or a number followed by s, m or h")
            return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
        return value


_FRONT_MATTER = YAMLHandler()


@dataclass
class Task:
    spec: TaskSpec
    body: str
    path: Path | None


def parse_task(text: str, source: str) -> tuple[TaskSpec, str]:
    """The front matter and the task. python-frontmatter finds the `---` lines whatever the line endings
    (CRLF from Windows editors) and takes an empty block; a UTF-8 BOM is dropped first, or the front
    matter would silently become part of the task."""
    text = text.removeprefix("\ufeff")
    front: dict[str, Any] = {}
    body = text
    if _FRONT_MATTER.detect(text):
        try:
            block, body = _FRONT_MATTER.split(text)
        except ValueError:
            raise ConfigError(f"{source}: the front matter has no closing '---' line") from None
        try:
            loaded = _FRONT_MATTER.load(block)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: the front matter is not valid YAML", str(exc)) from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{source}: the front matter must be a mapping of keys to values")
        front = loaded or {}
    try:
        spec = TaskSpec.model_validate(front)
    except ValidationError as exc:
        known = ", ".join(TaskSpec.model_fields)
        raise ConfigError(
            f"invalid front matter in {source}",
            describe_validation_error(source, exc),
            f"Known keys: {known}.",
        ) from exc
    return spec, body.replace("\r\n", "\n").strip()


def load_task(path: Path) -> Task:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"task file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read task file {path}", str(exc)) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))
        why = "It is UTF-16 (it starts with that BOM)." if utf16 else f"Byte {exc.start} cannot be decoded."
        raise ConfigError(f"task file {path} is not UTF-8 text", why, "Save it as UTF-8.") from exc
    spec, body = parse_task(text, str(path))
    if not body:
        raise ConfigError(f"task file {path} holds no task", "After the front matter there is no text.")
    return Task(spec, body, path)


# What a check may start with that is the shell's own, never a program on PATH (was: `if ...; fi`
# refused as "the check command's program 'if' is not installed").
SHELL_WORDS = frozenset({
    "cd", "test", "[", "[[", "true", "false", "if", "for", "while", "until", "case", "select", "{", "(",
    "!", "function", "exec", "eval", "source", ".", "set", "export", "command", "builtin", "time",
})  # fmt: skip


def check_command_exists(command: str, workdir: Path) -> None:
    """A check whose program cannot be found is a mistake in the task file: say so before working."""
    # Read as bash reads it (tools/shell_parser.py): a check that is a heredoc script may hold an apostrophe
    # in its Python (`# it's`), which shlex took for an unclosed quote and refused the task.
    parsed = parse(command)
    if parsed.unreadable:
        raise ConfigError(f"the check command cannot be parsed: {command}", parsed.unreadable)
    first = parsed.commands[0].words if parsed.commands else []
    program = first[0].text if first and not first[0].dynamic else ""
    if not program or "/" in program or program in SHELL_WORDS:
        return  # a path may be made by the task itself; shell builtins and keywords always exist
    if shutil.which(program) is None:
        raise ConfigError(
            f"the check command's program '{program}' is not installed", f"check: {command}",
            "Install it or fix the check in the task file's front matter.",
        )  # fmt: skip
