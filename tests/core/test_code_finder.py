"""Finding the code a task is about from its words: dotted names through the package layout, names,
literals and plain words, each result with the reason a user can follow."""

from __future__ import annotations

from agent.core.code_finder import find_definitions, stem, words_of

SIZES = '''"""Sizes of files."""


def parse_size(text):
    """Read "1 KiB" or "3 MB" as a number of bytes."""
    number, unit = text.split()
    return int(float(number) * UNITS[unit])


def format_size(n):
    return f"{n} B"
'''

CACHES = '''class LRUCache:
    def get(self, key):
        return self.data[key]

    def expire(self, now):
        """Drop the items whose time is up."""
        return [k for k, t in self.times.items() if t < now]


class TTLCache:
    def get(self, key):
        return self.data[key]

    def expire(self, now):
        return [k for k, t in self.times.items() if t <= now]

    def popitem(self):
        """Evict the least recently used item."""
        return self.order.pop(0)
'''

TABLES = '''def separator_line(widths, align):
    """The line under a Markdown table's header, with a colon on the side each column is aligned to."""
    cells = []
    for width, side in zip(widths, align):
        cells.append(":" + "-" * width if side == "right" else "-" * width + ":")
    return "|" + "|".join(cells) + "|"


def pipe(cell):
    return cell.replace("|", "\\\\|")
'''

TESTS = """from mypkg.units import parse_size


def test_parse_size():
    assert parse_size("1 KiB") == 1024
"""


def files(**extra: str) -> list[tuple[str, str]]:
    """The package's files; `extra`: more, or another text for one of them, by path."""
    found = {
        "src/mypkg/__init__.py": "from .units import parse_size\n",
        "src/mypkg/units.py": SIZES,
        "src/mypkg/caches.py": CACHES,
        "src/mypkg/tables.py": TABLES,
        "tests/test_units.py": TESTS,
    }
    return list({**found, **extra}.items())


def names(found) -> list[str]:
    return [f"{f.rel}:{f.qualname}" for f in found]


def test_a_dotted_name_resolves_through_the_package_layout_to_its_definition():
    found = find_definitions(files(), '`mypkg.parse_size("1 KiB")` returns 1000, it should be 1024.')
    assert names(found)[0] == "src/mypkg/units.py:parse_size"
    assert found[0].why.startswith("the task names `mypkg.parse_size`")
    # ...and through the module's own path as well.
    found = find_definitions(files(), "mypkg.units.format_size(3) is wrong")
    assert names(found)[0] == "src/mypkg/units.py:format_size"


def test_a_dotted_name_of_a_module_s_own_definition_does_not_also_name_its_namesakes_in_the_package():
    """`mypkg.units.format_size` is units.py's; tables.py's `format_size` is in the same package, which
    would resolve it only were it re-exported from there, and units.py says where it is."""
    namesake = TABLES + '\n\ndef format_size(n):\n    """Width of a size column."""\n    return len(str(n))\n'
    found = find_definitions(
        files(**{"src/mypkg/tables.py": namesake}), "mypkg.units.format_size(3) is wrong"
    )
    assert names(found) == ["src/mypkg/units.py:format_size"]
    # Named by its package alone, both might be the one meant: both are shown.
    found = find_definitions(files(**{"src/mypkg/tables.py": namesake}), "mypkg.format_size(3) is wrong")
    assert sorted(names(found)) == ["src/mypkg/tables.py:format_size", "src/mypkg/units.py:format_size"]


def test_a_class_and_method_mean_that_method_not_another_classs_method_of_the_same_name():
    found = find_definitions(files(), "`TTLCache.expire` drops an item whose time is not up yet.")
    assert names(found)[0] == "src/mypkg/caches.py:TTLCache.expire"
    assert found[0].score > 2 * max((f.score for f in found[1:]), default=0)


def test_plain_words_find_a_definition_by_its_docstring_and_body():
    found = find_definitions(files(), "The cache evicts the wrong item when it is full.")
    assert names(found)[0] == "src/mypkg/caches.py:TTLCache.popitem"
    assert "evict" in found[0].why


def test_a_literal_and_words_find_the_code_that_uses_them():
    found = find_definitions(
        files(), 'The Markdown table puts the colon on the wrong side of the "|" separator.'
    )
    assert names(found)[0] == "src/mypkg/tables.py:separator_line"


def test_a_test_of_the_name_ranks_below_the_code_it_tests():
    found = find_definitions(files(), "parse_size is wrong for KiB")
    assert names(found)[0] == "src/mypkg/units.py:parse_size"
    assert all(not f.rel.startswith("tests/") or f.score < found[0].score / 2 for f in found)


def test_a_task_that_points_nowhere_finds_nothing():
    assert find_definitions(files(), "Please be quick.") == []
    assert find_definitions([("README.md", "# hello\n")], "fix parse_size") == []


def test_words_are_split_and_stemmed_alike_in_code_and_prose():
    assert words_of("naturalSize natural_size") == ["natural", "size", "natural", "size"]
    assert stem("evicts") == stem("evicted") == stem("evicting") == "evict"
    assert "the" not in words_of("the item")


def test_a_traceback_pasted_into_the_task_points_at_the_definition_holding_its_line():
    task = (
        "It crashes:\n"
        'Traceback (most recent call last):\n  File "/home/me/proj/src/mypkg/caches.py", line 15, in expire\n'
        "TypeError: '<=' not supported"
    )
    found = find_definitions(files(), task)
    assert names(found)[0] == "src/mypkg/caches.py:TTLCache.expire"
    assert found[0].why == "the traceback in the task points at line 15"
    found = find_definitions(files(), "src/mypkg/units.py:7: in parse_size\nKeyError: 'KiB'")
    assert names(found)[0] == "src/mypkg/units.py:parse_size"


def test_what_users_say_finds_what_code_calls_it_and_a_plain_word_can_be_a_name():
    code = [
        (
            "src/q.py",
            'def discard_oldest(queue):\n    """Take the oldest entry off."""\n    return queue.pop(0)\n',
        ),
        ("src/r.py", "def render(rows):\n    return rows\n"),
        ("docs/conf.py", "def setup(app):\n    app.evict = True\n"),
    ]
    found = find_definitions(code, "The queue evicts the newest entry instead.")
    assert names(found)[0] == "src/q.py:discard_oldest"  # evict ~ discard, pop; docs/ weigh less
    assert names(find_definitions(code, "render drops the header row")) == ["src/r.py:render"]
