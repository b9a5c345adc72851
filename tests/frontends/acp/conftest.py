"""acpx keeps its queue sockets in /tmp/acpx-HASH, HASH from the home folder (its
`queueSocketBaseDir`), and leaves the folder there. The tests that give acpx a home of their own
(tmp_path/home) remove that folder after them."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def acpx_sockets_removed(tmp_path: Path) -> Iterator[None]:
    yield
    home = str(tmp_path / "home")
    shutil.rmtree(f"/tmp/acpx-{hashlib.sha256(home.encode()).hexdigest()[:10]}", ignore_errors=True)
