"""What the model has seen of each file in this session: the read stamps that keep an edit off a file
changed on disk since read_file showed it, and the shown-whole records without which an existing file
is not written whole.

Separate from the file tools because bash records what `cat FILE` showed too, and the blocks protocol
and the workbench read and set these records (ToolContext.state keys READ_STAMPS and SHOWN_WHOLE).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from tools.base import ToolContext, ToolError
from tools.outline import DEFINITION_NAME, Definition, excerpt, fence_for, outline, qualname, words_of
from tools.workspace import OutsideWorkspace

READ_STAMPS = "files.read_stamps"  # ToolContext.state key: real path -> stamp of the file read_file saw
# ToolContext.state key: real path -> stamp of the version the model was shown whole (read_file of all of
# it, `cat FILE`, the task message, or a file it wrote itself). Only those may be rewritten whole.
SHOWN_WHOLE = "files.shown_whole"
# ToolContext.state key: real path -> names of the top-level definitions of a long file that the task
# message showed whole. A whole-file block holding only those may replace them (tools/definition_edit.py).
SHOWN_DEFINITIONS = "files.shown_definitions"
# ToolContext.state key: real path -> the definitions of a long file that the task message showed as
# what the task is about, best first. A refused write of that file shows these first.
TASK_FOCUS = "files.task_focus"
NOT_SHOWN = "you have not been shown all of it"  # in the refusal; the blocks protocol reads it back
SHOWN_NOW_WHOLE = "Here it is whole, as it is now"  # in the refusal that showed the file: it may be written
# A refused file up to this size is shown whole with the refusal; a longer one as its outline and the
# definitions named. 12,000 characters is about 350 lines: the 1.5B rewrites that much reliably.
SHOW_WHOLE_CHARS = 12_000
SHOW_PART_CHARS = 8_000
SHOW_PART_DEFINITIONS = 4  # past the best few, the model is shown more to copy than to read


def file_stamp(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_mtime_ns, st.st_size, st.st_ino)  # an editor that saves by rename changes the inode


def remember_read(ctx: ToolContext, path: Path, st: os.stat_result) -> None:
    ctx.state.setdefault(READ_STAMPS, {})[str(path)] = file_stamp(st)


def refresh_stamp(ctx: ToolContext, path: Path) -> None:
    """After our own write: the model knows what it wrote, so a stamp it had stays valid."""
    for key in (READ_STAMPS, SHOWN_WHOLE):
        stamps = ctx.state.get(key, {})
        if str(path) in stamps:
            stamps[str(path)] = file_stamp(path.stat())


def mark_shown_whole(state: dict, path: Path) -> None:
    """The model has seen all of `path` as it is now: it may write it whole."""
    with contextlib.suppress(OSError):
        state.setdefault(SHOWN_WHOLE, {})[str(path)] = file_stamp(path.stat())


def mark_shown_definitions(state: dict, path: Path, names: list[str]) -> None:
    """The model has seen these definitions of `path` whole: it may write them anew. A class shown
    whole shows its methods whole too: each may be written alone (`LRUCache.__init__`)."""
    shown = state.setdefault(SHOWN_DEFINITIONS, {}).setdefault(str(path), set())
    shown.update(names)
    classes = {name for name in names if "." not in name}
    if classes:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            defs = outline(path.name, path.read_text(encoding="utf-8"))
            members = (qualname(d, defs) for d in defs if d.depth == 1)
            shown.update(q for q in members if q.split(".")[0] in classes)


def mark_task_focus(state: dict, path: Path, names: list[str]) -> None:
    """These definitions of `path` (qualified: `Version.compare`), best first, are what the task is about."""
    state.setdefault(TASK_FOCUS, {})[str(path)] = list(names)


def shown_definitions(state: dict, path: Path) -> set[str]:
    return state.get(SHOWN_DEFINITIONS, {}).get(str(path), set())


CAT_COMMAND = re.compile(r"""^\s*cat\s+(['"]?)([^\s'"|;&<>$`*?(){}]+)\1\s*$""")


def note_shown_by_command(command: str, cwd: Path, ctx: ToolContext, output: str) -> None:
    """`cat FILE` that printed all of FILE showed it whole, as read_file does (the blocks protocol
    tells small models to ask for a file that way)."""
    match = CAT_COMMAND.match(command)
    if not match or not fits_shown(ctx, output):
        return
    try:
        path = ctx.workspace.resolve(str(cwd / match.group(2)))
    except OutsideWorkspace:
        return
    if path.is_file():
        mark_shown_whole(ctx.state, path)


def fits_shown(ctx: ToolContext, output: str) -> bool:
    """Whether an output this long reaches the model uncut (the context caps long tool outputs)."""
    return ctx.shown_limit is None or len(output) <= ctx.shown_limit


def check_shown_whole(ctx: ToolContext, path: Path, rel: str, st: os.stat_result | None) -> None:
    """Refuse a whole-file rewrite of an existing file the model was not shown whole in this session.

    A small model shown one file wrote another of the same name whole from it, and 1,143 lines of a
    library it had never read were gone (FACTS.md). An empty file has nothing to lose.
    """
    why = _not_shown(ctx, path, rel, st)
    if why is None:
        return
    shown = sorted(shown_definitions(ctx.state, path)) if rel.endswith(".py") else []
    only = (
        f" Or write only the functions or classes you change, each whole ({', '.join(shown[:5])} were shown "
        "to you whole): they replace the ones in the file, and a new one is added at its end."
        if shown
        else ""
    )
    raise ToolError(
        f"{why} Change only the part you mean with a SEARCH/REPLACE edit (edit_file), or read the whole "
        f"file first (read_file, or `cat {rel}`) and then write it whole.{only}"
    )


def refuse_unseen(
    ctx: ToolContext, path: Path, rel: str, st: os.stat_result | None, written: str, task: str = ""
) -> ToolError:
    """The refusal of a whole-file write of a file the model was not shown whole, showing it the file
    (`show_unseen`) where it can; check_shown_whole's plain refusal where it cannot."""
    why = _not_shown(ctx, path, rel, st)
    shown = show_unseen(ctx, path, rel, written, task) if why else ""
    if not shown:
        try:
            check_shown_whole(ctx, path, rel, st)
        except ToolError as exc:
            return exc
        return ToolError(f"Not written: {rel} could not be judged; read it and write it again.")
    return ToolError(f"{why}{shown}")


def _not_shown(ctx: ToolContext, path: Path, rel: str, st: os.stat_result | None) -> str | None:
    """Why the model may not write `path` whole (its first sentence of the refusal), or None."""
    if st is None or st.st_size == 0:
        return None
    if ctx.state.get(SHOWN_WHOLE, {}).get(str(path)) == file_stamp(st):
        return None
    size = f"{st.st_size:,} bytes"
    with contextlib.suppress(OSError):
        if lines := path.read_bytes().count(b"\n"):
            size = f"{lines:,} lines"
    seen = str(path) in ctx.state.get(SHOWN_WHOLE, {})
    why = "it changed since you were shown it" if seen else f"{NOT_SHOWN} in this session"
    return (
        f"Not written: {rel} already exists ({size}) and {why}, so writing it whole would replace code "
        "you have not read."
    )


def check_fresh(ctx: ToolContext, path: Path, rel: str, st: os.stat_result | None) -> None:
    """Refuse to change a file that changed on disk since the model read it with read_file.

    Only files read with read_file carry a stamp: a file the model never read (blocks mode, which has
    no read_file, or a file seen through bash) is not judged.
    """
    seen = ctx.state.get(READ_STAMPS, {}).get(str(path))
    if seen is None or st is None or file_stamp(st) == seen:
        return
    raise ToolError(
        f"{rel} changed on disk since you last read it (now {st.st_size} bytes; another program, a "
        "command or the user changed it). It is unchanged: read it again with read_file, then make "
        "your change against what it holds now."
    )


def _refused_wanted(defs: list[Definition], focus: list[str], written: str, task: str) -> list[Definition]:
    """The definitions a refused write's answer shows, at most SHOW_PART_DEFINITIONS: those the task
    message found the task to be about (`focus`), then those the task names, then those the refused
    block names. In that order, because the 1.5B copies the first code it is shown: the outline it
    copied names every definition, and shown in file order they put semver's `_comparator` before the
    `Version.compare` the task was about, and it rewrote `_comparator`."""
    by_name = {qualname(d, defs): d for d in defs}
    in_task = [d for d in defs if len(d.name) > 3 and re.search(rf"(?<![\w]){re.escape(d.name)}(?!\w)", task)]
    in_block = set(DEFINITION_NAME.findall(written))
    ranked = [by_name[q] for q in focus if q in by_name] + in_task + [d for d in defs if d.name in in_block]
    ranked = list(dict.fromkeys(ranked))
    # A class the model wrote whole is shown by its members it named, or its head alone when too long.
    ranked = [
        d for d in ranked if not any(o is not d and o in ranked and d.start <= o.start <= d.end for o in defs)
    ]
    return ranked[:SHOW_PART_DEFINITIONS]


def show_unseen(ctx: ToolContext, path: Path, rel: str, written: str, task: str = "") -> str:
    """The file a refused whole-file write was for, as the model must see it to write it: whole when it
    fits, else its outline and the definitions that `written` (the refused content) or the task name.
    What is shown counts as shown from now on, so the next answer can be applied; a refusal that only
    said "not shown" left the 1.5B writing the same refused block until its line was stopped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    if len(text) <= SHOW_WHOLE_CHARS and fits_shown(ctx, text + " " * 400):
        mark_shown_whole(ctx.state, path)
        fence = fence_for(text)
        return f"\n\n{SHOWN_NOW_WHOLE}; write your change again against it:\n{rel}\n{fence}\n{text.rstrip()}\n{fence}"
    defs = outline(rel, text)
    if not defs:
        return ""
    wanted = _refused_wanted(defs, ctx.state.get(TASK_FOCUS, {}).get(str(path), []), written, task)
    head = f"{rel} has {len(text.splitlines()):,} lines, too long to show whole here: the parts named, then its outline."
    words = set(words_of(task))
    shown_text, shown = excerpt(
        rel, text, wanted, SHOW_PART_CHARS, head, members_of_wanted_only=True, words=words
    )
    if not fits_shown(ctx, shown_text):
        return ""
    mark_shown_definitions(ctx.state, path, shown)
    ask = (
        "write only the functions or classes you change or add, each whole: they replace the ones of "
        "the same name in the file, and a new one is added at its end"
        if rel.endswith(".py")
        else "change it with SEARCH/REPLACE edits copied exactly from the lines shown"
    )
    return f"\n\nHere is what you need of it, what the task is about first; {ask}:\n\n{shown_text}"
