"""The workspace a session works in, as the loop and the front ends see it: its git repository, the
checkpoint taken before each change, what the current task changed since its first checkpoint, and the
auto-commit of that. The task message (task_message.py) is its own module, the agent's assembly the
session layer's (agent/session/build_agent.py); the session's MCP servers are the session layer's (agent/session/mcp_servers.py).
"""

from __future__ import annotations

from pathlib import Path

from tools.git import Checkpoints, numstat, open_repo


class Workbench:
    """What a session needs besides the loop: the repository, its checkpoints, what the task changed, and
    the tools' state for the session."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace.resolve()
        self.repo = open_repo(self.workspace)
        self.checkpoints = Checkpoints(self.repo) if self.repo else None
        # The checkpoint from before the current task's first change: auto-commit commits what differs
        # from it. Front ends set it back to None when a new task (prompt) starts.
        self.task_start: str | None = None
        self.set_aside: list[str] = []  # the branches `start_over` kept, until `drop_set_aside`
        # The tools' per-session state (build_agent hands it to the agent's ToolContext): what the model
        # was shown whole, which the task message adds to, and the task's own words.
        self.tool_state: dict = {}

    def checkpoint(self, label: str) -> str | None:
        if self.checkpoints is None:
            return None
        made = self.checkpoints.create(label)
        if self.task_start is None:
            # None from create: the tree is the newest checkpoint's, so that one is the task's start
            self.task_start = made.sha if made else self.checkpoints.list()[-1].sha
        if made is None:
            return None
        number = made.ref.rsplit("/", 1)[1]
        return f"checkpoint {number} taken ({label}); `agent undo` (or /undo in the TUI) restores it"

    def changes(self) -> list[dict]:
        """Lines added and deleted per file since the task's first checkpoint, new files included:
        the end of a run lists them, so that a large deletion cannot go unseen."""
        if self.checkpoints is None or self.task_start is None:
            return []
        try:
            listing = self.checkpoints.diff_since(self.task_start, "--numstat", "--no-renames")
        except Exception:  # git refusing (a lock, a broken object): the summary goes without it
            return []
        return numstat(listing)

    def start_over(self, branch: str) -> bool:
        """Put the workspace back as it was before the task's first change, its state now kept on
        `branch` first; False where there is nothing to put back (not git, no change yet)."""
        if self.checkpoints is None or self.task_start is None:
            return False
        start = next((c for c in self.checkpoints.list() if c.sha == self.task_start), None)
        if start is None or not self.checkpoints.branch_off(branch, start.sha, f"agent: {branch}"):
            return False
        self.checkpoints.undo(start)  # (which drops `start` and every newer checkpoint)
        self.task_start = None  # the next line's first checkpoint is its start
        self.set_aside.append(branch)
        return True

    def drop_set_aside(self) -> None:
        """Delete the branches `start_over` kept (the work they hold is no longer wanted)."""
        if self.repo is not None and self.set_aside:
            self.repo.git.branch("-D", *self.set_aside)
        self.set_aside.clear()

    def auto_commit(self, subject: str) -> str | None:
        """Commit the files the agent changed in this task; the notice to show, None when nothing did."""
        if self.checkpoints is None or self.task_start is None:
            return None
        done = self.checkpoints.commit_changes(subject, self.task_start)
        return done.notice if done else None


def auto_commit_subject(words: str) -> str:
    """An auto-commit's subject: `agent: ` and the first line of what the task or prompt says, cut short."""
    first = next((line.strip() for line in words.splitlines() if line.strip()), "the task")
    return f"agent: {first[:60]}"


def changes_lines(changes: list[dict], limit: int = 20) -> list[str]:
    """The files a run changed, each with its lines added and deleted; a big deletion is flagged."""
    if not changes:
        return []
    lines = [f"changed {len(changes)} file{'s' if len(changes) != 1 else ''} (lines added, deleted):"]
    for change in changes[:limit]:
        added, deleted = change.get("added"), change.get("deleted")
        if added is None:
            lines.append(f"  {change['path']}  (binary)")
            continue
        flag = (
            "   <- deleted more than it added; `agent undo` restores it"
            if deleted > max(20, 2 * added)
            else ""
        )
        lines.append(f"  {change['path']}  +{added} -{deleted}{flag}")
    if len(changes) > limit:
        lines.append(f"  ... and {len(changes) - limit} more (`git status`)")
    return lines
