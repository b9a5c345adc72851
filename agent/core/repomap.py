"""What a small model is shown of a repository, within a budget it cannot overflow.

Small models do not explore: they act on what they are shown (FACTS.md). So the task message of the
`blocks` protocol carries the repository, in three parts, each cut to its share of the budget:

1. the files the task names, found by their path relative to the root (a bare base name only when
   exactly one file has it: `utils.py` must never mean `tests/utils.py`). A named file that fits is
   shown whole; one too long is shown as its outline with line numbers, plus whole the definitions
   the task names and the file's last lines (the anchor for an addition at the end);
2. a map of the rest: paths and the signatures of their definitions, read with tree-sitter grammars
   and ranked by relevance to the task: files that define a name the task mentions, that sit in a
   folder it names, that use those names, that git says changed recently;
3. a line saying what was left out, and how to ask for it (`cat PATH`, `sed -n 'A,Bp' PATH`).

When the whole repository fits, every file is shown whole, as before: small projects lose nothing.
A large one (past 2 MB of text) is outlined and searched only in its likeliest files, chosen by a
scan that parses nothing (agent/core/large_repository.py); the map lists the rest by path, so that a
repository of 10,000 files is read in about half a second on 2 cores.
Which files were shown whole is returned too: a whole-file rewrite is applied only to those
(tools/shown.py), so that a model never replaces code it has not read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath

from agent.core.code_finder import Found, find_definitions, is_test_file
from agent.core.large_repository import closely_read, is_large, likeliest
from agent.core.stoppable import check_wanted
from agent.settings.paths import PROJECT_CONFIG
from tools.outline import Definition, excerpt, outline, owner_of, words_of
from tools.search import workspace_names
from tools.workspace import Workspace

AGENT_DIR = f"{PROJECT_CONFIG.parent.as_posix()}/"  # .agent/: the agent's settings, not the project's code

TEXT_SUFFIXES = {
    ".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".js", ".mjs", ".cjs",
    ".jsx", ".ts", ".tsx", ".html", ".css", ".sh", ".rs", ".go", ".c", ".h", ".cpp", ".java", ".rb",
    ".sql", ".csv", ".rst", "",
}  # fmt: skip
MAX_READ_BYTES = 400_000  # a bigger file is listed by name only: generated code, data, vendored bundles
NAMED_SHARE = 0.7  # of the budget, at most, for the files the task names
FOUND_SHARE = 0.6  # of what the named files left, at most, for the code the task is found to be about
FOUND_WHOLE_CHARS = 8000  # a file holding found code is shown whole up to this size (about 250 lines)
FOUND_LIMIT = 4  # definitions found and shown: past the best few, a guess costs the model more than it helps
CLASS_WHOLE_LINES = 80  # a found method's class up to this long is shown whole beside it (`class_context`)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# Words of a task that are surely code: in backticks, snake_case, camelCase, or called.
CODE_WORD = re.compile(r"`([A-Za-z_]\w*)`|\b(\w*_\w*|[a-z]+[A-Z]\w*|[A-Z]\w*[a-z][A-Z]\w*)\b|\b(\w+)\(")
ENTRY_LIMIT = 1500  # characters of one file's entry in the map
PATHLIKE = re.compile(r"[\w./-]+")


# ---------------------------------------------------------------------------------------------- the files


@dataclass
class SourceFile:
    rel: str
    data: bytes | None  # None: too big or not text; listed by name only

    @cached_property
    def text(self) -> str | None:
        """Decoded when first wanted: a large repository's view decodes only what it reads closely."""
        return None if self.data is None else self.data.decode("utf-8", errors="replace")

    @property
    def size(self) -> int:
        return len(self.text) if self.text is not None else 0

    @property
    def lines(self) -> list[str]:
        return (self.text or "").splitlines()


def text_files(workspace: Path) -> list[SourceFile]:
    """The project's files as the model may see them: text only, hidden files left out, and the agent's
    own folder (.agent/: its settings, the project's check among them, which the model must pass, not
    read; a small model copies a check it was shown into its answer)."""
    found = []
    root = os.fspath(workspace)
    for rel in workspace_names(Workspace(workspace), workspace):
        check_wanted()
        name = rel.rsplit("/", 1)[-1]
        if _suffix(name).lower() not in TEXT_SUFFIXES or name.startswith(".") or rel.startswith(AGENT_DIR):
            continue
        try:
            size, data = _read(os.path.join(root, rel))
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue
        found.append(SourceFile(rel, data if data or not size else None))
    return found


