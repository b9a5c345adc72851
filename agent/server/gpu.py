"""Which llama-server to build and how to run it: an NVIDIA GPU, a CUDA toolkit, a binary's devices.

The build choice (issue #25, the seed's CUDA options):
- a GPU and `nvcc`: CUDA, flash attention with every KV-cache quant, for the GPU's own architecture
  only (one architecture compiles several times faster than llama.cpp's default list);
- a GPU without `nvcc`: the CPU build, with a note on what to install, so nobody is stuck;
- no GPU: the CPU build.
`--cpu`/`--cuda` force either. The cmake options are part of the build key (agent/server/build.py),
so the CPU and CUDA builds are cached side by side.

A GPU is found through NVML (`nvidia-ml-py`, when importable) and else `nvidia-smi`, which ships with
the driver. Whether a *binary* can use it is another matter: `llama-server --list-devices` says, and
its answer is cached per binary like `--help` (agent/server/dialect.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent.errors import ServerError

Backend = Literal["cpu", "cuda"]
BackendChoice = Literal["auto", "cpu", "cuda"]

# Where the CUDA toolkit installs itself when it is not on PATH (NVIDIA's .run and .deb packages).
CUDA_BIN_DIRS: tuple[Path, ...] = (Path("/usr/local/cuda/bin"),)

# The seed's options (BeeLlama's guide, "Compiler BeeLlama.cpp avec CUDA"); the architecture is added.
CUDA_CMAKE_ARGS = ("-DGGML_CUDA=ON", "-DGGML_CUDA_FA=ON", "-DGGML_CUDA_FA_ALL_QUANTS=ON")

# Build times, so the user knows what to expect before a build starts: wall time x cores, measured.
# CPU: 448 s on the 2-core CI kind, 15 core-minutes. CUDA for one architecture with every
# flash-attention quant: 305-381 s on the 16-core H200 machine (docs/benchmarks.md, "The CUDA
# build"), about 100 core-minutes at most; the CUDA kernels dominate
# and spread over the cores.
CPU_BUILD_CORE_MINUTES = 15
CUDA_BUILD_CORE_MINUTES = 100


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_cap: str  # "9.0"

    @property
    def arch(self) -> str:
        """CMAKE_CUDA_ARCHITECTURES spelling: 9.0 -> 90, 8.9 -> 89."""
        return self.compute_cap.replace(".", "")


@dataclass(frozen=True)
class BuildChoice:
    backend: Backend
    cmake_args: tuple[str, ...] = ()
    gpus: tuple[Gpu, ...] = ()
    nvcc: Path | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def arch(self) -> str:
        for arg in self.cmake_args:
            if arg.startswith("-DCMAKE_CUDA_ARCHITECTURES="):
                return arg.split("=", 1)[1]
        return ""

    @property
    def label(self) -> str:
        return f"cuda (arch {self.arch})" if self.backend == "cuda" else "cpu"


CPU_BUILD = BuildChoice("cpu")


def detect_gpus() -> list[Gpu]:
    """The NVIDIA GPUs the driver shows, or [] (no driver, no GPU, or a tool that does not answer)."""
    return list(_detect(os.environ.get("PATH", "")))


@functools.lru_cache(maxsize=8)
def _detect(_path: str) -> tuple[Gpu, ...]:
    # Asked once per command (`agent server profiles` asks for each profile), keyed by PATH so that a
    # changed PATH (a toolkit just installed; the tests' fake nvidia-smi) is seen.
    return tuple(_gpus_from_nvml() or _gpus_from_nvidia_smi())


def _gpus_from_nvml() -> list[Gpu]:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver: NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return []
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(Gpu(name.decode() if isinstance(name, bytes) else name, f"{major}.{minor}"))
        return gpus
    except Exception:
        return []
    finally:
        pynvml.nvmlShutdown()


_SMI_LINE = re.compile(r"^\s*(?P<name>.+?)\s*,\s*(?P<cap>\d+\.\d+)\s*$")


def _gpus_from_nvidia_smi() -> list[Gpu]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        result = subprocess.run(
            [smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if result.returncode != 0:
        return []
    # An old driver answers "[N/A]" or "Field ... is not a valid field": no capability, no arch to build.
    return [Gpu(m["name"], m["cap"]) for m in map(_SMI_LINE.match, result.stdout.splitlines()) if m]


def find_nvcc() -> Path | None:
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    for folder in CUDA_BIN_DIRS:
        if (folder / "nvcc").is_file() and os.access(folder / "nvcc", os.X_OK):
            return folder / "nvcc"
    return None


def choose_build(requested: BackendChoice = "auto", user_cmake_args: tuple[str, ...] = ()) -> BuildChoice:
    """CPU or CUDA, with the cmake options for it. `user_cmake_args` (settings, --cmake-arg) may already
    say -DGGML_CUDA=... or the architecture; they are taken as the user's word."""
    user_cuda = _user_flag(user_cmake_args, "-DGGML_CUDA")
    if requested == "auto" and user_cuda is not None:
        requested = "cuda" if user_cuda.upper() in ("ON", "1", "TRUE", "YES") else "cpu"
    if requested == "cpu":
        return BuildChoice("cpu", notes=("CPU build (asked for)",))
    gpus = tuple(detect_gpus())
    nvcc = find_nvcc()
    if requested == "auto":
        if not gpus:
            return BuildChoice("cpu")
        if nvcc is None:
            return BuildChoice(
                "cpu",
                gpus=gpus,
                notes=(
                    f"found {_describe(gpus)} but no CUDA toolkit (no `nvcc` on PATH or in "
                    f"{', '.join(map(str, CUDA_BIN_DIRS))}): building for the CPU. For the GPU, install "
                    "the CUDA toolkit (https://developer.nvidia.com/cuda-downloads; Debian/Ubuntu: "
                    "apt install nvidia-cuda-toolkit), then `agent server install --cuda`.",
                ),
            )
    if nvcc is None:
        raise ServerError(
            "cannot build llama-server for CUDA: `nvcc` is not installed",
            "A CUDA build compiles the GPU kernels with the CUDA toolkit's compiler; it is neither on PATH "
            f"nor in {', '.join(map(str, CUDA_BIN_DIRS))}.",
            "Install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads; Debian/Ubuntu: apt "
            "install nvidia-cuda-toolkit) and put its bin/ on PATH, or build for the CPU with --cpu.",
        )
    user_arch = _user_flag(user_cmake_args, "-DCMAKE_CUDA_ARCHITECTURES")
    if user_arch is None and not gpus:
        raise ServerError(
            "cannot build llama-server for CUDA: no NVIDIA GPU is visible to pick its architecture",
            "Neither NVML nor `nvidia-smi --query-gpu=name,compute_cap` listed a GPU.",
            "Check the driver (`nvidia-smi`), or name the GPU's architecture yourself, e.g. "
            "--cmake-arg=-DCMAKE_CUDA_ARCHITECTURES=90 for an H100/H200, 89 for an RTX 4090.",
        )
    args = list(CUDA_CMAKE_ARGS)
    if user_arch is None:
        args.append("-DCMAKE_CUDA_ARCHITECTURES=" + ";".join(sorted({g.arch for g in gpus}, key=int)))
    if shutil.which("nvcc") is None:
        args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")  # found outside PATH: CMake would not see it
    notes = (f"CUDA architecture {user_arch} (asked for)",) if user_arch is not None else ()
    return BuildChoice("cuda", tuple(args), gpus, nvcc, notes)


