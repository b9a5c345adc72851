"""A whole-file block for a long Python file, read as the new version of the definitions it holds.

A file too long for the context is shown to the model as its outline and the definitions the task is
about (agent/core/repomap.py), and may not be written whole: the model has not read the rest. SEARCH
lines copied exactly are what the 1.5B fails at, though; asked to fix attrs' `_NumberValidator`, all
four attempts wrote `src/attr/validators.py` as a whole file, three times each, and each was refused
(real-attrs-fix-number-validators). What a small model writes well is a whole function.
So a block whose content is nothing but top-level functions and classes, each one the model was shown
whole in this session (or a new one), replaces those definitions where they stand, or adds the new
ones at the end, and leaves every other line of the file as it was.

A method shown whole (`TTLCache.expire`) is written the same way: alone, at any indentation, when no
other shown method has its name, or inside its class's line (`class TTLCache(...):` holding only the
methods that change). It replaces that method, indented as it was.

Text in, text out; the write tool reads the file and the shown records (tools/shown.py).
"""

from __future__ import annotations

import ast
import io
import itertools
import re
import textwrap
import tokenize
from difflib import SequenceMatcher
from pathlib import Path

from tools.missing_imports import defines
from tools.text_files import leading_space

# More changed than this is a rewrite of the file, not a change of a few definitions. Those copied as
# they stand do not count: the 1.5B writes a file's tail from the function it fixes to the end of
# the file (inflection's `parameterize` and the six after it, two changed), refused whole.
MAX_DEFINITIONS = 3
# A block this long for a file shown in part is the file again. The longest definition the task
# message shows of such a file is about 90 lines (click's _NumberRangeBase); on 2 cores, four streams
# write 150 lines in about 5 minutes.
MAX_DEFINITION_LINES = 150
DEFINITION_START = re.compile(r"^[ \t]*(?:@\w|(?:async[ \t]+)?def[ \t]+(\w+)|class[ \t]+(\w+))")


def may_write_definition(first: str, path: Path, shown: set[str], new: bool = True) -> bool:
    """Whether a block for `path` (a file the model was not shown whole) that begins with the line
    `first` may be a definition it can write anew: one it was shown, a new one (unless not `new`:
    after imports, see definitions_change), or a decorator (its name comes later). A definition of the
    file it never read is refused whatever follows."""
    match = DEFINITION_START.match(first)
    if match is None:
        return False
    name = match.group(1) or match.group(2)
    if (
        name is None
        or name in shown
        or any(q.endswith(f".{name}") or q.startswith(f"{name}.") for q in shown)
    ):
        return True
    if not new:
        return False
    try:
        return not defines(path.read_text(encoding="utf-8"), name)
    except (OSError, UnicodeDecodeError):
        return False


