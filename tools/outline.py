"""The outline of a source file: its functions, classes and methods with their one-line signatures and
lines, read with tree-sitter grammars (which read past syntax errors, so a half-written file still has
one). The repository view, the code finder and the refusal of an unseen write all show files this way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import PurePosixPath

TOKEN = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
# Words that say nothing about where the code is: English glue and what every task says.
STOPWORDS = frozenset(
    """a an and are as at be but by can could do does doing done for from get gets got has have how if in
    into is it its it's of on or should so some than that the their them then there these this those to
    too was were what when where which while who why will with would you your instead returns return
    returned gives give given says say said it should fix bug wrong right expected expect makes make
    function method class call calls called value values work works working broken case cases also now
    only just like way want wants need needs use uses used one two not no yes""".split()  # noqa: SIM905
)
TAIL_LINES = 12  # the end of a long file, shown so that an addition at the end has an anchor
TRAILING_COMMENT = re.compile(r"(?m)[ \t]*(?:#|//)[^\n'\"]*$")
# The name on each `def` or `class` line of Python text, at any indentation, `async def` too. A pattern,
# not a parse: a block the model wrote that does not parse (a snippet, a method alone) still names them.
DEFINITION_NAME = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)


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
    return list(_outline(rel, text))


@lru_cache(maxsize=2048)  # the map, the code finder and a refusal read the same files in one task
def _outline(rel: str, text: str) -> tuple[Definition, ...]:
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
    return tuple(found)


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


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks in the text (Markdown files hold fences)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def owner_of(d: Definition, defs: list[Definition]) -> Definition | None:
    """The top-level definition (a class, an impl) holding `d`, a member; None for a top-level one."""
    if d.depth == 0:
        return None
    return next((o for o in reversed(defs) if o.depth == 0 and o.start < d.start <= o.end), None)


def qualname(d: Definition, defs: list[Definition]) -> str:
    """`Class.method` for a member, the name for a top-level definition (`defs`: the file's outline)."""
    owner = owner_of(d, defs)
    return f"{owner.name}.{d.name}" if owner else d.name


def excerpt(
    rel: str,
    text: str,
    wanted: list[Definition],
    budget: int,
    head: str,
    why: dict[Definition, str] | None = None,
    members_of_wanted_only: bool = False,
    words: set[str] | None = None,
) -> tuple[str, list[str]]:
    """A file too long to show whole, as a model is shown it: `head`, the `wanted` definitions whole
    (each with `why` it was chosen), its outline with line numbers, its last lines (the anchor of an
    addition at the end), within about `budget` characters. The code comes before the outline because
    a small model copies the first code it sees: shown the outline first, the 1.5B wrote it back as
    its fix of semver's `Version.compare`, three times in a row. Returns the text and the names of the
    definitions shown whole (`Class.method` for a member). `members_of_wanted_only`: list only the
    members of the classes holding a wanted definition (the rest of a large file is noise). A wanted
    definition too long for the budget is shown by its lines holding the most of `words` (stemmed,
    `words_of`), each with a few lines around it."""
    lines = text.splitlines()
    defs = outline(rel, text)
    listed = defs
    if members_of_wanted_only:
        owners = {qualname(d, defs).split(".")[0] for d in wanted if d.depth}
        listed = [d for d in defs if d.depth == 0 or qualname(d, defs).split(".")[0] in owners]
    parts, shown, listing = [head], [], ""
    if defs:
        listing = "\n".join(f"{d.start:>6}  {'    ' * d.depth}{d.signature}" for d in listed)
        if len(listing) > budget // 3:
            listing = "\n".join(f"{d.start:>6}  {d.signature}" for d in defs if d.depth == 0)
        if len(listing) > budget // 3:
            kept = listing[: listing.rfind("\n", 0, budget // 3)]
            listing = f"{kept}\n   ...  ({listing.count(chr(10)) - kept.count(chr(10))} more definitions)"
        listing = f"The outline of {rel} (line numbers on the left):\n{listing}"
    used = len(head) + len(listing)
    for d in wanted:
        body = "\n".join(lines[d.start - 1 : d.end])
        if used + len(body) > budget:
            windows = _windows(lines, d, words or set(), (budget - used) // 2)
            if windows:
                parts.append(
                    f"{qualname(d, defs)}, lines {d.start}-{d.end} of {rel}, is too long to show whole here: the "
                    f"lines of it that the task's words point at (line numbers on the left; copy SEARCH lines "
                    f"exactly, without the numbers):\n{windows}"
                )
                used += len(parts[-1])
            else:
                parts.append(f"(The definition {d.name}, lines {d.start}-{d.end}, is too long to show here.)")
            continue
        label = qualname(d, defs) + (f": {why[d]}" if why and d in why else "")
        fence = fence_for(body)
        parts.append(f"Lines {d.start}-{d.end} of {rel} ({label}):\n{fence}\n{body}\n{fence}")
        used += len(body)
        shown.append(qualname(d, defs))
    if listing:
        parts.append(listing)
    tail = "\n".join(lines[-TAIL_LINES:])
    if used + len(tail) <= budget:
        fence = fence_for(tail)
        parts.append(
            f"The last {min(TAIL_LINES, len(lines))} lines of {rel} (lines {max(1, len(lines) - TAIL_LINES + 1)}"
            f"-{len(lines)}):\n{fence}\n{tail}\n{fence}"
        )
    return "\n\n".join(parts), shown


def stem(word: str) -> str:
    """A light stemmer: "evicts", "evicted", "eviction" and "evicting" all read "evict", and "remove",
    "removes" and "removed" read "remov"."""
    word = word.lower()
    for suffix in ("ations", "ation", "ings", "ing", "ions", "ion", "ies", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


class _Stems(dict):
    """{token: its stem, or "" for a word left out}: a repository repeats a few thousand words millions
    of times, and the code finder reads each definition's body as words."""

    def __missing__(self, token: str) -> str:
        if len(self) > 200_000:  # random tokens (hashes, data) must not grow it without end
            self.clear()
        found = stem(token) if len(token) > 1 and token.lower() not in STOPWORDS else ""
        self[token] = found
        return found


_STEMS = _Stems()


def words_of(text: str) -> list[str]:
    """The stemmed words of code or prose, identifiers split (`naturalSize`, `natural_size`: natural, size)."""
    return [s for s in map(_STEMS.__getitem__, TOKEN.findall(text)) if s]


WINDOW = 3  # lines shown either side of a line of a long definition that the task's words point at


def _windows(lines: list[str], d: Definition, words: set[str], budget: int) -> str:
    """The lines of a long definition that hold the most of `words`, each with WINDOW lines around
    it, numbered, within `budget` characters; its first line always; '' when no line holds a word."""
    doc = _docstring_lines(lines, d)
    span = range(d.start, d.end + 1)
    scores = {n: 0 if n in doc else len(words & set(words_of(lines[n - 1]))) for n in span}
    best = sorted((n for n in span if scores[n]), key=lambda n: (-scores[n], n))
    if not best:
        return ""
    chosen: set[int] = {d.start}
    for n in best:
        wider = chosen | set(range(max(d.start, n - WINDOW), min(d.end, n + WINDOW) + 1))
        if sum(len(lines[i - 1]) + 8 for i in wider) > budget:
            break
        chosen = wider
    out, last = [], 0
    for n in sorted(chosen):
        if last and n > last + 1:
            out.append("   ...")
        out.append(f"{n:>6}  {lines[n - 1]}")
        last = n
    return "\n".join(out)


def _docstring_lines(lines: list[str], d: Definition) -> set[int]:
    """The line numbers of a Python definition's docstring: its examples echo the task's words, but the
    change is in the code."""
    header_end = next((n for n in range(d.start, d.end + 1) if lines[n - 1].rstrip().endswith(":")), None)
    if header_end is None:
        return set()
    first = next((n for n in range(header_end + 1, d.end + 1) if lines[n - 1].strip()), None)
    text = lines[first - 1].strip().lstrip("rRuU") if first else ""
    if not text.startswith(('"""', "'''")):
        return set()
    quote = text[:3]
    if text.count(quote) >= 2:
        return {first}
    end = next((m for m in range(first + 1, d.end + 1) if quote in lines[m - 1]), d.end)
    return set(range(first, end + 1))
