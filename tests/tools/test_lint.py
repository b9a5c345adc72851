"""The lint after each edit: syntax errors and undefined names found with their lines, only the ones an
edit adds, and pointed at for the model."""

from __future__ import annotations

import sys
import types

import pytest

from tools.lint import LintProblem, describe, new_problems, problems

HELLO = 'import sys\n\n\ndef main():\n    print("hi", file=sys.stderr)\n\n\nmain()\n'
BROKEN = "def main():\n    print(undefined_thing)\n\n\nmain()\n"


def test_a_python_syntax_error_is_found_with_its_line():
    found = problems("hello.py", "import sys\n\ndef main(:\n    pass\n")
    assert [(p.line, p.message) for p in found] == [(3, "SyntaxError: invalid syntax")]


def test_a_statement_the_compiler_refuses_is_a_syntax_error():
    found = problems("hello.py", "x = 1\nreturn x\n")
    assert [(p.line, p.message) for p in found] == [(2, "SyntaxError: 'return' outside function")]


def test_an_undefined_name_is_found():
    found = problems("hello.py", 'def main():\n    prnt("hi")\n')
    assert [str(p) for p in found] == ["hello.py:2: undefined name 'prnt'"]


def test_unused_imports_and_other_style_flakes_are_not_problems():
    assert problems("hello.py", "import os\nx = 1\nx = 2\nf'{x}'\nf'plain'\n") == []


def test_a_syntax_error_in_one_file_and_an_undefined_name_in_another_are_both_found():
    found = problems("a.py", "if True\n    pass\n") + problems("b.py", "print(nothing)\n")
    assert [(p.path, p.line) for p in found] == [("a.py", 1), ("b.py", 1)]
    assert "SyntaxError" in found[0].message
    assert found[1].message == "undefined name 'nothing'"


@pytest.mark.parametrize(
    ("path", "text", "line", "message"),
    [
        ("app.js", "function f() {\n  return g(1, 2;\n}\n", 2, "missing ')'"),
        ("app.ts", "const x: number = 1;\nfunction f(a: number {\n  return a;\n}\n", 2, "missing ')'"),
        ("app.tsx", "const A = () => <div>hi</div\n;\n", 1, "missing '>'"),
        ("main.go", 'package main\n\nfunc main() {\n\tprintln("hi"\n}\n', 4, "missing ')'"),
        ("main.rs", 'fn main() {\n    let x = 1\n    println!("{}", x);\n}\n', 2, "syntax error at '1'"),
    ],
)
def test_a_syntax_error_is_found_by_the_files_grammar(path, text, line, message):
    assert [(p.line, p.message) for p in problems(path, text)] == [(line, message)]


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("hello.py", HELLO),
        ("app.js", "export function f(a, b) {\n  return a + b;\n}\n"),
        ("app.ts", "export const f = (a: number): number => a * 2;\n"),
        ("main.go", 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n}\n'),
        ("main.rs", 'fn main() {\n    println!("hi");\n}\n'),
    ],
)
def test_a_clean_file_gives_nothing(path, text):
    assert problems(path, text) == []


def test_an_error_the_file_already_had_is_not_new_when_an_edit_moves_it():
    after = "import os\n\n\n" + BROKEN + "\n\ndef added():\n    return os.sep\n"
    assert problems("app.py", after)[0].line == 5
    assert new_problems("app.py", BROKEN, after) == []


def test_a_new_error_in_an_already_broken_file_is_reported():
    after = BROKEN + "\n\ndef added():\n    return missing_too\n"
    assert [str(p) for p in new_problems("app.py", BROKEN, after)] == [
        "app.py:9: undefined name 'missing_too'"
    ]


def test_a_second_copy_of_an_old_error_is_new():
    after = BROKEN + "\n\ndef again():\n    print(undefined_thing)\n"
    assert [p.line for p in new_problems("app.py", BROKEN, after)] == [9]


def test_a_new_file_reports_every_problem():
    text = "print(a)\nprint(b)\n"
    assert new_problems("new.py", None, text) == problems("new.py", text)
    assert len(new_problems("new.py", None, text)) == 2


