"""A large repository, generated: what the repository view and the code finder meet in a real project
of thousands of files. Shared by the tests that interrupt the first request's search
(tests/faults/test_search_faults.py) and its benchmark (`examples/bench_repo_view.py --generated N`).

The same seed and size give the same files, byte for byte. Of every 10,000 files: about 8,000 Python
modules in nested packages (a few to a hundred definitions each, their names drawn from one shared
vocabulary, so that names repeat across modules as in a real project), 1,000 tests, 500 Markdown
pages under docs/, 400 data files (JSON, CSV, YAML), and a few large ones: long modules of thousands
of lines, generated tables and data dumps past the size the view reads. One module holds a planted
bug, and `BigRepo.task` describes it as a user would: the function's dotted name, the call, what it
returns and what it should return; no path.
"""

from __future__ import annotations

import json
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "orbit"
NOUNS = """account address amount archive audit batch bucket buffer cache channel checksum client cluster
column config connection context counter cursor customer dataset delta device digest document domain
duration entry event export feature field filter frame gateway graph handler header index invoice item
job journal key label layer ledger limit link loader lock manifest marker matrix message metric node
offset order owner packet page parcel partition payload period pipeline policy pool price profile queue
quota range rate reader record region registry report request resource result retry route rule sample
schedule schema scope segment sensor session shard signal snapshot source span stage status stream
subscription summary tag task tenant threshold ticket timer token topic trace transaction transfer unit
upload user value vector version window worker""".split()  # noqa: SIM905
VERBS = """parse format load save build check compute merge split normalize validate resolve render encode
decode fetch update apply convert count filter group sort collect emit flush reset scale round clamp
prepare export import_ read write open close find match select""".split()  # noqa: SIM905
AREAS = """billing catalog identity inventory messaging analytics scheduling storage search shipping
reporting notifications""".split()  # noqa: SIM905
PLANTED = "billing/ledger/proration.py"  # under the package
PLANTED_FUNCTION = "prorate_amount"
PLANTED_BODY = '''

def prorate_amount(amount, days, period_days=30):
    """The share of `amount` owed for `days` of a billing period of `period_days` days, in cents
    rounded to the nearest cent."""
    if days <= 0 or period_days <= 0:
        return 0.0
    days = min(days, period_days)
    share = amount * days // period_days
    return round(share, 2)
'''
DECOY_BODY = '''

def prorate_amount(amount, days, period_days=30):
    """The share of `amount` for `days` of `period_days`, by whole {unit}s."""
    if days <= 0:
        return 0
    return amount * min(days, period_days) / period_days
'''


@dataclass(frozen=True)
class BigRepo:
    root: Path
    files: int  # how many files were written
    task: str  # a user's words: the dotted name, the call, what it returns and should; no path
    path: str  # the file holding the planted bug, from the root
    function: str  # its name