DEFINITION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def definitions_change(current: str, block: str, shown: set[str], task: str = "") -> tuple[str, str] | None:
    """(the file with `block`'s definitions in place, what was done) when `block` holds only top-level
    functions and classes (after any imports; at most MAX_DEFINITIONS of them changed), each either
    copied as it stands, or shown to the model (`shown`) and defined once at the top level of
    `current`, or new, or a shown method (alone, or in its class); None when the block is anything
    else.

    A new definition whose name the task gives to one shown definition it names (the only such one:
    "rename `super_len` to `body_length`") replaces that one: the 1.5B wrote the renamed function as a
    block, which was added beside the old one (real-requests-rename-super-len)."""
    block = _unqualified(textwrap.dedent(block), current)
    block = _header_moved(block) or block
    try:
        old_tree, new_tree = ast.parse(current), ast.parse(block)
    except (SyntaxError, ValueError):
        return None
    # Imports written above the definitions are the model saying what they use: the file keeps its
    # own, and one the change needs that the file lacks is added after (tools/edit_lint.py:
    # add_missing_imports). Refused, the 1.5B's `import math` above a fixed `humanize.intcomma` ended
    # its line of work.
    news = list(
        itertools.dropwhile(lambda node: isinstance(node, (ast.Import, ast.ImportFrom)), new_tree.body)
    )
    imported = len(news) < len(new_tree.body)
    if not news or not all(isinstance(node, DEFINITION_NODES) for node in news):
        return None
    tops: dict[str, list[ast.stmt]] = {}
    for node in old_tree.body:
        if isinstance(node, DEFINITION_NODES):
            tops.setdefault(node.name, []).append(node)
    block_lines, lines = block.splitlines(), current.splitlines()
    replaced, added, spans, members_added = [], [], [], []
    changed = 0
    for node in news:
        text = "\n".join(block_lines[first_line(node) - 1 : node.end_lineno])
        olds = tops.get(node.name, []) or tops.get(_renamed_from(node, shown, tops, task), [])
        if len(olds) == 1 and _same(text, "\n".join(lines[first_line(olds[0]) - 1 : olds[0].end_lineno])):
            continue  # copied as it stands (the end of a file shown as its anchor): nothing to change
        changed += 1
        if changed > MAX_DEFINITIONS:
            return None
        if len(olds) > 1 or (olds and olds[0].name not in shown):
            methods = _methods_of_class_block(node, olds, shown, block_lines, lines)
            if methods is None:
                return None  # two definitions of the name, or one the model never read: not guessed at
            spans += methods
            replaced += [f"{node.name}.{name}" for name in _names_in(node)]
        elif olds and (merged := _class_merged(node, olds[0], block_lines, lines, task)) is not None:
            spans.append((first_line(olds[0]), olds[0].end_lineno or 0, merged[0]))
            replaced += [f"{node.name}.{name}" for name in merged[1]]
            members_added += [f"{node.name}.{name}" for name in merged[2]]
        elif olds:
            spans.append((first_line(olds[0]), olds[0].end_lineno or 0, text))
            replaced.append(node.name if olds[0].name == node.name else f"{olds[0].name}` by `{node.name}")
        elif (method := _shown_method(node.name, shown, old_tree, task)) is not None:
            spans.append(_method_span(method, text, lines))
            replaced.append(f"{_owner(method, old_tree)}.{node.name}")
        elif _is_method(node):
            return None  # `def __call__(self, ...)` alone: a method of a class, not a new function
        else:
            added.append(text)
    if imported and not replaced and not members_added:
        if not added:
            # Imports above the file's own definitions as they stand: a fix that changed nothing, to be
            # told so. Refused as "not shown", the 1.5B was shown `metric` again and wrote it back with
            # the same imports until its line was stopped (humanize-metric on the H100).
            return current, ""
        return None  # imports and new code only: another file's content (tests/utils.py into utils.py)
    kept_docs = []
    for start, end, text in sorted(spans, reverse=True):
        kept = text if _DOC_WORD.search(task) else _docstring_kept(text, lines[start - 1 : end])
        if kept != text:
            kept_docs.append(_name_of(kept))
        lines[start - 1 : end] = kept.splitlines()
    if added:
        while lines and not lines[-1].strip():
            lines.pop()
        for text in added:
            lines += ["", "", *text.splitlines()]
    said = []
    if replaced:
        said.append("replaced " + ", ".join(f"`{name}`" for name in replaced) + " where it stood")
    if members_added:
        said.append("added " + ", ".join(f"`{name}`" for name in members_added) + " at the end of its class")
    if added:
        new_names = [node.name for node in news if node.name not in tops]
        said.append("added " + ", ".join(f"`{name}`" for name in new_names) + " at the end")
    if kept_docs:
        names = ", ".join(f"`{name}`" for name in reversed(kept_docs))
        said.append(f"kept the docstrings in {names} as they were (the task does not ask to change them)")
    ending = "\n" if current.endswith("\n") or not current else ""
    return "\n".join(lines) + ending, " and ".join(said)


_DOC_WORD = re.compile(r"\bdoc", re.IGNORECASE)


def _docstring_kept(text: str, old: list[str]) -> str:
    """`text` (a definition written anew, placed as it will stand) with the docstring of `old` (the
    lines it replaces) where it dropped or reworded its own, and for a class, its methods' too.
    Writing a function out again, the 1.5B shortens its docstring: humanize's `intcomma` came back 3
    lines short, `metric` 6 and then 12, and a fix identical but for that counted as a change. Left
    as it is when anything does not line up."""
    kept = _own_docstring_kept(text, old)
    try:
        new_def = ast.parse(textwrap.dedent(kept)).body[0]
        old_def = ast.parse(textwrap.dedent("\n".join(old))).body[0]
    except (SyntaxError, ValueError, IndexError):
        return kept
    if not isinstance(new_def, ast.ClassDef) or not isinstance(old_def, ast.ClassDef):
        return kept
    olds = _members(old_def)
    lines = kept.splitlines()
    for member in sorted(_members(new_def).values(), key=lambda ms: -ms[0].lineno):
        if len(member) != 1 or len(olds.get(member[0].name, [])) != 1:
            continue
        start, end = first_line(member[0]), member[0].end_lineno or member[0].lineno
        was = olds[member[0].name][0]
        old_lines = old[first_line(was) - 1 : was.end_lineno or was.lineno]
        lines[start - 1 : end] = _own_docstring_kept(
            "\n".join(lines[start - 1 : end]), old_lines
        ).splitlines()
    whole = "\n".join(lines) + ("\n" if kept.endswith("\n") else "")
    try:
        ast.parse(textwrap.dedent(whole))
    except SyntaxError:
        return kept
    return whole


