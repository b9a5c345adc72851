"""Which definitions of a repository a task is about, found from the task's own words.

Users name functions and behaviour, rarely paths: "`humanize.naturalsize(1024)` says 1.0 kB", "the
cache evicts an item that was just read". A small model acts on what it is shown, so before the first
request the task is matched against every definition of the project:

- dotted names (`pkg.utils.slugify`, `TTLCache.expire`) resolve through the package layout to the
  definition, its class and its module;
- identifiers (backticked, snake_case, camelCase, called) match definition names, weighted down when
  many definitions share the name (`get`, `__init__`);
- a traceback pasted into the task points at the definition holding each frame's line;
- string literals and plain words are scored against each definition's name, docstring and body with
  BM25 (split identifiers, light stemming, and at half weight what code calls what users say: "evicts"
  finds `pop` and `discard` too). Tests and docs/ weigh less: the change is seldom there.

Each result says why it was chosen, in words a user can follow; the repository view shows the best
whole (agent/core/repomap.py).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from agent.core.stoppable import check_wanted
from tools.outline import STOPWORDS, Definition, outline, stem, words_of

DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w(]*\.\w)")
CODE_NAME = re.compile(
    r"`([A-Za-z_][\w.]*)|\b([A-Za-z_]\w*_\w*|[a-z]+[A-Z]\w*|[A-Z]\w*[a-z][A-Z]\w*)\b|\b([A-Za-z_]\w*)\("
)
# A frame of a traceback or of pytest's report pasted into the task: `File "src/pkg/x.py", line 12, in f`
# or `src/pkg/x.py:12: in f`.
FRAME = re.compile(r'File "([^"\n]+)", line (\d+)|^([\w./-]+\.py):(\d+):', re.M)
WORD_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
LITERAL = re.compile(r"""(?<!\w)(?:"([^"\n]{1,60})"|'([^'\n]{1,60})')""")
FILE_SUFFIXES = {"py", "md", "txt", "toml", "cfg", "ini", "json", "yaml", "yml", "js", "ts", "rs", "go", "sh"}
K1, B = 1.2, 0.75  # BM25's usual constants
TEST_WEIGHT = 0.3  # a test is the task's evidence, not where the change goes
ASIDE_WEIGHT = 0.5  # docs/, examples/, benchmarks/: code, but seldom what a task is about
ASIDE_FOLDERS = frozenset({"docs", "doc", "examples", "example", "benchmarks", "bench", "scripts"})
# What users say and what code calls it: "evicts" is `popitem` or `remove`, "reads" is `get`. A
# synonym counts at half the weight of the word itself.
_SYNONYMS = {
    "evict": "pop remove discard delete expire purge",
    "read": "get getitem access load fetch lookup",
    "write": "set setitem put store save dump",
    "remove": "pop delete discard delitem strip",
    "delete": "remove pop delitem discard",
    "add": "append insert put push extend",
    "find": "search lookup index match locate",
    "count": "len size total number",
    "convert": "to from cast parse format",
    "sort": "order sorted rank",
    "split": "partition chunk separate tokenize",
    "join": "concat merge combine",
    "check": "valid verify ensure test",
    "compare": "cmp eq lt gt equal",
    "round": "floor ceil truncate precision",
    "empty": "none blank null zero",
}
MIN_SHARE = 0.5  # of the best score: below it a definition is a weaker guess than the map's own ranking


@dataclass(frozen=True)
class Found:
    """A definition the task seems to be about, and why."""

    rel: str
    definition: Definition
    qualname: str  # `TTLCache.expire` for a method, the name for a top-level definition
    score: float
    why: str  # "the task names `TTLCache.expire`", "its docstring and body say evict, expire"


@dataclass(frozen=True)
class _Entry:
    rel: str
    definition: Definition
    qualname: str
    module: tuple[str, ...]  # ("src", "pkg", "utils") for src/pkg/utils.py; __init__ dropped
    tokens: Counter


SYNONYMS = {stem(word): tuple(stem(alt) for alt in alts.split()) for word, alts in _SYNONYMS.items()}


