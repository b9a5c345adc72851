"""The rendered skeleton written into the new project's folder, never over a file already there."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import ConfigError
from agent.frontends.scaffold.render import Skeleton


@dataclass
class Written:
    files: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # already there (with --force): left as they were


def folder_entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def check_folder(folder: Path, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} exists and is not a folder", fix="Give a new folder's path.")
    entries = folder_entries(folder)
    if entries and not force:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise ConfigError(
            f"{folder} is not empty (it holds {shown})",
            "`agent new` starts a project in a new or empty folder.",
            "Give another folder, or --force to add the template's files next to what is there "
            "(an existing file is never overwritten).",
        )


def write_skeleton(skeleton: Skeleton, folder: Path) -> Written:
    """Write the files; one that is already there, or whose path leads out of the folder (a symlink),
    is left alone and reported."""
    folder.mkdir(parents=True, exist_ok=True)
    root = folder.resolve()
    written = Written()
    for item in skeleton.files:
        target = folder / item.path
        inside = target.resolve().is_relative_to(root)
        if not inside or target.exists() or target.is_symlink() or _blocked_parent(target, folder):
            written.kept.append(item.path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as handle:  # exclusive: never overwrites, even in a race
            handle.write(item.data)
        if item.executable:
            target.chmod(target.stat().st_mode | 0o111)
        written.files.append(item.path)
    return written


def _blocked_parent(target: Path, folder: Path) -> bool:
    parent = target.parent
    while parent != folder:
        if parent.exists() and not parent.is_dir():
            return True
        parent = parent.parent
    return False