def _own_docstring_kept(text: str, old: list[str]) -> str:
    """`_docstring_kept` for the definition's own docstring only."""
    try:
        new_def = ast.parse(textwrap.dedent(text)).body[0]
        old_def = ast.parse(textwrap.dedent("\n".join(old))).body[0]
    except (SyntaxError, ValueError, IndexError):
        return text
    new_doc, old_doc = _docstring_node(new_def), _docstring_node(old_def)
    if old_doc is None or not getattr(new_def, "body", None):
        return text
    new_lines, old_text = text.splitlines(), old[old_doc.lineno - 1 : old_doc.end_lineno or old_doc.lineno]
    if new_doc is not None:
        first, last = new_doc.lineno - 1, new_doc.end_lineno or new_doc.lineno
    else:
        first = last = new_def.body[0].lineno - 1  # inserted above the body's first statement
    if first >= len(new_lines) or leading_space(new_lines[first]) != leading_space(old_text[0]):
        return text
    kept = "\n".join([*new_lines[:first], *old_text, *new_lines[last:]])
    try:
        ast.parse(textwrap.dedent(kept))
    except SyntaxError:
        return text
    return kept + ("\n" if text.endswith("\n") else "")


def _docstring_node(node: ast.stmt) -> ast.stmt | None:
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[0] if isinstance(body[0].value.value, str) else None
    return None


def _name_of(text: str) -> str:
    return getattr(ast.parse(textwrap.dedent(text)).body[0], "name", "?")  # (parsed in _docstring_kept)


def _members(cls: ast.ClassDef) -> dict[str, list[ast.stmt]]:
    found: dict[str, list[ast.stmt]] = {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, []).append(node)
    return found


def _names_in(cls: ast.stmt) -> list[str]:
    return [
        n.name for n in getattr(cls, "body", []) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _shown_method(name: str, shown: set[str], tree: ast.Module, task: str) -> ast.stmt | None:
    """The one method named `name` that the model was shown (`Class.name`), defined once in its class;
    of two shown, the one whose class the task names."""
    owners = [q.split(".")[0] for q in shown if q.count(".") == 1 and q.endswith(f".{name}")]
    if len(owners) > 1:
        owners = [owner for owner in owners if _names(task, owner)]
    if len(owners) != 1:
        return None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owners[0]]
    methods = _members(classes[0]).get(name, []) if len(classes) == 1 else []
    return methods[0] if len(methods) == 1 else None


def _owner(method: ast.stmt, tree: ast.Module) -> str:
    return next(n.name for n in tree.body if isinstance(n, ast.ClassDef) and method in n.body)


def _method_span(method: ast.stmt, text: str, lines: list[str]) -> tuple[int, int, str]:
    """(first line, last line, `text` indented as the method is in the file)."""
    start, end = first_line(method), method.end_lineno or first_line(method)
    indent, written = leading_space(lines[start - 1]), leading_space(text.splitlines()[0]) if text else ""
    placed = textwrap.indent(textwrap.dedent(text), indent)
    if len(indent) > len(written):
        placed = _realigned(placed, lines[start - 1 : end], len(indent) - len(written))
    return start, end, placed


