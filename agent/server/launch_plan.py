"""A profile made into a launch, checked before any process exists: the binary, the model files, the chat
template, the flags translated to the binary's dialect, all layers on the GPU when the binary has
one, and the preflight on the GGUF headers (agent/server/preflight/). `check_profile` is the same plan
as `agent server check` shows it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import ServerError
from agent.server.dialect import BinaryCapabilities, read_capabilities, translate_args
from agent.server.embedded_model import embedded_key, lookup_embedded_model
from agent.server.gpu import list_devices
from agent.server.preflight.checks import preflight, template_in_args
from agent.server.preflight.gguf import read_gguf_header
from agent.server.preflight.memory import flag_value
from agent.server.preflight.report import DraftError, Memory, PreflightReport
from agent.server.profiles import EMBEDDED, LOOPBACK_HOSTS, ServerProfile, names_flag
from agent.server.source_build import SERVER_BIN_VAR, installed_binary


def api_root(base_url: str) -> str:
    """The server's root, where llama-server's /health, /props and /metrics live."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def openai_base_url(base_url: str) -> str:
    """The base URL the OpenAI client wants: the root plus /v1 unless a path is given."""
    url = base_url.rstrip("/")
    path = url.split("://", 1)[-1].partition("/")[2]
    return url if path else url + "/v1"


@dataclass
class LaunchPlan:
    """A profile resolved against this machine: exactly what will be executed."""

    profile: ServerProfile
    binary: Path
    capabilities: BinaryCapabilities
    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    notes: list[str] = field(default_factory=list)
    preflight: PreflightReport | None = None  # None: the profile turned it off (preflight = false)

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def command_line(self) -> str:
        import shlex

        return shlex.join([str(self.binary), *self.argv])


@dataclass
class MachinePaths:
    """Where this machine keeps things; passed in so tests can point them at temp dirs."""

    models_dir: Path
    cache_dir: Path
    state_dir: Path
    embedded_binary: Callable[[], Path]
    embedded_model: Callable[[str], Path]  # an EMBEDDED_MODELS key -> the assembled GGUF
    embedded_templates: Callable[[], Path]


def resolve_binary(profile: ServerProfile, paths: MachinePaths, override: str | None = None) -> Path:
    spec = override or profile.binary
    if spec == EMBEDDED:
        return paths.embedded_binary()
    expanded = os.path.expandvars(spec)
    if "$" in expanded:
        installed = installed_binary(spec, paths.state_dir)  # `agent server install --source`'s build
        if installed is not None:
            return installed
        var = expanded[expanded.index("$") :].split("/")[0].strip("${}")
        raise ServerError(
            f"profile '{profile.name}' runs the binary named by ${var}, which is not set",
            f'The profile says binary = "{spec}".',
            f"Point it at your llama-server build, e.g. `export {var}=~/beellama.cpp/llama-server`, "
            "or pass --binary PATH"
            + (
                ", or build your checkout with `agent server install --source DIR`."
                if var == SERVER_BIN_VAR
                else "."
            ),
        )
    path = Path(expanded).expanduser()
    if not path.is_file():
        raise ServerError(
            f"llama-server binary not found: {path}",
            f"Profile '{profile.name}' names it as its binary.",
            "Build it (see the profile's description) or fix the path; LLAMA_SERVER_BIN or --binary "
            "override it.",
        )
    if not os.access(path, os.X_OK):
        raise ServerError(f"{path} is not executable", fix=f"chmod +x {path}")
    return path


def resolve_model_file(value: str, what: str, profile: ServerProfile, paths: MachinePaths) -> Path:
    key = embedded_key(value)
    if key is not None:
        try:
            lookup_embedded_model(key)
        except ServerError as exc:
            raise ServerError(
                f"the {what} of profile '{profile.name}' names an unknown embedded model: '{value}'",
                exc.why,
                exc.fix,
            ) from None
        return paths.embedded_model(key)
    path = Path(os.path.expandvars(value)).expanduser()
    if not path.is_absolute():
        path = paths.models_dir / path
    # A draft that cannot be used is the fallback's cue (agent/session/connect.py): the target runs without it.
    error = DraftError if what == "draft model" else ServerError
    if path.is_dir():
        raise error(
            f"the {what} of profile '{profile.name}' is a folder, not a GGUF file: {path}",
            f"The profile names '{value}'.",
            "Name the .gguf file inside that folder.",
            **(
                {"reason": f"the draft model is a folder, not a GGUF file: {path}"}
                if error is DraftError
                else {}
            ),
        )
    if not path.is_file():
        raise error(
            f"the {what} of profile '{profile.name}' is missing: {path}",
            f"The profile names '{value}', looked up in the models dir {paths.models_dir}."
            if not Path(value).expanduser().is_absolute()
            else f"The profile names {value}.",
            "Download the file there, or set AGENT_MODELS_DIR (or models_dir in config.toml) to the "
            "folder that holds it. Nothing is downloaded for you.",
            **({"reason": f"the draft model is missing: {path}"} if error is DraftError else {}),
        )
    return path


