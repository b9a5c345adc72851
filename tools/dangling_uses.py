"""The uses an edit left behind when it took a top-level Python name away: a rename made in one file of
six. Asked to rename `want_bytes` to `to_bytes` in itsdangerous, the 1.5B renamed the definition and
said it was done, three runs out of three (real-itsdangerous-rename-want-bytes: +2 -2);
the 24 other uses failed the check with an ImportError far from its edit. An editor's rename finds
every use. Here the edit's result lists them, line by line, and when the edit replaced one name by
another, gives the one command that renames the rest: 27 SEARCH/REPLACE blocks are beyond a small
model, one copied bash block is not.

Read, not imported: the uses are the lines naming it, in the edited file and in each Python file of the
workspace that imports the name (`from .encoding import want_bytes`, from any module, since a package
re-exports) or reads it off the module (`encoding.want_bytes`). A file with a variable of the same
name and no such import is not the module's user. Text in, text out, but for reading the files the
caller lists.
"""

from __future__ import annotations

import ast
import contextlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tools.missing_imports import defines

MAX_FILES = 5_000  # Python files searched: past this, a tree of generated code, not a project
MAX_FILE_BYTES = 1_000_000
SHOWN_USES = 12
MAX_COMMAND_FILES = 40  # a longer command line is not one a model copies whole


@dataclass(frozen=True)
class Use:
    path: str  # relative to the workspace
    line: int  # 1-based
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text.strip()[:160]}"


def top_level_names(text: str) -> dict[str, str] | None:
    """{name: kind} of a module's top-level functions, classes and plain assignments; None when the text
    is not valid Python (the lint reports that)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = "function"
        elif isinstance(node, ast.ClassDef):
            names[node.name] = "class"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update((t.id, "variable") for t in targets if isinstance(t, ast.Name))
    return names


def renamed(before: str | None, after: str) -> tuple[list[str], str | None]:
    """The top-level names `before` defined and `after` does not, and the name that took their place
    when the edit replaced exactly one definition by one new one of the same kind (a rename)."""
    if before is None or _top_lines(before) <= _top_lines(after):
        return [], None  # every top-level statement's first line is still there: no name can be gone
    old, new = top_level_names(before), top_level_names(after)
    if old is None or new is None:
        return [], None
    gone = [name for name in old if name not in new]
    added = [name for name in new if name not in old]
    if len(gone) == 1 and len(added) == 1 and old[gone[0]] == new[added[0]]:
        return gone, added[0]
    return gone, None


def _top_lines(text: str) -> set[str]:
    """The lines at column 0 that may begin a statement: a cheap test before two parses, since most
    edits change only the bodies of functions (indented)."""
    return {line for line in text.splitlines() if line[:1] not in ("", " ", "\t", "#", ")", "]", "}")}


def uses(name: str, files: list[Path], root: Path, edited: Path) -> list[Use]:
    """Each line naming `name` as a word in the edited file and in the workspace's Python files
    (`files`, absolute) that import it or read it off the edited module."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    found: list[Use] = []
    for path in [p for p in files if p.suffix == ".py"][:MAX_FILES]:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
            if not word.search(text) or (path != edited and not _imports(text, name, edited.stem)):
                continue
            rel = path.relative_to(root).as_posix()
            found += [Use(rel, n, line) for n, line in enumerate(text.splitlines(), 1) if word.search(line)]
    return found


def _imports(text: str, name: str, module: str) -> bool:
    """Whether a module's text imports `name` (from any module: `import ... name`, or inside the
    parentheses of a multi-line import) or reads `module.name`, and has no `name` of its own. Read,
    not parsed: most files of a project that hold a common word do not import it."""
    word = re.escape(name)
    found = (
        re.search(rf"\bimport\b[^\n#(]*\b{word}\b", text)
        or re.search(rf"\bimport\s*\([^)]*\b{word}\b", text)
        or re.search(rf"(?<![\w.]){re.escape(module)}\.{word}\b", text)
    )
    return found is not None and not defines(text, name)


def rename_command(old: str, new: str, left: list[Use]) -> str:
    """The sed line that renames `old` to `new` in the files of `left` ('' past MAX_COMMAND_FILES)."""
    paths = list(dict.fromkeys(use.path for use in left))
    if not paths or len(paths) > MAX_COMMAND_FILES:
        return ""
    return f"sed -i 's/\\b{old}\\b/{new}/g' " + " ".join(shlex.quote(p) for p in paths)


def describe(old: str, rel: str, left: list[Use], new: str | None, command: str) -> str:
    """What the model is told: where `old` is still used, and the command when it was renamed."""
    files = len({use.path for use in left})
    shown = [str(use) for use in left[:SHOWN_USES]]
    if len(left) > SHOWN_USES:
        shown.append(f"... and {len(left) - SHOWN_USES} more")
    lines = "line" if len(left) == 1 else "lines"
    text = f"`{old}` is no longer defined in {rel}, but {len(left)} {lines} in {files} "
    text += f"file{'s' if files > 1 else ''} still use it:\n" + "\n".join(shown)
    if new and command:
        where = "its file" if files == 1 else f"all {files} files"
        text += f"\nIt is now `{new}`. This command renames every use left, in {where}:"
        text += f"\n```bash\n{command}\n```"
    return text
