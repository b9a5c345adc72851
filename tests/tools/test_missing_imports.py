"""The import an edit forgot is added where exactly one is known (tools/missing_imports.py), through the
edit tools as the model uses them: real files in a real folder, the lint after the edit as it runs."""

from __future__ import annotations

import pytest

from tools.base import ToolContext
from tools.files import EditArgs, EditFile, MultiEdit, MultiEditArgs, OneEdit, WriteArgs, WriteFile
from tools.missing_imports import defines, import_for, with_imports
from tools.shown import mark_shown_whole


async def test_a_standard_module_used_without_its_import_is_imported_and_said(ctx: ToolContext):
    # csv-totals, 2026-12-06: report.py used csv.DictReader with no `import csv`.
    text = '"""Totals."""\n\ndef totals(path):\n    return list(csv.DictReader(open(path)))\n'
    result = await WriteFile().run(WriteArgs(path="report.py", content=text), ctx)
    written = (ctx.workspace.root / "report.py").read_text()
    assert (
        written
        == '"""Totals."""\nimport csv\n\ndef totals(path):\n    return list(csv.DictReader(open(path)))\n'
    )
    assert "Added `import csv` to report.py: the change used it without importing." in result.output
    assert "new problems" not in result.output  # nothing is left to report


async def test_a_test_calling_the_function_of_the_module_beside_it_imports_it_from_there(ctx: ToolContext):
    # fizzbuzz, 2026-12-05/06: test_fizzbuzz.py called fizzbuzz(3) without importing it, 15 reports in
    # 3 sessions; pytest.raises without `import pytest` in validate-input.
    (ctx.workspace.root / "fizzbuzz.py").write_text("def fizzbuzz(n):\n    return str(n)\n")
    test = "import os\n\n\ndef test_three():\n    assert fizzbuzz(3) == 'Fizz'\n    with pytest.raises(TypeError):\n        fizzbuzz()\n"
    result = await WriteFile().run(WriteArgs(path="test_fizzbuzz.py", content=test), ctx)
    written = (ctx.workspace.root / "test_fizzbuzz.py").read_text()
    assert written.startswith(
        "import os\nfrom fizzbuzz import fizzbuzz\nimport pytest\n\n\ndef test_three():"
    )
    assert "Added `from fizzbuzz import fizzbuzz`, `import pytest` to test_fizzbuzz.py" in result.output


async def test_an_edit_that_brings_a_well_known_name_gets_its_import(ctx: ToolContext):
    path = ctx.workspace.root / "notes.py"
    path.write_text("class Note:\n    text: str\n")
    mark_shown_whole(ctx.state, path)
    result = await EditFile().run(
        EditArgs(path="notes.py", old_string="class Note:", new_string="@dataclass\nclass Note:"), ctx
    )
    assert path.read_text() == "from dataclasses import dataclass\n@dataclass\nclass Note:\n    text: str\n"
    assert "Added `from dataclasses import dataclass` to notes.py" in result.output
    assert "+from dataclasses import dataclass" in result.output  # the diff shows it


async def test_a_multi_edit_gets_the_import_once_and_keeps_crlf(ctx: ToolContext):
    path = ctx.workspace.root / "paths.py"
    path.write_bytes(b"import os\r\n\r\nA = 1\r\nB = 2\r\n")
    mark_shown_whole(ctx.state, path)
    edits = [
        OneEdit(old_string="A = 1", new_string="A = Path('a')"),
        OneEdit(old_string="B = 2", new_string="B = Path('b')"),
    ]
    result = await MultiEdit().run(MultiEditArgs(path="paths.py", edits=edits), ctx)
    assert (
        path.read_bytes()
        == b"import os\r\nfrom pathlib import Path\r\n\r\nA = Path('a')\r\nB = Path('b')\r\n"
    )
    assert result.output.count("from pathlib import Path`") == 1


@pytest.mark.parametrize(
    ("siblings", "text", "why"),
    [
        ({"a": {"helper"}, "b": {"helper"}}, "helper()\n", "two modules define it"),
        ({}, "prnt('x')\n", "a typo: nothing defines it"),
        ({}, "datetime.now()\n", "the module or its class"),
        ({}, "field(default=1)\n", "`field` without a dataclass in sight"),
        ({}, "no_such_module_here.run()\n", "no module of that name is installed"),
    ],
)
def test_a_name_without_one_answer_is_left_to_the_model(siblings, text, why):
    name = text.split("(")[0].split(".")[0]
    assert (
        import_for(name, text, "main", lambda name: [m for m, names in siblings.items() if name in names])
        == ""
    ), why


async def test_a_name_left_undefined_is_reported_as_before_and_a_file_already_broken_is_not_touched(
    ctx: ToolContext,
):
    path = ctx.workspace.root / "old.py"
    path.write_text("value = csv_thing\n\ndef f():\n    return 1\n")
    mark_shown_whole(ctx.state, path)
    await EditFile().run(EditArgs(path="old.py", old_string="return 1", new_string="return 2"), ctx)
    assert path.read_text() == "value = csv_thing\n\ndef f():\n    return 2\n"  # csv_thing: not this edit's
    result = await WriteFile().run(WriteArgs(path="typo.py", content="prnt('hi')\n"), ctx)
    assert "undefined name 'prnt'" in result.output and "Added" not in result.output


async def test_lint_off_adds_nothing(ctx: ToolContext):
    ctx.lint = False
    await WriteFile().run(WriteArgs(path="r.py", content="rows = csv.reader([])\n"), ctx)
    assert (ctx.workspace.root / "r.py").read_text() == "rows = csv.reader([])\n"


def test_imports_go_after_the_docstring_future_and_imports_and_below_a_shebang():
    assert with_imports("#!/usr/bin/env python3\n# licence\n\nx = csv\n", ["import csv"]) == (
        "#!/usr/bin/env python3\n# licence\nimport csv\n\nx = csv\n"
    )
    text = '"""Doc\nstring."""\nfrom __future__ import annotations\nimport os\n\nx = 1\n'
    assert with_imports(text, ["import csv"]) == (
        '"""Doc\nstring."""\nfrom __future__ import annotations\nimport os\nimport csv\n\nx = 1\n'
    )
    assert with_imports("x = csv", ["import csv"]) == "import csv\nx = csv"


def test_a_module_defines_its_functions_classes_and_assigned_names_at_top_level_only():
    text = "import os\nA = 1\nB: int = 2\ndef f():\n    inner = 3\nclass C:\n    pass\nasync def g():\n    pass\nD == 3\n"
    assert [name for name in "ABfCg" if defines(text, name)] == list("ABfCg")
    assert not any(defines(text, name) for name in ("inner", "D", "os", "F"))
