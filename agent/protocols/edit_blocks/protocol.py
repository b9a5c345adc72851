"""The `blocks` protocol: the model writes text it saw in training (a path line and the whole file in a
fence, SEARCH/REPLACE blocks, a fenced `bash` block), read by `parser`; results go back as one user
message that reads like a terminal. A 1.5B model solved 4 of 5 small tasks this way in Aider and none
with JSON tool calls (FACTS.md)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from agent.core.check_output import LINT_MARK, MAX_LOCATIONS, CheckFailure, marked, marks_off
from agent.core.llm import Completion, ToolCall
from agent.core.protocol import ReadAnswer
from agent.protocols.base import stopped_at_limit
from agent.protocols.edit_blocks import NAME
from agent.protocols.edit_blocks.parser import (
    Action,
    ParsedAnswer,
    open_whole_file_block,
    parse_answer,
    to_tool_calls,
)
from agent.protocols.edit_blocks.prompt import (
    APPLY_PLAN,
    BLOCKS_REMINDER,
    BLOCKS_REMINDER_DEFINITIONS,
    BLOCKS_REMINDER_NAMED,
    BLOCKS_REMINDER_PARTLY,
    EXAMPLE_PATH,
    PLAN_FIX,
    PLAN_TASK,
    PLAN_TOKENS,
    RENAME_REMINDER,
    SEARCH_REPLACE_REMINDER,
    SYSTEM_PROMPT_BLOCKS,
)
from tools.base import ToolContext, ToolError, ToolRegistry, ToolResult
from tools.definition_edit import MAX_DEFINITION_LINES, may_write_definition
from tools.outline import DEFINITION_NAME, fence_for
from tools.search import workspace_files
from tools.shown import NOT_SHOWN, SHOWN_NOW_WHOLE, check_shown_whole, shown_definitions
from tools.workspace import OutsideWorkspace, Workspace

# A file name in prose: `report.py`, src/app.ts (not `e.g.` or `os.getcwd`, by the suffix).
_FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z]{1,4})(?![\w])")
SOURCE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".c", ".h", ".cpp", ".java", ".rb", ".sh", ".md"}
)
MAX_NAMED = 3  # files named in the request for the blocks after a plan; more are not a plan of one change
SHOWN_FILE_LIMIT = 12_000  # characters of an edited file shown back to the model after the change
CODE_WITHOUT_PATH = re.compile(r"a ```\w+ block without a file path")  # tagged: code, not quoted output
# What the blocks reader says of code that is a sketch in a plan, not a block meant to be applied.
PLAN_SKETCHES = (
    "without a file path",
    "holds only a path",
    "the same text in SEARCH and REPLACE",
    "an empty ```",
)
_LINT_LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+)(?::\d+)?: (?P<message>.*)$")


class BlockActions:
    """Edit blocks, whole files and bash fences written as text; results come back as one user message."""

    mode = NAME
    system_prompt = SYSTEM_PROMPT_BLOCKS
    shows_repository = True  # a small model acts on what it is shown; it rarely asks to read
    # Off by default (the `plan_first` setting, or a profile's): on the small suite three runs with it
    # solved 4, 5 and 4 of 14, against 2-4 without (docs/benchmarks.md, "A plan before the blocks").
    can_plan = True
    plan_first = False

    def reminder(self, partly: list[str]) -> str:
        """A plan first (PLAN_TASK); the blocks are asked for once the model has given it."""
        return self._ask_first(PLAN_TASK, partly_reminder(partly) if partly else BLOCKS_REMINDER)

    def _ask_first(self, ask: str, act: str) -> str:
        """Ask for a plan now, and for the blocks (`act`) after it: the next answer is read as a plan;
        without `plan_first`, ask for the blocks at once."""
        if not self.plan_first:
            return act
        self.planning, self.act = True, act
        return ask

    def files_written(self, message: dict[str, Any]) -> dict[str, str]:
        content = message.get("content")
        if not isinstance(content, str) or "```" not in content:
            return {}
        return {a.path: a.content for a in parse_answer(content).actions if a.kind == "write" and a.path}

    def __init__(self, workspace: Path) -> None:
        self.workspace = Workspace(workspace)
        self.changed: dict[str, None] = {}  # files written or edited in this session, in order
        # What the model was last told failed: its check (after_failed_check), or a command or an edit
        # in the last results. A block refused for its form (no path) is neither: nothing ran.
        self.check_failed = False
        self.tool_failed = False
        self.planning = False  # the next answer is the plan asked for, not yet the blocks
        self.act = BLOCKS_REMINDER  # what asks for the blocks once the plan is given
        self.task = ""  # the task as the model was given it
        # Where the answer's open block of definitions for a file shown in part began (stream_stop).
        self._definitions_from: int | None = None

    def new_task(self, task: str) -> None:
        """Nothing of the new task has failed yet (a fresh start's files may be back as they were)."""
        self.task = task
        self.check_failed = self.tool_failed = False

    def after_failed_check(self, failure: CheckFailure) -> str:
        """The files, the check's failure, and the format again: after a failed check small models
        tend to describe a fix instead of writing it. The 1.5B copies whole files whatever it is asked
        (asked for a SEARCH/REPLACE at a shown line, it wrote those lines back as the whole file), so
        the files the output points into are shown whole with the error written on its line, as a
        comment (taken off again from what the model writes); a located file too long to show whole
        gets its lines in the failure and a SEARCH/REPLACE asked for. The failure comes last, next to
        the instruction: the 1.5B rewrites the last file it was shown."""
        self.check_failed = True
        located: dict[str, set[int]] = {}
        for location in failure.locations[:MAX_LOCATIONS]:
            located.setdefault(location.path, set()).add(location.line)
        files, unshown = [], []
        for path in dict.fromkeys([*located, *self.changed]):
            text = self._read(path)
            notes = dict.fromkeys(located.get(path, ()), failure.error)
            with_mark = marked(path, text, notes) if text and path in located else None
            if with_mark is not None and len(with_mark) <= SHOWN_FILE_LIMIT:
                fence = fence_for(with_mark)
                files.append(f"{path} now reads (the line the check points at is marked):\n{fence}\n"
                             f"{with_mark.rstrip()}\n{fence}")  # fmt: skip
            elif path in located:
                unshown.append(path)
            else:
                files.append(self._show(path))
        message = failure.head + (failure.where if unshown else "") + failure.tail
        plan = self._ask_first(PLAN_FIX, SEARCH_REPLACE_REMINDER if unshown else BLOCKS_REMINDER)
        return "\n\n".join([*[f for f in files if f], message, plan])

    def request_tools(self, tools: ToolRegistry) -> list[dict[str, Any]]:
        return []  # no schemas: the chat template then says nothing of JSON tool calls

    def request_overrides(self) -> dict[str, Any]:
        return {"max_tokens": PLAN_TOKENS} if self.planning else {}

    def stream_stop(self, text: str, ctx: ToolContext) -> tuple[str, str] | None:
        """End the answer as soon as it starts writing whole an existing file that the model was not
        shown whole: the write would be refused whatever follows, and on a CPU the 1.5B spent minutes
        writing out a 700-line file before hearing so (real-attrs-fix-number-validators). What is
        kept is the answer up to the block's first line, with the fence closed, so that the refusal
        and its reason reach the model as usual."""
        if self._definitions_from is not None:
            return self._long_definitions(text)
        block = open_whole_file_block(text)
        if block is None:
            return None
        kept, path = block
        rel = self._known_path(Action("write", path, "")).path or path
        try:
            target = self.workspace.resolve(rel)
            check_shown_whole(ctx, target, rel, target.stat() if target.is_file() else None)
        except ToolError:
            first = kept.rstrip("\n").rsplit("\n", 2)[-2]
            if rel.endswith(".py") and may_write_definition(
                first, target, shown_definitions(ctx.state, target)
            ):
                # A function or class written anew: tools/definition_edit.py may take it.
                end = text.rfind("\n")  # the end of the block's first line, the last complete one
                self._definitions_from = text.rfind("\n", 0, end) + 1
                return None
            why = (
                f"the model began writing {rel} whole, which it was not shown whole: its answer was "
                "stopped there, as the write would be refused (the model is told why)"
            )
            return kept, why
        except (OSError, OutsideWorkspace):
            return None  # the tool layer says what is wrong once the block is written
        return None

    def _long_definitions(self, text: str) -> tuple[str, str] | None:
        """Stop a block of definitions that goes on past MAX_DEFINITION_LINES: the file written out
        whole after all, which the write refuses (the early stop above, once it is clear)."""
        lines = text[self._definitions_from or 0 :].split("\n")[:-1]
        if any(line.strip().startswith(("```", "~~~")) for line in lines):
            self._definitions_from = None  # closed: any later block is judged afresh
            return None
        if len(lines) <= MAX_DEFINITION_LINES:
            return None
        kept = "\n".join(text.split("\n")[:-1]) + "\n```\n"
        return kept, (
            f"the model wrote over {MAX_DEFINITION_LINES} lines of definitions into a file it was not "
            "shown whole: its answer was stopped there, as the write would be refused"
        )

    def read(self, completion: Completion, tools: ToolRegistry) -> ReadAnswer:
        self._definitions_from = None  # the next answer starts with no block open
        parsed = parse_answer(
            completion.content, cut_off=not completion.complete or stopped_at_limit(completion)
        )
        if not self.planning:  # in a plan, code without a path is a sketch
            parsed = self._adopt_pathless(parsed)
        # The instructions' example, copied with its path (`def example(): return 43`, written as a
        # new example.py beside the real change in implement-docstring): no work of the
        # task. Said, and not applied.
        copied = [a for a in parsed.actions if a.path == EXAMPLE_PATH and not self._read("example.py")]
        if copied:
            said = (
                f"the {EXAMPLE_PATH} block is the instructions' example of the format, not a file of "
                "this project. Write only the files the task needs."
            )
            if parsed.actions[0] in copied:
                # An answer that opens with the example goes on in its likeness: another_file.py,
                # a_third_file.py... each a new `path/to/` file (kv-report). Not written.
                invented = [a for a in parsed.actions if a not in copied and self._invented(a)]
                if invented:
                    copied += invented
                    names = ", ".join(a.path.removeprefix("path/to/") for a in invented)
                    said = (
                        f"the answer opened with the instructions' example ({EXAMPLE_PATH}) and went "
                        f"on with new files in its likeness ({names}): none of them was written. Write "
                        "only the files the task needs."
                    )
            parsed = replace(
                parsed,
                actions=[a for a in parsed.actions if a not in copied],
                problems=[*parsed.problems, said],
            )
        # A whole file written back unchanged is the model restating its work, not a change to make:
        # an answer made only of those ends the task like a plain "done".
        actions = [_unmarked(self._known_path(a)) for a in parsed.actions]
        unchanged = [a for a in actions if self._unchanged(a)]
        actions = [a for a in actions if a not in unchanged]
        planned, self.planning = self.planning, False
        if planned and _is_plan(parsed, actions, completion):
            # The plan asked for: its code (a line quoted, a fix sketched, the file copied as it is)
            # is no block to apply, and its commands are what it means to run once the change is
            # made: run before it, a test's output came last and the 1.5B wrote its fix into the
            # data file that output named (cli-flag). A fence labelled `# pricing.py`
            # inside is a sketch too: taken as a write, the sketch of one function replaced the
            # whole file (rename-function). A plan cut at PLAN_TOKENS is a plan. An answer that
            # writes a file under a path line at once, or tries to in a whole answer (a block
            # malformed), or that is only commands, is acting.
            return ReadAnswer([], completion.content, followup=self._apply_plan(completion.content))
        if self._plan_again(parsed, actions, completion):
            why = "the model described its change again after making it: taken as done"
            return ReadAnswer([], completion.content, notice=why)
        problems = list(parsed.problems)
        if problems and self._restates_files(completion.content):
            # "The file now reads: ```...```" with the file, or a part of it, exactly as it is now: a
            # summary of work done, not an edit.
            problems = [p for p in problems if "without a file path" not in p]
        if any(CODE_WITHOUT_PATH.search(p) for p in problems):
            problems += self._files_meant(completion.content)
        if unchanged and not actions and (self.check_failed or self.tool_failed or not self.changed):
            # ...but not after a failure: the same file again is no fix; nor before any change: the
            # file copied back is no work done. Say which: never a check that did not run, nor "the
            # output above" when there is none.
            if self.check_failed or self.tool_failed:
                what = (
                    "the task's check failed on it"
                    if self.check_failed
                    else "the last command or edit failed"
                )
                why = f"and {what} (see the previous message). Write it again with the fix in it."
            else:
                why = "so nothing is done yet. Write it again with the task's change in it."
            problems += [f"{a.path} is exactly as it was, {why}" for a in unchanged]
        return ReadAnswer(to_tool_calls(actions), completion.content, problems)

    def _apply_plan(self, plan: str) -> str:
        """What asks for the blocks once the plan is given, naming the files to write: the source files
        the plan names (else those changed, else those the task names). Told only the format after its
        plan, the 1.5B wrote the format's example, `path/to/example.py`, four times in one task
        (csv-totals): the path it is shown is the path it writes. Data files are
        not named: told to write the sales.csv its task reads, it wrote it back."""
        files = (
            self._sources_named(plan)
            or [rel for rel in self.changed if PurePosixPath(rel).suffix in SOURCE_SUFFIXES]
            or self._sources_named(self.task)
        )
        if self.act != BLOCKS_REMINDER or not 1 <= len(files) <= MAX_NAMED:
            return APPLY_PLAN.format(reminder=self.act)
        return APPLY_PLAN.format(reminder=BLOCKS_REMINDER_NAMED.format(files=" and ".join(files)))

    def _plan_again(self, parsed: ParsedAnswer, actions: list[Action], completion: Completion) -> bool:
        """Whether, the change made and not yet judged, the answer is a plan again, sketches and all.
        The 1.5B gives its plan again nearly word for word once it has written the change; refused for
        its pathless sketches, it gave the same answer until the repeat guard ended the task, and no
        check round came (cli-flag and dataclass-field). It is telling what it
        did: the check judges the change. Commands with prose and no sketch are run as ever."""
        settled = self.changed and not (self.check_failed or self.tool_failed)
        return bool(self.plan_first and settled and parsed.problems and _is_plan(parsed, actions, completion))

    def _adopt_pathless(self, parsed: ParsedAnswer) -> ParsedAnswer:
        """The answer's one block of code without a path, when it holds every definition of exactly
        one Python file (of those this session changed, else of the project): that file, written
        whole, as Aider takes the only file in the chat. The 1.5B wrote its right fix of report.py
        three times without the path line (csv-totals). A snippet (some definitions of
        a file) is not adopted, and the write meets the same rules as any other (a rewrite that
        deletes most of a file asks)."""
        if len(parsed.pathless) != 1 or not (written := set(DEFINITION_NAME.findall(parsed.pathless[0]))):
            return parsed
        pool = [rel for rel in (self.changed or self._files()) if rel.endswith(".py")]
        meant = [
            rel
            for rel in pool
            if (defs := set(DEFINITION_NAME.findall(self._read(rel) or ""))) and defs <= written
        ]
        said = next((p for p in parsed.problems if CODE_WITHOUT_PATH.search(p)), None)
        if len(meant) != 1 or said is None:
            return parsed
        problems = list(parsed.problems)
        problems.remove(said)
        return ParsedAnswer([*parsed.actions, Action("write", meant[0], parsed.pathless[0])], problems)

    def _restates_files(self, content: str) -> bool:
        """Whether every fenced block of the answer that has code in it repeats, line for line, a part
        of a file this session changed (indentation and blank lines aside)."""
        bodies = [b for b in _split_fences(content)[1] if b]
        if not bodies or not self.changed:
            return False
        texts = [_normalised(self._read(rel) or "") for rel in self.changed]
        return all(any(body in text for text in texts if text) for body in bodies)

    def _sources_named(self, text: str) -> list[str]:
        """The source files `text` names, new ones too, as paths of the project where they are its
        files, in the order named; and the existing ones whose definitions it rewrites."""
        names = [name for name in _FILE_NAME.findall(text) if name != EXAMPLE_PATH]
        named = [self._known_path(Action("write", name, "")).path for name in names]
        found = [*named, *self._named_files(text)]
        return [rel for rel in dict.fromkeys(found) if PurePosixPath(rel).suffix in SOURCE_SUFFIXES]

    def _named_files(self, content: str) -> list[str]:
        """The project files `content` names ("In `test_x.py`, add...") or whose definitions it
        rewrites."""
        written = set(DEFINITION_NAME.findall(content))
        meant = []
        for rel in self._files():
            named = re.search(rf"(?<![\w/.]){re.escape(rel)}(?![\w])", content)
            if named or (
                rel.endswith(".py")
                and written
                and written & set(DEFINITION_NAME.findall(self._read(rel) or ""))
            ):
                meant.append(rel)
        return meant

    def _files_meant(self, content: str) -> list[str]:
        """For a fence without a path: what to write instead, for the project files it names or whose
        definitions it rewrites."""
        meant = self._named_files(content)
        return [
            f"That code looks like a change to {rel}: write `{rel}` alone on a line, then the whole new "
            "file in the fence."
            for rel in meant[:2]
        ]

    def _invented(self, action: Action) -> bool:
        """A new file written under the example's `path/to/` folder that the task does not name: no
        file of the project has its path or its name."""
        if action.kind != "write" or not action.path.startswith("path/to/"):
            return False
        path = self._known_path(action).path
        return self._read(path) is None and PurePosixPath(path).name not in self.task

    def _known_path(self, action: Action) -> Action:
        """The path the model meant. Small models copy the prompt's `path/to/` example, or write a bare
        file name for a file that sits in a folder; an unknown path whose name is that of exactly one
        file of the project is that file (as Aider does)."""
        if not action.path or action.kind == "bash":
            return action
        path = action.path.removeprefix("./")
        path = path.removeprefix("path/to/") or path
        try:
            exists = self.workspace.resolve(path).exists()
        except OutsideWorkspace:
            return action  # refused, with a message, by the tool layer
        if not exists:
            # The one file of that name that the task names; else `attrs/validators.py` for
            # src/attrs/validators.py: a path that ends an existing one is that file; else a bare name
            # that exactly one file has. The task first: asked to fix src/attr/validators.py, the 1.5B
            # wrote `path/to/attrs/validators.py` (the package's name), and src/attrs/validators.py,
            # the 3-line module that re-exports it, got its class.
            files = self._files()
            by_tail = [p for p in files if p.endswith("/" + path)]
            name = PurePosixPath(path).name
            same_name = [p for p in files if PurePosixPath(p).name == name]
            named = [p for p in same_name if re.search(rf"(?<![\w/.]){re.escape(p)}(?![\w/])", self.task)]
            if len(named) == 1:
                path = named[0]
            elif len(by_tail) == 1:
                path = by_tail[0]
            elif len(same_name) == 1:
                path = same_name[0]
        return action if path == action.path else replace(action, path=path)

    def _read(self, rel: str, errors: str = "replace") -> str | None:
        """A project file's text; None when it is missing, unreadable or outside the workspace."""
        try:
            return self.workspace.resolve(rel).read_text(encoding="utf-8", errors=errors)
        except (OSError, ValueError, OutsideWorkspace):
            return None

    def _files(self) -> list[str]:
        root = self.workspace.root
        return [p.relative_to(root).as_posix() for p in workspace_files(self.workspace, root)]

    def _unchanged(self, action: Action) -> bool:
        if action.kind != "write" or not action.path:
            return False
        current = self._read(action.path, errors="strict")  # None: the tool layer will say what is wrong
        return current is not None and current.rstrip("\n") == action.content.rstrip("\n")

    def history_message(self, answer: ReadAnswer) -> dict[str, Any]:
        # Exactly what the model wrote: the re-rendered prompt then matches the server's cache.
        return {"role": "assistant", "content": answer.content}

    def results(self, answer: ReadAnswer, results: list[tuple[ToolCall, ToolResult]]) -> list[dict[str, Any]]:
        if answer.followup:  # a plan given: the blocks asked for
            return [{"role": "user", "content": answer.followup}]
        for call, result in results:
            if call.name in ("write_file", "edit_file") and result.ok:
                self.changed[result.display.get("path") or _arguments(call).get("path", "")] = None
        parts = [self._describe(call, result) for call, result in results]
        parts += [f"Not applied: {problem}" for problem in answer.problems]
        # An edit the lint found new problems in is applied, but is a failure to fix all the same.
        self.tool_failed = any(not result.ok or result.display.get("lint") for _, result in results)
        if any(call.name != "bash" and result.ok for call, result in results):
            self.check_failed = False  # files changed since: the check has not judged them yet
        if self.tool_failed or answer.problems:
            # The files as they are now, and the format again: a small model fixes a file it can see,
            # by writing it out whole; otherwise it describes the fix (seen on the 1.5B).
            # ...each with the lint's problems written on their lines, where the model copies from.
            problems = _lint_notes(results)
            parts += [self._show(path, problems.get(path)) for path in self.changed]
            # A whole file refused because the model never saw all of it: ask for edits, not whole files.
            # (A file the refusal showed whole may now be written whole: the usual reminder.)
            unseen = [
                _arguments(c).get("path", "?")
                for c, r in results
                if not r.ok and NOT_SHOWN in r.output and SHOWN_NOW_WHOLE not in r.output
            ]
            rename = next(
                (r.display["rename_command"] for _, r in results if "rename_command" in r.display), ""
            )
            if rename:
                reminder = RENAME_REMINDER.format(command=rename)
            elif unseen:
                reminder = partly_reminder(unseen)
            else:
                reminder = BLOCKS_REMINDER
            parts.append(f"Fix what failed. {reminder} When the task is done, answer without any block.")
        else:
            parts += self._fresh_files(results)
            parts.append("Go on with the task. When it is done, answer without any block.")
        return [{"role": "user", "content": "\n\n".join(p for p in parts if p)}]

    @staticmethod
    def _describe(call: ToolCall, result: ToolResult) -> str:
        args = _arguments(call)
        if call.name == "bash":
            return f"$ {args.get('command', '').strip()}\n{result.output.strip() or '(no output)'}"
        verb = "Wrote" if call.name == "write_file" else "Edited"
        if result.ok:
            return f"{verb} {args.get('path', '?')}: {result.output.strip()}"
        return f"Failed to change {args.get('path', '?')}: {result.output.strip()}"

    def _fresh_files(self, results: list[tuple[ToolCall, ToolResult]]) -> list[str]:
        """Files changed by SEARCH/REPLACE, shown as they are now: the model's next edit must match them."""
        shown, parts = set(), []
        for call, result in results:
            path = _arguments(call).get("path")
            if call.name != "edit_file" or not result.ok or not path or path in shown:
                continue
            shown.add(path)
            parts.append(self._show(path))
        return [p for p in parts if p]

    def _show(self, path: str, notes: dict[int, str] | None = None) -> str:
        """`path now reads:` and the file in a fence, with `notes` ({line: problem}) written on their
        lines; '' when it is gone or too big to repeat."""
        text = self._read(path)
        if text is None or len(text) > SHOWN_FILE_LIMIT:
            return ""  # the model can ask for it with `cat`
        with_notes = marked(path, text, notes, LINT_MARK) if notes else None
        said = " (the lines with problems are marked)" if with_notes else ""
        text = with_notes or text
        return f"{path} now reads{said}:\n{fence_for(text)}\n{text.rstrip()}\n{fence_for(text)}"


def partly_reminder(files: list[str]) -> str:
    """The format asked for when `files` were shown in part: whole definitions in Python files."""
    form = BLOCKS_REMINDER_DEFINITIONS if all(f.endswith(".py") for f in files) else BLOCKS_REMINDER_PARTLY
    return form.format(files=" or ".join(files))


def _lint_notes(results: list[tuple[ToolCall, ToolResult]]) -> dict[str, dict[int, str]]:
    """{path: {line: problem}} of the lint problems the edits' results list ("path:line: message")."""
    found: dict[str, dict[int, str]] = {}
    for _, result in results:
        for problem in result.display.get("lint") or []:
            if match := _LINT_LINE.match(problem):
                found.setdefault(match["path"], {}).setdefault(int(match["line"]), match["message"])
    return found


def _unmarked(action: Action) -> Action:
    """The action without the failure marks a shown file carried (the model copies them back)."""
    if action.kind == "bash":
        return action
    return replace(
        action,
        content=marks_off(action.content),
        search=marks_off(action.search),
        replace=marks_off(action.replace),
    )


def _normalised(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _is_plan(parsed: ParsedAnswer, actions: list[Action], completion: Completion) -> bool:
    """Whether an answer to the plan asked for is that plan: no file written under a path line, no
    block tried and malformed (unless the cap cut it), and not commands alone."""
    if any(a.path and not a.labelled for a in actions if a.kind != "bash"):
        return False
    sketches_only = all(any(n in p for n in PLAN_SKETCHES) for p in parsed.problems)
    if not (sketches_only or stopped_at_limit(completion)):
        return False
    commands_only = all(a.kind == "bash" for a in actions) and not _split_fences(completion.content)[0]
    return not (actions and commands_only)


def _split_fences(content: str) -> tuple[list[str], list[str]]:
    """An answer's non-blank lines outside its fenced blocks, and the normalised text of each block (an
    opening fence, with or without a tag, and a closing one are both a line starting with ```)."""
    outside, bodies, inside, lines = [], [], False, []
    for line in content.splitlines():
        if line.strip().startswith("```"):
            if inside:
                bodies.append(_normalised("\n".join(lines)))
                lines = []
            inside = not inside
        elif inside:
            lines.append(line)
        elif line.strip():
            outside.append(line)
    return outside, bodies


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        data = json.loads(call.arguments)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


PROTOCOL = BlockActions