def _resolve_template(value: str, paths: MachinePaths) -> Path:
    if value.startswith(EMBEDDED + ":"):
        path = paths.embedded_templates() / value.split(":", 1)[1]
    else:
        path = Path(os.path.expandvars(value)).expanduser()
    if not path.is_file():
        raise ServerError(f"chat template file not found: {path}")
    return path


def plan_launch(
    profile: ServerProfile,
    paths: MachinePaths,
    host: str | None = None,
    port: int | None = None,
    binary: str | None = None,
    api_key: str | None = None,
    ctx_size: int | None = None,
    strict: bool = False,
    slots: int = 1,
) -> LaunchPlan:
    """`strict`: a preflight warning (memory that will not fit, no chat template) refuses too. `slots`:
    parallel slots (`-np`), each with the profile's whole context; refused, saying how many fit, when
    their memory does not."""
    if profile.kind == "attach":
        raise ServerError(
            f"profile '{profile.name}' attaches to {profile.base_url}; it is never started here",
            fix=profile.launch or "Start that server yourself, then run the agent with this profile.",
        )
    if ctx_size is not None:
        profile = profile.model_copy(update={"ctx_size": ctx_size})
    if slots > 1:
        profile = with_slots(profile, slots)
    bin_path = resolve_binary(profile, paths, binary)
    profile, offload_note = _offload_on_gpu(profile, bin_path, paths.cache_dir)
    model = resolve_model_file(profile.model or "", "model", profile, paths) if profile.model else None
    if model is None:
        raise ServerError(f"profile '{profile.name}' names no model", fix="Set `model = ...` in the profile.")
    spec = profile.speculative
    draft = (
        resolve_model_file(spec.draft_model, "draft model", profile, paths)
        if spec and spec.draft_model
        else None
    )
    template = _resolve_template(profile.chat_template_file, paths) if profile.chat_template_file else None
    caps = read_capabilities(bin_path, paths.cache_dir)
    host = host or profile.host
    port = port or profile.port
    raw = profile.server_args(str(model), str(draft) if draft else None, str(template) if template else None)
    raw += ["--host", host, "--port", str(port)]
    if slots > 1 and caps.accepts("--slot-save-path") and prefix_reusable(model, raw):
        raw += ["--slot-save-path", str(slot_save_dir(paths.state_dir))]
    translated = translate_args(raw, caps, profile.name)
    notes = [offload_note] if offload_note else []
    if translated.notes:
        notes.append(
            f"profile written for {profile.dialect}, binary speaks {caps.dialect}: "
            + ", ".join(translated.notes)
        )
    env = {**os.environ, **profile.env}
    if api_key:
        env["LLAMA_API_KEY"] = api_key  # the environment, not argv: argv is visible to every user in ps
    if host not in LOOPBACK_HOSTS and not api_key:
        notes.append(
            f"warning: listening on {host} without an API key; anyone on the network can use this "
            "server. Set AGENT_API_KEY to require one."
        )
    plan = LaunchPlan(profile, bin_path, caps, translated.argv, env, host, port, notes)
    if profile.preflight:
        plan.preflight = preflight(
            profile.name,
            translated.argv,
            model,
            draft,
            flag_value(translated.argv, "--spec-type"),
            caps.dialect,
            binary=bin_path,
            binary_label=caps.label(),
            template_given=template is not None
            or bool(profile.chat_template)
            or template_in_args(profile.args),
            cache_dir=paths.cache_dir,
        )
        plan.preflight.raise_for_failures(strict)
        if slots > 1:
            _check_slots_fit(plan.preflight.memory, slots, profile)
        notes += plan.preflight.notes()
    return plan


def prefix_reusable(model: Path, argv: list[str]) -> bool:
    """Whether a cached prompt serves a longer one that parts from it before its end: not where the
    model attends through a sliding window (the cache keeps only its last window, unless
    `--swa-full`) or has recurrent layers (a state, not a cache per token; FACTS.md)."""
    try:
        header = read_gguf_header(model)
    except Exception:  # not a GGUF we can read: the preflight says why; no sharing
        return False
    if header.arch("ssm.conv_kernel") is not None or header.arch("ssm.state_size") is not None:
        return False
    return header.arch("attention.sliding_window") is None or "--swa-full" in argv


def slot_save_dir(state_dir: Path) -> Path:
    """Where a server with several slots saves a slot for another to restore (`--slot-save-path`):
    the attempts' shared prefill (agent/session/shared_prefill.py) copies one slot to the others."""
    folder = state_dir / "slots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def with_slots(profile: ServerProfile, slots: int) -> ServerProfile:
    """`profile` serving `slots` requests at once (`-np`), each slot with the profile's context: with
    `-np` given, llama-server splits --ctx-size between the slots (no unified KV cache), so the total
    is the profile's times the slots."""
    args, skip = [], False
    for arg in profile.args:  # the profile's own -np goes: the slots asked for replace it
        if skip:
            skip = False
        elif arg in ("-np", "--parallel"):
            skip = True
        elif not arg.startswith(("-np=", "--parallel=")):
            args.append(arg)
    ctx = profile.ctx_size * slots if profile.ctx_size else None
    return profile.model_copy(update={"args": [*args, "-np", str(slots)], "ctx_size": ctx})