def _realigned(placed: str, old: list[str], shift: int) -> str:
    """`placed` (a method the model wrote `shift` columns left of where it stands, moved back) with the
    lines it copied at their column in the file, not the block's, moved back too.

    The 1.5B does this: it wrote semver's `Version.compare` at column 0 with its fix in it, and its last
    15 lines, unchanged, still at the method's 8 spaces. They fell inside the `raise` branch above
    them, which is valid Python, and the method returned None. It wrote boltons' `OneToOne.__init__`
    the same way with two continuation lines at their old column, and they came back 4 spaces deeper:
    lines changed that the task never asked to change.

    So a line it copied unchanged `shift` columns too deep goes back: a line that continues a bracket
    or a string (or a comment) wherever it is, since its column is text; and the lines that start
    statements after the last one copied at the block's column, when every one of them is too deep,
    with all the lines among them. Only when the method still parses, as one method."""
    new = placed.splitlines()
    starts = _statement_rows(textwrap.dedent(placed))
    if starts is None:
        return placed
    pairs = SequenceMatcher(None, [n.strip() for n in new], [o.strip() for o in old], autojunk=False)
    deeper = {
        i
        for a, b, size in pairs.get_matching_blocks()
        for i, j in zip(range(a, a + size), range(b, b + size), strict=True)
        if new[i].strip() and len(leading_space(new[i])) - len(leading_space(old[j])) == shift
    }
    matched = {i for a, _, size in pairs.get_matching_blocks() for i in range(a, a + size) if new[i].strip()}
    statements = sorted(i for i in matched if i in starts)
    kept = [i for i in statements if i not in deeper]
    last_kept = kept[-1] if kept else -1
    tail = [i for i in statements if i > last_kept]
    text_lines = {i for i in deeper if i not in starts}  # continuation lines and comments: text
    # Every statement after the last one at the block's column is too deep (none kept is among them),
    # and no new line comes before them: `if x:` put around them would be the model's own change.
    tries = [text_lines]
    if len(tail) >= 2 and all(i in matched for i in range(last_kept + 1, tail[0]) if new[i].strip()):
        tries.insert(0, text_lines | {i for i in range(tail[0], len(new)) if new[i].strip()})
    for moves in tries:
        if moves and all(len(leading_space(new[i])) >= shift for i in moves):
            moved = "\n".join(line[shift:] if i in moves else line for i, line in enumerate(new))
            if _one_definition(moved):
                return moved
    return placed


def _unqualified(block: str, current: str) -> str:
    """`block` with `def Class.method(` read as `def method(` where `current` defines that class: the
    1.5B wrote `def LRUCache.__setitem__(self, key, value, ...)`, which does not parse, 8 times in one
    task (cachetools-lrucache-setitem on the H100)."""

    def named(match: re.Match) -> str:
        defines = re.search(rf"^class[ \t]+{re.escape(match.group(2))}\b", current, re.M)
        return match.group(1) + match.group(3) if defines else match.group(0)

    return _QUALIFIED_DEF.sub(named, block)


_QUALIFIED_DEF = re.compile(
    r"^([ \t]*(?:async[ \t]+)?def[ \t]+)([A-Za-z_]\w*)\.([A-Za-z_]\w*)(?=[ \t]*\()", re.M
)


def _header_moved(block: str) -> str:
    """`block` (one definition that does not parse) with its first lines moved right to where its
    other lines are, where that makes it parse as one definition; '' when it parses already or no move
    does.

    The 1.5B writes a method out at column 0 for its signature and the start of its docstring, then
    goes on at the method's columns in the file: semver's `Version.bump_prerelease`, its body 8
    spaces deep under a `def` at column 0, was refused 15 times in one line of work. The fewest lines
    moved that make one definition of it: those are the lines it moved left itself (a docstring's
    lines are text, and the file's docstring is kept unless the task is about it)."""
    if not DEFINITION_START.match(block):
        return ""
    try:
        ast.parse(block)
        return ""  # it parses: read as it is (a block of several definitions is not one moved)
    except SyntaxError:
        pass
    lines = block.splitlines()
    for shift in (4, 8):
        for k in range(1, len(lines)):
            moved = "\n".join(
                [*(" " * shift + line if line.strip() else line for line in lines[:k]), *lines[k:]]
            )
            if _one_definition(moved):
                return textwrap.dedent(moved) + "\n"
    return ""