def _user_flag(args: tuple[str, ...], name: str) -> str | None:
    value = None
    for arg in args:
        if arg.startswith(name + "=") or arg.startswith(name + ":"):
            value = arg.split("=", 1)[1]
    return value


def _describe(gpus: tuple[Gpu, ...]) -> str:
    return ", ".join(f"{g.name} (compute {g.compute_cap})" for g in gpus)


def expected_build_minutes(backend: Backend, cores: int | None = None) -> int:
    cores = max(1, cores or os.cpu_count() or 2)
    per_core = CUDA_BUILD_CORE_MINUTES if backend == "cuda" else CPU_BUILD_CORE_MINUTES
    return max(1, round(per_core / cores))


def announce(choice: BuildChoice, cores: int | None = None) -> str:
    """What is about to be built and how long it takes, said before the build starts."""
    minutes = expected_build_minutes(choice.backend, cores)
    cores = cores or os.cpu_count() or 2
    if choice.backend == "cuda":
        what = f"llama-server for CUDA, architecture {choice.arch}"
        if choice.gpus:
            what += f" ({_describe(choice.gpus)})"
    else:
        what = "llama-server for the CPU"
    return f"building {what}: expect about {minutes} min on {cores} cores"


# --- what a built binary can use -------------------------------------------------------------------

_DEVICE_LINE = re.compile(r"^\s+(?P<id>[A-Za-z][\w-]*\d+):\s*(?P<desc>.+)$")


def parse_list_devices(text: str) -> list[str]:
    """`llama-server --list-devices`: 'Available devices:' then '  CUDA0: NVIDIA H200 (143771 MiB, ...)'
    per non-CPU device, or '  (none)' (common/arg.cpp). Returns 'CUDA0: NVIDIA H200 (...)' lines."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Available devices:")
    except StopIteration:
        return []
    devices = []
    for line in lines[start + 1 :]:
        match = _DEVICE_LINE.match(line)
        if match:
            devices.append(f"{match['id']}: {match['desc'].strip()}")
    return devices


def list_devices(binary: Path, cache_dir: Path | None) -> list[str]:
    """The binary's GPU devices (empty for a CPU build), asked once per binary (path, size, mtime);
    the preflight's memory check and the launcher's offload both read it. No cache_dir: not cached."""
    stat = binary.stat()
    key = hashlib.sha256(f"{binary.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    cached = cache_dir / "devices" / f"{key}.txt" if cache_dir else None
    if cached is not None and cached.is_file():
        return parse_list_devices(cached.read_text(encoding="utf-8"))
    try:
        result = subprocess.run(
            [str(binary), "--list-devices"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"could not run {binary} --list-devices", str(exc)) from exc
    text = result.stdout + "\n" + result.stderr
    if "Available devices:" not in text:
        # An older build without the flag, or one that crashed: assume no GPU, and don't cache a
        # guess about a binary that may answer next time.
        return []
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(text, encoding="utf-8")
    return parse_list_devices(text)