def _check_slots_fit(memory: Memory | None, slots: int, profile: ServerProfile) -> None:
    if memory is None or memory.free is None or memory.total <= memory.free:
        return
    per_slot = (memory.kv_cache + memory.draft_kv_cache) / slots
    room = memory.free - memory.weights - memory.draft_weights
    fit = max(0, int(room // per_slot)) if per_slot else 0
    each = f"{memory.ctx // slots:,} tokens" if memory.ctx else "the profile's context"
    raise ServerError(
        f"{slots} parallel slots of {each} do not fit profile '{profile.name}': they need about "
        f"{memory.total / 2**30:.1f} GiB and {memory.where} has {memory.free / 2**30:.1f} GiB free",
        f"{fit} slot{'s' if fit != 1 else ''} would fit" if fit else "not even one slot would fit",
        f"Ask for {fit} attempts, or lower the profile's ctx_size."
        if fit > 1
        else "Run one attempt, or lower the profile's ctx_size.",
    )


def _offload_on_gpu(profile: ServerProfile, binary: Path, cache_dir: Path) -> tuple[ServerProfile, str]:
    """An embedded profile names no -ngl (it must run on any machine); on a binary with a GPU device,
    all layers go there: the embedded models are small enough for any GPU llama.cpp supports, and a
    partial offload ('auto', upstream's default) decodes at the CPU's pace for the layers left behind."""
    if (
        profile.kind != "embedded"
        or profile.gpu_layers is not None
        or names_flag(profile.args, "-ngl", "--gpu-layers", "--n-gpu-layers")
    ):
        return profile, ""
    devices = list_devices(binary, cache_dir)
    if not devices:
        return profile, ""
    update: dict = {"gpu_layers": "all"}
    spec = profile.speculative
    if spec and spec.draft_model and spec.draft_gpu_layers is None:
        update["speculative"] = spec.model_copy(update={"draft_gpu_layers": "all"})
    return profile.model_copy(update=update), f"all layers on the GPU: {devices[0]}"


def check_profile(
    profile: ServerProfile, paths: MachinePaths, binary: str | None = None, ctx_size: int | None = None
) -> PreflightReport:
    """The preflight as `agent server check` shows it: the binary, the files and the flags too, each a
    row, and every check that can still run after one fails. It starts nothing."""
    from agent.errors import AgentError
    from agent.server.preflight.report import Finding

    if ctx_size is not None:
        profile = profile.model_copy(update={"ctx_size": ctx_size})
    rows: list[Finding] = []
    caps = bin_path = model = draft = template = None
    draft_problem = None
    try:
        bin_path = resolve_binary(profile, paths, binary)
        caps = read_capabilities(bin_path, paths.cache_dir)
        rows.append(Finding("binary", "ok", caps.label(), bin_path))
    except AgentError as exc:
        rows.append(Finding("binary", "fail", exc.what, key="binary", found=exc.why, fix=exc.fix))
    try:
        if not profile.model:
            raise ServerError(
                f"profile '{profile.name}' names no model", fix="Set `model = ...` in the profile."
            )
        model = resolve_model_file(profile.model, "model", profile, paths)
    except AgentError as exc:
        rows.append(Finding("model file", "fail", exc.what, key="model", found=exc.why, fix=exc.fix))
    spec = profile.speculative
    if spec and spec.draft_model:
        try:
            draft = resolve_model_file(spec.draft_model, "draft model", profile, paths)
        except AgentError as exc:
            draft_problem = Finding(
                "draft file",
                "fail",
                exc.what,
                key="speculative.draft_model",
                found=exc.why,
                fix=exc.fix,
                draft=True,
            )
    try:
        template = (
            _resolve_template(profile.chat_template_file, paths) if profile.chat_template_file else None
        )
    except AgentError as exc:
        rows.append(Finding("chat template", "fail", exc.what, key="chat_template_file", fix=exc.fix))
    argv = profile.server_args(
        str(model or "model.gguf"), str(draft) if draft else None, str(template or "") or None
    )
    if caps is not None:
        try:
            translated = translate_args(argv, caps, profile.name)
            argv = translated.argv
            rows.append(
                Finding(
                    "flags",
                    "ok",
                    f"written for {profile.dialect}, the binary speaks {caps.dialect}: "
                    + (", ".join(translated.notes) if translated.notes else "accepted as written"),
                )
            )
        except ServerError as exc:
            rows.append(Finding("flags", "fail", exc.what, found=exc.why, fix=exc.fix))
    if model is None:
        report = PreflightReport(profile.name)
        if draft_problem is not None:
            report.findings.append(draft_problem)
    else:
        report = preflight(
            profile.name,
            argv,
            model,
            draft,
            flag_value(argv, "--spec-type") or (spec.type if spec else None),
            caps.dialect if caps else "",
            binary=bin_path,
            binary_label=caps.label() if caps else "",
            template_given=template is not None
            or bool(profile.chat_template)
            or template_in_args(profile.args),
            cache_dir=paths.cache_dir,
            draft_problem=draft_problem,
        )
    report.findings[:0] = rows
    return report
