"""Edit blocks: a model's answer, written as text, read into the actions it asks for.

Small local models write edits better as text they saw in training than as JSON tool calls
(DESIGN.md, "Two ways for the model to act"). The protocol they are told:

- a path alone on a line, then a fenced block with the whole new content of that file
  (the path may also be the fence's info string: ```python path/x.py, ```path/x.py, ```python:x.py);
- a path line, then a fence holding SEARCH/REPLACE blocks (or the blocks without a fence);
- a fenced block tagged bash, sh, shell or console: one command (a script is fine);
- an answer with no block: the task is done.

`parse_answer` is pure: it reads text and returns `Action`s in the order written, plus problems
written for the model (what was not taken and how to write it instead). `to_tool_calls` turns the
actions into ordinary `write_file`, `edit_file` and `bash` calls, which then pass through the same
permissions, checkpoints and events as native tool calls. Whether a path is inside the workspace
is the tool layer's decision, not the parser's.

Choices worth knowing:
- A fence closes only on a line holding nothing but the same fence character, at least as many.
  A fence never closed is never applied (cut off at max_tokens, or simply left open).
- Markdown targets (.md/.markdown, or a ```markdown fence) may hold fences: inside them a fence line
  with an info string (```bash) opens a nested level that the next bare fence closes. SEARCH/REPLACE
  marker lines end any nesting, so a SEARCH that quotes half of a nested block still parses.
- An empty SEARCH is a whole-file write of the REPLACE text (aider appends to an existing file;
  a write is one rule for the model and shows as a diff). It counts as that file's whole-file block.
- Whole-file blocks: the first for a path is taken, later ones in the same answer are refused.
  SEARCH/REPLACE blocks apply in order, after a whole-file block for the same file if one came first.
- SEARCH/REPLACE blocks without a path line take the path of the SEARCH/REPLACE block just before
  them when only blank lines separate the two; otherwise they are refused.
- SEARCH text is kept as written (echoed line numbers included): `edit_file` matching copes.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.core.llm import ToolCall

SHELL_TAGS = frozenset({"bash", "sh", "shell", "console"})
MARKDOWN_TAGS = frozenset({"markdown", "md"})
DIFF_TAGS = frozenset({"diff", "patch", "udiff"})
MAX_PATH = 200

_FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")
_HEAD = re.compile(r"^[ \t]*<{5,9} ?SEARCH>?[ \t]*$", re.IGNORECASE)
_DIVIDER = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_UPDATED = re.compile(r"^[ \t]*>{5,9} ?REPLACE[ \t]*$", re.IGNORECASE)
# "New file: `x.py`" and "Updated file: x.py" too: the 1.5B labels a block so (4 of its fences in one
# H100 run).
_PATH_PREFIX = re.compile(
    r"^(?:(?:new|updated|modified|changed|edited)[ \t]+)?(?:file ?name|file|path)[ \t]*:[ \t]*", re.IGNORECASE
)
# Files people name without an extension; any other single word ("Output", "python") is prose.
_BARE_NAME = re.compile(
    r"^(?:\w*file|readme|license|licence|copying|authors|changelog|notice|codeowners|todo)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Action:
    """One thing the model asked for, in order of appearance."""

    kind: Literal["write", "replace", "bash"]
    path: str | None
    content: str  # the whole file (write), the command (bash)
    search: str = ""  # replace only
    replace: str = ""
    labelled: bool = False  # a write named by a `# path` comment inside its fence, not a path line


@dataclass
class ParsedAnswer:
    actions: list[Action] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # written for the model
    pathless: list[str] = field(default_factory=list)  # closed blocks of tagged code without a path

    @property
    def done(self) -> bool:
        """No block at all: the model says the task is finished."""
        return not self.actions and not self.problems


def parse_answer(text: str, cut_off: bool = False) -> ParsedAnswer:
    """The actions in a model's answer, and what could not be taken. `cut_off`: the answer hit max_tokens."""
    reader = _Reader(text.splitlines(), cut_off)
    reader.read()
    return ParsedAnswer(reader.actions, reader.problems, reader.pathless)


