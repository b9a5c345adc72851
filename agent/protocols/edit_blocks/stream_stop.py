"""Ending a blocks answer while it streams, once the block it is writing would be refused whatever
follows: a small model on a CPU can spend minutes writing out a file that is then refused."""

from __future__ import annotations

import re

from agent.protocols.edit_blocks.parser import Action, open_whole_file_block
from agent.protocols.edit_blocks.repairs import AnswerRepairs
from tools.base import ToolContext, ToolError
from tools.definition_edit import MAX_DEFINITION_LINES, may_write_definition
from tools.shown import check_shown_whole, shown_definitions
from tools.workspace import OutsideWorkspace, Workspace


class StreamStop:
    """Follows one answer as it streams; remembers where its open block of definitions began."""

    def __init__(self, workspace: Workspace, repairs: AnswerRepairs) -> None:
        self.workspace = workspace
        self.repairs = repairs
        # Where the answer's open block of definitions for a file shown in part began.
        self._definitions_from: int | None = None

    def new_answer(self) -> None:
        """The next answer starts with no block open."""
        self._definitions_from = None

    def watch(self, text: str, ctx: ToolContext) -> tuple[str, str] | None:
        """End the answer as soon as it starts writing whole an existing file that the model was not
        shown whole: the write would be refused whatever follows, and on a CPU the 1.5B spent minutes
        writing out a 700-line file before hearing so (real-attrs-fix-number-validators). What is
        kept is the answer up to the block's first line, with the fence closed, so that the refusal
        and its reason reach the model as usual."""
        if self._definitions_from is not None:
            return self._long_definitions(text)
        block = open_whole_file_block(text)
        if block is None:
            return None
        kept, path = block
        rel = self.repairs.known_path(Action("write", path, "")).path or path
        try:
            target = self.workspace.resolve(rel)
            check_shown_whole(ctx, target, rel, target.stat() if target.is_file() else None)
        except ToolError:
            so_far = _block_so_far(kept)
            if rel.endswith(".py") and _IMPORTS_SO_FAR.match(so_far):
                return None  # imports above definitions may go in (tools/definition_edit.py): judged after
            after_imports = so_far.lstrip().startswith(("import ", "from "))
            # The block's first line of code after its imports, however many lines came at once (a
            # server may send several tokens a chunk; an answer begun for the model comes whole).
            first = next(
                (line for line in so_far.splitlines() if line.strip() and not _IMPORT.match(line)), ""
            )
            if rel.endswith(".py") and may_write_definition(
                first, target, shown_definitions(ctx.state, target), new=not after_imports
            ):
                # A function or class written anew: tools/definition_edit.py may take it.
                end = text.rfind("\n")  # the end of the block's first line, the last complete one
                self._definitions_from = text.rfind("\n", 0, end) + 1
                return None
            why = (
                f"the model began writing {rel} whole, which it was not shown whole: its answer was "
                "stopped there, as the write would be refused (the model is told why)"
            )
            return _through(kept, first), why
        except (OSError, OutsideWorkspace):
            return None  # the tool layer says what is wrong once the block is written
        return None

    def _long_definitions(self, text: str) -> tuple[str, str] | None:
        """Stop a block of definitions that goes on past MAX_DEFINITION_LINES: the file written out
        whole after all, which the write refuses (the early stop above, once it is clear)."""
        lines = text[self._definitions_from or 0 :].split("\n")[:-1]
        if any(line.strip().startswith(("```", "~~~")) for line in lines):
            self._definitions_from = None  # closed: any later block is judged afresh
            return None
        if len(lines) <= MAX_DEFINITION_LINES:
            return None
        kept = "\n".join(text.split("\n")[:-1]) + "\n```\n"
        return kept, (
            f"the model wrote over {MAX_DEFINITION_LINES} lines of definitions into a file it was not "
            "shown whole: its answer was stopped there, as the write would be refused"
        )


# A block's lines so far that are all imports or blank: definitions may follow.
_IMPORTS_SO_FAR = re.compile(r"\A(?:[ \t]*(?:(?:import|from)\s+[\w.]+.*)?\n)+\Z")
_IMPORT = re.compile(r"[ \t]*(?:import|from)\s+[\w.]+")


def _through(kept: str, first: str) -> str:
    """`kept` (an answer with its open block closed) cut after the block's line `first`, the fence
    closed again: the answer as far as the line the refusal is for. Lines that came after it in the
    same chunk are not kept: a definition's head alone, closed, would be taken as the whole of it."""
    lines = kept.rstrip("\n").split("\n")
    closing = lines.pop()
    opening = _last_fence(lines)
    at = next((i for i in range(opening + 1, len(lines)) if lines[i] == first), len(lines) - 1)
    return "\n".join([*lines[: at + 1], closing]) + "\n"


def _block_so_far(kept: str) -> str:
    """The code of the block `open_whole_file_block` just closed: its lines between the fences."""
    lines = kept.rstrip("\n").split("\n")[:-1]
    return "".join(f"{line}\n" for line in lines[_last_fence(lines) + 1 :])


def _last_fence(lines: list[str]) -> int:
    """Where the block just closed opened: the last fence line before its closing one."""
    return max(i for i, line in enumerate(lines) if line.lstrip().startswith(("```", "~~~")))
