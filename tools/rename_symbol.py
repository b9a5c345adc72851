"""rename_symbol: a top-level Python name renamed as a word in the file that defines it and in each file
of the workspace that uses it (which: tools/dangling_uses.py), as an editor's rename does. An edit that
began a rename the task asks for proposes the rest as this call (tools/edit_lint.py), and the loop runs
it as its own: asked for, shown and recorded like any other edit.

Each file is changed as the edit tools change one: inside the workspace and never in .git
(tools/file_paths.py), text only with its line endings kept, written atomically (tools/text_files.py).
A symbolic link is left alone: written through, it would change a file elsewhere; replaced, the link
would be gone.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from tools import dangling_uses
from tools.base import ProposedCall, ToolContext, ToolError, ToolResult
from tools.file_paths import existing_stat, resolve_to_change
from tools.search import workspace_files
from tools.shown import refresh_stamp
from tools.text_files import load_text, short_diff, write_atomically

NAME = "rename_symbol"
IDENTIFIER = r"^[A-Za-z_]\w*$"


def rename_call(path: str, old: str, new: str) -> ProposedCall:
    """The call that renames `old` to `new` from `path`, the module defining it, to its every use."""
    return ProposedCall(NAME, {"path": path, "old": old, "new": new})


class RenameArgs(BaseModel):
    path: str = Field(description="The Python file that defines the name, relative to the workspace root.")
    old: str = Field(pattern=IDENTIFIER, description="The name as it is now.")
    new: str = Field(pattern=IDENTIFIER, description="The name it gets.")


class RenameSymbol:
    name: ClassVar[str] = NAME
    description: ClassVar[str] = (
        "Rename a top-level Python function, class or variable everywhere it is used: in the file that "
        "defines it and in every file that imports it or reads it off that module, as a whole word. "
        "Another file's own name that is spelled the same is left alone."
    )
    Args: ClassVar[type[BaseModel]] = RenameArgs
    effect: ClassVar[str] = "edit"

    def summary(self, args: RenameArgs) -> str:
        return f"{args.path}: {args.old} -> {args.new}"

    async def changes(self, args: RenameArgs, ctx: ToolContext) -> list[str]:
        """The files the call would change, for the permissions to judge one by one: a rule or a
        protected place that holds for an edit of a file holds for its rename too."""
        try:
            _, _, found = await asyncio.to_thread(self._uses, args, ctx)
        except ToolError:  # the run says why
            return []
        return list(dict.fromkeys(use.path for use in found))

    async def run(self, args: RenameArgs, ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._rename, args, ctx)

    def _uses(self, args: RenameArgs, ctx: ToolContext) -> tuple[Path, str, list[dangling_uses.Use]]:
        path = resolve_to_change(ctx, args.path)
        rel = ctx.workspace.relative(path)
        existing_stat(path, rel)
        if not rel.endswith(".py"):
            raise ToolError(f"{rel} is not a Python file: {self.name} renames Python names. Use edit_file.")
        if args.old == args.new:
            raise ToolError(f"`{args.old}` is already its name; nothing to rename.")
        root = ctx.workspace.root
        found = dangling_uses.uses(args.old, workspace_files(ctx.workspace, root), root, path)
        if not found:
            raise ToolError(
                f"Nothing uses `{args.old}`: neither {rel} nor a file importing it from there. Nothing renamed."
            )
        return path, rel, found

    def _rename(self, args: RenameArgs, ctx: ToolContext) -> ToolResult:
        path, rel, found = self._uses(args, ctx)
        root = ctx.workspace.root
        word, renamed, diffs, skipped = re.compile(rf"\b{re.escape(args.old)}\b"), [], [], []
        for each in dict.fromkeys(use.path for use in found):
            if (root / each).is_symlink():
                skipped.append(f"{each} (a symbolic link)")
                continue
            try:
                target = resolve_to_change(ctx, each)
                file = load_text(target, each, existing_stat(target, each), self.name)
            except ToolError as exc:
                skipped.append(f"{each} ({exc})")
                continue
            # Read and renamed now, so nothing changed since the model read the file is lost: no
            # freshness check, unlike an edit written from what the model saw.
            text = word.sub(args.new, file.text)
            if text != file.text:
                write_atomically(target, file.encode(text, each))
                renamed.append(each)
                diffs.append(short_diff(file.text, text, each))
        if rel in renamed:
            # The model is renaming in this file itself and is told what changed here. The other
            # files' stamps go stale: it reads them again before writing one whole.
            refresh_stamp(ctx, path)
        lines = sum(1 for use in found if use.path in renamed)
        said = f"Renamed `{args.old}` to `{args.new}`: {lines} line{'s' if lines != 1 else ''} in "
        said += (", ".join(renamed) + ".") if renamed else "no file."
        if skipped:
            said += " Left as they were: " + "; ".join(skipped) + "."
        return ToolResult(
            bool(renamed), said, {"path": rel, "renamed": renamed, "diff": "\n".join(d for d in diffs if d)}
        )