def _one_definition(code: str) -> bool:
    """Whether `code` parses as one function or class. Moving a tail must leave the method whole: a
    second copy of the tail written after the first (the coder did, at the block's column) would fall
    outside it, where `return` parses but does not compile."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return False
    return len(tree.body) == 1 and isinstance(tree.body[0], DEFINITION_NODES)


def _statement_rows(code: str) -> set[int] | None:
    """The 0-based rows of `code` where a statement starts (not those inside brackets or strings, nor
    comments alone); None when it does not tokenize."""
    rows, at_start = set(), True
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.NEWLINE:
                at_start = True
            elif token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                if at_start and token.type != tokenize.ENDMARKER:
                    rows.add(token.start[0] - 1)
                at_start = False
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return rows


def _class_merged(
    node: ast.stmt, old: ast.stmt, block_lines: list[str], lines: list[str], task: str
) -> tuple[str, list[str], list[str]] | None:
    """(the class `old` with the methods of the class block `node` in it, those replaced, those added)
    when the block leaves out methods the class has and the task does not name: the block is the
    methods that change, not the class's new whole. None when it is the class whole, or holds more
    than a docstring and methods.

    Asked to add `LRUCache.peek`, the 1.5B wrote `class LRUCache(Cache):` holding `peek` alone. Read
    as the class anew, that deleted the class's eight other methods (cachetools-lrucache-peek)."""
    if not isinstance(node, ast.ClassDef) or not isinstance(old, ast.ClassDef):
        return None
    news, olds = _members(node), _members(old)
    if all(name in news or _names(task, name) for name in olds):
        return None
    for child in node.body:
        docstring = isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant)
        if not docstring and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
    if any(len(ms) != 1 or len(olds.get(name, [])) > 1 for name, ms in news.items()):
        return None
    start, end = first_line(old), old.end_lineno or old.lineno
    merged = lines[start - 1 : end]
    indent = leading_space(lines[first_line(next(iter(olds.values()))[0]) - 1]) if olds else "    "
    replaced, appended = [], []
    for name, (child,) in news.items():
        text = "\n".join(block_lines[first_line(child) - 1 : child.end_lineno])
        if name in olds:
            was = olds[name][0]
            if _same(text, "\n".join(lines[first_line(was) - 1 : was.end_lineno])):
                continue  # copied as it stands: not said to be replaced
            replaced.append((name, _method_span(was, text, lines)))
        else:
            appended.append((name, textwrap.indent(textwrap.dedent(text), indent)))
    for _, (first, last, placed) in sorted(replaced, key=lambda r: -r[1][0]):
        merged[first - start : last - start + 1] = placed.splitlines()
    for _, placed in appended:
        merged += ["", *placed.splitlines()]
    return "\n".join(merged), [name for name, _ in replaced], [name for name, _ in appended]


def _methods_of_class_block(
    node: ast.stmt, olds: list[ast.stmt], shown: set[str], block_lines: list[str], lines: list[str]
) -> list[tuple[int, int, str]] | None:
    """The spans a class block holding only methods the model was shown replaces (`class C:` with
    `def m(self)` in it, C not shown whole); None when it holds anything else."""
    if not isinstance(node, ast.ClassDef) or len(olds) != 1 or not isinstance(olds[0], ast.ClassDef):
        return None
    members, spans = _members(olds[0]), []
    for child in node.body:
        if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant):
            continue  # the class's docstring, copied: not a change
        name = getattr(child, "name", None)
        if (
            not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            or f"{node.name}.{name}" not in shown
        ):
            return None
        if len(members.get(name, [])) != 1:
            return None
        text = "\n".join(block_lines[first_line(child) - 1 : child.end_lineno])
        spans.append(_method_span(members[name][0], text, lines))
    return spans or None


def _same(a: str, b: str) -> bool:
    """The same code, but for indentation and blank lines."""
    return [line.strip() for line in a.splitlines() if line.strip()] == [
        line.strip() for line in b.splitlines() if line.strip()
    ]


def _renamed_from(node: ast.stmt, shown: set[str], tops: dict[str, list[ast.stmt]], task: str) -> str:
    """The one shown definition of the file, of `node`'s kind (a class or a function), that a task
    naming `node` renames to it, or ''. Of another kind it is no rename: `def total(self)` is a method
    of the shown class `Store` that the task names (`store.Store.total()`), not Store renamed."""
    name, kind = getattr(node, "name", ""), isinstance(node, ast.ClassDef)
    if not task or not _names(task, name):
        return ""
    candidates = [
        old
        for old in shown
        if old in tops and old != name and _names(task, old)
        and all(isinstance(top, ast.ClassDef) == kind for top in tops[old])
    ]  # fmt: skip
    return candidates[0] if len(candidates) == 1 else ""


def _names(task: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", task) is not None


def first_line(node: ast.stmt) -> int:
    """A definition's first line, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _is_method(node: ast.stmt) -> bool:
    if isinstance(node, ast.ClassDef):
        return False
    args = node.args.posonlyargs + node.args.args  # type: ignore[attr-defined]
    return (bool(args) and args[0].arg in ("self", "cls")) or node.name.startswith("__")