def open_whole_file_block(text: str) -> tuple[str, str] | None:
    """While an answer streams: if its complete lines end just after the first line of code of a
    fenced block that writes a file whole, (the answer so far with that block closed, the block's
    path). Only a block that has just begun: its fence at most four lines back."""
    # Asked at every new line of a stream: look at the whole answer only when a fence is near its end.
    if not any(_opening_fence(line) for line in text.rsplit("\n", 6)[:-1]):
        return None
    lines = text.split("\n")[:-1]  # the last piece is a line still being written
    for back in range(2, min(5, len(lines)) + 1):
        fence = _opening_fence(lines[-back])
        body = lines[len(lines) - back + 1 :]
        if fence is None or any(_closes(line, fence.char, fence.length) for line in body):
            continue
        tag, path = _split_info(fence.info)
        before = next((line for line in reversed(lines[:-back]) if line.strip()), "")
        path = path_from_line(before) or path
        code = body
        if not path and (path := _path_comment(body)):
            code = body[body.index(next(line for line in body if line.strip())) + 1 :]
        if (
            not path
            or not any(line.strip() for line in code)
            or any(_HEAD.match(line) for line in code)
            or tag in SHELL_TAGS | DIFF_TAGS
            or _is_markdown(tag, path)
        ):
            return None
        kept = "\n".join([*lines, " " * fence.indent + fence.char * fence.length]) + "\n"
        # The reader must see the same thing: a write of that path, last.
        actions = parse_answer(kept).actions
        if actions and actions[-1].kind == "write" and actions[-1].path == path:
            return kept, path
        return None
    return None


def to_tool_calls(actions: Iterable[Action]) -> list[ToolCall]:
    """The tool calls that carry out `actions`: write_file, edit_file and bash, with ids block_1, block_2..."""
    calls = []
    for number, action in enumerate(actions, 1):
        if action.kind == "write":
            name, args = "write_file", {"path": action.path, "content": action.content}
        elif action.kind == "replace":
            name = "edit_file"
            args = {"path": action.path, "old_string": action.search, "new_string": action.replace}
        else:
            name, args = "bash", {"command": action.content}
        calls.append(ToolCall(f"block_{number}", name, json.dumps(args, ensure_ascii=False)))
    return calls


