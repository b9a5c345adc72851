"""What the blocks reader fixes up of what a small model writes, before any of it runs: the path it
meant, the prompt's example copied, a file given without its path, the failure marks copied back, a
file restated as it is."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath

from agent.core.check_output import marks_off
from agent.protocols.edit_blocks.parser import Action, ParsedAnswer
from agent.protocols.edit_blocks.project import ProjectFiles, TaskProgress
from agent.protocols.edit_blocks.prompt import EXAMPLE_CODE, EXAMPLE_PATH
from tools.outline import DEFINITION_NAME
from tools.workspace import OutsideWorkspace

_QUALIFIED = re.compile(r"([A-Za-z_]\w*)\.([A-Za-z_]\w*)")  # `Class.method`, which no file is named
EXAMPLE_COPIED = "the instructions' example of the format"  # in what is said of it; the feedback reads it
CODE_WITHOUT_PATH = re.compile(r"a ```\w+ block without a file path")  # tagged: code, not quoted output


class AnswerRepairs:
    """Reads an answer's blocks as the model meant them, where its known habits are clear."""

    def __init__(self, files: ProjectFiles, progress: TaskProgress) -> None:
        self.files = files
        self.progress = progress

    def known_path(self, action: Action) -> Action:
        """The path the model meant. Small models copy the prompt's `path/to/` example, or write a bare
        file name for a file that sits in a folder; an unknown path whose name is that of exactly one
        file of the project is that file (as Aider does)."""
        if not action.path or action.kind == "bash":
            return action
        path = action.path.removeprefix("./")
        path = path.removeprefix("path/to/") or path
        try:
            exists = self.files.workspace.resolve(path).exists()
        except OutsideWorkspace:
            return action  # refused, with a message, by the tool layer
        if not exists and (owner := self._definition_label(path)):
            path = owner
        elif not exists:
            # The one file of that name that the task names; else `attrs/validators.py` for
            # src/attrs/validators.py: a path that ends an existing one is that file; else a bare name
            # that exactly one file has. The task first: asked to fix src/attr/validators.py, the 1.5B
            # wrote `path/to/attrs/validators.py` (the package's name), and src/attrs/validators.py,
            # the 3-line module that re-exports it, got its class.
            files = self.files.paths()
            by_tail = [p for p in files if p.endswith("/" + path)]
            name = PurePosixPath(path).name
            same_name = [p for p in files if PurePosixPath(p).name == name]
            task = self.progress.task
            named = [p for p in same_name if re.search(rf"(?<![\w/.]){re.escape(p)}(?![\w/])", task)]
            if len(named) == 1:
                path = named[0]
            elif len(by_tail) == 1:
                path = by_tail[0]
            elif len(same_name) == 1:
                path = same_name[0]
        return action if path == action.path else replace(action, path=path)

    def _definition_label(self, path: str) -> str:
        """The file shown in part that defines `Class.method`, where the path line is that name: the
        1.5B wrote `LFUCache.__setitem__:` above its fence, and a file of that name was created
        (cachetools-lfucache-setitem on 2 cores)."""
        match = _QUALIFIED.fullmatch(path.rstrip(":"))
        if match is None:
            return ""
        meant = self._partly_defining(set(match.groups()))
        return meant[0] if len(meant) == 1 else ""

    def without_example(self, parsed: ParsedAnswer) -> ParsedAnswer:
        """The answer without the instructions' example copied: its path (`def example(): return 43`,
        written as a new example.py beside the real change in implement-docstring), or its code under
        a real path (src/cachetools/__init__.py got `def example()` added at its end on 2 cores). No
        work of the task: said, and not applied. A definition the task message showed, written under
        the example's path, goes to its file (`def tabulate(...)` in path/to/example.py)."""
        parsed = replace(parsed, actions=[self._defined_in(a) for a in parsed.actions])
        copied = [
            a
            for a in parsed.actions
            if (a.path == EXAMPLE_PATH and not self.files.read("example.py")) or self._example_code(a)
        ]
        if not copied:
            return parsed
        said = (
            f"the block holding `def example()` is {EXAMPLE_COPIED}, not a change for this task: nothing "
            "was written. Write only the files the task needs."
            if any(a.path != EXAMPLE_PATH for a in copied)
            else f"the {EXAMPLE_PATH} block is {EXAMPLE_COPIED}, not a file of this project. Write only "
            "the files the task needs."
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
        return replace(
            parsed,
            actions=[a for a in parsed.actions if a not in copied],
            problems=[*parsed.problems, said],
        )

    def _example_code(self, action: Action) -> bool:
        """A block that is the instructions' example code, where neither the task nor the file it goes
        to has an `example` of its own."""
        code = action.content.strip().replace("\r\n", "\n")
        if action.kind != "write" or code not in EXAMPLE_CODE or "example" in self.progress.task:
            return False
        return "example" not in DEFINITION_NAME.findall(self.files.read(self.known_path(action).path) or "")

    def _defined_in(self, action: Action) -> Action:
        """A block under the example's path whose first definition one file shown in part defines (a
        method too): that file. The 1.5B wrote tabulate's `tabulate()` there (tabulate-2)."""
        if action.kind != "write" or action.path != EXAMPLE_PATH or self.files.read("example.py") is not None:
            return action
        names = DEFINITION_NAME.findall(action.content)
        if not names or names[0] == "example":
            return action
        meant = self._partly_defining({names[0]})
        return replace(action, path=meant[0]) if len(meant) == 1 else action

    def _invented(self, action: Action) -> bool:
        """A new file written under the example's `path/to/` folder that the task does not name: no
        file of the project has its path or its name."""
        if action.kind != "write" or not action.path.startswith("path/to/"):
            return False
        path = self.known_path(action).path
        return self.files.read(path) is None and PurePosixPath(path).name not in self.progress.task

    def adopt_pathless(self, parsed: ParsedAnswer) -> ParsedAnswer:
        """The answer's one block of code without a path, when it holds every definition of exactly
        one Python file (of those this session changed, else of the project): that file, written
        whole, as Aider takes the only file in the chat. The 1.5B wrote its right fix of report.py
        three times without the path line (csv-totals). A snippet (some definitions of
        a file) is not adopted, and the write meets the same rules as any other (a rewrite that
        deletes most of a file asks). But for a file the task message showed in part, a block of its
        functions or classes is the format asked for: the 1.5B wrote "Here's the updated
        `LRUCache.__setitem__` method:" and the method, with no path (cachetools-lrucache-setitem).

        The same block given twice is one block. Where more than one file could hold it, the
        definition the task is about decides (`focus_defined`)."""
        pathless = list(dict.fromkeys(parsed.pathless))
        if len(pathless) != 1 or not (written := set(DEFINITION_NAME.findall(pathless[0]))):
            return parsed
        given = {  # the answer's other writes, the format's example aside (dropped later)
            normalised(a.content): a.path
            for a in parsed.actions
            if a.kind == "write" and a.path != EXAMPLE_PATH and not self._example_code(a)
        }
        if normalised(pathless[0]) in given:
            # The block given with its path, then again "now as follows": a restatement, not a second
            # write. Taken as one, it was refused as changing nothing and the answer reported as a
            # failure after its fix had landed (boltons-onetoone-init on 2 cores).
            return replace(parsed, problems=[p for p in parsed.problems if not CODE_WITHOUT_PATH.search(p)])
        pool = [rel for rel in (self.progress.changed or self.files.paths()) if rel.endswith(".py")]
        meant = [
            rel
            for rel in pool
            if (defs := set(DEFINITION_NAME.findall(self.files.read(rel) or ""))) and defs <= written
        ] or self._partly_defining(written)
        if len(meant) != 1:
            meant = self._focus_defined(written) or meant
        said = next((p for p in parsed.problems if CODE_WITHOUT_PATH.search(p)), None)
        if len(meant) != 1 or said is None or meant[0] in given.values():
            return parsed  # a file the answer writes already is written once, as the reader does
        problems = [p for p in parsed.problems if p != said]
        return ParsedAnswer([*parsed.actions, Action("write", meant[0], pathless[0])], problems)

    def _focus_defined(self, names: set[str]) -> list[str]:
        """The file of the definition the task message found first, where `names` (a block's
        definitions) hold it or its class and that file was shown in part: a block of its functions
        or classes is what its feedback asks for. The 1.5B wrote `def __init__(self, *a, **kw):`
        with no path for boltons' `OneToOne.__init__`; four files shown define an `__init__`, and it
        was told to write two of the others (boltons-onetoone-init on the H100). It wrote `class
        LRUCache(Cache):` holding a new `peek`, which no file defines (cachetools-lrucache-peek)."""
        if self.progress.focus is None:
            return []
        rel, name = self.progress.focus
        if rel not in self.progress.partly or not set(name.split(".")) & names:
            return []
        # Tests written beside the fix belong to a test file, not at the end of the module.
        defined = set(DEFINITION_NAME.findall(self.files.read(rel) or ""))
        return [] if any(n.startswith("test") and n not in defined for n in names) else [rel]

    def _partly_defining(self, names: set[str]) -> list[str]:
        """The files shown in part that define every one of `names` (a method too)."""
        return [
            rel
            for rel in self.progress.partly
            if names <= set(DEFINITION_NAME.findall(self.files.read(rel) or ""))
        ]

    def unchanged(self, action: Action) -> bool:
        """A whole file written back exactly as it is, or, in a file changed in this session, code that
        it holds as it is now: the functions the model changed, given again once they landed (the 1.5B
        repeats its answer after its fix of `Bits.__getitem__` was applied)."""
        if action.kind != "write" or not action.path:
            return False
        current = self.files.read(action.path, errors="strict")  # None: the tool layer will say what is wrong
        if current is None:
            return False
        if current.rstrip("\n") == action.content.rstrip("\n"):
            return True
        given = normalised(action.content)
        return action.path in self.progress.changed and bool(given) and given in normalised(current)

    def pathless_problems(self, problems: list[str], content: str) -> list[str]:
        """The answer's problems, as its code without a path leaves them: none for a file restated as
        it is now, and for code that looks like a change to a project file, what to write instead."""
        if problems and self._restates_files(content):
            # "The file now reads: ```...```" with the file, or a part of it, exactly as it is now: a
            # summary of work done, not an edit.
            problems = [p for p in problems if "without a file path" not in p]
        if any(CODE_WITHOUT_PATH.search(p) for p in problems):
            problems = [*problems, *self._files_meant(content)]
        return list(problems)

    def _restates_files(self, content: str) -> bool:
        """Whether every fenced block of the answer that has code in it repeats, line for line, a part
        of a file this session changed (indentation and blank lines aside)."""
        bodies = [b for b in split_fences(content)[1] if b]
        if not bodies or not self.progress.changed:
            return False
        texts = [normalised(self.files.read(rel) or "") for rel in self.progress.changed]
        return all(any(body in text for text in texts if text) for body in bodies)

    def named_files(self, content: str) -> list[str]:
        """The project files `content` names ("In `test_x.py`, add...") or whose definitions it
        rewrites."""
        written = set(DEFINITION_NAME.findall(content))
        meant = []
        for rel in self.files.paths():
            named = re.search(rf"(?<![\w/.]){re.escape(rel)}(?![\w])", content)
            if named or (
                rel.endswith(".py")
                and written
                and written & set(DEFINITION_NAME.findall(self.files.read(rel) or ""))
            ):
                meant.append(rel)
        return meant

    def _files_meant(self, content: str) -> list[str]:
        """For a fence without a path: what to write instead, for the project files it names or whose
        definitions it rewrites."""
        meant = self.named_files(content)
        return [
            f"That code looks like a change to {rel}: write `{rel}` alone on a line, then "
            + (
                "the functions or classes you change in the fence, each whole."
                if rel in self.progress.partly
                else "the whole new file in the fence."
            )
            for rel in meant[:2]
        ]


def unmarked(action: Action) -> Action:
    """The action without the failure marks a shown file carried (the model copies them back)."""
    if action.kind == "bash":
        return action
    return replace(
        action,
        content=marks_off(action.content),
        search=marks_off(action.search),
        replace=marks_off(action.replace),
    )


def normalised(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def split_fences(content: str) -> tuple[list[str], list[str]]:
    """An answer's non-blank lines outside its fenced blocks, and the normalised text of each block (an
    opening fence, with or without a tag, and a closing one are both a line starting with ```)."""
    outside, bodies, inside, lines = [], [], False, []
    for line in content.splitlines():
        if line.strip().startswith("```"):
            if inside:
                bodies.append(normalised("\n".join(lines)))
                lines = []
            inside = not inside
        elif inside:
            lines.append(line)
        elif line.strip():
            outside.append(line)
    return outside, bodies