def generate(root: Path, files: int = 10_000, seed: int = 1, commit: bool = True) -> BigRepo:
    """Write a repository of `files` files under `root` (created), committed to git when `commit`."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    written = 0

    def write(rel: str, text: str | bytes) -> None:
        nonlocal written
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        written += 1

    large = max(2, files // 250)
    docs, data, tests = files // 20, files // 25, files // 10
    modules = files - large - docs - data - tests - 4
    folders = _folders(rng, modules)
    module_paths = []
    for i in range(modules - 1):  # and the planted one
        folder = folders[i % len(folders)]
        init = f"{PACKAGE}/{folder}/__init__.py"
        if not (root / init).exists() and i < len(folders):
            write(init, f'"""The {folder.replace("/", " ")} package."""\n')
            continue
        module_paths.append(f"{PACKAGE}/{folder}/{_name(rng)}_{i}.py")
    module_paths.append(f"{PACKAGE}/{PLANTED}")
    for rel in module_paths:
        write(rel, _module(rng, rel))
    planted = root / PACKAGE / PLANTED
    planted.write_text(planted.read_text() + PLANTED_BODY)
    for unit, rel in (("day", module_paths[7]), ("week", module_paths[len(module_paths) // 2])):
        (root / rel).write_text((root / rel).read_text() + DECOY_BODY.format(unit=unit))
    for i in range(tests):
        target = module_paths[rng.randrange(len(module_paths))]
        write(f"tests/{target.split('/')[1]}/test_{Path(target).stem}_{i}.py", _test(rng, target))
    for i in range(docs):
        write(f"docs/{rng.choice(AREAS)}/{_name(rng)}_{i}.md", _doc(rng, module_paths))
    for i in range(data):
        write(*_data(rng, i))
    for i in range(large):
        write(*_large(rng, i))
    write("README.md", f"# {PACKAGE}\n\nA platform of {len(AREAS)} services.\n")
    write("pyproject.toml", f'[project]\nname = "{PACKAGE}"\nversion = "1.0.0"\n')
    write(".gitignore", "__pycache__/\n*.pyc\nbuild/\n")
    write("setup.cfg", "[flake8]\nmax-line-length = 110\n")
    if commit:
        git = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=Dev"]
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run([*git, "commit", "-qm", "The platform as it is"], cwd=root, check=True)
    dotted = f"{PACKAGE}.{PLANTED.removesuffix('.py').replace('/', '.')}.{PLANTED_FUNCTION}"
    task = (
        f"`{dotted}(100, 10)` returns 33, it should return 33.33: a third of the period is a third of the "
        "amount, to the cent."
    )
    return BigRepo(root, written, task, f"{PACKAGE}/{PLANTED}", PLANTED_FUNCTION)


def _folders(rng: random.Random, modules: int) -> list[str]:
    """Packages two and three deep, about 110 modules each: orbit/billing/ledger, orbit/billing/ledger/v2."""
    wanted = max(1, modules // 110)
    folders = ["billing/ledger"]
    while len(folders) < wanted:
        area = rng.choice(AREAS)
        sub = rng.choice(NOUNS)
        folder = f"{area}/{sub}" if rng.random() < 0.7 else f"{area}/{sub}/{rng.choice(NOUNS)}"
        if folder not in folders:
            folders.append(folder)
    return folders


def _name(rng: random.Random) -> str:
    return f"{rng.choice(VERBS).rstrip('_')}_{rng.choice(NOUNS)}"


def _module(rng: random.Random, rel: str) -> str:
    """A module: a docstring, imports, constants, and functions and classes of varied length. Most
    modules are short; one in ten is long (the lengths of a real project's modules spread wide)."""
    count = min(120, int(rng.lognormvariate(1.7, 0.9)) + 1)
    noun = rng.choice(NOUNS)
    out = [
        f'"""{noun.capitalize()} handling for {rel.split("/")[1]}: {rng.choice(VERBS)} and {rng.choice(VERBS)}."""'
    ]
    out += ["", "import math", "from collections import defaultdict", ""]
    out += [f"DEFAULT_{rng.choice(NOUNS).upper()} = {rng.randrange(1, 500)}", ""]
    for _ in range(count):
        out += _class(rng) if rng.random() < 0.15 else _function(rng)
    return "\n".join(out) + "\n"


def _function(rng: random.Random, indent: str = "", method: bool = False) -> list[str]:
    verb, noun, other = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(NOUNS)
    args = ["self"] if method else []
    args += [noun, f"{other}=None"] if rng.random() < 0.6 else [noun]
    name = f"{verb.rstrip('_')}_{noun}" + (f"_{other}" if rng.random() < 0.4 else "")
    lines = ["", f"{indent}def {name}({', '.join(args)}):"]
    lines.append(
        f'{indent}    """{verb.rstrip("_").capitalize()} the {noun} of a {other}, by its {rng.choice(NOUNS)}."""'
    )
    body_lines = rng.choice([2, 3, 4, 6, 9, 14, 22])
    for i in range(body_lines):
        var, word = f"{rng.choice(NOUNS)}_{i}", rng.choice(NOUNS)
        lines.append(
            rng.choice(
                [
                    f"{indent}    {var} = {noun} * {rng.randrange(2, 90)} + {rng.randrange(100)}",
                    f"{indent}    {var} = [{word} for {word} in range({rng.randrange(3, 30)}) if {word} % 3]",
                    f"{indent}    {var} = defaultdict(list)",
                    f'{indent}    {var} = "{word}-{rng.choice(VERBS)}".split("-")',
                    f"{indent}    {var} = math.floor({noun} / {rng.randrange(2, 12)}) if {noun} else 0",
                    f"{indent}    if {noun} is None:\n{indent}        {var} = {rng.randrange(100)}",
                ]
            )
        )
    lines.append(f"{indent}    return {noun}")
    return lines


def _class(rng: random.Random) -> list[str]:
    noun = rng.choice(NOUNS).capitalize()
    name = f"{noun}{rng.choice(['Store', 'Reader', 'Builder', 'Index', 'Policy', 'Queue', 'Cache'])}"
    lines = ["", "", f"class {name}:", f'    """Keeps {noun.lower()}s and what is known of each."""', ""]
    lines += ["    def __init__(self, limit=100):", "        self.limit = limit", "        self.items = {}"]
    for _ in range(rng.randrange(2, 9)):
        lines += _function(rng, "    ", method=True)
    return lines


def _test(rng: random.Random, target: str) -> str:
    module = target.removesuffix(".py").replace("/", ".")
    out = [f'"""Tests of {module}."""', "", "import pytest", "", f"from {module} import *  # noqa: F403", ""]
    for i in range(rng.randrange(3, 25)):
        out += [
            "",
            f"def test_{_name(rng)}_{i}():",
            f"    assert {rng.randrange(9)} + 1 == {rng.randrange(1, 10)}",
        ]
    return "\n".join(out) + "\n"


def _doc(rng: random.Random, modules: list[str]) -> str:
    module = rng.choice(modules).removesuffix(".py").replace("/", ".")
    out = [f"# {rng.choice(NOUNS).capitalize()} {rng.choice(NOUNS)}s", ""]
    for _ in range(rng.randrange(2, 12)):
        out += [f"## {rng.choice(VERBS).capitalize()} a {rng.choice(NOUNS)}", ""]
        words = " ".join(rng.choice(NOUNS + VERBS) for _ in range(rng.randrange(20, 90)))
        out += [f"See `{module}`. The {words}.", ""]
    return "\n".join(out)


def _data(rng: random.Random, i: int) -> tuple[str, str]:
    kind = i % 3
    rows = rng.randrange(5, 300)
    if kind == 0:
        items = [{"id": n, "name": _name(rng), "limit": rng.randrange(1000)} for n in range(rows)]
        return f"data/fixtures/{_name(rng)}_{i}.json", json.dumps(items, indent=1)
    if kind == 1:
        lines = ["id,name,amount"] + [f"{n},{_name(rng)},{rng.randrange(10**6)}" for n in range(rows)]
        return f"data/exports/{_name(rng)}_{i}.csv", "\n".join(lines) + "\n"
    lines = [f"{_name(rng)}:\n  limit: {rng.randrange(100)}\n  enabled: true" for _ in range(rows // 5 + 1)]
    return f"config/{rng.choice(AREAS)}/{_name(rng)}_{i}.yaml", "\n".join(lines) + "\n"


def _large(rng: random.Random, i: int) -> tuple[str, str | bytes]:
    """A long module (thousands of lines), a generated table module past the view's read limit, a
    data dump, or a binary file."""
    kind = i % 4
    if kind == 0:
        out = [
            '"""Generated: the compatibility layer."""',
            "",
            "import math",
            "from collections import defaultdict",
        ]
        for _ in range(rng.randrange(300, 500)):
            out += _function(rng)
        return f"{PACKAGE}/compat/generated_{i}.py", "\n".join(out) + "\n"
    if kind == 1:
        rows = [f"    ({n}, {rng.randrange(10**9)}, {_name(rng)!r})," for n in range(12_000)]
        return f"{PACKAGE}/tables/table_{i}.py", "TABLE = [\n" + "\n".join(rows) + "\n]\n"
    if kind == 2:
        lines = [f"{n},{_name(rng)},{rng.random():.6f}" for n in range(20_000)]
        return f"data/dumps/dump_{i}.csv", "\n".join(lines) + "\n"
    return f"assets/image_{i}.png", bytes(rng.randrange(256) for _ in range(50_000))
