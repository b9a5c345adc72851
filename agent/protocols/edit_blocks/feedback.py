"""What the blocks protocol tells the model back, as one user message that reads like a terminal: each
call's result, what was not applied, the files as they are now, and the format again where something
failed; after a failed check, the files it points into with the error on its line."""

from __future__ import annotations

import ast
import re

from agent.core.check_output import LINT_MARK, MAX_LOCATIONS, CheckFailure, marked
from agent.core.code_finder import is_test_file
from agent.core.llm import ToolCall
from agent.core.protocol import ReadAnswer
from agent.protocols.edit_blocks.parser import Action, call_arguments
from agent.protocols.edit_blocks.project import ProjectFiles, TaskProgress
from agent.protocols.edit_blocks.prompt import BLOCKS_REMINDER, RENAME_REMINDER, partly_reminder
from agent.protocols.edit_blocks.repairs import EXAMPLE_COPIED
from tools.base import ToolResult
from tools.definition_edit import DEFINITION_NODES, first_line
from tools.outline import Definition, fence_for, outline, qualname
from tools.rename_symbol import NAME as RENAME_SYMBOL
from tools.shown import NOT_SHOWN, SHOWN_NOW_WHOLE

SHOWN_FILE_LIMIT = 12_000  # characters of an edited file shown back to the model after the change
_LINT_LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+)(?::\d+)?: (?P<message>.*)$")


