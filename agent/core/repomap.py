"""What a small model is shown of a repository, within a budget it cannot overflow.

Small models do not explore: they act on what they are shown (FACTS.md). So the task message of the
`blocks` protocol carries the repository, in three parts, each cut to its share of the budget:

1. the files the task names, found by their path relative to the root (a bare base name only when
   exactly one file has it: `utils.py` must never mean `tests/utils.py`). A named file that fits is
   shown whole; one too long is shown as its outline with line numbers, plus whole the definitions
   the task names and the file's last lines (the anchor for an addition at the end);
2. a map of the rest: paths and the signatures of their definitions, read with tree-sitter grammars
   and ranked by relevance to the task: files that define a name the task mentions, that sit in a
   folder it names, that use those names, that git says changed recently;
3. a line saying what was left out, and how to ask for it (`cat PATH`, `sed -n 'A,Bp' PATH`).

When the whole repository fits, every file is shown whole, as before: small projects lose nothing.
Which files were shown whole is returned too: a whole-file rewrite is applied only to those
(tools/shown.py), so that a model never replaces code it has not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath

from agent.settings.paths import PROJECT_CONFIG
from tools.search import workspace_files
from tools.workspace import Workspace

AGENT_DIR = f"{PROJECT_CONFIG.parent.as_posix()}/"  # .agent/: the agent's settings, not the project's code

TEXT_SUFFIXES = {
    ".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".js", ".mjs", ".cjs",
    ".jsx", ".ts", ".tsx", ".html", ".css", ".sh", ".rs", ".go", ".c", ".h", ".cpp", ".java", ".rb",
    ".sql", ".csv", ".rst", "",
}  # fmt: skip
MAX_READ_BYTES = 400_000  # a bigger file is listed by name only: generated code, data, vendored bundles
NAMED_SHARE = 0.7  # of the budget, at most, for the files the task names
TAIL_LINES = 12  # the end of a long named file, shown so that an addition at the end has an anchor
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# Words of a task that are surely code: in backticks, snake_case, camelCase, or called.
CODE_WORD = re.compile(r"`([A-Za-z_]\w*)`|\b(\w*_\w*|[a-z]+[A-Z]\w*|[A-Z]\w*[a-z][A-Z]\w*)\b|\b(\w+)\(")
TRAILING_COMMENT = re.compile(r"(?m)[ \t]*(?:#|//)[^\n'\"]*$")
ENTRY_LIMIT = 1500  # characters of one file's entry in the map
PATHLIKE = re.compile(r"[\w./-]+")


# ---------------------------------------------------------------------------------------------- outlines


@dataclass(frozen=True)
class Definition:
    name: str
    signature: str  # one line: `def f(a, b=1) -> int`, `class C(B)`, `func (s *S) M()`
    start: int  # 1-based, decorators included
    end: int
    depth: int  # 0: top level; 1: a member of a class, impl or trait


# tree-sitter grammars by suffix: (module, its language function, the definitions' node types, the
# node types whose members are listed one level down, wrappers to look through).
_PY = ({"function_definition", "class_definition"}, {"class_definition"}, {"decorated_definition"})
_JS = (
    {"function_declaration", "class_declaration", "method_definition", "generator_function_declaration",
     "interface_declaration", "type_alias_declaration", "enum_declaration", "abstract_class_declaration"},
    {"class_declaration", "abstract_class_declaration", "interface_declaration"},
    {"export_statement"},
)  # fmt: skip
_GO = ({"function_declaration", "method_declaration", "type_spec"}, set(), {"type_declaration"})
_RS = (
    {"function_item", "struct_item", "enum_item", "trait_item", "impl_item", "function_signature_item",
     "mod_item", "type_item"},
    {"impl_item", "trait_item"},
    set(),
)  # fmt: skip
GRAMMARS = {
    ".py": ("tree_sitter_python", "language", *_PY),
    ".js": ("tree_sitter_javascript", "language", *_JS),
    ".mjs": ("tree_sitter_javascript", "language", *_JS),
    ".cjs": ("tree_sitter_javascript", "language", *_JS),
    ".jsx": ("tree_sitter_javascript", "language", *_JS),
    ".ts": ("tree_sitter_typescript", "language_typescript", *_JS),
    ".tsx": ("tree_sitter_typescript", "language_tsx", *_JS),
    ".go": ("tree_sitter_go", "language", *_GO),
    ".rs": ("tree_sitter_rust", "language", *_RS),
}
_BODY_NODES = {"block", "class_body", "declaration_list", "statement_block", "interface_body",
               "field_declaration_list", "struct_type", "enum_variant_list", "object_type"}  # fmt: skip


@cache
def _parser(suffix: str):
    """A tree-sitter parser for files with `suffix`; None when no grammar for it is installed."""
    from importlib import import_module

    from tree_sitter import Language, Parser

    module, function = GRAMMARS[suffix][:2]
    try:
        return Parser(Language(getattr(import_module(module), function)()))
    except (ImportError, AttributeError):
        return None


def outline(rel: str, text: str) -> list[Definition]:
    """The definitions of a source file, in order; [] for a language without a grammar here.
    tree-sitter reads past syntax errors, so a half-written file still has an outline."""
    suffix = PurePosixPath(rel).suffix.lower()
    if suffix not in GRAMMARS or (parser := _parser(suffix)) is None:
        return []
    _, _, kinds, containers, wrappers = GRAMMARS[suffix]
    data = text.encode("utf-8", errors="replace")
    found: list[Definition] = []

    def visit(node, depth: int, start_row: int | None = None) -> None:
        for child in node.children:
            if child.type in wrappers:
                inner = [c for c in child.children if c.type in kinds or c.type in wrappers]
                visit(child, depth, child.start_point[0] if inner else None)
            elif child.type in kinds:
                found.append(_definition(child, data, depth, start_row))
                if child.type in containers and depth == 0:
                    body = child.child_by_field_name("body") or next(
                        (c for c in child.children if c.type in _BODY_NODES), None
                    )
                    if body is not None:
                        visit(body, 1)
            start_row = None

    visit(parser.parse(data).root_node, 0)
    return found


def _definition(node, data: bytes, depth: int, start_row: int | None) -> Definition:
    name_node = node.child_by_field_name("name") or node.child_by_field_name("type")
    name = name_node.text.decode("utf-8", "replace") if name_node is not None else node.type
    body = node.child_by_field_name("body") or next((c for c in node.children if c.type in _BODY_NODES), None)
    head_end = body.start_byte if body is not None else node.end_byte
    head = data[node.start_byte : head_end].decode("utf-8", "replace")
    head = TRAILING_COMMENT.sub("", head)  # `def f(self):  # why` or `fn f() { // why`
    signature = " ".join(head.split()).rstrip(":{ ").strip()
    if len(signature) > 140:
        signature = signature[:137] + "..."
    start = (start_row if start_row is not None else node.start_point[0]) + 1
    return Definition(name, signature, start, node.end_point[0] + 1, depth)


# ---------------------------------------------------------------------------------------------- the files


@dataclass
class SourceFile:
    rel: str
    text: str | None  # None: too big or not text; listed by name only

    @property
    def size(self) -> int:
        return len(self.text) if self.text is not None else 0

    @property
    def lines(self) -> list[str]:
        return (self.text or "").splitlines()


def text_files(workspace: Path) -> list[SourceFile]:
    """The project's files as the model may see them: text only, hidden files left out, and the agent's
    own folder (.agent/: its settings, the project's check among them, which the model must pass, not
    read; a small model copies a check it was shown into its answer)."""
    found = []
    for path in workspace_files(Workspace(workspace), workspace):
        rel = path.relative_to(workspace).as_posix()
        if path.suffix.lower() not in TEXT_SUFFIXES or path.name.startswith(".") or rel.startswith(AGENT_DIR):
            continue
        try:
            size = path.stat().st_size
            data = path.read_bytes() if size <= MAX_READ_BYTES else b""
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue
        found.append(SourceFile(rel, data.decode("utf-8", errors="replace") if data or not size else None))
    return found


def named_files(files: list[SourceFile], task: str) -> list[SourceFile]:
    """The files the task names, by their path from the root or a tail of it (`requests/utils.py`);
    by base name alone only when exactly one file has that name."""
    mentioned = {m.strip("./").rstrip(".") for m in PATHLIKE.findall(task.replace("\\", "/"))}
    mentioned.discard("")
    by_name: dict[str, list[SourceFile]] = {}
    for f in files:
        by_name.setdefault(PurePosixPath(f.rel).name, []).append(f)
    named = []
    for f in files:
        parts = f.rel.split("/")
        tails = {"/".join(parts[i:]) for i in range(len(parts) - 1)}  # with at least one folder
        by_base_name = parts[-1] in mentioned and len(by_name[parts[-1]]) == 1 and len(parts[-1]) > 3
        if f.rel in mentioned or tails & mentioned or by_base_name:
            named.append(f)
    return named


def is_test_file(rel: str) -> bool:
    """Whether a path is a test: under a tests/ or test/ folder, or named test_*, *_test or *.test.*."""
    path = PurePosixPath(rel)
    return (
        bool({"tests", "test"} & set(path.parts[:-1]))
        or path.name.startswith("test_")
        or path.stem.endswith(("_test", ".test", ".spec"))
    )


# ---------------------------------------------------------------------------------------------- ranking


@dataclass
class Ranked:
    file: SourceFile
    score: float
    definitions: list[Definition] = field(default_factory=list)


def rank(files: list[SourceFile], task: str, named: list[SourceFile], recent: list[str]) -> list[Ranked]:
    """The files not named by the task, most relevant first."""
    words = set(WORD.findall(task))
    code_words = {w for groups in CODE_WORD.findall(task) for w in groups if len(w) > 2}
    named_rels = {f.rel for f in named}
    named_text = "\n".join(f.text or "" for f in named)
    named_words = set(WORD.findall(named_text)) if named_text else set()
    task_parts = {p for m in PATHLIKE.findall(task) for p in m.split("/") if len(p) > 2}
    recent_set = set(recent)
    ranked = []
    for f in files:
        if f.rel in named_rels:
            continue
        defs = outline(f.rel, f.text) if f.text else []
        defined = {d.name for d in defs}
        path = PurePosixPath(f.rel)
        score = 0.0
        score += 10.0 * len(defined & code_words) + 2.0 * len(defined & words)  # defines what it mentions
        score += 3.0 * len(set(path.parts[:-1]) & task_parts)  # in a folder the task names
        score += 2.0 * (path.stem in words)
        if f.text and words:
            score += 1.0 * min(3, len(words & set(WORD.findall(f.text))))  # uses those names
        score += 2.0 * (f.rel in recent_set)
        if named_words and path.stem in named_words:
            score += 2.0  # a named file imports or mentions it
        score += 0.5 * min(4, len(defined & named_words))
        if path.parts[0] in ("tests", "test", "docs", "examples"):
            score -= 0.5
        ranked.append(Ranked(f, score, defs))
    ranked.sort(key=lambda r: (-r.score, r.file.rel.count("/"), r.file.rel))
    return ranked


# ---------------------------------------------------------------------------------------------- the text


@dataclass
class RepositoryView:
    text: str
    whole: list[str]  # files shown whole: the model may rewrite these whole
    partly: list[str] = field(default_factory=list)  # named files shown in part: SEARCH/REPLACE only
    # {file shown in part: the top-level definitions shown whole in it}: the model may write those anew
    definitions: dict[str, list[str]] = field(default_factory=dict)


def _fenced(rel: str, text: str, fence_for: Callable[[str], str]) -> str:
    fence = fence_for(text)
    return f"{rel}\n{fence}\n{text.rstrip()}\n{fence}"


def _wanted(defs: list[Definition], lines: list[str], task: str) -> list[Definition]:
    """The definitions of a long file to show whole: those the task names (`lt` counts: matched as a
    whole word against the file's own names), then the top-level ones they use, since a bug is often
    in the helper a named function calls (attrs' `lt` and its `_NumberValidator`). None twice: a
    member inside a class already chosen is left out."""
    named = [d for d in defs if re.search(rf"(?<![\w.]){re.escape(d.name)}(?!\w)", task)]
    top = {d.name: d for d in defs if d.depth == 0}
    used = set()
    for d in named:
        used |= set(IDENTIFIER.findall("\n".join(lines[d.start - 1 : d.end])))
    related = sorted((top[n] for n in used if n in top and top[n] not in named), key=lambda d: d.start)
    chosen: list[Definition] = []
    for d in [*named, *related]:
        if not any(c.start <= d.start and d.end <= c.end for c in chosen):
            chosen.append(d)
    return chosen


def _long_file(
    f: SourceFile, task: str, budget: int, fence_for: Callable[[str], str], shown: list[str]
) -> str:
    """A named file too long to show: its outline, the definitions the task names, its last lines.
    The top-level definitions shown whole are added to `shown`."""
    lines = f.lines
    defs = outline(f.rel, f.text or "")
    head = (
        f"{f.rel} has {len(lines):,} lines: too long to show whole here, so you cannot write it whole. "
        "Change it with SEARCH/REPLACE blocks whose SEARCH lines are copied exactly from the parts below."
    )
    parts = [head]
    if defs:
        listing = "\n".join(f"{d.start:>6}  {'    ' * d.depth}{d.signature}" for d in defs)
        if len(listing) > budget // 3:
            listing = "\n".join(f"{d.start:>6}  {d.signature}" for d in defs if d.depth == 0)
        if len(listing) > budget // 3:
            kept = listing[: listing.rfind("\n", 0, budget // 3)]
            listing = f"{kept}\n   ...  ({listing.count(chr(10)) - kept.count(chr(10))} more definitions)"
        parts.append(f"Its outline (line numbers on the left):\n{listing}")
    used = sum(len(p) for p in parts)
    for d in _wanted(defs, lines, task):
        body = "\n".join(lines[d.start - 1 : d.end])
        if used + len(body) > budget:
            parts.append(f"(The definition {d.name}, lines {d.start}-{d.end}, is too long to show here.)")
            continue
        parts.append(
            f"Lines {d.start}-{d.end} of {f.rel} ({d.name}):\n{fence_for(body)}\n{body}\n{fence_for(body)}"
        )
        used += len(body)
        if d.depth == 0:
            shown.append(d.name)
    tail = "\n".join(lines[-TAIL_LINES:])
    if used + len(tail) <= budget:
        parts.append(
            f"The last {min(TAIL_LINES, len(lines))} lines of {f.rel} (lines {max(1, len(lines) - TAIL_LINES + 1)}"
            f"-{len(lines)}):\n{fence_for(tail)}\n{tail}\n{fence_for(tail)}"
        )
    return "\n\n".join(parts)


def _map_entry(r: Ranked) -> str:
    """A file's path and its definitions' signatures; members of classes only for a relevant file."""
    if r.file.text is None:
        return f"{r.file.rel} (not shown: large or not text)"
    defs = [d for d in r.definitions if d.depth == 0 or r.score >= 2]
    entry = r.file.rel + "".join(f"\n    {'    ' * d.depth}{d.signature}" for d in defs)
    if len(entry) > ENTRY_LIMIT:
        entry = entry[: entry.rfind("\n", 0, ENTRY_LIMIT)] + "\n    ..."
    return entry


def repository_view(
    workspace: Path,
    task: str,
    budget_chars: int,
    fence_for: Callable[[str], str],
    recent: list[str] | None = None,
) -> RepositoryView:
    """The repository for the task message, never longer than `budget_chars` (a few lines of
    explanation aside)."""
    files = text_files(workspace)
    if not files:
        return RepositoryView("The project folder is empty.", [])
    total = sum(f.size + len(f.rel) + 10 for f in files)
    if all(f.text is not None for f in files) and total <= budget_chars:
        shown = "\n\n".join(_fenced(f.rel, f.text or "", fence_for) for f in files)
        return RepositoryView(f"The project's files, as they are now:\n\n{shown}", [f.rel for f in files])

    named = named_files(files, task)
    parts: list[str] = []
    whole: list[str] = []
    partly: list[str] = []
    definitions: dict[str, list[str]] = {}
    named_budget, used = int(budget_chars * NAMED_SHARE), 0
    # The code first, the small files whole first; a named test last. The tests are the task's evidence
    # and the code is what changes: click's test_types.py (241 lines) shown whole first left no room for
    # the class with the bug in types.py (real-click-fix-range-bounds, 2026-12-06).
    for f in sorted(named, key=lambda f: (is_test_file(f.rel), f.size)):
        if f.text is None:
            continue
        room = named_budget - used
        if f.size + len(f.rel) + 10 <= room:
            parts.append(_fenced(f.rel, f.text, fence_for))
            whole.append(f.rel)
        elif room > 2000:
            definitions[f.rel] = []
            parts.append(_long_file(f, task, room, fence_for, definitions[f.rel]))
            partly.append(f.rel)
        else:
            parts.append(f"{f.rel} is named by the task but there is no room left to show it: `cat {f.rel}`.")
        used += len(parts[-1])
    if parts:
        parts.insert(0, "The files the task names, as they are now:")

    ranked = rank(files, task, named, recent or [])
    room = budget_chars - used
    entries, left_out = [], []
    for r in ranked:
        entry = _map_entry(r)
        if len(entry) + 1 > room:
            entry = r.file.rel  # the path alone, when its signatures do not fit
        if len(entry) + 1 > room:
            left_out.append(r.file.rel)
            continue
        entries.append(entry)
        room -= len(entry) + 1
    if entries:
        parts.append(
            "The other files, the most relevant first, with their definitions. To see one, write a bash "
            "block with `cat PATH`; for part of a long file, `sed -n 'START,ENDp' PATH`:\n"
            + "\n".join(entries)
        )
    if left_out:
        folders = sorted({str(PurePosixPath(p).parent) for p in left_out})
        parts.append(
            f"{len(left_out)} more files are not listed, to fit the context (in {', '.join(folders[:8])}"
            f"{', ...' if len(folders) > 8 else ''}); `ls FOLDER` or `grep -rn NAME FOLDER` in a bash "
            "block finds them."
        )
    return RepositoryView("\n\n".join(parts), whole, partly, definitions)
