"""`agent server install --source DIR`: the user's own llama.cpp or BeeLlama checkout, built with the
embedded build's options and CUDA choice, and recorded as the binary of `$LLAMA_SERVER_BIN` profiles.

- Out of tree. The build folder lives in the cache (`llama-server/build/NAME-HASH`), one per checkout
  folder and options, and is kept: a rebuild after `git pull` compiles what changed (a CUDA build from
  nothing is 20 minutes on the seed's machine). The checkout is only read: its own `build/` may hold
  the user's hand-made build (the seed's `cmake -B build` with GGML_NATIVE and its own options), which
  a configure of ours there would change under them.
- Cached like the embedded build, keyed by the checkout's identity and the options: the git commit,
  plus a hash of the changes when the tree is dirty; without git, a hash of the files' names, sizes
  and times.
- Recorded in the state dir (`llama-server.json`) only once the binary starts and its `--help` reads as
  a llama-server's. A profile whose binary is `$LLAMA_SERVER_BIN` runs it while that variable is
  unset; set, the variable wins. The dialect is read from the binary at launch, as for any binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agent.errors import AgentError, ServerError
from agent.server.build import (
    EmbeddedBuild,
    Progress,
    build_info,
    build_lock,
    compile_server,
    compiler_id,
    embedded_build,
    install_into,
    require_toolchain,
)
from agent.server.dialect import read_capabilities
from agent.server.gpu import CPU_BUILD, BuildChoice

SERVER_BIN_VAR = "LLAMA_SERVER_BIN"
RECORD_NAME = "llama-server.json"
# Where llama.cpp keeps the server's CMakeLists: tools/server since mid-2025, examples/server before
# (BeeLlama 0.1 forked after the move).
SERVER_CMAKELISTS = ("tools/server/CMakeLists.txt", "examples/server/CMakeLists.txt")


@dataclass(frozen=True)
class SourceCheckout:
    """A llama.cpp-like source folder and what it holds now."""

    root: Path
    commit: str = ""  # "" without git
    dirty: str = ""  # a short hash of the uncommitted changes; "" when clean
    files: str = ""  # without git: a short hash of the tree's names, sizes and times

    @property
    def name(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "-", self.root.name).strip("-") or "source"

    @property
    def identity(self) -> str:
        if self.commit:
            return self.commit[:12] + (f"-dirty{self.dirty}" if self.dirty else "")
        return f"files{self.files}"

    @property
    def label(self) -> str:
        if self.commit:
            return f"commit {self.commit[:12]}" + (" with uncommitted changes" if self.dirty else "")
        return f"no git; files {self.files}"


def inspect_checkout(path: Path) -> SourceCheckout:
    """The checkout at `path`, checked to be a llama.cpp source with a server target, and identified."""
    root = path.expanduser()
    if not root.exists():
        raise AgentError(
            f"no such folder: {root}",
            "`agent server install --source` builds a llama.cpp or BeeLlama checkout from its folder.",
            "Give the folder you cloned, e.g. `git clone https://github.com/Anbeeld/beellama.cpp` then "
            "`agent server install --source beellama.cpp`.",
        )
    if not root.is_dir():
        raise AgentError(
            f"{root} is a file, not a source folder",
            "--source takes the checkout's folder (the one with CMakeLists.txt).",
            f"For a llama-server you built yourself, set {SERVER_BIN_VAR}={root} instead."
            if os.access(root, os.X_OK)
            else "Give the checkout's folder.",
        )
    root = root.resolve()
    if not (root / "CMakeLists.txt").is_file():
        nested = [p.parent for p in sorted(root.glob("*/CMakeLists.txt")) if _server_cmakelists(p.parent)]
        raise AgentError(
            f"{root} is not a llama.cpp checkout: it has no CMakeLists.txt",
            "The source is configured with CMake from the checkout's top folder.",
            f"Did you mean {nested[0]}?"
            if nested
            else "Give the folder you cloned llama.cpp or BeeLlama into.",
        )
    if _server_cmakelists(root) is None:
        raise AgentError(
            f"{root} has no llama-server target",
            f"None of {', '.join(SERVER_CMAKELISTS)} defines llama-server: this CMake project is not "
            "llama.cpp or a fork of it.",
            "Give the folder of a llama.cpp or BeeLlama checkout.",
        )
    commit = _git(root, "rev-parse", "--verify", "HEAD")
    if commit is None:
        return SourceCheckout(root, files=_tree_hash(root))
    return SourceCheckout(root, commit.decode().strip(), _dirty_hash(root))


def _server_cmakelists(root: Path) -> Path | None:
    for relative in SERVER_CMAKELISTS:
        path = root / relative
        try:
            if "llama-server" in path.read_text(encoding="utf-8", errors="replace"):
                return path
        except OSError:
            continue
    return None


def _git(root: Path, *args: str) -> bytes | None:
    """git's output in `root`, or None when it is not a work tree (or git is missing, or refuses a
    checkout another user owns): then the files identify it instead."""
    try:
        result = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    if args[0] == "rev-parse":
        # A folder inside some other repository (a tarball unpacked in a home under git) is not a
        # checkout of its own: its commit would say nothing about these files.
        top = _git_toplevel(root)
        if top is None or top != root:
            return None
    return result.stdout


def _git_toplevel(root: Path) -> Path | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(result.stdout.strip()).resolve() if result.returncode == 0 else None


def _dirty_hash(root: Path) -> str:
    status = _git(root, "status", "--porcelain", "-z", "--untracked-files=all") or b""
    if not status.strip(b"\0"):
        return ""
    digest = hashlib.sha256(_git(root, "diff", "HEAD", "--binary") or b"")
    for entry in status.split(b"\0"):
        if entry.startswith(b"?? "):
            # Untracked files by their stat: one may be a large model someone put there.
            path = root / os.fsdecode(entry[3:])
            try:
                stat = path.stat()
            except OSError:
                continue
            digest.update(entry + f"|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:8]


_SKIPPED_TOP = re.compile(r"^(build.*|\..*|node_modules)$")


def _tree_hash(root: Path) -> str:
    """Names, sizes and times of the source files: enough to see a change, without reading 100 MB.
    Top-level build folders and dot folders, and GGUF models, are not source."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if not _SKIPPED_TOP.match(d)]
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".gguf"):
                continue
            try:
                stat = (here / name).stat()
            except OSError:
                continue
            digest.update(f"{(here / name).relative_to(root)}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:12]


def source_build(
    cache_dir: Path,
    checkout: SourceCheckout,
    extra_cmake_args: list[str] | tuple[str, ...] = (),
    choice: BuildChoice = CPU_BUILD,
) -> EmbeddedBuild:
    """Where the build of this checkout, as it is now, with these options, is cached."""
    return embedded_build(cache_dir, f"src-{checkout.name}-{checkout.identity}", extra_cmake_args, choice)


def build_folder(cache_dir: Path, checkout: SourceCheckout, build: EmbeddedBuild) -> Path:
    """The kept build folder: one per checkout folder and options, whatever its commit."""
    # Not the commit: that is what lets a rebuild after `git pull` compile only what changed.
    ident = json.dumps([str(checkout.root), list(build.cmake_args), platform.machine(), compiler_id()])
    ident = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return cache_dir / "llama-server" / "build" / f"{checkout.name}-{ident}"


def install_source(
    build: EmbeddedBuild,
    checkout: SourceCheckout,
    cache_dir: Path,
    progress: Progress,
    jobs: int | None = None,
    force: bool = False,
) -> EmbeddedBuild:
    """Build the checkout's llama-server into `build.root` unless it is there already.

    `force` starts from an empty build folder. An interrupt (KeyboardInterrupt, SIGTERM through
    console.sigterm_as_interrupt) stops the compiler's process group and leaves `build.root` as it was:
    the binary is moved in whole, after it has started.
    """
    if build.is_installed() and not force:
        return build
    require_toolchain(f"{checkout.root} is compiled with CMake and a C++ compiler.")
    with build_lock(build.root.parent, progress):
        if build.is_installed() and not force:
            return build
        folder = build_folder(cache_dir, checkout, build)
        if force:
            shutil.rmtree(folder, ignore_errors=True)
        started = time.monotonic()
        with build.log.open("w", encoding="utf-8") as log:
            log.write(f"# {checkout.root} ({checkout.label}); build folder {folder}\n")
            compile_server(
                checkout.root, folder, build.cmake_args, jobs or os.cpu_count() or 2, log, progress
            )
        install_into(
            build,
            checkout.root,
            folder,
            time.monotonic() - started,
            source=f"{checkout.root} ({checkout.label})",
        )
        try:
            caps = read_capabilities(build.binary, cache_dir)
        except ServerError as exc:
            shutil.rmtree(build.root, ignore_errors=True)
            raise ServerError(
                f"the llama-server built from {checkout.root} does not answer --help as llama-server does",
                exc.why,
                "Check that the checkout is llama.cpp or a fork of it; the build log is in " + str(build.log),
            ) from None
        info = build_info(build) | {"commit": checkout.commit, "dirty": bool(checkout.dirty)}
        info["dialect"] = caps.dialect
        (build.root / "build.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        progress(1.0, f"llama-server built in {time.monotonic() - started:.0f} s")
    return build


# --- the record: which binary `$LLAMA_SERVER_BIN` means while the variable is unset -----------------


@dataclass(frozen=True)
class RecordedServer:
    binary: Path
    source: str  # the checkout's folder
    identity: str  # commit (and dirty hash) or files hash
    backend: str
    cuda_arch: str
    dialect: str
    version: str
    built_at: str


def record_server(state_dir: Path, build: EmbeddedBuild, checkout: SourceCheckout) -> RecordedServer:
    """Name this build as the one `$LLAMA_SERVER_BIN` profiles run; written whole or not at all."""
    info = build_info(build)
    record = RecordedServer(
        binary=build.binary,
        source=str(checkout.root),
        identity=checkout.identity,
        backend=build.backend,
        cuda_arch=build.choice.arch,
        dialect=info.get("dialect", ""),
        version=info.get("version", ""),
        built_at=info.get("built_at", ""),
    )
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / RECORD_NAME
    partial = path.with_name(path.name + ".new")
    partial.write_text(json.dumps(asdict(record) | {"binary": str(build.binary)}, indent=2) + "\n")
    partial.replace(path)
    return record


def recorded_server(state_dir: Path) -> RecordedServer | None:
    """The build `agent server install --source` recorded last, or None."""
    path = state_dir / RECORD_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return RecordedServer(**{**data, "binary": Path(data["binary"])})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ServerError(
            f"the record of your llama-server build is unreadable: {path}",
            str(exc),
            "Run `agent server install --source DIR` again, or delete that file.",
        ) from None


def names_server_bin_var(spec: str) -> bool:
    """Whether a profile's binary is `$LLAMA_SERVER_BIN` itself (not a path built from it)."""
    return spec.strip() in (f"${SERVER_BIN_VAR}", f"${{{SERVER_BIN_VAR}}}")


def installed_binary(spec: str, state_dir: Path) -> Path | None:
    """What a profile's `binary = "$LLAMA_SERVER_BIN"` runs while the variable is unset: the recorded
    build, or None (none recorded, or another spec). A record whose binary is gone is an error."""
    if not names_server_bin_var(spec) or os.environ.get(SERVER_BIN_VAR):
        return None
    record = recorded_server(state_dir)
    if record is None:
        return None
    if not record.binary.is_file():
        raise ServerError(
            f"the llama-server built from {record.source} is gone: {record.binary}",
            f"`agent server install --source` recorded it for profiles whose binary is ${SERVER_BIN_VAR}; "
            "the cache it lived in was cleared.",
            f"Run `agent server install --source {record.source}` again, or set {SERVER_BIN_VAR}.",
        )
    return record.binary
