"""The fatal problems of a file the model just changed: syntax errors (Python's compiler for .py, the
file's tree-sitter grammar for JS, TS, Go and Rust) and, for Python, pyflakes' undefined names and the
other errors Aider selects (`flake8 --select=E9,F821,F823,F831,F406,F407,F701,F702,F704,F706`), and a
mutable dataclass default (an error at import, far from its line).

A deterministic check after every edit, fed back at once with the lines around each problem, is what
helps a small model most. Only the problems an edit adds count (`new_problems`): a file that was
already broken is not blamed on the edit. Text in, text out; nothing is read or written.
"""

from __future__ import annotations

import ast
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import import_module
from pathlib import PurePosixPath

from tree_sitter import Language, Node, Parser

from tools.outline import GRAMMARS as OUTLINE_GRAMMARS

MAX_CHARS = 1_000_000  # a bigger file is data or generated code: linting it costs more than it tells
MAX_SYNTAX_ERRORS = 10  # tree-sitter's recovery cascades after the first few; enough to compare before/after
SHOWN_PROBLEMS = 5  # what `describe` points at: a small model fixes the first few and loses track after
CONTEXT_LINES = 2
MAX_SHOWN_CHARS = 200  # a minified line would drown the message

# Python is not here: its own compiler is exact where tree-sitter-python guesses.
GRAMMARS: dict[str, tuple[str, str]] = {
    suffix: grammar[:2] for suffix, grammar in OUTLINE_GRAMMARS.items() if suffix != ".py"
}


@dataclass(frozen=True)
class LintProblem:
    path: str
    line: int  # 1-based
    message: str

    @property
    def key(self) -> str:
        """What the problem is, wherever it is: an edit that moves lines keeps the key."""
        return self.message

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def problems(path: str, text: str | bytes) -> list[LintProblem]:
    """The fatal problems of one file's text, in line order; [] for a suffix without a checker here, a
    file over MAX_CHARS, or bytes that are not UTF-8."""
    return list(_problems(path, text))


# An edit's text is linted by the import fixer (tools/missing_imports.py) and then by the report: once.
@lru_cache(maxsize=8)
def _problems(path: str, text: str | bytes) -> tuple[LintProblem, ...]:
    return tuple(_find_problems(path, text))


