"""The preflight: what a profile's GGUF files say about a launch, read before any process starts.

A wrong draft shows up late and in different ways on each binary (FACTS.md): upstream llama-server
aborts while loading on an assert, BeeLlama 0.1 loads and answers the first request with HTTP 500
"Invalid input batch". The files' headers already say most of it:

- **draft type**: `draft-dflash`/`dflash` need a DFlash draft *that this binary can load*. DFlash
  GGUFs come under two architecture names, and each binary loads only its own: `dflash-draft`
  (BeeLlama 0.1, and the seed's Gemma 4 draft) and `dflash` (upstream llama.cpp). BeeLlama 0.2 and
  later load both. A `draft-simple` draft must not be a DFlash model.
- **tokenizer**: draft and target share it (the same tokenizer model, vocabulary size and tokens);
  where they differ is named.
- **memory**: weights (the file sizes) + KV cache (layers × KV heads × head size × context × cache
  type) + the draft, against free VRAM (NVML, when the binary has a GPU device and layers are
  offloaded) or free RAM (/proc/meminfo). A launch that will not fit is warned about, with the
  numbers, and refused only under `--strict`.
- **chat template**: in the GGUF (`tokenizer.chat_template`) or in the profile.

Headers are read with the `gguf` package's constants (llama.cpp's own definitions of the format),
never the tensor data. Its `GGUFReader` is not used: it builds a numpy view per element of every
array, 7.2 s on the 1.1 GB coder (151,936 tokens and 151,387 merges); this reader walks the same
layout through an mmap of the header pages and keeps only the arrays it needs.
"""

from __future__ import annotations

import ctypes
import mmap
import re
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from agent.errors import ServerError
from agent.server.gpu import list_devices

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
# String arrays kept in full; every other array keeps its length only (merges are walked, not kept).
KEEP_STRINGS = frozenset({"tokenizer.ggml.tokens"})
SMALL_ARRAY = 4096  # numeric arrays up to this length are decoded (per-layer head counts)

Status = Literal["ok", "warn", "fail", "skip"]
GiB = 1024**3