def test_an_unknown_extension_gives_nothing():
    assert problems("notes.txt", "def (((") == []
    assert problems("Makefile", "}}}{{{") == []


def test_text_that_is_not_utf8_gives_nothing():
    assert problems("hello.py", b"print('\xff\xfe')\n") == []
    assert problems("app.js", "const s = '\udcff';\n") == []  # surrogateescape'd bytes


def test_a_file_over_a_megabyte_is_skipped():
    assert problems("big.py", "x = (\n" + "1,\n" * 600_000) == []


def test_describe_marks_the_line_among_its_neighbours():
    text = "import os\n\n\ndef main():\n    prnt('hi')\n\n\nmain()\n"
    shown = describe("hello.py", problems("hello.py", text), text)
    assert shown == (
        "hello.py:5: undefined name 'prnt'\n   3 |\n   4 | def main():\n>  5 |     prnt('hi')\n   6 |\n   7 |"
    )


def test_describe_shows_the_first_five_and_counts_the_rest():
    text = "".join(f"print(name{i})\n" for i in range(8))
    shown = describe("many.py", problems("many.py", text), text)
    assert shown.count("undefined name") == 5
    assert shown.endswith("... and 3 more in many.py")


def test_describe_says_nothing_when_nothing_is_wrong():
    assert describe("hello.py", [], HELLO) == ""


def test_a_problem_reads_as_path_line_and_message_and_keys_without_its_line():
    problem = LintProblem("hello.py", 3, "undefined name 'foo'")
    assert str(problem) == "hello.py:3: undefined name 'foo'"
    assert problem.key == LintProblem("hello.py", 30, "undefined name 'foo'").key


def test_a_byte_order_mark_is_not_a_python_syntax_error():
    assert problems("hello.py", "\ufeff" + HELLO) == []


@pytest.mark.parametrize(
    ("default", "kind"),
    [("[]", "list"), ("{}", "dict"), ("set()", "set"), ("list()", "list"), ("[x for x in 'ab']", "list")],
)
def test_a_mutable_dataclass_default_is_found_on_its_own_line(default, kind):
    # dataclass-field, 2026-12-05/06: the import-time ValueError pointed at `@dataclass`, not the field.
    text = f"from dataclasses import dataclass\n\n\n@dataclass(frozen=False)\nclass Note:\n    title: str\n    tags: list = {default}\n"
    [problem] = problems("notes.py", text)
    assert problem.line == 7 and "mutable default for the dataclass field 'tags'" in problem.message
    assert f"field(default_factory={kind})" in problem.message
    module = types.ModuleType("notes_under_lint")
    sys.modules[module.__name__] = module  # (dataclasses reads the class's module)
    try:
        with pytest.raises(ValueError, match="mutable default"):  # what Python itself says at import
            exec(compile(text, "notes.py", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


def test_a_dataclass_default_factory_and_a_plain_class_list_are_fine():
    text = (
        "import dataclasses\nfrom dataclasses import field\n\n@dataclasses.dataclass\nclass A:\n"
        "    tags: list = field(default_factory=list)\n    n: int = 0\n\nclass B:\n    items: list = []\n"
    )
    assert problems("a.py", text) == []


def test_a_module_importing_from_itself_is_found_relative_or_absolute():
    text = "from .encoding import to_bytes as want_bytes\n"
    [problem] = problems("pkg/encoding.py", text)
    assert problem.line == 1
    assert problem.message == (
        "encoding.py imports `to_bytes` from itself (.encoding): that fails when the module loads; "
        "define `to_bytes` in this file instead"
    )
    [absolute] = problems("src/pkg/encoding.py", "x = 1\nfrom pkg.encoding import a, b\n")
    assert absolute.line == 2 and "imports `a`, `b` from itself (pkg.encoding)" in absolute.message


def test_imports_from_a_sibling_a_parent_or_a_package_init_are_fine():
    assert problems("pkg/signer.py", "from .encoding import to_bytes\nfrom . import encoding\n") == []
    assert problems("pkg/sub/encoding.py", "from ..encoding import x\nfrom other.encoding import y\n") == []
    assert problems("pkg/__init__.py", "from .pkg import x\nfrom pkg import y\n") == []