def _find_problems(path: str, text: str | bytes) -> list[LintProblem]:
    if len(text) > MAX_CHARS:
        return []
    suffix = PurePosixPath(path).suffix.lower()
    if suffix != ".py" and suffix not in GRAMMARS:
        return []
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return []
    if suffix == ".py":
        # Python reads a BOM in a file's bytes but calls it an invalid character in a str.
        return _python_problems(path, text.removeprefix("\ufeff"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: text decoded with surrogateescape from non-UTF-8 bytes
        return []
    return _syntax_problems(path, data, _parser(*GRAMMARS[suffix]))


def new_problems(path: str, before: str | bytes | None, after: str | bytes) -> list[LintProblem]:
    """The problems of `after` that `before` did not have (all of them for a new file, `before` None),
    in line order. Compared by key, as multisets: a moved error is not new, a second copy of one is."""
    found = problems(path, after)
    if before is None or not found:  # a clean edit, the usual case, costs one lint
        return found
    old = Counter(problem.key for problem in problems(path, before))
    added = []
    for problem in found:
        if old[problem.key]:
            old[problem.key] -= 1
        else:
            added.append(problem)
    return added


def describe(path: str, found: list[LintProblem], text: str) -> str:
    """The problems as a small model reads them best: each message, then its line marked among the
    numbered lines around it; the first SHOWN_PROBLEMS of them. '' when there are none."""
    if not found:
        return ""
    lines = text.splitlines()
    shown = found[:SHOWN_PROBLEMS]
    width = max(3, len(str(max(problem.line for problem in shown) + CONTEXT_LINES)))
    parts = []
    for problem in shown:
        block = [str(problem)]
        at = min(max(problem.line, 1), max(len(lines), 1))
        for number in range(max(1, at - CONTEXT_LINES), min(len(lines), at + CONTEXT_LINES) + 1):
            line = lines[number - 1].rstrip()
            if len(line) > MAX_SHOWN_CHARS:
                line = line[:MAX_SHOWN_CHARS] + " ..."
            mark = ">" if number == at else " "
            block.append(f"{mark}{number:>{width}} | {line}".rstrip())
        parts.append("\n".join(block))
    if len(found) > len(shown):
        parts.append(f"... and {len(found) - len(shown)} more in {path}")
    return "\n\n".join(parts)


def _python_problems(path: str, text: str) -> list[LintProblem]:
    # SyntaxWarnings (an invalid escape like "\d") would be printed on the terminal, under the TUI.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(text, path)
            # The compiler finds what the parser lets through: `return` outside a function, a duplicate
            # argument, a late `from __future__`. Compiling the tree is cheaper than compiling the text again.
            compile(tree, path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            return [LintProblem(path, exc.lineno or 1, f"{type(exc).__name__}: {exc.msg}")]
        except (ValueError, RecursionError, MemoryError):  # a NUL byte, nesting too deep to check
            return []
    from pyflakes import checker  # ~10 ms to import: paid at the first Python edit, not at startup

    try:
        flakes = checker.Checker(tree, filename=path).messages
    except RecursionError:
        return []
    found = [
        LintProblem(path, message.lineno, message.message % message.message_args)
        for message in flakes
        if isinstance(message, _fatal_flakes())
    ]
    found += _mutable_dataclass_defaults(path, tree) + _self_imports(path, tree)
    return sorted(found, key=lambda problem: problem.line)


def _self_imports(path: str, tree: ast.Module) -> list[LintProblem]:
    """`from .encoding import x` in encoding.py: an ImportError when the module loads ("partially
    initialized module ... circular import"). Asked to rename a function, the 1.5B replaced its
    definition by an import of the new name from the file itself, and sent it back each round (a rename
    on the real coder)."""
    parts = PurePosixPath(path).with_suffix("").parts
    if not parts or parts[-1] == "__init__":
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        dotted = tuple(node.module.split("."))
        own = (node.level == 1 and dotted == parts[-1:]) or (
            node.level == 0 and len(dotted) > 1 and parts[-len(dotted) :] == dotted
        )
        if own:
            names = ", ".join(f"`{alias.name}`" for alias in node.names)
            found.append(LintProblem(path, node.lineno, (
                f"{PurePosixPath(path).name} imports {names} from itself ({'.' * node.level}{node.module}): "
                f"that fails when the module loads; define {names} in this file instead"
            )))  # fmt: skip
    return found


# A list, dict or set as a dataclass field's default raises ValueError when the module is imported, far
# from its line: the traceback points into dataclasses.py and at the `@dataclass` line. The 1.5B read it
# right ("use a default_factory") and wrote `tags: list[str] = []` back each round (dataclass-field).
_MUTABLE = {
    ast.List: "list",
    ast.ListComp: "list",
    ast.Dict: "dict",
    ast.DictComp: "dict",
    ast.Set: "set",
    ast.SetComp: "set",
}


def _mutable_dataclass_defaults(path: str, tree: ast.Module) -> list[LintProblem]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or not any(map(_is_dataclass, node.decorator_list)):
            continue
        for item in node.body:
            named = isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            if named and (kind := _mutable_kind(item.value)):
                field = item.target.id
                found.append(LintProblem(path, item.lineno, (
                    f"mutable default for the dataclass field '{field}': Python refuses it when the module "
                    f"is imported; write `{field}: ... = field(default_factory={kind})`"
                )))  # fmt: skip
    return found


def _mutable_kind(value: ast.expr | None) -> str:
    """'list', 'dict' or 'set' for a default of that kind ([], {}, set(), a comprehension), else ''."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("list", "dict", "set")
    ):
        return value.func.id
    return _MUTABLE.get(type(value), "")


def _is_dataclass(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "dataclass"


@cache
def _fatal_flakes() -> tuple[type, ...]:
    """pyflakes' messages for Aider's fatal flake8 codes. All but F821 and F823 are SyntaxErrors of the
    compiler too, which runs first; they stay for a Python whose compiler lets one through."""
    from pyflakes import messages

    return (
        messages.UndefinedName,  # F821
        messages.UndefinedLocal,  # F823
        messages.DuplicateArgument,  # F831
        messages.ImportStarNotPermitted,  # F406
        messages.FutureFeatureNotDefined,  # F407
        messages.BreakOutsideLoop,  # F701
        messages.ContinueOutsideLoop,  # F702
        messages.YieldOutsideFunction,  # F704
        messages.ReturnOutsideFunction,  # F706
    )


@cache
def _parser(module: str, function: str) -> Parser:
    return Parser(Language(getattr(import_module(module), function)()))


def _syntax_problems(path: str, data: bytes, parser: Parser) -> list[LintProblem]:
    root = parser.parse(data).root_node
    if not root.has_error:
        return []
    found: list[LintProblem] = []
    _collect_errors(root, path, data, found)
    return sorted(found, key=lambda problem: problem.line)


def _collect_errors(node: Node, path: str, data: bytes, found: list[LintProblem]) -> None:
    """ERROR and MISSING nodes, outermost first (an error inside an error is the same error); only
    subtrees holding one are walked, so a large file with one error costs its depth, not its size."""
    if len(found) >= MAX_SYNTAX_ERRORS:
        return
    line = node.start_point.row + 1
    if node.is_missing:
        # A missing token is named by its text (')'), a missing named node by its kind (identifier).
        what = node.type if node.is_named else repr(node.type)
        found.append(LintProblem(path, line, f"missing {what}"))
    elif node.is_error:
        found.append(LintProblem(path, line, _unexpected(node, data)))
    else:
        for child in node.children:
            if child.has_error:
                _collect_errors(child, path, data, found)


def _unexpected(node: Node, data: bytes) -> str:
    """'syntax error at' the start of what the grammar could not read: where to look, in the file's words."""
    start = data[node.start_byte : min(node.end_byte, node.start_byte + 200)]
    lines = start.decode("utf-8", errors="replace").strip().splitlines()
    if not lines:
        return "syntax error"
    first = lines[0].strip()
    if len(first) > 30:
        first = first[:30] + "..."
    return f"syntax error at {first!r}"