def call_arguments(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as to_tool_calls wrote them; {} for arguments that are not a JSON object."""
    try:
        data = json.loads(call.arguments)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class _Fence:
    char: str
    length: int
    info: str
    indent: int = 0  # a fence indented in a list item: as much is taken off its content lines


def _opening_fence(line: str) -> _Fence | None:
    match = _FENCE.match(line)
    if not match:
        return None
    fence = match["fence"]
    return _Fence(fence[0], len(fence), match["info"], len(match["indent"]))


def _closes(line: str, char: str, length: int) -> bool:
    bare = line.strip()
    return len(bare) >= length and bare == char * len(bare)


def _joined(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def path_from_line(line: str) -> str | None:
    """The file path a line names on its own (`x.py`, **x.py**, File: x.py, # x.py, x.py:), or None."""
    text, quoted, colon = line.strip(), False, False
    previous = None
    while text != previous:
        previous = text
        text = text.lstrip("#").strip()
        text = _PATH_PREFIX.sub("", text)
        if text.endswith(":"):
            text, colon = text[:-1].rstrip(), True
        for quote in ("**", "`", '"', "'", "*"):
            if len(text) > 2 * len(quote) and text.startswith(quote) and text.endswith(quote):
                text, quoted = text[len(quote) : -len(quote)].strip(), True
    return text if _looks_like_path(text, quoted, colon) else None


def _looks_like_path(text: str, quoted: bool, colon: bool) -> bool:
    if not text or len(text) > MAX_PATH or text in {".", "..", "..."}:
        return False
    if any(c in text for c in "`*<>|{}") or "://" in text or text.endswith(("/", ".")):
        return False
    has_shape = "/" in text or "." in text or bool(_BARE_NAME.match(posixpath.basename(text)))
    if any(c.isspace() for c in text):
        # "Here is the updated main.py:" or "Save this as app.py" is a sentence; a path with spaces
        # counts only when quoted as a whole and not ended by a colon.
        return quoted and not colon and ("/" in text or "." in text)
    return has_shape


def _split_info(info: str) -> tuple[str, str | None]:
    """A fence's info string as (language tag, path): python | python x.py | x.py | python:x.py."""
    words = info.split()
    if not words:
        return "", None
    first = words[0]
    if ":" in first and not first.endswith(":"):
        tag, _, rest = first.partition(":")
        if _info_path(rest):
            return tag.lower(), _info_path(rest)
    if len(words) == 1 and ("/" in first or "." in first[1:] or first.startswith(".")):
        return "", _info_path(first)
    for word in words[1:]:
        if path := _info_path(re.sub(r"^\w+=", "", word)):  # also title="x.py"
            return first.lower(), path
    return first.lower(), None


def _info_path(word: str) -> str | None:
    word = word.strip("\"'")
    return word if ("/" in word or "." in word) and _looks_like_path(word, False, False) else None


def _is_markdown(tag: str, path: str | None) -> bool:
    return tag in MARKDOWN_TAGS or bool(path and path.lower().endswith((".md", ".markdown")))


class _Reader:
    def __init__(self, lines: list[str], cut_off: bool) -> None:
        self.lines = lines
        self.cut_off = cut_off
        self.actions: list[Action] = []
        self.problems: list[str] = []
        self.pathless: list[str] = []
        self.written: set[str] = set()
        self.path_line: str | None = None  # the last path line, while only blank lines follow it
        self.replace_path: str | None = None  # the last SEARCH/REPLACE block's path, likewise

    def read(self) -> None:
        i = 0
        while i < len(self.lines):
            line = self.lines[i]
            if fence := _opening_fence(line):
                i = self._fenced(i, fence)
            elif _HEAD.match(line):
                i = self._bare_block(i)
            elif line.strip():
                self.path_line, self.replace_path = path_from_line(line), None
                i += 1
            else:
                i += 1

    # -------------------------------------------------------------------------- fences

    def _fenced(self, start: int, fence: _Fence) -> int:
        tag, info_path = _split_info(fence.info)
        path = self.path_line or info_path
        inherited = self.replace_path
        self.path_line = self.replace_path = None
        body, end = self._body(start + 1, fence, _is_markdown(tag, path))
        if fence.indent:
            body = [line[min(fence.indent, len(line) - len(line.lstrip(" "))) :] for line in body]
        closed = end < len(self.lines)
        if any(_HEAD.match(line) for line in body):
            path = path or inherited
            if not closed:
                return self._unclosed(f"the block for {path}" if path else "a SEARCH/REPLACE block", end)
            self._replace_blocks(body, path)
        elif not path and tag not in SHELL_TAGS and not any(line.strip() for line in body):
            pass  # an empty fence, or a stray fence line left over: nothing was asked for
        elif not closed:
            if path:
                return self._unclosed(f"the block for {path}", end)
            if tag in SHELL_TAGS:
                return self._unclosed(f"the ```{tag} command", end, verb="run", smaller=False)
            self.problems.append(_no_path(tag))
        elif tag in DIFF_TAGS and not (path and path.lower().endswith((".diff", ".patch"))):
            self.problems.append(
                f"a ```{tag} block was not applied: diffs are not read. To change part of a file, "
                "write SEARCH/REPLACE blocks; to rewrite it, give the whole new file."
            )
        elif path and (signatures := _outline_lines(path, body)):
            # The 1.5B copies the outline's first line, `def _comparator(operator: Comparator) ->
            # Comparator`, as its fix (planted semver task): refused as a whole-file write of a file
            # it was not shown, it wrote the same line again until the repeat guard ended the line.
            self.problems.append(
                f"the block for {path.removeprefix('path/to/')} holds only {signatures}, copied from the "
                "outline: a signature "
                "without its body is not code, so nothing was written. Write the function or class you "
                "change whole, from its `def` or `class` line to the end of its body, with your change in it."
            )
        elif path:
            self._write(path, _joined(body))
        elif tag in SHELL_TAGS:
            self._command(body, tag)
        elif inner := _path_then_fence(body):
            # ```python / inflection/__init__.py / ```python / the code / ```: the path line and the
            # fence written inside a fence, 42 times in the 1.5B's answers of one GPU run (275ed24).
            self._write(*inner)
        elif labelled := _path_comment(body):
            # `# hello.py` as the fence's first line: how the 1.5B labels a file when asked to explain
            # first (suite run 6). The label names the file; it is not part of it.
            first = body.index(next(ln for ln in body if ln.strip()))
            self._write(labelled, _joined(body[first + 1 :]), labelled=True)
        elif only_path := _only_a_path(body):
            # ```python / path/to/hello.py / ```: the path put inside the fence, and nothing else. Told
            # "put the path on the line before the fence", the 1.5B gave the same answer until the
            # repeat guard ended the task (hello).
            self.problems.append(
                f"the ```{tag} block holds only a path, {only_path}, and no content: write {only_path} "
                "alone on a line, then a fenced block holding the file's complete content."
            )
        else:
            self.problems.append(_no_path(tag))
            if tag:  # code, not quoted output: the protocol may know which file it is
                self.pathless.append(_joined(body))
        return end + 1

    def _body(self, start: int, fence: _Fence, markdown: bool) -> tuple[list[str], int]:
        """The lines inside the fence opened just before `start`, and the index of its closing line."""
        nested: list[_Fence] = []
        for i in range(start, len(self.lines)):
            line = self.lines[i]
            if fence.length > 3 and _closes(line, fence.char, fence.length):
                return self.lines[start:i], i  # a long outer fence says which line ends it
            if nested:
                if _closes(line, nested[-1].char, nested[-1].length):
                    nested.pop()
                elif (inner := _opening_fence(line)) and inner.info:
                    nested.append(inner)
                elif _HEAD.match(line) or _DIVIDER.match(line) or _UPDATED.match(line):
                    nested.clear()
            elif _closes(line, fence.char, fence.length):
                return self.lines[start:i], i
            elif (inner := _opening_fence(line)) and inner.info and (markdown or inner.indent > fence.indent):
                # Markdown holds fences; so does code, indented, in a docstring's example (humanize's
                # apnumber: "```pycon" ... "```" inside it cut the 1.5B's block in two).
                nested.append(inner)
        return self.lines[start:], len(self.lines)

    def _unclosed(self, subject: str, end: int, verb: str = "applied", smaller: bool = True) -> int:
        if self.cut_off:
            again = "Write it again, or use SEARCH/REPLACE blocks for a smaller change." if smaller else ""
            self.problems.append(
                f"{subject} was cut off before its closing fence; it was not {verb}. {again or 'Write it again.'}"
            )
        else:
            self.problems.append(
                f"{subject} has no closing fence; it was not {verb}. End every block with a line "
                "holding only its fence (```)."
            )
        return end

    # -------------------------------------------------------------------------- SEARCH/REPLACE

    def _bare_block(self, start: int) -> int:
        path = self.path_line or self.replace_path
        search, replace, end, missing = self._split_block(self.lines, start)
        if missing:
            if end >= len(self.lines) and self.cut_off:
                self.problems.append(
                    f"the SEARCH/REPLACE block for {path or 'a file'} was cut off before its "
                    ">>>>>>> REPLACE line; it was not applied. Write it again."
                )
            else:
                self.problems.append(_malformed(path, missing))
        else:
            self._replace(path, search, replace)
        self.path_line, self.replace_path = None, path
        return end + 1

    def _replace_blocks(self, body: list[str], path: str | None) -> None:
        j = 0
        while j < len(body):
            line = body[j]
            if _HEAD.match(line):
                search, replace, end, missing = self._split_block(body, j)
                if missing:
                    self.problems.append(_malformed(path, missing))
                else:
                    self._replace(path, search, replace)
                j = end + 1
                continue
            if line.strip() and (named := path_from_line(line)):
                path = named  # a path line inside the fence, before its blocks
            j += 1
        self.replace_path = path

    @staticmethod
    def _split_block(lines: list[str], start: int) -> tuple[list[str], list[str], int, str | None]:
        """(search, replace, index of its last line, the marker line it lacks) for the block at `start`."""
        divider = start + 1
        while divider < len(lines) and not _DIVIDER.match(lines[divider]):
            if _HEAD.match(lines[divider]) or _UPDATED.match(lines[divider]):
                return [], [], divider - 1, "======="
            divider += 1
        if divider >= len(lines):
            return [], [], divider, "======="
        updated = divider + 1
        while updated < len(lines) and not _UPDATED.match(lines[updated]):
            if _HEAD.match(lines[updated]):
                return [], [], updated - 1, ">>>>>>> REPLACE"
            updated += 1
        if updated >= len(lines):
            return [], [], updated, ">>>>>>> REPLACE"
        return lines[start + 1 : divider], lines[divider + 1 : updated], updated, None

    def _replace(self, path: str | None, search_lines: list[str], replace_lines: list[str]) -> None:
        if not path:
            self.problems.append(
                "a SEARCH/REPLACE block without a file path was not applied: put the file's path "
                "alone on the line before the fence that holds the block."
            )
            return
        search, replace = _joined(search_lines), _joined(replace_lines)
        if not search.strip():
            self._write(path, replace)
        elif search == replace:
            self.problems.append(
                f"a SEARCH/REPLACE block for {path} has the same text in SEARCH and REPLACE; "
                "nothing would change, so it was skipped."
            )
        else:
            self.actions.append(Action("replace", path, "", search, replace))

    # -------------------------------------------------------------------------- writes and commands

    def _write(self, path: str, content: str, labelled: bool = False) -> None:
        key = posixpath.normpath(path)
        if key in self.written:
            self.problems.append(
                f"{path} was written twice in one answer; only the first version was applied."
            )
            return
        self.written.add(key)
        self.actions.append(Action("write", path, content, labelled=labelled))

    def _command(self, body: list[str], tag: str) -> None:
        lines = body
        prompted = [line.lstrip() for line in body if line.lstrip().startswith("$ ")]
        filled = [line for line in body if line.strip()]
        if tag == "console" and prompted:
            lines = [line[2:] for line in prompted]  # lines without a prompt are the output shown
        elif filled and len(prompted) == len(filled):
            lines = [line.lstrip()[2:] if line.strip() else line for line in body]
        command = "\n".join(lines).strip("\n")
        if not command.strip():
            self.problems.append(f"an empty ```{tag} block was skipped.")
            return
        self.actions.append(Action("bash", None, command))


def _malformed(path: str | None, missing: str) -> str:
    return (
        f"a SEARCH/REPLACE block for {path or 'a file'} has no {missing} line; it was not applied. "
        "Write each block as: <<<<<<< SEARCH, the old lines, =======, the new lines, >>>>>>> REPLACE."
    )


_COMMENT_LABEL = re.compile(r"^\s*(?:#|//|--|<!--)\s*(\S+?)\s*(?:-->)?\s*$")


def _path_then_fence(body: list[str]) -> tuple[str, str] | None:
    """(path, content) of a block whose first line is a path and whose second opens a fence, with code
    after it; None for any other block."""
    filled = [i for i, line in enumerate(body) if line.strip()]
    if len(filled) < 3 or filled[1] != filled[0] + 1 or not _opening_fence(body[filled[1]]):
        return None
    path = path_from_line(body[filled[0]])
    return (path, _joined(body[filled[1] + 1 :])) if path else None


def _path_comment(body: list[str]) -> str | None:
    """The path named by a comment that is the whole first line of a code block, if any."""
    first = next((line for line in body if line.strip()), "")
    match = _COMMENT_LABEL.match(first)
    name = match.group(1) if match else None
    return name if name and "." in posixpath.basename(name) and path_from_line(name) else None


# A line of the outline as the model copies it: its line number too, or not.
_SIGNATURE = re.compile(r"^\s*(?:\d+\s+)?(?:async\s+)?(?:def|class)\s+(\w+)")


def _outline_lines(path: str, body: list[str]) -> str | None:
    """The signature lines a Python block holds when they are all it holds and they are no code: each
    whole (its brackets closed) and without the colon that begins a body, as the outline shows them.
    Named as `_comparator` or `2 signatures`; else None. A block's first line of real code (`class
    Version:`, `def f(a,`), all a stream stopped early keeps of it, is not one (stream_stop.py)."""
    lines = [line.split("#")[0].rstrip() for line in body if line.strip()]
    if not path.endswith(".py") or not lines:
        return None
    for line in lines:
        numbered = re.match(r"\s*\d", line)  # the outline's line number: never code, even cut short
        closed = all(line.count(a) == line.count(b) for a, b in ("()", "[]"))
        if not _SIGNATURE.match(line) or (not numbered and (line.endswith(":") or not closed)):
            return None
    try:
        ast.parse("\n".join(re.sub(r"^\s*\d*\s*", "", line) for line in lines))
    except SyntaxError:
        first = _SIGNATURE.match(lines[0])
        return f"`{first.group(1)}`" if first and len(lines) == 1 else f"{len(lines)} signatures"
    return None


def _only_a_path(body: list[str]) -> str | None:
    """The path that is the whole of a block (its one line), the prompt's `path/to/` taken off."""
    filled = [line for line in body if line.strip()]
    path = path_from_line(filled[0]) if len(filled) == 1 else None
    return path.removeprefix("path/to/") if path and "." in posixpath.basename(path) else None


def _no_path(tag: str) -> str:
    return (
        f"a ```{tag} block without a file path was not applied: put the file's path alone on the line "
        "before the fence" + ("" if tag else ", or tag the block bash to run it as a command") + "."
    )
