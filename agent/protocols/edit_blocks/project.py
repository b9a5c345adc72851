"""What the blocks protocol's parts share: the project's files as they read them, and how far the task
has come (what it is, the files changed, what the model was last told failed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.core.llm import ToolCall
from agent.protocols.edit_blocks.parser import call_arguments
from tools.base import ToolResult
from tools.search import workspace_files
from tools.workspace import OutsideWorkspace, Workspace


class ProjectFiles:
    """The project's files, read for judging an answer: never an error, None for what cannot be read."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def read(self, rel: str, errors: str = "replace") -> str | None:
        """A project file's text; None when it is missing, unreadable or outside the workspace."""
        try:
            return self.workspace.resolve(rel).read_text(encoding="utf-8", errors=errors)
        except (OSError, ValueError, OutsideWorkspace):
            return None

    def paths(self) -> list[str]:
        """Every file of the project, by its path from the root."""
        root = self.workspace.root
        return [p.relative_to(root).as_posix() for p in workspace_files(self.workspace, root)]


@dataclass
class TaskProgress:
    """The task as the model was given it, the files changed in this session, and what the model was
    last told failed: its check (after_failed_check), or a command or an edit in the last results. A
    block refused for its form (no path) is neither: nothing ran."""

    task: str = ""
    changed: dict[str, None] = field(default_factory=dict)  # files written or edited, in order
    check_failed: bool = False
    tool_failed: bool = False
    # The files the task message showed in part: what is asked for after a failure is their functions
    # or classes whole, never "the complete new file", which is refused there (tools/shown.py).
    partly: list[str] = field(default_factory=list)
    focus: tuple[str, str] | None = None  # (file, `Class.name`) the task message showed first, named too

    @property
    def failed(self) -> bool:
        return self.check_failed or self.tool_failed

    def new_task(self, task: str) -> None:
        """Nothing of the new task has failed yet (a fresh start's files may be back as they were)."""
        self.task = task
        self.check_failed = self.tool_failed = False

    def record(self, results: list[tuple[ToolCall, ToolResult]]) -> None:
        """What the last answer's calls did: the files they changed, and whether any failed."""
        for call, result in results:
            if call.name in ("write_file", "edit_file") and result.ok:
                self.changed[result.display.get("path") or call_arguments(call).get("path", "")] = None
            self.changed.update(dict.fromkeys(result.display.get("renamed", [])))
        # An edit the lint found new problems in is applied, but is a failure to fix all the same.
        self.tool_failed = any(not result.ok or result.display.get("lint") for _, result in results)
        if any(call.name != "bash" and result.ok for call, result in results):
            self.check_failed = False  # files changed since: the check has not judged them yet