class Feedback:
    """Renders what happened for the model to read; changes nothing (TaskProgress records it)."""

    def __init__(self, files: ProjectFiles, progress: TaskProgress) -> None:
        self.files = files
        self.progress = progress

    def check_failure(self, failure: CheckFailure) -> tuple[list[str], bool, tuple[str, str] | None]:
        """The files the failure points into, shown whole with the error written on its line as a
        comment, the other files changed, and the failure last; whether a file it points into was too
        long to show whole (its lines are then in the failure, and SEARCH/REPLACE is asked for); and
        the definition shown whole in place of such a file ((path, name), or None).

        Where the failure points into the project's code, that code is what is shown: a test file is
        left to the failure's lines, and a code file the task message showed in part gives the
        definition holding the line, whole (and asked for whole, as the task message asked). Shown
        humanize's 150-line test file whole after `intcomma` failed, and asked for a SEARCH/REPLACE in
        number.py, the 1.5B wrote `intcomma` whole again, broken."""
        located: dict[str, set[int]] = {}
        for location in failure.locations[:MAX_LOCATIONS]:
            located.setdefault(location.path, set()).add(location.line)
        code_located = any(not is_test_file(path) for path in located)
        # Where the failure points into tests alone (a wrong value, asserted there), the code the task
        # is about stands in for the code located: the definition found first, asked for whole. Shown
        # humanize's test file whole instead, and asked for "the complete new file", the 1.5B wrote
        # number.py's 614 lines whole, refused, for the rest of the line (humanize-metric, H100).
        tested = None if code_located or not located else self._tested_focus()
        files, unshown, too_long, focus = [], [], False, None
        for path in dict.fromkeys([*located, *self.progress.changed]):
            text = self.files.read(path)
            notes = dict.fromkeys(located.get(path, ()), failure.error)
            with_mark = marked(path, text, notes) if text and path in located else None
            in_tests = is_test_file(path)
            lines_only = (code_located or tested is not None) and in_tests  # a test: its lines only
            if with_mark is not None and len(with_mark) <= SHOWN_FILE_LIMIT and not lines_only:
                fence = fence_for(with_mark)
                files.append(f"{path} now reads (the line the check points at is marked):\n{fence}\n"
                             f"{with_mark.rstrip()}\n{fence}")  # fmt: skip
            elif path in located:
                unshown.append(path)
                found = None
                if with_mark is not None and not in_tests and focus is None and path in self.progress.partly:
                    found = self._failed_definition(path, text or "", with_mark, notes)
                if found:
                    focus, shown = found
                    files.append(shown)
                elif not lines_only:
                    too_long = True
            else:
                files.append(self._show(path))
        if tested is not None and focus is None:
            focus, shown = tested
            files.append(shown)
        message = failure.head + (failure.where if unshown else "") + failure.tail
        return [*[f for f in files if f], message], too_long and focus is None, focus

    def _tested_focus(self) -> tuple[tuple[str, str], str] | None:
        """The definition the task message showed first, in a file shown in part, as it is now, to show
        and ask for whole after a failure located in tests alone; None without one."""
        if self.progress.focus is None or self.progress.focus[0] not in self.progress.partly:
            return None
        body = self._focus_body()
        if body is None or len(body) > SHOWN_FILE_LIMIT:
            return None
        rel, name = self.progress.focus
        said = f"`{name}` in {rel}, the code the task is about, now reads (the check failed in a test of it)"
        return (rel, name), f"{said}:\n{fence_for(body)}\n{body}\n{fence_for(body)}"

    @staticmethod
    def _failed_definition(
        path: str, text: str, with_mark: str, notes: dict[int, str]
    ) -> tuple[tuple[str, str], str] | None:
        """The innermost definition of `path` (`text`) holding a line the check points at, marked, to
        show whole in place of a file too long to: ((path, its name), what to show); None when there
        is none or it is too long itself."""
        defs = outline(path, text)
        holding = [d for d in defs if any(d.start <= n <= d.end for n in notes)]
        if not holding:
            return None
        inner = min(holding, key=lambda d: d.end - d.start)
        body = "\n".join(with_mark.splitlines()[inner.start - 1 : inner.end])
        if len(body) > SHOWN_FILE_LIMIT:
            return None
        name = qualname(inner, defs)
        fence = fence_for(body)
        said = f"`{name}` in {path} now reads (the line the check points at is marked)"
        return (path, name), f"{said}:\n{fence}\n{body}\n{fence}"

    def results(self, answer: ReadAnswer, results: list[tuple[ToolCall, ToolResult]]) -> str:
        """Each call's result and what was not applied; after a failure, the files as they are now and
        the format again; else the files SEARCH/REPLACE changed, fresh."""
        parts = [self._describe(call, result) for call, result in results]
        parts += [f"Not applied: {problem}" for problem in answer.problems]
        if self.progress.tool_failed or answer.problems:
            # The files as they are now, and the format again: a small model fixes a file it can see,
            # by writing it out whole; otherwise it describes the fix (seen on the 1.5B).
            # ...each with the lint's problems written on their lines, where the model copies from.
            problems = lint_notes(results)
            parts += [self._show(path, problems.get(path)) for path in self.progress.changed]
            # A whole file refused because the model never saw all of it: ask for edits, not whole files.
            # (A file the refusal showed whole may now be written whole: the usual reminder.)
            unseen = [
                call_arguments(c).get("path", "?")
                for c, r in results
                if not r.ok and NOT_SHOWN in r.output and SHOWN_NOW_WHOLE not in r.output
            ]
            rename = next(
                (r.display["rename_command"] for _, r in results if "rename_command" in r.display), ""
            )
            if rename:
                reminder = RENAME_REMINDER.format(command=rename)
            elif unseen or self.progress.partly:
                # Asked for "the complete new file" after any failure, even the format's example copied
                # back, a model writes a file it was shown in part whole, and that is refused.
                reminder = partly_reminder(unseen or self.progress.partly, self.progress.focus)
            else:
                reminder = BLOCKS_REMINDER
            if any(EXAMPLE_COPIED in problem for problem in answer.problems):
                parts.append(self._focus_code(shown=parts))
            parts.append(f"Fix what failed. {reminder} When the task is done, answer without any block.")
        else:
            parts += self._fresh_files(results)
            parts.append("Go on with the task. When it is done, answer without any block.")
        return "\n\n".join(p for p in parts if p)

    def copied_back(self, unchanged: list[Action], acting: bool) -> list[str]:
        """What to say of files written back exactly as they are in an answer that does nothing else
        (`acting`: it does), after a failure (the same file again is no fix) or before any change (the
        file copied back is no work done); nothing otherwise, and the answer ends the task like a plain
        "done". Say which: never a check that did not run, nor "the output above" when there is none."""
        progress = self.progress
        if not unchanged or acting or not (progress.failed or not progress.changed):
            return []
        if progress.failed:
            what = (
                "the task's check failed on it"
                if progress.check_failed
                else "the last command or edit failed"
            )
            why = f"and {what} (see the previous message). Write it again with the fix in it."
        else:
            why = "so nothing is done yet. Write it again with the task's change in it."
        return [f"{a.path} is exactly as it was, {why}" for a in unchanged]

    @staticmethod
    def _describe(call: ToolCall, result: ToolResult) -> str:
        args = call_arguments(call)
        if call.name == "bash":
            return f"$ {args.get('command', '').strip()}\n{result.output.strip() or '(no output)'}"
        if call.name == RENAME_SYMBOL:  # no block of the model's: the rest of a rename its edit began
            done = result.output.strip()
            return done if result.ok else f"Renaming `{args.get('old')}` to `{args.get('new')}`: {done}"
        verb = "Wrote" if call.name == "write_file" else "Edited"
        if result.ok:
            return f"{verb} {args.get('path', '?')}: {result.output.strip()}"
        return f"Failed to change {args.get('path', '?')}: {result.output.strip()}"

    def _fresh_files(self, results: list[tuple[ToolCall, ToolResult]]) -> list[str]:
        """Files changed by SEARCH/REPLACE, shown as they are now: the model's next edit must match them."""
        shown, parts = set(), []
        for call, result in results:
            path = call_arguments(call).get("path")
            if call.name != "edit_file" or not result.ok or not path or path in shown:
                continue
            shown.add(path)
            parts.append(self._show(path))
        return [p for p in parts if p]

    def _focus_code(self, shown: list[str]) -> str:
        """The definition the task message showed first, as it is now, next to where the model writes:
        after the format's example copied. The 1.5B copies the last code it was shown; shown only the
        format again, it wrote the example again (boltons-bits-getitem, `Bits.__getitem__`)."""
        if self.progress.focus is None or any(
            p.startswith(f"{self.progress.focus[0]} now reads") for p in shown
        ):
            return ""  # none found, or its file is shown whole just above
        body = self._focus_body()
        if body is None:
            return ""
        rel, name = self.progress.focus
        return f"`{name}` in {rel} now reads:\n{fence_for(body)}\n{body}\n{fence_for(body)}"

    def focus_opening(self) -> str:
        """How the answer that writes the definition found first begins: its file's path line, a fence,
        and its decorators and signature as they stand; '' where there is none to write so (not
        Python, or a file shown whole, whose block would replace all of it)."""
        if self.progress.focus is None or self.progress.focus[0] not in self.progress.partly:
            return ""
        rel = self.progress.focus[0]
        found = self._focus_definition() if rel.endswith(".py") else None
        if found is None:
            return ""
        text, definition = found
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return ""
        # The outline starts a member at its `def` line, a top-level definition at its decorators.
        node = next(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, DEFINITION_NODES) and definition.start in (first_line(n), n.lineno)
            ),
            None,
        )
        if node is None:
            return ""
        # Its decorators too (a block replaces from them), to its body's first line, decorators and all.
        head = text.splitlines()[first_line(node) - 1 : first_line(node.body[0]) - 1]  # empty: one line
        return f"{rel}\n```python\n" + "".join(f"{line}\n" for line in head) if head else ""

    def _focus_body(self) -> str | None:
        """The focus's lines as they are now; None when it is not there once."""
        found = self._focus_definition()
        if found is None:
            return None
        text, definition = found
        return "\n".join(text.splitlines()[definition.start - 1 : definition.end])

    def _focus_definition(self) -> tuple[str, Definition] | None:
        """The text of the focus's file and the focus in its outline, when it is there once."""
        assert self.progress.focus is not None
        rel, name = self.progress.focus
        text = self.files.read(rel) or ""
        defs = outline(rel, text)
        found = [d for d in defs if qualname(d, defs) == name]
        return (text, found[0]) if len(found) == 1 else None

    def _show(self, path: str, notes: dict[int, str] | None = None) -> str:
        """`path now reads:` and the file in a fence, with `notes` ({line: problem}) written on their
        lines; '' when it is gone or too big to repeat."""
        text = self.files.read(path)
        if text is None or len(text) > SHOWN_FILE_LIMIT:
            return ""  # the model can ask for it with `cat`
        with_notes = marked(path, text, notes, LINT_MARK) if notes else None
        said = " (the lines with problems are marked)" if with_notes else ""
        text = with_notes or text
        return f"{path} now reads{said}:\n{fence_for(text)}\n{text.rstrip()}\n{fence_for(text)}"


def lint_notes(results: list[tuple[ToolCall, ToolResult]]) -> dict[str, dict[int, str]]:
    """{path: {line: problem}} of the lint problems the edits' results list ("path:line: message")."""
    found: dict[str, dict[int, str]] = {}
    for _, result in results:
        for problem in result.display.get("lint") or []:
            if match := _LINT_LINE.match(problem):
                found.setdefault(match["path"], {}).setdefault(int(match["line"]), match["message"])
    return found
