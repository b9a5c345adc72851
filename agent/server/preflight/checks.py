"""The preflight's checks on a profile's resolved files, and `preflight`, which runs them all: the draft
type against the binary, the tokenizer shared by draft and target, the memory (`memory`), the chat
template. Nothing here starts a server."""

from __future__ import annotations

import time
from pathlib import Path

from agent.server.preflight.gguf import GGUFError, GGUFHeader, read_gguf_header
from agent.server.preflight.memory import check_memory
from agent.server.preflight.report import Finding, GiB, PreflightReport, Status

# Spec types whose draft is a DFlash model, and the binaries that load each DFlash architecture.
DFLASH_SPEC_TYPES = frozenset({"dflash", "draft-dflash"})
DRAFT_SIMPLE = "draft-simple"
# Spec types that read a separate draft GGUF (draft-mtp uses the target's own MTP layers; n-grams none).
NEEDS_DRAFT_MODEL = DFLASH_SPEC_TYPES | {DRAFT_SIMPLE, "draft-eagle3", "draft-dspark"}
DFLASH_ARCHS = {"dflash": "upstream llama.cpp", "dflash-draft": "BeeLlama 0.1"}
# The key each DFlash architecture needs: without it upstream refuses the file ("DFlash model requires
# 'target_layers'") and BeeLlama 0.1 loads it with n_target_layers=0, then fails every request.
DFLASH_LAYER_KEYS = {"dflash": "dflash.target_layers", "dflash-draft": "dflash-draft.dflash.target_layer_ids"}
# What each dialect (agent/server/dialect.py) loads. BeeLlama v0.1 and v0.2 share a dialect; only
# v0.2 also loads upstream's `dflash`, so that case is a warning, not a refusal.
DIALECT_LOADS = {
    "upstream": {"dflash"},
    "beellama-0.1": {"dflash-draft"},
    "beellama-0.4": {"dflash", "dflash-draft"},
}
# llama.cpp's own tolerance for draft vocabularies (common/speculative.cpp): sizes may differ by up
# to 128 (padding), and token texts are compared from id 5 on.
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START = 5


def preflight(
    profile_name: str,
    argv: list[str],
    model: Path,
    draft: Path | None,
    spec_type: str | None,
    dialect: str,
    binary: Path | None = None,
    binary_label: str = "",
    template_given: bool = False,
    cache_dir: Path | None = None,
    draft_problem: Finding | None = None,
) -> PreflightReport:
    """Every check on resolved files. `argv` is the launch's (translated) argument list; it says the
    context size, cache types and GPU layers as the binary will read them. Nothing here starts a
    server; a binary with an NVIDIA GPU around is asked `--list-devices` once (cached)."""
    started = time.perf_counter()
    report = PreflightReport(profile_name)
    target = _read(report, "model file", model, draft=False)
    types = [t for t in (spec_type or "").split(",") if t]
    drafts_with_model = [t for t in types if t in NEEDS_DRAFT_MODEL]
    draft_header = None
    if draft_problem is not None:
        report.add(draft_problem)
    elif draft is not None:
        draft_header = _read(report, "draft file", draft, draft=True)
    elif drafts_with_model:
        report.add(
            Finding(
                "draft type",
                "fail",
                f"--spec-type {drafts_with_model[0]} needs a draft model, and the profile names none",
                key="speculative.draft_model",
                expected="a draft GGUF",
                fix="Set speculative.draft_model in the profile, or use an n-gram type (ngram-mod) that needs none.",
                draft=True,
            )
        )
    if draft_header is not None:
        _check_draft_type(report, draft_header, types, dialect, binary_label)
        if target is not None:
            _check_tokenizer(report, target, draft_header)
    if target is not None:
        check_memory(report, target, draft_header, argv, binary, cache_dir)
        _check_chat_template(report, target, template_given)
    report.seconds = time.perf_counter() - started
    return report


