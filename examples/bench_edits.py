"""How fast a failed edit finds the nearest lines, before and after rapidfuzz, side by side in one run.

python examples/bench_edits.py            # every case; the difflib scan alone takes ~2 minutes
python examples/bench_edits.py --quick    # without the difflib scan on 10,000 lines

Three ways to find the window of the file most like a missed old_string:
- the difflib scan (commit 8a4c9d7): difflib's ratio for every window, which issue 13 measured at 14 s;
- shared words + difflib (commit 2decaa5): a sliding count of shared words picks 8 windows, difflib's
  ratio ranks them (slow again for a long old_string: difflib is quadratic in the window);
- rapidfuzz (now, tools/edit_matching.py nearest_lines): rapidfuzz's Indel ratio for every window while that
  is cheap, else for the 32 windows the lines vote for.
Then the whole failed edit_file call (read, four matching passes, nearest lines) on 10,000 lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import heapq
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tools.base import ToolContext, ToolError
from tools.edit_matching import nearest_lines
from tools.files import EditArgs, EditFile
from tools.workspace import Workspace


def difflib_scan(text: str, old: str) -> int:
    """Commit 8a4c9d7: the 1-based first line of the best window, difflib's ratio for every window."""
    lines = text.splitlines()
    want = old.strip("\n").splitlines() or [old]
    size = max(1, len(want))
    best, best_at = 0.0, 0
    target = "\n".join(want)
    for i in range(max(1, len(lines) - size + 1)):
        ratio = difflib.SequenceMatcher(None, "\n".join(lines[i : i + size]), target, autojunk=False).ratio()
        if ratio > best:
            best, best_at = ratio, i
    return best_at + 1


_TOKEN = re.compile(r"\w+|[^\w\s]+")


def shared_words(text: str, old: str) -> int:
    """Commit 2decaa5: 8 windows by a sliding count of shared words, ranked by difflib's ratio."""
    lines = text.splitlines()
    want = old.strip("\n").splitlines() or [old]
    size = max(1, len(want))
    windows = max(1, len(lines) - size + 1)
    wanted: dict[str, int] = {}
    for line in want:
        for token in _TOKEN.findall(line):
            wanted[token] = wanted.get(token, 0) + 1
    tokens = [_TOKEN.findall(line) for line in lines]
    have: dict[str, int] = {}

    def add(line_tokens: list[str], step: int) -> int:
        change = 0
        for token in line_tokens:
            if token not in wanted:
                continue
            before = have.get(token, 0)
            have[token] = before + step
            if step > 0 and before < wanted[token]:
                change += 1
            elif step < 0 and before <= wanted[token]:
                change -= 1
        return change

    shared = sum(add(t, 1) for t in tokens[:size])
    scores = [shared]
    for i in range(1, windows):
        shared += add(tokens[i - 1], -1) + add(tokens[i + size - 1], 1)
        scores.append(shared)
    best, best_at = 0.0, 0
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(want))
    for i in heapq.nlargest(8, range(windows), key=scores.__getitem__):
        matcher.set_seq1("\n".join(lines[i : i + size]))
        if (ratio := matcher.ratio()) > best:
            best, best_at = ratio, i
    return best_at + 1


def rapidfuzz_now(text: str, old: str) -> int:
    shown = nearest_lines(text, old)
    return int(re.search(r"is at lines (\d+)-", shown).group(1))


def module(functions: int) -> str:
    return "".join(
        f"def handler_{i}(request, user_{i}):\n"
        f"    value = compute({i}, request.size * {i % 7})\n"
        f"    return respond(value + {i})\n\n"
        for i in range(functions)
    )


def two_typos(lines: list[str], start: int, count: int) -> str:
    wanted = lines[start : start + count]
    wanted[0] = wanted[0].replace("request.size", "request.length")
    wanted[8] = wanted[8].replace("compute", "calc")
    return "\n".join(wanted)


def cases() -> list[tuple[str, str, str, int]]:
    small, big = module(750), module(2500)
    small_lines, big_lines = small.splitlines(), big.splitlines()
    renamed = "\n".join(
        line.replace("request", "req").replace("value", "val") for line in big_lines[4001:4013]
    )
    long_one = [
        line.replace("respond", "reply") if n % 10 == 0 else line
        for n, line in enumerate(big_lines[5000:5159])
    ]
    long_one[80] = "    # a comment the model imagined"
    return [
        ("20 lines, 2 typos, in 3,000 lines", small, two_typos(small_lines, 2001, 20), 2002),
        ("20 lines, 2 typos, in 10,000 lines", big, two_typos(big_lines, 7001, 20), 7002),
        ("12 lines, a typo on every line, in 10,000 lines", big, renamed, 4002),
        ("159 lines, 17 typos, in 10,000 lines", big, "\n".join(long_one), 5001),
    ]


def timed(find, text: str, old: str, runs: int) -> tuple[float, int]:
    times, found = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        found = find(text, old)
        times.append(time.perf_counter() - started)
    return statistics.median(times), found


def failed_edit_ms(runs: int = 7) -> float:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        text = module(2500)
        (root / "handlers.py").write_text(text)
        old = two_typos(text.splitlines(), 7001, 20)
        ctx = ToolContext(Workspace(root))
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            with contextlib.suppress(ToolError):
                asyncio.run(EditFile().run(EditArgs(path="handlers.py", old_string=old, new_string="x"), ctx))
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000


def main() -> None:
    quick = "--quick" in sys.argv
    print("| old_string | difflib scan (8a4c9d7) | shared words + difflib (2decaa5) | rapidfuzz (now) |")
    print("|---|---|---|---|")
    for name, text, old, right in cases():
        cells = []
        for find, runs in ((difflib_scan, 1), (shared_words, 3), (rapidfuzz_now, 5)):
            if find is difflib_scan and (len(old) > 2000 or (quick and len(text) > 200_000)):
                cells.append("not run (minutes)")
                continue
            took, found = timed(find, text, old, runs)
            verdict = "right lines" if found == right else f"wrong: line {found}, not {right}"
            cells.append(f"{took * 1000:,.0f} ms, {verdict}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"\nA failed 20-line edit_file on 10,000 lines, the whole call: {failed_edit_ms():.0f} ms (median of 7)"
    )


if __name__ == "__main__":
    main()
