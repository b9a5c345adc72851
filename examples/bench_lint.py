"""What the lint after each edit costs (tools/lint.py new_problems), on files of 50, 1,000 and 3,500 lines.

python examples/bench_lint.py             # 20 runs per case: best and median in ms

The files are the running Python's own stdlib (encodings/ascii.py, functools.py, typing.py), so the figures
depend on its version. Each file gets three edits, one line appended:
- clean: the usual case, only the new text is linted;
- undefined name: the new text has a problem, so the old text is linted too, to see whether it is new;
- syntax error: the compiler stops early, and the old text is linted whole.
A 3,000-line JavaScript file (a function repeated) shows the tree-sitter path. The import fixer
(tools/missing_imports.py) is timed at its worst: a name no module of the folder defines. The search
for the uses a rename left behind (tools/dangling_uses.py) is timed on this project's own checkout:
`problems` renamed in tools/lint.py, every Python file the checkout holds searched.
"""

from __future__ import annotations

import statistics
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace

from tools import lint
from tools.edit_lint import _dangling, add_missing_imports
from tools.lint import new_problems
from tools.search import workspace_files
from tools.workspace import Workspace

RUNS = 20
EDITS = {
    "clean": "_bench_lint = len(__name__)\n",
    "undefined name": "_bench_lint = bench_lint_undefined\n",
    "syntax error": "_bench_lint = (\n",
}
JS_FUNCTION = """export function f{i}(items, limit) {{
  const out = [];
  for (const item of items) {{
    if (item.size > limit) out.push({{ name: item.name, size: item.size }});
  }}
  return out;
}}

"""


def timed(path: str, before: str, after: str) -> tuple[float, float, int]:
    """Best and median milliseconds of new_problems over RUNS, and how many problems it found."""
    found = new_problems(path, before, after)  # imports pyflakes and builds the parser outside the timing
    times = []
    for _ in range(RUNS):
        lint._problems.cache_clear()  # (the edit tools lint a text once; here each run is a first)
        start = time.perf_counter()
        new_problems(path, before, after)
        times.append((time.perf_counter() - start) * 1000)
    return min(times), statistics.median(times), len(found)


def main() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [stdlib / "encodings/ascii.py", stdlib / "functools.py", stdlib / "typing.py"]
    rows = []
    for file in files:
        text = file.read_text(encoding="utf-8")
        for edit, line in EDITS.items():
            rows.append((file.name, text.count("\n"), edit, *timed(file.name, text, text + line)))
    js = "".join(JS_FUNCTION.format(i=i) for i in range(375))
    for edit, line in {"clean": "f0([], 1);\n", "syntax error": "f0([], 1;\n"}.items():
        rows.append(("app.js", js.count("\n"), edit, *timed("app.js", js, js + line)))

    # The import fixer's worst case: an undefined name that is no module, so every module of the folder
    # (the stdlib's, up to MAX_SIBLINGS) is searched for its definition, and none has it.
    ctx = SimpleNamespace(lint=True)
    target = stdlib / "functools.py"
    text = target.read_text(encoding="utf-8")
    times = []
    for _ in range(RUNS):
        lint._problems.cache_clear()
        start = time.perf_counter()
        add_missing_imports(ctx, target, "functools.py", text, text + EDITS["undefined name"])
        times.append((time.perf_counter() - start) * 1000)
    print(
        f"add_missing_imports, functools.py, the {len(list(stdlib.glob('*.py')))} modules beside it searched:"
    )
    print(f"  best {min(times):.1f} ms, median {statistics.median(times):.1f} ms\n")

    # A rename in a project of a few hundred files: the names it took away, and every use left.
    root = Path(__file__).resolve().parents[1]
    source = (root / "tools/lint.py").read_text(encoding="utf-8")
    renamed = source.replace("def problems(", "def lint_problems(")
    ctx = SimpleNamespace(workspace=Workspace(root))
    times, found = [], []
    for _ in range(RUNS):
        start = time.perf_counter()
        found = _dangling(ctx, root / "tools/lint.py", "tools/lint.py", source, renamed)
        times.append((time.perf_counter() - start) * 1000)
    python_files = sum(1 for p in workspace_files(ctx.workspace, root) if p.suffix == ".py")
    [(name, uses, new)] = found
    print(
        f"the uses of `{name}` left by its rename to `{new}`: {len(uses)} lines, {python_files} Python files:"
    )
    print(f"  best {min(times):.1f} ms, median {statistics.median(times):.1f} ms\n")

    print(f"new_problems, {RUNS} runs each (ms)\n")
    print(f"{'file':<12} {'lines':>6}  {'edit':<15} {'best':>7} {'median':>7}  new")
    for name, lines, edit, best, median, found in rows:
        print(f"{name:<12} {lines:>6}  {edit:<15} {best:>7.1f} {median:>7.1f}  {found}")


if __name__ == "__main__":
    main()