def module_of(rel: str) -> tuple[str, ...]:
    """("src", "pkg", "utils") for src/pkg/utils.py, ("pkg",) for pkg/__init__.py."""
    *folders, name = rel.split("/")
    dot = name.rfind(".")
    parts = (*folders, name[:dot] if 0 < dot < len(name) - 1 else name)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _entries(files: list[tuple[str, str]]) -> list[_Entry]:
    found = []
    for rel, text in files:
        check_wanted()
        defs = outline(rel, text)
        if not defs:
            continue
        lines = text.splitlines()
        module = module_of(rel)
        owner = ""
        for i, d in enumerate(defs):
            if d.depth == 0:
                owner = d.name
            qualname = f"{owner}.{d.name}" if d.depth and owner else d.name
            body = lines[d.start - 1 : d.end]
            if d.depth == 0 and (first := _first_member(defs, i)):
                # A class: its own lines up to its first member, not its methods' (they have their own).
                body = lines[d.start - 1 : first - 1]
            tokens = Counter(words_of(" ".join([qualname] * 3 + body)))
            found.append(_Entry(rel, d, qualname, module, tokens))
    return found


def _first_member(defs: list[Definition], i: int) -> int | None:
    """The first line of the first member of `defs[i]`, a top-level definition; None without one. An
    outline lists a class's members right after it, in order."""
    d = defs[i]
    for x in defs[i + 1 :]:
        if x.depth == 0 or x.start > d.end:
            return None
        if d.start < x.start:
            return x.start
    return None


def dotted_names(task: str) -> list[list[str]]:
    """The dotted names the task writes (`pkg.utils.slugify` as its parts), file names left out."""
    names = []
    for match in DOTTED.finditer(task):
        parts = match.group(0).split(".")
        if parts[-1].lower() in FILE_SUFFIXES or len(parts[0]) < 2:  # a file name, "e.g"
            continue
        names.append(parts)
    return names


def code_names(task: str) -> set[str]:
    """The names the task writes as code: backticked, snake_case, camelCase or called; each part of a
    dotted one."""
    found = set()
    for groups in CODE_NAME.findall(task):
        for g in groups:
            for part in g.split("."):
                if len(part) > 2 and part.lower() not in STOPWORDS:
                    found.add(part)
    return found


def plain_names(task: str) -> set[str]:
    """The task's plain words that may be a definition's exact name (`naturaldelta`): six letters or
    more and no stopword, since many names are also English words."""
    return {w for w in WORD_NAME.findall(task) if len(w) >= 6 and w.lower() not in STOPWORDS}


def _resolution(entry: _Entry, parts: list[str]) -> int:
    """How surely a dotted name (`pkg.mod.Class.method`, `Class.method`, `mod.func`) is this
    definition, whose name (and class) are its last one or two parts: 2 when the parts before them
    are a tail of its module's path (or there are none before `Class.method`, precise enough); 1 when
    only its package is the first of them, where a package re-exports the name; 0 otherwise (a bare
    name is an identifier, not a dotted name)."""
    qual = entry.qualname.split(".")
    found = 0
    for size in (2, 1):
        if len(qual) != size or parts[-size:] != qual:
            continue
        module = parts[:-size]
        if not module:
            return 2 if size == 2 else found
        path = [p for p in entry.module if p not in ("src", "lib")]
        if path[-len(module) :] == module:
            return 2
        if path and path[0] == module[0]:
            found = 1
    return found


def _framed(entries: list[_Entry], task: str) -> dict[int, int]:
    """{id of an entry: the line of it that a traceback frame in the task points at}: the innermost
    definition holding each frame's line, in the file whose path ends as the frame's does."""
    found: dict[int, int] = {}
    for match in FRAME.finditer(task):
        path, line = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        path, number = path.replace("\\", "/"), int(line)
        holding = [
            e
            for e in entries
            if (path == e.rel or path.endswith("/" + e.rel) or e.rel.endswith("/" + path.lstrip("./")))
            and e.definition.start <= number <= e.definition.end
        ]
        if holding:
            innermost = max(holding, key=lambda e: e.definition.start)
            found.setdefault(id(innermost), number)
    return found


