"""Why a llama-server start failed, read from its log: the known lines, what each means for the user,
what to do, and whether the draft alone is at fault (a DraftError: the fallback can run the target
without it)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from agent.errors import ServerError
from agent.server.launch_plan import LaunchPlan
from agent.server.preflight.report import DraftError


def dflash_fix(dialect: str) -> str:
    """What to do about a draft the DFlash loader refused, naming the binary that loads each kind."""
    own = {"upstream": "dflash", "beellama-0.1": "dflash-draft"}.get(dialect)
    which = (
        f"This binary ({dialect}) loads DFlash drafts with general.architecture '{own}'"
        if own
        else f"This binary ({dialect}) loads DFlash drafts of either architecture, dflash or dflash-draft"
    )
    return (
        "speculative.draft_model must be a DFlash draft GGUF made for this target model. "
        f"{which}; 'dflash' files load on upstream llama.cpp and BeeLlama 0.2+, 'dflash-draft' files "
        "(the seed's Gemma 4 draft) on BeeLlama 0.1+. `agent server check PROFILE` reads the file's header."
    )


def log_line(path: Path, needle: str, also: str = "") -> str | None:
    """The first line of the log holding `needle` (and `also`, in any case); the load is at its start."""
    try:
        with path.open("rb") as f:
            text = f.read(8 * 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
    return next((line for line in text.splitlines() if needle in line and also.lower() in line.lower()), None)


def log_tail(path: Path, lines: int = 15) -> list[str]:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            return f.read().decode("utf-8", "replace").splitlines()[-lines:]
    except OSError:
        return []


def tail_text(path: Path, lines: int = 15) -> str:
    return "\n".join(f"  | {line}" for line in log_tail(path, lines))


def loading_phase(log_path: Path) -> str:
    for line in reversed(log_tail(log_path, 5)):
        for marker in ("load_model:", "load_tensors:", "llama_server:", "srv "):
            if marker in line:
                return line.split(marker, 1)[1].strip()[:80]
    return ""


# A line in the log of a server that exited while starting, what it means for the user, what to do
# ("dflash": the fix names the binary that loads each DFlash architecture), and whether the draft alone
# is at fault (a DraftError: the fallback can run the target without it). Draft lines come first: the
# generic "failed to load model" line follows them in the same log.
_DIAGNOSES: list[tuple[str, str, str, bool]] = [
    ("DFlash model has no target_layer_ids", "the draft model is not a DFlash model", "dflash", True),
    (
        "DFlash model requires 'target_layers'",
        "the DFlash draft has no target_layers in its metadata",
        "dflash",
        True,
    ),
    (
        "unknown model architecture: 'dflash-draft'",
        "this binary cannot load a dflash-draft model (BeeLlama 0.1's DFlash format)",
        "dflash",
        True,
    ),
    (
        "unknown model architecture: 'dflash'",
        "this binary cannot load a dflash model (upstream llama.cpp's DFlash format)",
        "dflash",
        True,
    ),
    (
        "vocabs are not compatible",
        "the draft's tokenizer does not match the target's",
        "A draft must share the target's tokenizer: pick one of the same model family. "
        "`agent server check PROFILE` says where they differ.",
        True,
    ),
    (
        "failed to load draft model",
        "llama-server could not load the draft model",
        "Check that speculative.draft_model is a complete GGUF this binary supports "
        "(`agent server check PROFILE` reads its header).",
        True,
    ),
    (
        "unknown speculative type",
        "this llama-server does not know the speculative type",
        "Use a --spec-type the binary lists in its --help, or a binary that has it.",
        False,
    ),
    (
        "invalid argument",
        "llama-server refused an argument",
        "Remove or fix that flag in the profile.",
        False,
    ),
    (
        "error while handling argument",
        "llama-server refused an argument",
        "Remove or fix that flag in the profile.",
        False,
    ),
    ("couldn't bind", "the port is already in use", "Pass --port to use another port.", False),
    (
        "out of memory",
        "the model does not fit in memory",
        "Lower ctx_size or gpu_layers in the profile, or use a smaller quantization.",
        False,
    ),
    (
        "failed to allocate",
        "the model does not fit in memory",
        "Lower ctx_size or gpu_layers in the profile, or use a smaller quantization.",
        False,
    ),
    (
        "failed to load model",
        "llama-server could not load the model file",
        "Check that the file is a complete GGUF this build supports (a partial download fails this way).",
        False,
    ),
]


def diagnose_exit(plan: LaunchPlan, code: int, log_path: Path) -> ServerError:
    lines = log_tail(log_path, 40)
    signal_name = ""
    if code < 0:
        signal_name = f" (killed by {signal.Signals(-code).name})"
    elif code == 134:
        signal_name = " (SIGABRT: an assertion failed)"
    for needle, meaning, fix, draft in _DIAGNOSES:
        hit = next((line for line in reversed(lines) if needle.lower() in line.lower()), None)
        if hit:
            what = f"llama-server for profile '{plan.profile.name}' exited while starting: {meaning}"
            why = f"Exit code {code}{signal_name}. The log says:\n  | {hit.strip()}"
            cause = next((line for line in reversed(lines) if "error loading model" in line), None)
            if cause and cause is not hit:  # what the loader itself objected to, e.g. a missing key
                why += f"\n  | {cause.strip()}"
            fix = f"{dflash_fix(plan.capabilities.dialect) if fix == 'dflash' else fix}\nFull log: {log_path}"
            if draft and plan.profile.speculative is not None:
                return DraftError(what, why, fix, reason=meaning, log_path=str(log_path))
            return ServerError(what, why, fix)
    return ServerError(
        f"llama-server for profile '{plan.profile.name}' exited with code {code}{signal_name} while starting",
        "Last lines of its log:\n" + tail_text(log_path),
        f"Full log: {log_path}",
    )
