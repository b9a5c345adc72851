"""The workspace boundary: every path a tool touches resolves inside the root or an allowed extra root."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path


class OutsideWorkspace(Exception):
    pass


class SymlinkLoop(OutsideWorkspace):
    """A path whose symlinks lead back to themselves: it names no file, inside the workspace or out.

    A kind of OutsideWorkspace so that every caller that refuses an unusable path refuses this one too.
    """


def symlink_chain(link: Path, name: str, limit: int = 8) -> str:
    """'a -> b -> a': the link, as `name`, and the targets it leads through, as `ls -l` shows them."""
    shown, visited, here = [name], {link}, link
    for _ in range(limit):
        try:
            target = os.readlink(here)
        except OSError:
            break
        shown.append(target)
        here = Path(os.path.normpath(here.parent / target))
        if here in visited:
            break
        visited.add(here)
    return " -> ".join(shown)


@dataclass
class Workspace:
    root: Path
    extra_roots: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.extra_roots = [p.expanduser().resolve() for p in self.extra_roots]

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real path (symlinks followed) of `path`, relative paths taken from the root.

        Raises OutsideWorkspace, with a message for the model, when it lands outside every root:
        through `..`, an absolute path or a symlink alike.
        """
        raw = Path(os.path.expanduser(str(path)))
        candidate = raw if raw.is_absolute() else self.root / raw
        try:
            real = candidate.resolve()  # follows every symlink that exists along the way
        except RuntimeError as exc:  # what Python < 3.13 raises for a loop
            raise self._loop(path, candidate) from exc
        try:
            os.stat(real)
        except OSError as exc:  # a missing path is fine (a file to create); a loop is not
            if exc.errno == errno.ELOOP:
                raise self._loop(path, candidate) from exc
        for allowed in (self.root, *self.extra_roots):
            if real == allowed or allowed in real.parents:
                return real
        via = " (through a symlink)" if candidate.absolute() != real and ".." not in raw.parts else ""
        raise OutsideWorkspace(
            f"'{path}' resolves to {real}{via}, outside the workspace {self.root}. "
            "Only paths inside the workspace can be used."
        )

    def _loop(self, path: str | os.PathLike[str], candidate: Path) -> SymlinkLoop:
        link = next((p for p in (candidate, *candidate.parents) if p.is_symlink()), candidate)
        return SymlinkLoop(
            f"'{path}' goes through a symbolic link loop ({symlink_chain(link, self.relative(link))}), "
            "so it names no file. "
            "Use another path; to fix the link, remove it (rm) and create it again."
        )

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)
