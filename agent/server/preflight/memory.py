"""Will the launch fit: weights (the file sizes) + KV cache (layers × KV heads × head size × context ×
cache type) + the draft, against free VRAM (NVML, when the binary has a GPU device and layers are
offloaded) or free RAM (/proc/meminfo). A launch that will not fit is warned about, with the numbers,
and refused only under `--strict`."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

from agent.errors import ServerError
from agent.server.gpu import list_devices
from agent.server.preflight.gguf import GGUFHeader
from agent.server.preflight.report import Finding, GiB, Memory, PreflightReport


def _bytes_per_element(cache_type: str) -> tuple[float, bool]:
    """(bytes per element, known) of a KV cache type such as f16, q8_0, q4_1."""
    import gguf

    try:
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[cache_type.upper()]]
    except KeyError:
        return 2.0, False  # BeeLlama's turbo* types and the like: counted as f16, an upper bound
    return size / block, True


def flag_value(argv: list[str], *names: str) -> str | None:
    """The value of the last of `names` in argv (llama-server keeps the last one given)."""
    value = None
    for i, token in enumerate(argv[:-1]):
        if token in names:
            value = argv[i + 1]
    return value


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


def check_memory(
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
