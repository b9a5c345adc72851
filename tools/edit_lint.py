"""The lint after each edit, as the edit tools run it: the file's fatal problems (tools/lint.py) and the
project's own lint command when one is named (`lint:` in a task file, `lint_command` in the config),
both reduced to what the edit added, and told to the model as part of that edit's result.

The project's command runs once before the file is written (its baseline) and once after; a line of
its output that was not there before (line and column numbers aside) is a new problem.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections import Counter
from functools import cache
from pathlib import Path

from tools import dangling_uses
from tools.base import TASK_TEXT, ToolContext, ToolResult
from tools.lint import describe, new_problems
from tools.missing_imports import defines, import_for, undefined_names, with_imports
from tools.process_group import CappedOutput, run_command
from tools.rename_symbol import NAME as RENAME_SYMBOL
from tools.rename_symbol import rename_call
from tools.search import workspace_files

LINT_TIMEOUT = 30.0
SHOWN_LINES = 15
MAX_SIBLINGS = 200  # modules of a folder read for a name's definition: more is a data folder, not a package
MAX_SIBLING_BYTES = 200_000
_POSITION = re.compile(r":\d+(?::\d+)?(?=[:\s]|$)")  # `x.py:12:5:` -> `x.py:` for comparing runs


def lint_baseline(ctx: ToolContext, path: Path, rel: str) -> list[str] | None:
    """The project's lint output for the file before the edit; None when no command is named."""
    if not ctx.lint or not ctx.lint_command or not path.is_file():
        return None
    return run_lint_command(ctx.lint_command, ctx.workspace.root, rel)


def add_missing_imports(
    ctx: ToolContext, path: Path, rel: str, before: str | None, after: str
) -> tuple[str, list[str]]:
    """`after` with the imports it lacks, where one is known for each (tools/missing_imports.py), and
    those import lines. Only names this change left undefined; the lint's switch turns it off too."""
    if not ctx.lint or not rel.endswith(".py"):
        return after, []
    names = undefined_names(problem.message for problem in new_problems(rel, before, after))
    if not names:
        return after, []
    module = path.stem

    @cache
    def siblings() -> dict[str, str]:
        """The text of each module beside the file, read once for all the names."""
        texts = {}
        for other in sorted(path.parent.glob("*.py"))[:MAX_SIBLINGS]:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                if (
                    other.stem.isidentifier()
                    and other.is_file()
                    and other.stat().st_size <= MAX_SIBLING_BYTES
                ):
                    texts[other.stem] = other.read_text(encoding="utf-8")
        return texts

    def definers(name: str) -> list[str]:
        return [stem for stem, text in siblings().items() if defines(text, name)]

    lines = list(dict.fromkeys(line for name in names if (line := import_for(name, after, module, definers))))
    return (with_imports(after, lines), lines) if lines else (after, [])


def imports_note(rel: str, lines: list[str]) -> str:
    """What the model is told about the imports added to its change ('' for none)."""
    if not lines:
        return ""
    added = ", ".join(f"`{line}`" for line in lines)
    return f" Added {added} to {rel}: the change used {'them' if len(lines) > 1 else 'it'} without importing."


def report_lint(
    ctx: ToolContext,
    result: ToolResult,
    path: Path,
    rel: str,
    before: str | None,
    after: str,
    baseline: list[str] | None,
) -> ToolResult:
    """`result` with the edit's new problems appended for the model and listed in `display["lint"]`."""
    if not ctx.lint:
        return result
    dangling, reports, listed, following = _dangling(ctx, path, rel, before, after), [], [], set()
    for old, left, new in dangling:
        if new and _rename_asked(ctx, old, new):
            # The task asks for this rename: the rest of it is an editor's rename, proposed as a call
            # the loop runs next (asked for and shown as any edit), rather than asked of a small model,
            # which did not copy the command.
            files = len({use.path for use in left})
            result.output += (
                f"\n\nThe task renames `{old}` to `{new}`, so its other uses ({len(left)} lines in {files} "
                f"file{'s' if files > 1 else ''}) are renamed next, by {RENAME_SYMBOL}."
            )
            result.followups.append(rename_call(rel, old, new))
            following.add(f"undefined name '{old}'")
            continue
        command = dangling_uses.rename_command(old, new, left) if new else ""
        reports.append(dangling_uses.describe(old, rel, left, new, command))
        listed += [f"{use.path}:{use.line}: uses `{old}`, which {rel} no longer defines" for use in left]
        if command:
            result.display["rename_command"] = command
    # (the uses of a name being renamed next are no problem of this edit's)
    found = [p for p in new_problems(rel, before, after) if p.message not in following]
    parts = ([describe(rel, found, after)] if found else []) + reports
    listed = [str(problem) for problem in found] + listed
    if ctx.lint_command:
        now = run_lint_command(ctx.lint_command, ctx.workspace.root, rel)
        added = _new_lines(baseline or [], now) if baseline is not None or before is None else []
        if added:
            shown = added[:SHOWN_LINES] + (
                [f"... and {len(added) - SHOWN_LINES} more"] if len(added) > SHOWN_LINES else []
            )
            parts.append(f"The project's lint (`{ctx.lint_command}`) reports:\n" + "\n".join(shown))
            listed += added
    if parts:
        result.output += "\n\nThe change is made, but it brings new problems. Fix them:\n" + "\n\n".join(
            parts
        )
        result.display["lint"] = listed
    return result


def _dangling(
    ctx: ToolContext, path: Path, rel: str, before: str | None, after: str
) -> list[tuple[str, list[dangling_uses.Use], str | None]]:
    """(name, its uses left, its new name or None) for each top-level name the edit took away from a
    Python file that the workspace still uses."""
    if not rel.endswith(".py") or before is None:
        return []
    gone, new = dangling_uses.renamed(before, after)
    if not gone:
        return []
    files = workspace_files(ctx.workspace, ctx.workspace.root)
    found = [(old, dangling_uses.uses(old, files, ctx.workspace.root, path)) for old in gone]
    return [(old, left, new) for old, left in found if left]


def _rename_asked(ctx: ToolContext, old: str, new: str) -> bool:
    """Whether the task names both the old name and the new one."""
    task = str(ctx.state.get(TASK_TEXT, ""))
    return all(re.search(rf"(?<!\w){re.escape(name)}(?!\w)", task) for name in (old, new))


def run_lint_command(command: str, root: Path, rel: str, timeout: float | None = None) -> list[str]:
    """The command's output lines for one file: `{path}` in it is the file, else the path is appended.
    A command that cannot run or times out says so in one line, which then counts as its output."""
    timeout = timeout or LINT_TIMEOUT
    quoted = shlex.quote(rel)
    line = command.replace("{path}", quoted) if "{path}" in command else f"{command} {quoted}"
    output = CappedOutput()
    try:
        # Over when its shell exits, even if something it started still holds the output (then stopped).
        ran = run_command(
            ["bash", "-c", line], output=output, cwd=root, timeout=timeout, grace=0, kill_leftovers=True
        )
    except OSError as exc:
        return [f"(the lint command could not start: {exc})"]
    if ran.timed_out:
        return [f"(the lint command timed out after {timeout:.0f} s)"]
    return [text for text in output.text().splitlines() if text.strip()]


def _new_lines(before: list[str], after: list[str]) -> list[str]:
    """Lines of `after` not in `before`, compared without line and column numbers, as multisets."""
    old = Counter(_POSITION.sub(":", text) for text in before)
    added = []
    for text in after:
        key = _POSITION.sub(":", text)
        if old[key]:
            old[key] -= 1
        else:
            added.append(text)
    return added