def find_definitions(files: list[tuple[str, str]], task: str, limit: int = 6) -> list[Found]:
    """The definitions of `files` ([(path, text)]) that `task` seems to be about, best first; [] when
    nothing in the task points anywhere."""
    entries = _entries(files)
    if not entries:
        return []
    dotted = dotted_names(task)
    names = code_names(task) | plain_names(task)
    literals = [a or b for a, b in LITERAL.findall(task)]
    query = Counter(words_of(task))
    related = {alt: 0.5 for word in query for alt in SYNONYMS.get(word, ()) if alt not in query}
    by_name = Counter(e.definition.name for e in entries)
    framed = _framed(entries, task)
    # BM25 over the definitions, each a document of its name, docstring and body.
    count = len(entries)
    average = sum(sum(e.tokens.values()) for e in entries) / count
    having = Counter(w for e in entries for w in e.tokens if w in query or w in related)
    idf = {w: related.get(w, 1.0) * math.log(1 + (count - n + 0.5) / (n + 0.5)) for w, n in having.items()}
    # A dotted name that is some module's own definition means that one, not a namesake elsewhere in
    # its package (which a package's re-export would be).
    surely = {id(e): [_resolution(e, parts) for parts in dotted] for e in entries}
    exact = [any(surely[id(e)][i] == 2 for e in entries) for i in range(len(dotted))]
    resolving = {
        id(e): next((parts for i, parts in enumerate(dotted) if surely[id(e)][i] > exact[i]), None)
        for e in entries
    }
    # A name the task gave with its class or module (`TTLCache.expire`) does not also mean every other
    # definition of that name (`TLRUCache.expire`).
    placed = {parts[-1] for parts in resolving.values() if parts}
    scored = []
    for e in entries:
        score, why = 0.0, []
        resolved = resolving[id(e)]
        if resolved:
            score += 100.0
            why.append(f"the task names `{'.'.join(resolved)}`")
        elif id(e) in framed:
            score += 60.0
            why.append(f"the traceback in the task points at line {framed[id(e)]}")
        elif e.definition.name in names and e.definition.name not in placed:
            score += 40.0 / by_name[e.definition.name]
            why.append(f"the task names `{e.definition.name}`")
        length = sum(e.tokens.values())
        lexical, matched = 0.0, []
        for word, weight in idf.items():
            tf = e.tokens.get(word, 0)
            if tf:
                lexical += weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
                matched.append(word)
        if lexical:
            score += 4.0 * lexical
            if not why:
                shown = ", ".join(sorted(matched, key=lambda w: -idf[w])[:4])
                why.append(f"it shares the task's words {shown}")
        for literal in literals:  # the literal's own words, all of them
            parts = words_of(literal)
            if parts and all(p in e.tokens for p in parts):
                score += 8.0
                why.append(f'it uses "{literal}"')
                break
        if score <= 0:
            continue
        score *= file_weight(e.rel)
        scored.append(Found(e.rel, e.definition, e.qualname, score, "; ".join(why)))
    scored.sort(key=lambda f: (-f.score, f.rel, f.definition.start))
    if not scored:
        return []
    best = scored[0].score
    strong = [f for f in scored if f.score >= best * MIN_SHARE]
    chosen: list[Found] = []
    for f in strong:
        # A class holding another strong result gives way to it (the method is what the task is
        # about); a method inside a class already chosen is shown with it.
        inside = [
            o for o in strong if o is not f and o.rel == f.rel and _contains(f.definition, o.definition)
        ]
        if inside or any(c.rel == f.rel and _contains(c.definition, f.definition) for c in chosen):
            continue
        chosen.append(f)
        if len(chosen) >= limit:
            break
    return chosen


def file_weight(rel: str) -> float:
    """What a match in this file counts for: tests and docs/ less, since the change is seldom there."""
    if is_test_file(rel):
        return TEST_WEIGHT
    return ASIDE_WEIGHT if ASIDE_FOLDERS.intersection(rel.split("/")[:-1]) else 1.0


def _contains(outer: Definition, inner: Definition) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end and outer != inner


def is_test_file(rel: str) -> bool:
    """Whether a path is a test: under a tests/ or test/ folder, or named test_*, *_test or *.test.*."""
    *folders, name = rel.split("/")
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name
    return (
        "tests" in folders
        or "test" in folders
        or name.startswith("test_")
        or stem.endswith(("_test", ".test", ".spec"))
    )
