"""Which files of a large repository the task message reads closely, chosen by what costs little.

The repository view outlines every file with tree-sitter and the code finder scores every definition
as words: about 0.4 s a megabyte of source on 2 cores, nothing in a project of a few hundred files,
a minute in one of 10,000. So past SEARCHED_WHOLE bytes of text, only the files likeliest to matter
are read closely, up to CLOSE_BYTES of them, and the map lists the rest by path. A file's likelihood
comes from its path and a scan of its bytes, with no parse: the module a dotted name points at
(`orbit.billing.ledger.proration.prorate_amount`: a module whose path ends that way, holding the
name) and the modules beside it, a file a traceback frame names, the names the task writes as code
that its text holds, and the task's words in its path and (when no name is rare enough to point
anywhere) in its text, each weighted by how rare it is in the repository (BM25's idf). Tests and docs
weigh less, as in the code finder."""

from __future__ import annotations

import math

from agent.core.code_finder import FRAME, code_names, dotted_names, file_weight, module_of
from agent.core.stoppable import check_wanted
from tools.outline import words_of

SEARCHED_WHOLE = 2_000_000  # bytes of text: a repository up to this size is read closely whole
CLOSE_BYTES = 300_000  # bytes of the files read closely in a larger one (~0.1 s on 2 cores)
NAME_WEIGHT = 3.0  # a name the task writes as code, against one of its words
DOTTED_MODULE = 100.0  # the module a dotted name points at, holding the name
DOTTED_PACKAGE = 30.0  # a module of its package holding the name (a package re-exports it)
BESIDE = 2.0  # a module in the folder of the one a dotted name points at
FRAMED = 60.0  # a file a traceback frame names
# A name the task writes as code points somewhere when this few files hold it: then its plain words
# are not looked for in every file.
RARE_FILES, RARE_SHARE = 50, 0.005


def is_large(sizes: list[int]) -> bool:
    """Whether a repository whose readable files have these sizes (bytes) is too large to read closely
    whole."""
    return sum(sizes) > SEARCHED_WHOLE


def likeliest(files: list[tuple[str, bytes]], task: str, recent: list[str]) -> list[tuple[str, float]]:
    """Every file of `files` ([(path, content)]) with its likelihood of holding what `task` is about,
    likeliest first (a tie: the shallower path, then by name).

    Each word looked for costs a pass over every file's bytes (0.05 s in 75 MB), so: the names the task
    writes as code first; its plain words only when no name is rare enough to point anywhere (a task
    calling `update()` in a project where thousands of files say it); never a dotted name's modules
    (the paths say where those are) nor numbers (a call's arguments and results)."""
    dotted = dotted_names(task)
    placed = {part for parts in dotted for part in parts[:-1]}
    names = sorted((code_names(task) | {parts[-1] for parts in dotted}) - placed)
    words = sorted({w for w in words_of(task) if not w.isdigit()} - set(words_of(" ".join(placed))))
    frames = [(m.group(1) or m.group(3)).replace("\\", "/").lstrip("./") for m in FRAME.finditer(task)]
    name_hits = _holding(files, names, lower=False)
    name_idf = _idf(name_hits)
    rarest = min((sum(n in hits for hits in name_hits) for n in name_idf), default=len(files))
    pointed = rarest <= max(RARE_FILES, RARE_SHARE * len(files))
    word_hits = [set()] * len(files) if pointed else _holding(files, words, lower=True)
    word_idf = _idf(word_hits)
    paths = [{w for w in words if w in rel.lower()} for rel, _ in files]  # its path says them
    path_idf = _idf(paths)
    recent_set = set(recent)
    scored = []
    for (rel, _), found_names, found_words, path_words in zip(
        files, name_hits, word_hits, paths, strict=True
    ):
        score = NAME_WEIGHT * sum(name_idf[n] for n in found_names) + sum(word_idf[w] for w in found_words)
        score += sum(path_idf[w] for w in path_words)
        score += _placed(rel, found_names, dotted) + FRAMED * any(_framed(rel, f) for f in frames)
        score += 1.0 * (rel in recent_set)
        scored.append((rel, score * file_weight(rel)))
    scored.sort(key=lambda item: (-item[1], item[0].count("/"), item[0]))
    return scored


def _holding(files: list[tuple[str, bytes]], terms: list[str], lower: bool) -> list[set[str]]:
    """Per file, the terms its bytes hold (`lower`: in any case; the terms are lower-case)."""
    if not terms:
        return [set()] * len(files)
    encoded = [(t, t.encode("utf-8")) for t in terms]
    held = []
    for _, data in files:
        check_wanted()
        text = data.lower() if lower else data
        held.append({t for t, b in encoded if b in text})
    return held


def _idf(held: list[set[str]]) -> dict[str, float]:
    """BM25's idf of each term, from the sets of terms each file holds."""
    df: dict[str, int] = {}
    for terms in held:
        for term in terms:
            df[term] = df.get(term, 0) + 1
    return {t: math.log(1 + (len(held) - n + 0.5) / (n + 0.5)) for t, n in df.items()}


def _placed(rel: str, found_names: set[str], dotted: list[list[str]]) -> float:
    """The most a dotted name of the task says for this file: the module it points at, or a module of
    its package, that holds the name it ends with; else a module beside the one it points at."""
    path = [p for p in module_of(rel) if p not in ("src", "lib")]
    best = 0.0
    for parts in dotted:
        for size in (2, 1):  # `mod.Class.method` or `mod.func`
            module = parts[:-size]
            if not module:
                continue
            if parts[-1] not in found_names:
                best = max(best, BESIDE * (len(module) > 1 and path[: len(module) - 1] == module[:-1]))
            elif path[-len(module) :] == module:
                best = max(best, DOTTED_MODULE)
            elif path and path[0] == module[0]:
                best = max(best, DOTTED_PACKAGE)
    return best


def _framed(rel: str, frame: str) -> bool:
    return frame == rel or frame.endswith("/" + rel) or rel.endswith("/" + frame)


def closely_read(
    ranked: list[tuple[str, float]], sizes: dict[str, int], budget: int = CLOSE_BYTES
) -> list[str]:
    """The likeliest files that `likeliest` scored above nothing, up to `budget` bytes; the first one
    whatever its size."""
    chosen, used = [], 0
    for rel, score in ranked:
        if score <= 0 or (chosen and used + sizes[rel] > budget):
            continue
        chosen.append(rel)
        used += sizes[rel]
    return chosen
