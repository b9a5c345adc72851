"""The workspace boundary: every path a tool touches resolves inside the root or an allowed extra root."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


class OutsideWorkspace(Exception):
    pass


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
        real = candidate.resolve()  # follows every symlink that exists along the way
        for allowed in (self.root, *self.extra_roots):
            if real == allowed or allowed in real.parents:
                return real
        via = " (through a symlink)" if candidate.absolute() != real and ".." not in raw.parts else ""
        raise OutsideWorkspace(
            f"'{path}' resolves to {real}{via}, outside the workspace {self.root}. "
            "Only paths inside the workspace can be used."
        )

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)