def _read(report: PreflightReport, check: str, path: Path, draft: bool) -> GGUFHeader | None:
    try:
        header = read_gguf_header(path)
    except GGUFError as exc:
        what = "draft" if draft else "model"
        report.add(
            Finding(
                check,
                "fail",
                f"the {what} {exc.problem}",
                file=path,
                key="GGUF header",
                expected="a complete GGUF file (magic b'GGUF', version 2 or 3)",
                fix=(
                    "Point the profile at the .gguf file inside that folder."
                    if "folder" in exc.problem
                    else f"Download the {what} again and check its size and checksum against the source."
                ),
                draft=draft,
            )
        )
        return None
    arch = header.architecture or "?"
    report.add(
        Finding(
            check,
            "ok",
            f"{header.name}: {arch}, {header.size / GiB:.2f} GiB, GGUF v{header.version}",
            file=path,
            draft=draft,
        )
    )
    return header


def _binary_for(arch: str) -> str:
    return {
        "dflash": "upstream llama.cpp or BeeLlama 0.2 and later",
        "dflash-draft": "BeeLlama 0.1 or later",
    }.get(arch, "")


def _check_draft_type(
    report: PreflightReport, draft: GGUFHeader, types: list[str], dialect: str, binary_label: str
) -> None:
    arch = draft.architecture
    key = "general.architecture"
    is_dflash = arch in DFLASH_ARCHS
    if any(t in DFLASH_SPEC_TYPES for t in types):
        spec = next(t for t in types if t in DFLASH_SPEC_TYPES)
        if not is_dflash:
            report.add(
                Finding(
                    "draft type",
                    "fail",
                    f"the draft is not a DFlash model (its architecture is '{arch or 'missing'}')",
                    file=draft.path,
                    key=key,
                    expected="'dflash' (upstream llama.cpp) or 'dflash-draft' (BeeLlama 0.1)",
                    found=f"'{arch}'",
                    fix=f"--spec-type {spec} needs a DFlash draft GGUF made for this target model. "
                    "An ordinary model as the draft belongs with --spec-type draft-simple.",
                    draft=True,
                )
            )
            return
        loads = DIALECT_LOADS.get(dialect, {arch})  # no binary known: nothing to compare with
        binary = binary_label or "this binary"
        warned = False
        if arch not in loads:
            status: Status = "warn" if (dialect, arch) == ("beellama-0.1", "dflash") else "fail"
            report.add(
                Finding(
                    "draft type",
                    status,
                    f"this binary cannot load a {arch} model"
                    + (" if it is BeeLlama 0.1 (0.2 and later can)" if status == "warn" else ""),
                    file=draft.path,
                    key=key,
                    expected=" or ".join(f"'{a}'" for a in sorted(loads))
                    + f" for {binary}"
                    + ("" if dialect in binary else f" ({dialect})"),
                    found=f"'{arch}', which {_binary_for(arch)} loads",
                    fix=f"Run this profile with a binary that loads {arch} models ({_binary_for(arch)}): "
                    "set `binary` in the profile or LLAMA_SERVER_BIN, or use the draft converted for "
                    f"{'BeeLlama 0.1 (dflash-draft)' if arch == 'dflash' else 'upstream llama.cpp (dflash)'}.",
                    draft=True,
                )
            )
            if status == "fail":
                return
            warned = True
        layer_key = DFLASH_LAYER_KEYS[arch]
        layers = draft.fields.get(layer_key)
        if not layers:
            report.add(
                Finding(
                    "draft type",
                    "fail",
                    f"the DFlash draft has no target layers ({layer_key} is "
                    f"{'empty' if layer_key in draft.fields else 'missing'})",
                    file=draft.path,
                    key=layer_key,
                    expected="the target layers the draft reads, e.g. [1, 16, 31]",
                    found=repr(layers),
                    fix="The file is not a complete DFlash draft: convert it again, or download the "
                    "draft published for this target model.",
                    draft=True,
                )
            )
            return
        if not warned:
            report.add(
                Finding(
                    "draft type",
                    "ok",
                    f"DFlash draft ({arch}), target layers {list(layers)}",
                    file=draft.path,
                    key=key,
                )
            )
        return
    if DRAFT_SIMPLE in types and is_dflash:
        report.add(
            Finding(
                "draft type",
                "fail",
                f"the draft is a DFlash model ({arch}), which --spec-type draft-simple cannot use",
                file=draft.path,
                key=key,
                expected="an ordinary model of the target's family, e.g. a smaller one",
                found=f"'{arch}'",
                fix="Use --spec-type draft-dflash (upstream) or dflash (BeeLlama 0.1) for a DFlash draft.",
                draft=True,
            )
        )
        return
    report.add(
        Finding("draft type", "ok", f"{arch} model as a {', '.join(types) or 'draft'} draft", draft.path)
    )


