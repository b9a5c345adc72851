"""The import a Python edit forgot, added where exactly one is known: what an editor's quick fix does.

Small models write `csv.DictReader` without `import csv`, and a test that calls `fizzbuzz(3)` without
importing it from fizzbuzz.py. Told "undefined name 'fizzbuzz'" with the line marked, the 1.5B sent
the same file back until the task ended (15 such reports in 3 sessions of the small suite
runs; pytest, csv, json, dataclass and a class of the project's own besides). The lint after each edit
(tools/edit_lint.py) asks here before it reports an undefined name. A name is imported only when
there is one answer:
- a module of Python's standard library, or one installed here, used as a module (`name.attribute`);
- a well-known name of the standard library (`dataclass`, `Path`, `defaultdict`...);
- a top-level function, class or variable of exactly one other module in the file's own folder.

Anything else (a typo, a name two modules define, a local that was never assigned) is left to the
model, reported as before. Text in, text out: the caller reads the folder and writes the file.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterable
from importlib.util import find_spec

# Names a small model uses without their import, each with the one import it can mean.
KNOWN_NAMES = {
    "dataclass": "from dataclasses import dataclass",
    "field": "from dataclasses import field",
    "Path": "from pathlib import Path",
    "defaultdict": "from collections import defaultdict",
    "Counter": "from collections import Counter",
    "OrderedDict": "from collections import OrderedDict",
    "namedtuple": "from collections import namedtuple",
    "deque": "from collections import deque",
    "Enum": "from enum import Enum",
    "timedelta": "from datetime import timedelta",
    "Any": "from typing import Any",
    "Optional": "from typing import Optional",
    "Callable": "from typing import Callable",
    "Iterable": "from typing import Iterable",
    "Iterator": "from typing import Iterator",
}
# A module named as its own main class: `datetime.now()` wants the class, `datetime.date` the module.
AMBIGUOUS = {"datetime"}
_UNDEFINED = re.compile(r"undefined name '(\w+)'")


def undefined_names(messages: Iterable[str]) -> list[str]:
    """The names of pyflakes' "undefined name" messages, each once, in order."""
    names = [match.group(1) for message in messages if (match := _UNDEFINED.fullmatch(message))]
    return list(dict.fromkeys(names))


def import_for(name: str, text: str, module: str, definers: Callable[[str], list[str]]) -> str:
    """The one import line that defines `name` for the module `module` (its file's stem), or ''.
    `definers(name)`: the other modules of the folder that define `name` at their top level."""
    if name in AMBIGUOUS or (name == "field" and "dataclass" not in text):
        return ""
    used_as_module = re.search(rf"(?<![\w.]){re.escape(name)}\.\w", text) is not None
    if used_as_module and name != module and _is_module(name):
        return f"import {name}"
    if name in KNOWN_NAMES and not used_as_module:
        return KNOWN_NAMES[name]
    owners = [other for other in definers(name) if other != module]
    return f"from {owners[0]} import {name}" if len(owners) == 1 else ""


def _is_module(name: str) -> bool:
    if name in sys.stdlib_module_names:
        return True
    try:
        return find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def defines(text: str, name: str) -> bool:
    """Whether a module's text defines `name` at its top level: a function, a class or an assignment
    at the start of a line (read, not parsed: a folder's modules are searched on every such edit)."""
    name = re.escape(name)
    return (
        re.search(
            rf"^(?:(?:async[ \t]+)?def[ \t]+{name}\b|class[ \t]+{name}\b|{name}[ \t]*(?::[^=\n]*)?=(?!=))",
            text,
            re.M,
        )
        is not None
    )


def with_imports(text: str, lines: list[str]) -> str:
    """`text` with the import `lines` added after its leading docstring, `from __future__` and imports
    (before its first statement when it has none), so that they run before the code that needs them."""
    tree = ast.parse(text)
    body = tree.body
    at = 0  # the line (1-based) after which the imports go; 0: at the top
    first = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        at, first = body[0].end_lineno or 0, 1  # the docstring
    for node in body[first:]:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            break
        at = node.end_lineno or at
    if at == 0 and body:
        decorators = getattr(body[0], "decorator_list", [])
        at = min([body[0].lineno] + [d.lineno for d in decorators]) - 1  # comments (a shebang) stay first
        while at > 0 and text.splitlines()[at - 1].strip() == "":
            at -= 1
    source = text.splitlines(keepends=True)
    newline = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
    if at and not source[at - 1].endswith(("\n", "\r")):
        source[at - 1] += newline
    return "".join(source[:at] + [line + newline for line in lines] + source[at:])