def _suffix(name: str) -> str:
    """A file name's suffix as pathlib says it (`.py`; "" for `.gitignore` and `Makefile`), without a
    Path per file."""
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def _read(path: str) -> tuple[int, bytes]:
    """A file's size and its bytes, b"" past MAX_READ_BYTES. os-level: pathlib's read_bytes cost
    four times as much, 0.5 s for a repository of 10,000 files."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size > MAX_READ_BYTES:
            return size, b""
        data = os.read(fd, size + 1)  # one call, unless the file grew since fstat
        if len(data) > size:
            chunks = [data]
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            data = b"".join(chunks)
        return size, data
    finally:
        os.close(fd)


def named_files(files: list[SourceFile], task: str) -> list[SourceFile]:
    """The files the task names, by their path from the root or a tail of it (`requests/utils.py`);
    by base name alone only when exactly one file has that name."""
    mentioned = {m.strip("./").rstrip(".") for m in PATHLIKE.findall(task.replace("\\", "/"))}
    mentioned.discard("")
    by_name: dict[str, list[SourceFile]] = {}
    for f in files:
        by_name.setdefault(f.rel.rsplit("/", 1)[-1], []).append(f)
    # A tail with at least one folder (`requests/utils.py`), by the base name it ends with.
    tails: dict[str, list[str]] = {}
    for m in mentioned:
        if "/" in m:
            tails.setdefault(m.rsplit("/", 1)[-1], []).append("/" + m)
    named = []
    for f in files:
        base = f.rel.rsplit("/", 1)[-1]
        by_base_name = base in mentioned and len(by_name[base]) == 1 and len(base) > 3
        if f.rel in mentioned or any(f.rel.endswith(t) for t in tails.get(base, ())) or by_base_name:
            named.append(f)
    return named


# ---------------------------------------------------------------------------------------------- ranking


@dataclass
class Ranked:
    file: SourceFile
    score: float
    definitions: list[Definition] = field(default_factory=list)


def rank(files: list[SourceFile], task: str, named: list[SourceFile], recent: list[str]) -> list[Ranked]:
    """The files not named by the task, most relevant first."""
    words = set(WORD.findall(task))
    code_words = {w for groups in CODE_WORD.findall(task) for w in groups if len(w) > 2}
    named_rels = {f.rel for f in named}
    named_text = "\n".join(f.text or "" for f in named)
    named_words = set(WORD.findall(named_text)) if named_text else set()
    task_parts = {p for m in PATHLIKE.findall(task) for p in m.split("/") if len(p) > 2}
    recent_set = set(recent)
    ranked = []
    for f in files:
        check_wanted()
        if f.rel in named_rels:
            continue
        defs = outline(f.rel, f.text) if f.text else []
        defined = {d.name for d in defs}
        path = PurePosixPath(f.rel)
        score = 0.0
        score += 10.0 * len(defined & code_words) + 2.0 * len(defined & words)  # defines what it mentions
        score += 3.0 * len(set(path.parts[:-1]) & task_parts)  # in a folder the task names
        score += 2.0 * (path.stem in words)
        if f.text and words:
            score += 1.0 * min(3, len(words & set(WORD.findall(f.text))))  # uses those names
        score += 2.0 * (f.rel in recent_set)
        if named_words and path.stem in named_words:
            score += 2.0  # a named file imports or mentions it
        score += 0.5 * min(4, len(defined & named_words))
        if path.parts[0] in ("tests", "test", "docs", "examples"):
            score -= 0.5
        ranked.append(Ranked(f, score, defs))
    ranked.sort(key=lambda r: (-r.score, r.file.rel.count("/"), r.file.rel))
    return ranked


# ---------------------------------------------------------------------------------------------- the text


@dataclass
class RepositoryView:
    text: str
    whole: list[str]  # files shown whole: the model may rewrite these whole
    partly: list[str] = field(default_factory=list)  # files shown in part: SEARCH/REPLACE or definitions
    # {file shown in part: the definitions shown whole in it, `Class.method` for a member}: the model may
    # write those anew
    definitions: dict[str, list[str]] = field(default_factory=dict)


def _fenced(rel: str, text: str, fence_for: Callable[[str], str]) -> str:
    fence = fence_for(text)
    return f"{rel}\n{fence}\n{text.rstrip()}\n{fence}"


def _wanted(defs: list[Definition], lines: list[str], task: str) -> list[Definition]:
    """The definitions of a long file to show whole: those the task names (`lt` counts: matched as a
    whole word against the file's own names), then the top-level ones they use, since a bug is often
    in the helper a named function calls (attrs' `lt` and its `_NumberValidator`). None twice: a
    member inside a class already chosen is left out."""
    named = [d for d in defs if re.search(rf"(?<![\w.]){re.escape(d.name)}(?!\w)", task)]
    top = {d.name: d for d in defs if d.depth == 0}
    used = set()
    for d in named:
        used |= set(IDENTIFIER.findall("\n".join(lines[d.start - 1 : d.end])))
    related = sorted((top[n] for n in used if n in top and top[n] not in named), key=lambda d: d.start)
    chosen: list[Definition] = []
    for d in [*named, *related]:
        if not any(c.start <= d.start and d.end <= c.end for c in chosen):
            chosen.append(d)
    return chosen


def _long_file(
    f: SourceFile,
    wanted: list[Definition],
    head: str,
    budget: int,
    fence_for: Callable[[str], str],
    shown: list[str],
    why: dict[Definition, str] | None = None,
    members_of_wanted_only: bool = False,
    words: set[str] | None = None,
) -> str:
    text, names = excerpt(f.rel, f.text or "", wanted, budget, head, why, members_of_wanted_only, words)
    shown += names
    return text


def _long_named_file(f: SourceFile, task: str) -> tuple[list[Definition], str]:
    head = (
        f"{f.rel} has {len(f.lines):,} lines: too long to show whole here, so you cannot write it whole. "
        "Change it with SEARCH/REPLACE blocks whose SEARCH lines are copied exactly from the parts below."
    )
    return _wanted(outline(f.rel, f.text or ""), f.lines, task), head


def _found_section(
    found: list[Found],
    files: dict[str, SourceFile],
    budget: int,
    fence_for: Callable[[str], str],
    view: RepositoryView,
    words: set[str],
) -> str:
    """The files holding the definitions the task seems to be about: a short one whole, a long one as
    its outline with those definitions whole, each headed by why it was chosen."""
    by_file: dict[str, list[Found]] = {}
    for item in found:
        by_file.setdefault(item.rel, []).append(item)
    parts, used = [], 0
    for rel, items in by_file.items():
        f = files[rel]
        room = budget - used
        if f.size <= FOUND_WHOLE_CHARS and f.size + 200 <= room:
            said = "; ".join(f"`{i.qualname}`: {i.why}" for i in items)
            parts.append(f"{rel} ({said}), whole:\n" + _fenced(rel, f.text or "", fence_for))
            view.whole.append(rel)
        elif room > 1500:
            head = f"{rel} has {len(f.lines):,} lines, too long to show whole here: the code found, then its outline."
            shown = view.definitions.setdefault(rel, [])
            why = {i.definition: i.why for i in items}
            wanted = [i.definition for i in items]
            # The best match's class right after it (the rest are weaker guesses).
            if not parts and (context := class_context(wanted[0], outline(rel, f.text or ""))):
                wanted.insert(1, context[0])
                why[context[0]] = context[1]
            parts.append(
                _long_file(
                    f, wanted, head, room, fence_for, shown, why, members_of_wanted_only=True, words=words
                )
            )
            view.partly.append(rel)
        else:
            continue
        used += len(parts[-1])
    if not parts:
        return ""
    return (
        "The code the task seems to be about, found from the names and words it uses (the best match "
        "first; if none of it is what the task means, say so and ask for the file you need):\n\n"
        + "\n\n".join(parts)
    )


def class_context(d: Definition, defs: list[Definition]) -> tuple[Definition, str] | None:
    """What a method found needs beside it, with why: its class whole where the class is short, else
    the class's `__init__`; None for a top-level definition. A method reads and writes its class's
    state, which its own lines do not show: shown `LRUCache.__setitem__` alone, the 1.5B rewrote it
    around a `self.__maxsize` and a `self.__order.append` that LRUCache never had, where `__init__`
    makes `__order` an OrderedDict and `__getitem__` and `popitem` show how it is used
    (cachetools-lrucache-setitem)."""
    owner = owner_of(d, defs)
    if owner is None:
        return None
    if owner.end - owner.start + 1 <= CLASS_WHOLE_LINES:
        return owner, f"`{d.name}` belongs to it: its state and its other members"
    init = next((x for x in defs if x.name == "__init__" and owner_of(x, defs) == owner), None)
    if init is None or init == d or init.end - init.start + 1 > CLASS_WHOLE_LINES:
        return None
    return init, f"where `{owner.name}` sets up the state `{d.name}` uses"


def _map_entry(r: Ranked) -> str:
    """A file's path and its definitions' signatures; members of classes only for a relevant file."""
    if r.file.data is None:
        return f"{r.file.rel} (not shown: large or not text)"
    defs = [d for d in r.definitions if d.depth == 0 or r.score >= 2]
    entry = r.file.rel + "".join(f"\n    {'    ' * d.depth}{d.signature}" for d in defs)
    if len(entry) > ENTRY_LIMIT:
        entry = entry[: entry.rfind("\n", 0, ENTRY_LIMIT)] + "\n    ..."
    return entry


def _fits_whole(files: list[SourceFile], budget_chars: int) -> bool:
    """Whether every file fits whole. A character is at most 4 bytes of UTF-8, so a repository larger
    than that is not decoded to find that it does not."""
    if sum(len(f.data or b"") for f in files) > 4 * budget_chars or any(f.data is None for f in files):
        return False
    return sum(f.size + len(f.rel) + 10 for f in files) <= budget_chars


def _closely_read(
    files: list[SourceFile], readable: dict[str, SourceFile], task: str, recent: list[str]
) -> tuple[list[SourceFile], list[SourceFile]]:
    """(the files to outline and search, the rest): all of them in a repository small enough; in a
    large one the likeliest (agent/core/large_repository.py), and the rest likeliest first, then those
    listed by name only."""
    sizes = {rel: len(f.data or b"") for rel, f in readable.items()}
    if not is_large(list(sizes.values())):
        return files, []
    order = likeliest([(f.rel, f.data or b"") for f in readable.values()], task, recent)
    chosen = set(closely_read(order, sizes))
    close = [f for f in files if f.rel in chosen]
    rest = [readable[rel] for rel, _ in order if rel not in chosen]
    return close, rest + [f for f in files if f.data is None]


def repository_view(
    workspace: Path,
    task: str,
    budget_chars: int,
    fence_for: Callable[[str], str],
    recent: list[str] | None = None,
) -> RepositoryView:
    """The repository for the task message, never longer than `budget_chars` (a few lines of
    explanation aside)."""
    files = text_files(workspace)
    if not files:
        return RepositoryView("The project folder is empty.", [])
    if _fits_whole(files, budget_chars):
        shown = "\n\n".join(_fenced(f.rel, f.text or "", fence_for) for f in files)
        return RepositoryView(f"The project's files, as they are now:\n\n{shown}", [f.rel for f in files])

    named = named_files(files, task)
    view = RepositoryView("", [])
    parts: list[str] = []
    named_budget, used = int(budget_chars * NAMED_SHARE), 0
    # The code first, the small files whole first; a named test last. The tests are the task's evidence
    # and the code is what changes: click's test_types.py (241 lines) shown whole first left no room for
    # the class with the bug in types.py (real-click-fix-range-bounds).
    for f in sorted(named, key=lambda f: (is_test_file(f.rel), f.size)):
        if f.text is None:
            continue
        room = named_budget - used
        if f.size + len(f.rel) + 10 <= room:
            parts.append(_fenced(f.rel, f.text, fence_for))
            view.whole.append(f.rel)
        elif room > 2000:
            wanted, head = _long_named_file(f, task)
            parts.append(_long_file(f, wanted, head, room, fence_for, view.definitions.setdefault(f.rel, [])))
            view.partly.append(f.rel)
        else:
            parts.append(f"{f.rel} is named by the task but there is no room left to show it: `cat {f.rel}`.")
        used += len(parts[-1])
    if parts:
        parts.insert(0, "The files the task names, as they are now:")

    # The definitions the task is about, in files it did not name: most tasks name behaviour, not paths.
    named_rels = {f.rel for f in named}
    readable = {f.rel: f for f in files if f.data is not None}
    close, rest = _closely_read(files, readable, task, recent or [])
    found = [
        item
        for item in find_definitions(
            [(f.rel, f.text) for f in close if f.text is not None], task, limit=FOUND_LIMIT
        )
        if item.rel not in named_rels
    ]
    section = _found_section(
        found, readable, int((budget_chars - used) * FOUND_SHARE), fence_for, view, set(words_of(task))
    )
    if section:
        parts.append(section)
        used += len(section)

    shown_files = named_rels | set(view.whole) | set(view.partly)
    ranked = [
        r
        for r in [*rank(close, task, named, recent or []), *(Ranked(f, 0.0) for f in rest)]
        if r.file.rel not in shown_files
    ]
    room = budget_chars - used
    entries, left_out = [], []
    for r in ranked:
        entry = _map_entry(r)
        if len(entry) + 1 > room:
            entry = r.file.rel  # the path alone, when its signatures do not fit
        if len(entry) + 1 > room:
            left_out.append(r.file.rel)
            continue
        entries.append(entry)
        room -= len(entry) + 1
    if entries:
        parts.append(
            "The other files, the most relevant first, with their definitions. To see one, write a bash "
            "block with `cat PATH`; for part of a long file, `sed -n 'START,ENDp' PATH`:\n"
            + "\n".join(entries)
        )
    if left_out:
        folders = sorted({p.rsplit("/", 1)[0] if "/" in p else "." for p in left_out})
        parts.append(
            f"{len(left_out)} more files are not listed, to fit the context (in {', '.join(folders[:8])}"
            f"{', ...' if len(folders) > 8 else ''}); `ls FOLDER` or `grep -rn NAME FOLDER` in a bash "
            "block finds them."
        )
    view.text = "\n\n".join(parts)
    return view