def _token(tokens: list[bytes], index: int) -> str:
    return repr(tokens[index].decode("utf-8", "replace")) if index < len(tokens) else "(none)"


def _check_tokenizer(report: PreflightReport, target: GGUFHeader, draft: GGUFHeader) -> None:
    if draft.tokens is None:
        report.add(
            Finding(
                "tokenizer",
                "skip",
                "the draft carries no tokenizer (tokenizer.ggml.tokens): it uses the target's",
                draft.path,
            )
        )
        return
    if target.tokens is None:
        report.add(Finding("tokenizer", "skip", "the target carries no tokenizer.ggml.tokens", target.path))
        return
    differences = []
    model_key = "tokenizer.ggml.model"
    t_model, d_model = target.fields.get(model_key), draft.fields.get(model_key)
    if t_model != d_model:
        differences.append(f"{model_key}: target '{t_model}', draft '{d_model}'")
    t_size, d_size = len(target.tokens), len(draft.tokens)
    if abs(t_size - d_size) > VOCAB_MAX_SIZE_DIFFERENCE:
        differences.append(f"vocabulary size: target {t_size:,}, draft {d_size:,}")
    common = min(t_size, d_size)
    if target.tokens[VOCAB_CHECK_START:common] != draft.tokens[VOCAB_CHECK_START:common]:
        first = next(i for i in range(VOCAB_CHECK_START, common) if target.tokens[i] != draft.tokens[i])
        differing = sum(1 for i in range(VOCAB_CHECK_START, common) if target.tokens[i] != draft.tokens[i])
        differences.append(
            f"token {first}: target {_token(target.tokens, first)}, draft {_token(draft.tokens, first)} "
            f"({differing:,} of the first {common:,} tokens differ)"
        )
    for special in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        if target.fields.get(special) != draft.fields.get(special):
            differences.append(
                f"{special}: target {target.fields.get(special)}, draft {draft.fields.get(special)}"
            )
    if differences:
        report.add(
            Finding(
                "tokenizer",
                "fail",
                "the draft's tokenizer differs from the target's: " + differences[0],
                file=draft.path,
                key="tokenizer.ggml.model, tokenizer.ggml.tokens",
                expected=f"the target's tokenizer ({target.path.name}: {t_model}, {t_size:,} tokens)",
                found="; ".join(differences),
                fix="A draft must share the target's tokenizer: pick a draft of the same model family "
                "(e.g. Qwen2.5-Coder-0.5B for Qwen2.5-Coder-1.5B).",
                draft=True,
            )
        )
        return
    note = (
        f" (sizes differ by {abs(t_size - d_size)}, within llama.cpp's {VOCAB_MAX_SIZE_DIFFERENCE})"
        if t_size != d_size
        else ""
    )
    report.add(Finding("tokenizer", "ok", f"same tokenizer: {t_model}, {t_size:,} tokens{note}", draft.path))


def _check_chat_template(report: PreflightReport, target: GGUFHeader, template_given: bool) -> None:
    key = "tokenizer.chat_template"
    if template_given:
        report.add(Finding("chat template", "ok", "from the profile (chat_template / chat_template_file)"))
        return
    template = target.fields.get(key)
    if isinstance(template, str) and template.strip():
        report.add(
            Finding("chat template", "ok", f"in the GGUF ({len(template):,} characters)", target.path, key)
        )
        return
    report.add(
        Finding(
            "chat template",
            "warn",
            "the model has no chat template, and the profile gives none: llama-server falls back to ChatML",
            file=target.path,
            key=key,
            expected="a Jinja chat template in the GGUF, or chat_template_file in the profile",
            found="missing",
            fix="Set chat_template_file in the profile (embedded:NAME.jinja names one of llama.cpp's "
            "templates), or chat_template = 'chatml' if ChatML is right for this model.",
        )
    )


def template_in_args(argv: list[str]) -> bool:
    return any(a in ("--chat-template", "--chat-template-file") for a in argv)
