"""The bash sandbox on Linux: bubblewrap, as Codex and Claude Code use it.

When the user lets commands run without asking (auto-edit and full-auto), each one runs inside
`bwrap`: the whole file system read-only, the workspace (and the extra roots) writable, a private
/tmp, the usual homes of credentials (~/.ssh, ~/.aws, ...) hidden behind empty ones, and no network
unless the settings allow it. The sandbox has its own loopback, so a test suite that starts its own
server on localhost still reaches it; the agent talks to the model server from outside the sandbox.
Where bwrap is missing or cannot start (no user namespaces), commands run unsandboxed and the
front ends say so once.

Inside the workspace, git's control files are read-only (tools/protected.py): a hook or a config
written by a command would run later as the user, outside the sandbox. Each git directory is bound
to itself (so it cannot be renamed away and replaced), writable for objects, refs, the index and
logs, so that `git add`, `git commit`, branches and stashes work; its hooks/, config, info/,
config.worktree and commondir, the .git files of a worktree or submodule, and the folder
core.hooksPath names are bound read-only on top. A worktree's git directories, outside the
workspace, get the same treatment. A control name that does not exist cannot be mounted, so one a
command creates is removed after it, and the model is told.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tools.approval import EDITS_UNASKED
from tools.protected import git_guard

SANDBOXED_MODES = EDITS_UNASKED  # where changes run unasked
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
# A write to git's read-only control files fails with one of these (a rename onto a mount: busy).
BLOCKED = ("Read-only file system", "Device or resource busy")
GIT_NOTE = (
    "[sandboxed: git's hooks, config and info/ are read-only for commands: what is written there "
    "runs later as the user, outside the sandbox. Commit, branch and stash with git commands; if the "
    "task needs a hook or a config change, tell the user what to run]"
)


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


def tools_under_tmp(path_var: str | None = None) -> list[Path]:
    """The folders of PATH that live under /tmp, which the sandbox's private /tmp would hide: a
    virtualenv made there (its root, where pyvenv.cfg and site-packages are) or a bin folder. A
    checkout and its venv under /tmp ran `python3` as "No such file or directory" inside the sandbox."""
    found: list[Path] = []
    for entry in (path_var if path_var is not None else os.environ.get("PATH", "")).split(os.pathsep):
        folder = Path(entry)
        if not entry or not folder.is_absolute() or not folder.is_dir():
            continue
        folder = folder.resolve()
        if folder.parts[:2] != ("/", "tmp"):
            continue
        root = folder.parent if (folder.parent / "pyvenv.cfg").is_file() else folder
        if not any(root == f or f in root.parents for f in found):
            found.append(root)
    return found


@dataclass
class Sandbox:
    writable: list[Path]  # the workspace first, then the extra roots
    network: bool = False
    mode: Callable[[], str] = lambda: "full-auto"  # the approval mode now (it can change in a session)
    home: Path = field(default_factory=Path.home)
    # of the command wrapped last: control names it must not create, and how git's files show
    absent: list[Path] = field(default_factory=list, init=False, repr=False)
    git_names: list[str] = field(default_factory=list, init=False, repr=False)

    @property
    def active(self) -> bool:
        return self.mode() in SANDBOXED_MODES and not unavailable()

    def wrap(self, argv: list[str], also_writable: list[Path]) -> list[str]:
        """`argv` run inside the sandbox. `also_writable`: folders the tool itself needs (its marker)."""
        args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for path in tools_under_tmp():
            args += ["--ro-bind", str(path), str(path)]  # the private /tmp must not hide the commands
        for name in SECRET_HOMES:
            path = self.home / name
            if path.is_dir():
                args += ["--tmpfs", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        for path in [*self.writable, *also_writable]:
            args += ["--bind", str(path), str(path)]
        self.absent, self.git_names = [], []
        for root in self.writable:
            guard = git_guard(root)
            for folder in guard.storage:
                args += ["--bind", str(folder), str(folder)]
            for path in guard.control:
                args += ["--ro-bind", str(path), str(path)]
            self.absent += guard.absent
            self.git_names += guard.names
        if not self.network:
            args.append("--unshare-net")
        # A TMPDIR of the user's (/var/tmp/me) is read-only in here: temporary files go to the private /tmp.
        args += ["--setenv", "TMPDIR", "/tmp"]
        return [*args, "--die-with-parent", "--", *argv]

    def sweep(self) -> str:
        """After the command: remove the control names it created where none existed to be mounted
        read-only (a `commondir` that points git elsewhere, a hooks folder); what to tell the model."""
        removed = []
        for path in self.absent:
            if path.is_symlink() or path.is_file():
                path.unlink(missing_ok=True)
            elif path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                continue
            removed.append(str(path))
        self.absent = []
        if not removed:
            return ""
        return (
            f"[sandboxed: removed {', '.join(removed)}, which the command created: git would read or "
            "run it later as the user, outside the sandbox. Use git commands for commits, branches "
            "and stashes; if the task needs a hook or a config change, tell the user what to run]"
        )

    def note(self, output: str, folders: tuple[Path, ...] = ()) -> str:
        """A line that explains a failure the sandbox caused, or ''. `folders`: where the command
        started and ended (`cd .git/hooks && echo > pre-commit` names no .git in its error)."""
        if any(symptom in output for symptom in BLOCKED) and (
            any(re.search(re.escape(n.rstrip("/")) + r"(?=[/'\":\s]|$)", output) for n in self.git_names)
            or any(".git" in folder.parts for folder in folders)
        ):
            return GIT_NOTE
        for symptom, why in NOTES.items():
            if symptom in output:
                return f"[sandboxed: {why}; ask the user if the task needs more]"
        return ""
