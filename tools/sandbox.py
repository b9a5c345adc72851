"""The bash sandbox on Linux: bubblewrap, as Codex and Claude Code use it.

When the user lets commands run without asking (auto-edit and full-auto), each one runs inside
`bwrap`: the whole file system read-only, the workspace (and the extra roots) writable, a private
/tmp, the usual homes of credentials (~/.ssh, ~/.aws, ...) hidden behind empty ones, and no network
unless the settings allow it. The sandbox has its own loopback, so a test suite that starts its own
server on localhost still reaches it; the agent talks to the model server from outside the sandbox.
Where bwrap is missing or cannot start (no user namespaces), commands run unsandboxed and the
front ends say so once.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SANDBOXED_MODES = ("auto-edit", "full-auto")
# Where credentials live; hidden (an empty directory or file in their place) when they exist.
SECRET_HOMES = (
    ".ssh", ".aws", ".gnupg", ".config/gh", ".docker", ".kube", ".config/gcloud", ".azure",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc",
)  # fmt: skip
NOTES = {  # what a failure inside the sandbox looks like, and what to tell the model
    "Read-only file system": "only the workspace and /tmp are writable here",
    "Could not resolve host": "the network is off for commands",
    "Temporary failure in name resolution": "the network is off for commands",
    "Network is unreachable": "the network is off for commands",
}


@cache
def unavailable() -> str:
    """Why bwrap cannot sandbox commands here; empty when it can."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bwrap (bubblewrap) is not installed: `apt install bubblewrap` or your system's package"
    probe = subprocess.run(
        [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "true"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"bwrap cannot start here ({probe.stderr.strip() or probe.returncode}); user namespaces off?"
    return ""


@dataclass
class Sandbox:
    writable: list[Path]  # the workspace first, then the extra roots
    network: bool = False
    mode: Callable[[], str] = lambda: "full-auto"  # the approval mode now (it can change in a session)
    home: Path = field(default_factory=Path.home)

    @property
    def active(self) -> bool:
        return self.mode() in SANDBOXED_MODES and not unavailable()

    def wrap(self, argv: list[str], also_writable: list[Path]) -> list[str]:
        """`argv` run inside the sandbox. `also_writable`: folders the tool itself needs (its marker)."""
        args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for name in SECRET_HOMES:
            path = self.home / name
            if path.is_dir():
                args += ["--tmpfs", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        for path in [*self.writable, *also_writable]:
            args += ["--bind", str(path), str(path)]
        if not self.network:
            args.append("--unshare-net")
        return [*args, "--die-with-parent", "--", *argv]

    @staticmethod
    def note(output: str) -> str:
        """A line that explains a failure the sandbox caused, or ''."""
        for symptom, why in NOTES.items():
            if symptom in output:
                return f"[sandboxed: {why}; ask the user if the task needs more]"
        return ""