class GGUFError(Exception):
    """A file that is not a readable GGUF: what is wrong with it, in words."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class DraftError(ServerError):
    """The draft model cannot be used, but the target can run without it (the fallback's cue).

    `reason` is the short form shown as "draft off: <reason>"; `log_path` is the log of the server
    that failed on the draft ("" when the preflight refused it and nothing started).
    """

    def __init__(self, what: str, why: str = "", fix: str = "", reason: str = "", log_path: str = "") -> None:
        super().__init__(what, why, fix)
        self.reason = reason or what
        self.log_path = log_path


# ---------------------------------------------------------------------------------------------- reading


@dataclass
class GGUFHeader:
    """The key/value section of one GGUF file (never its tensors)."""

    path: Path
    size: int
    version: int
    tensor_count: int
    fields: dict[str, Any]
    array_lengths: dict[str, int]  # every array's length, decoded or not
    tokens: list[bytes] | None = None  # tokenizer.ggml.tokens, as raw UTF-8

    @property
    def architecture(self) -> str:
        return str(self.fields.get("general.architecture", ""))

    def arch(self, suffix: str) -> Any:
        """`{architecture}.{suffix}`, e.g. arch("block_count")."""
        return self.fields.get(f"{self.architecture}.{suffix}")

    @property
    def vocab_size(self) -> int | None:
        return self.array_lengths.get("tokenizer.ggml.tokens")

    @property
    def name(self) -> str:
        return str(self.fields.get("general.name") or self.path.name)


def read_gguf_header(path: Path) -> GGUFHeader:
    """The header of `path`; GGUFError with the problem in words for anything that is not one."""
    import gguf
    from gguf.gguf_reader import READER_SUPPORTED_VERSIONS

    path = Path(path)
    if path.is_dir():
        raise GGUFError(path, "is a folder, not a GGUF file")
    try:
        size = path.stat().st_size
        with path.open("rb") as file:
            if size < 24:
                raise GGUFError(path, f"is {size} bytes long: too short to be a GGUF file")
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise GGUFError(path, "does not exist") from None
    except OSError as exc:
        raise GGUFError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        if struct.unpack_from("<I", data, 0)[0] != gguf.GGUF_MAGIC:
            raise GGUFError(
                path, f"does not start with the GGUF magic (it starts with {bytes(data[:4])!r}, not b'GGUF')"
            )
        order = "<"
        version = struct.unpack_from("<I", data, 4)[0]
        if version & 0xFFFF == 0:  # written on a machine of the other byte order
            order = ">"
            version = struct.unpack_from(">I", data, 4)[0]
        if version not in READER_SUPPORTED_VERSIONS:
            raise GGUFError(path, f"is GGUF version {version}; this reader knows {READER_SUPPORTED_VERSIONS}")
        tensor_count, kv_count = struct.unpack_from(order + "QQ", data, 8)
        reader = _Reader(data, order, path, gguf.GGUFValueType)
        reader.offset = 24
        header = GGUFHeader(path, size, version, tensor_count, {}, {})
        if kv_count > 1_000_000:
            raise GGUFError(path, f"claims {kv_count} metadata keys: the header is damaged")
        for _ in range(kv_count):
            key = reader.string().decode("utf-8", "replace")
            value_type = reader.u32()
            if value_type == reader.types.ARRAY:
                item_type, length = reader.u32(), reader.u64()
                header.array_lengths[key] = length
                if item_type == reader.types.STRING:
                    strings = reader.strings(length, keep=key in KEEP_STRINGS or length <= SMALL_ARRAY)
                    if key == "tokenizer.ggml.tokens":
                        header.tokens = strings
                    elif strings is not None:
                        header.fields[key] = [s.decode("utf-8", "replace") for s in strings]
                else:
                    values = reader.numbers(item_type, length, keep=length <= SMALL_ARRAY)
                    if values is not None:
                        header.fields[key] = values
            else:
                header.fields[key] = reader.value(value_type)
        return header
    finally:
        data.close()


class _Reader:
    """Little walks over the mmap; every read checks the bounds first (a truncated file says so)."""

    _SCALARS: ClassVar[dict[int, str]] = {
        0: "B",
        1: "b",
        2: "H",
        3: "h",
        4: "I",
        5: "i",
        6: "f",
        7: "?",
        10: "Q",
        11: "q",
        12: "d",
    }

    def __init__(self, data: mmap.mmap, order: str, path: Path, types: Any) -> None:
        self.data, self.order, self.path, self.types = data, order, path, types
        self.offset = 0
        self.end = len(data)

    def _need(self, n: int) -> None:
        if self.offset + n > self.end:
            raise GGUFError(
                self.path,
                f"is cut short: its header needs more than its {self.end:,} bytes (a partial download?)",
            )

    def u32(self) -> int:
        self._need(4)
        value = struct.unpack_from(self.order + "I", self.data, self.offset)[0]
        self.offset += 4
        return value

    def u64(self) -> int:
        self._need(8)
        value = struct.unpack_from(self.order + "Q", self.data, self.offset)[0]
        self.offset += 8
        return value

    def string(self) -> bytes:
        length = self.u64()
        self._need(length)
        value = self.data[self.offset : self.offset + length]
        self.offset += length
        return value

    def strings(self, count: int, keep: bool) -> list[bytes] | None:
        # The hot loop of the whole preflight (300k strings on a Qwen tokenizer): local names only.
        data, unpack, offset, end = (
            self.data,
            struct.Struct(self.order + "Q").unpack_from,
            self.offset,
            self.end,
        )
        out: list[bytes] | None = [] if keep else None
        append = out.append if out is not None else None
        for _ in range(count):
            if offset + 8 > end:
                break
            length = unpack(data, offset)[0]
            offset += 8
            if offset + length > end:
                break
            if append is not None:
                append(data[offset : offset + length])
            offset += length
        else:
            self.offset = offset
            return out
        self.offset = end
        self._need(1)  # raises: the array runs past the end of the file
        return None

    def numbers(self, item_type: int, count: int, keep: bool) -> list[Any] | None:
        code = self._SCALARS.get(item_type)
        if code is None:
            raise GGUFError(
                self.path, f"holds an array of unknown value type {item_type}: the header is damaged"
            )
        size = struct.calcsize(code) * count
        self._need(size)
        values = (
            list(struct.unpack_from(f"{self.order}{count}{code}", self.data, self.offset)) if keep else None
        )
        self.offset += size
        return values

    def value(self, value_type: int) -> Any:
        if value_type == self.types.STRING:
            return self.string().decode("utf-8", "replace")
        code = self._SCALARS.get(value_type)
        if code is None:
            raise GGUFError(self.path, f"holds a value of unknown type {value_type}: the header is damaged")
        size = struct.calcsize(code)
        self._need(size)
        value = struct.unpack_from(self.order + code, self.data, self.offset)[0]
        self.offset += size
        return value


# ---------------------------------------------------------------------------------------------- findings


@dataclass
class Finding:
    """One row of the preflight. A failure names the file, the key read, what was expected and the fix."""

    check: str
    status: Status
    summary: str
    file: Path | None = None
    key: str = ""
    expected: str = ""
    found: str = ""
    fix: str = ""
    draft: bool = False  # a failure of the draft alone: the target can still run without it

    def explain(self) -> str:
        parts = [f"{self.check}: {self.summary}"]
        if self.file is not None:
            parts.append(f"  file: {self.file}")
        if self.key:
            parts.append(f"  key read: {self.key}")
        if self.expected:
            parts.append(f"  expected: {self.expected}")
        if self.found:
            parts.append(f"  found: {self.found}")
        return "\n".join(parts)


@dataclass
class Memory:
    """The memory figures behind the memory row, in bytes."""

    weights: int = 0
    kv_cache: int = 0
    draft_weights: int = 0
    draft_kv_cache: int = 0
    free: int | None = None
    where: str = ""
    ctx: int = 0
    cache_types: tuple[str, str] = ("f16", "f16")

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.draft_weights + self.draft_kv_cache


@dataclass
class PreflightReport:
    profile: str
    findings: list[Finding] = field(default_factory=list)
    memory: Memory | None = None
    seconds: float = 0.0

    def add(self, finding: Finding) -> Finding:
        self.findings.append(finding)
        return finding

    def failures(self, strict: bool = False) -> list[Finding]:
        bad = ("fail", "warn") if strict else ("fail",)
        return [f for f in self.findings if f.status in bad]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "warn"]

    def notes(self) -> list[str]:
        """The warnings, one line each, for a launch that goes ahead."""
        return [f"warning: {f.check}: {f.summary}" + (f" {f.fix}" if f.fix else "") for f in self.warnings]

    def error(self, strict: bool = False) -> ServerError | None:
        """The refusal for these findings: a DraftError when only the draft is at fault, else a ServerError."""
        failed = self.failures(strict)
        if not failed:
            return None
        first = failed[0]
        what = (
            f"preflight of profile '{self.profile}': {first.check}: {first.summary}"
            if len(failed) == 1
            else f"preflight of profile '{self.profile}' found {len(failed)} problems "
            f"({', '.join(f.check for f in failed)})"
        )
        why = "\n".join(f.explain() for f in failed)
        fixes = list(dict.fromkeys(f.fix for f in failed if f.fix))
        fix = (
            "\n".join(fixes)
            + ("\n" if fixes else "")
            + f"`agent server check {self.profile}` shows every check."
        )
        if all(f.draft for f in failed):
            return DraftError(what, why, fix, reason=first.summary)
        return ServerError(what, why, fix)

    def raise_for_failures(self, strict: bool = False) -> None:
        error = self.error(strict)
        if error is not None:
            raise error


# ---------------------------------------------------------------------------------------------- checks


def flag_value(argv: list[str], *names: str) -> str | None:
    """The value of the last of `names` in argv (llama-server keeps the last one given)."""
    value = None
    for i, token in enumerate(argv[:-1]):
        if token in names:
            value = argv[i + 1]
    return value


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
        _check_memory(report, target, draft_header, argv, binary, cache_dir)
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


# ---------------------------------------------------------------------------------------------- memory


def _bytes_per_element(cache_type: str) -> tuple[float, bool]:
    """(bytes per element, known) of a KV cache type such as f16, q8_0, q4_1."""
    import gguf

    try:
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[cache_type.upper()]]
    except KeyError:
        return 2.0, False  # BeeLlama's turbo* types and the like: counted as f16, an upper bound
    return size / block, True


def kv_cache_bytes(header: GGUFHeader, ctx: int, type_k: str, type_v: str) -> int:
    """KV cache of `header`'s model for `ctx` tokens: Σ over layers of KV heads × (K size + V size).

    Per-layer head counts (an array) give 0 for layers without attention (hybrid models). Sliding-
    window layers keep less than this: the figure is an upper bound for them."""
    layers = int(header.arch("block_count") or 0)
    heads = header.arch("attention.head_count") or 0
    kv_heads = header.arch("attention.head_count_kv")
    if kv_heads is None:
        kv_heads = heads
    per_layer = kv_heads if isinstance(kv_heads, list) else [kv_heads] * layers
    if isinstance(heads, list):
        heads = max(heads) if heads else 0
    embd = int(header.arch("embedding_length") or 0)
    head_dim = embd // heads if heads else 0
    k_len = int(header.arch("attention.key_length") or head_dim)
    v_len = int(header.arch("attention.value_length") or head_dim)
    k_bytes, _ = _bytes_per_element(type_k)
    v_bytes, _ = _bytes_per_element(type_v)
    return int(sum(int(n) for n in per_layer[:layers] if n) * ctx * (k_len * k_bytes + v_len * v_bytes))


def _check_memory(
    report: PreflightReport,
    target: GGUFHeader,
    draft: GGUFHeader | None,
    argv: list[str],
    binary: Path | None,
    cache_dir: Path | None,
) -> None:
    trained = int(target.arch("context_length") or 0)
    ctx_flag = flag_value(argv, "-c", "--ctx-size")
    ctx = int(ctx_flag) if ctx_flag and ctx_flag.lstrip("-").isdigit() and int(ctx_flag) > 0 else trained
    type_k = flag_value(argv, "-ctk", "--cache-type-k") or "f16"
    type_v = flag_value(argv, "-ctv", "--cache-type-v") or "f16"
    memory = Memory(weights=target.size, ctx=ctx, cache_types=(type_k, type_v))
    memory.kv_cache = kv_cache_bytes(target, ctx, type_k, type_v)
    if draft is not None:
        memory.draft_weights = draft.size
        draft_ctx_flag = flag_value(argv, "-cd", "--spec-draft-ctx-size", "--ctx-size-draft")
        draft_ctx = (
            int(draft_ctx_flag)
            if draft_ctx_flag and draft_ctx_flag.isdigit() and int(draft_ctx_flag)
            else ctx
        )
        memory.draft_kv_cache = kv_cache_bytes(
            draft,
            draft_ctx,
            flag_value(argv, "-ctkd", "--spec-draft-type-k", "--cache-type-k-draft") or "f16",
            flag_value(argv, "-ctvd", "--spec-draft-type-v", "--cache-type-v-draft") or "f16",
        )
    layers = flag_value(argv, "-ngl", "--gpu-layers", "--n-gpu-layers")
    memory.free, memory.where = free_memory(binary, cache_dir, offloaded=layers not in ("0",))
    report.memory = memory
    unknown = [t for t in (type_k, type_v) if not _bytes_per_element(t)[1]]
    parts = [
        f"weights {_gib(memory.weights)}",
        f"KV cache {_gib(memory.kv_cache)} ({ctx:,} tokens, {type_k}/{type_v})",
    ]
    if draft is not None:
        parts.append(f"draft {_gib(memory.draft_weights + memory.draft_kv_cache)}")
    need = f"needs about {_gib(memory.total)} ({' + '.join(parts)})"
    if not ctx_flag:
        need += f"; no --ctx-size: the model's {trained:,} tokens (llama-server may shrink it with --fit)"
    if unknown:
        need += f"; cache type {'/'.join(unknown)} counted as f16"
    if memory.free is None:
        report.add(Finding("memory", "skip", f"{need}; free memory unknown here", target.path))
        return
    have = f"{_gib(memory.free)} of {memory.where} is free"
    if memory.total > memory.free:
        report.add(
            Finding(
                "memory",
                "warn",
                f"{need}, but only {have}",
                file=target.path,
                key=f"{target.architecture}.block_count, .attention.head_count_kv, .embedding_length",
                expected=f"at most {_gib(memory.free)}",
                found=_gib(memory.total),
                fix="Lower ctx_size, use smaller KV cache types (--cache-type-k q8_0), a smaller "
                "quantization, or offload fewer layers (gpu_layers).",
            )
        )
        return
    report.add(Finding("memory", "ok", f"{need}; {have}", target.path))


def _gib(n: int | float) -> str:
    return f"{n / GiB:.2f} GiB" if n < 10 * GiB else f"{n / GiB:.1f} GiB"


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvidia_gpus() -> list[tuple[str, int, int]] | None:
    """(name, free bytes, total bytes) per NVIDIA GPU through NVML; None without a driver."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        count = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        gpus = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
                continue
            memory = _NvmlMemory()
            if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0:
                continue
            name = ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetName(handle, name, 96)
            gpus.append((name.value.decode(errors="replace"), memory.free, memory.total))
        return gpus
    finally:
        nvml.nvmlShutdown()


def free_ram() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) * 1024 if match else None


def binary_devices(binary: Path, cache_dir: Path | None) -> list[str]:
    """The GPU devices `binary --list-devices` names ("CUDA0: NVIDIA H200 ..."); none when it cannot say."""
    try:
        return list_devices(binary, cache_dir)
    except ServerError:
        return []


def free_memory(
    binary: Path | None, cache_dir: Path | None, offloaded: bool = True
) -> tuple[int | None, str]:
    """(free bytes, where): free VRAM when the binary has an NVIDIA GPU to offload to, else free RAM."""
    gpus = nvidia_gpus() if offloaded else None
    if gpus and binary is not None and any("CUDA" in d for d in binary_devices(binary, cache_dir)):
        names = sorted({name for name, _, _ in gpus})
        return sum(free for _, free, _ in gpus), f"VRAM ({len(gpus)} × {', '.join(names)})"
    return free_ram(), "RAM"


# ---------------------------------------------------------------------------------------------- template


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
