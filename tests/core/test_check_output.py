"""A failed check's output as the model reads it: repeated tracebacks said once, and the project's
lines that the output points at located, from real Python and pytest runs."""

from __future__ import annotations

import subprocess
import sys

from agent.core.check_output import (
    LINT_MARK,
    Location,
    condense,
    error_line,
    locate,
    marked,
    marks_off,
    task_sentences,
    where_it_failed,
    window,
)

BUGGY = """\
def merge(pairs):
    result = []
    for pair in sorted(pairs):
        if result and pair[0] <= result[-1][1]:
            result[-1][1] = max(result[-1][1], pair[1])
        else:
            result.append(pair)
    return result
"""
TEST = """\
from intervals import merge


def test_overlapping():
    assert merge([(1, 3), (2, 4)]) == [(1, 4)]


def test_three():
    assert merge([(1, 3), (2, 4), (5, 6)]) == [(1, 4), (5, 6)]
"""


def _pytest(tmp_path, *options: str) -> str:
    (tmp_path / "intervals.py").write_text(BUGGY)
    (tmp_path / "test_intervals.py").write_text(TEST)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout
    return run.stdout


def test_a_pytest_failure_is_located_at_the_line_that_raised_before_the_test_that_called_it(tmp_path):
    found = locate(_pytest(tmp_path, "-q"), tmp_path)
    assert found[0] == Location("intervals.py", 5)
    assert Location("test_intervals.py", 5) in found  # the test comes after the code


def test_a_python_traceback_is_located_at_its_innermost_frame_in_the_project(tmp_path):
    (tmp_path / "intervals.py").write_text(BUGGY)
    (tmp_path / "main.py").write_text("from intervals import merge\nmerge([(1, 3), (2, 4)])\n")
    run = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "TypeError" in run.stderr
    assert locate(run.stderr, tmp_path) == [Location("intervals.py", 5), Location("main.py", 2)]


def test_files_outside_the_project_and_missing_files_are_not_locations(tmp_path):
    output = (
        f'  File "{sys.modules["json"].__file__}", line 10, in loads\n'
        '  File "/nonexistent/x.py", line 3, in f\n'
        "gone.py:4: NameError\n"
        "../outside.py:1: error\n"
    )
    assert locate(output, tmp_path) == []


def test_the_same_traceback_printed_for_each_failing_test_is_said_once(tmp_path):
    output = _pytest(tmp_path, "-q")
    condensed = condense(output)
    assert len(condensed) < len(output)
    assert "[... the same " in condensed and "lines as above ...]" in condensed

    # The traceback's own error lines; the short summary's FAILED lines vary with the terminal width.
    def raised(text: str) -> int:
        return sum(line.startswith("E ") and "TypeError" in line for line in text.splitlines())

    assert raised(output) >= 2
    assert raised(condensed) == 1
    assert condensed.rstrip().endswith(output.rstrip().splitlines()[-1])  # the summary stays


def test_output_without_repeats_is_left_as_it_is():
    text = "\n".join(f"line {n}" for n in range(30)) + "\n"
    assert condense(text) == text


def test_the_located_lines_are_shown_numbered_as_read_file_numbers_them(tmp_path):
    (tmp_path / "intervals.py").write_text(BUGGY)
    shown = where_it_failed([Location("intervals.py", 5)], tmp_path)
    assert shown.startswith("intervals.py, line 5:\n")
    assert "5|             result[-1][1] = max(result[-1][1], pair[1])" in shown
    assert window(BUGGY, 1).splitlines()[0] == "1| def merge(pairs):"


def test_a_location_in_a_test_says_the_fix_usually_belongs_in_the_code(tmp_path):
    (tmp_path / "test_intervals.py").write_text(TEST)
    assert "(a test: the fix usually belongs in the code it tests)" in where_it_failed(
        [Location("test_intervals.py", 5)], tmp_path
    )


def test_the_error_is_the_last_exception_line_of_the_output(tmp_path):
    assert error_line(_pytest(tmp_path, "-q")) == "TypeError: 'tuple' object does not support item assignment"
    assert error_line("E   ValueError: mutable default <class 'list'> for field tags") == (
        "ValueError: mutable default <class 'list'> for field tags"
    )
    assert error_line("all good\n") == ""


def test_a_marked_line_carries_the_error_as_a_comment_and_the_mark_comes_off_again():
    shown = marked("intervals.py", BUGGY, {5: "TypeError: nope"})
    line = shown.splitlines()[4]
    assert (
        line
        == "            result[-1][1] = max(result[-1][1], pair[1])  # <- the check failed here: TypeError: nope"
    )
    assert marks_off(shown) == BUGGY
    assert marked("notes.txt", "x\n", {1: "E"}) is None  # no comment syntax known: not marked
    assert (
        marked("a.ts", "let x = 1;\n", {1: ""}).splitlines()[0] == "let x = 1;  // <- the check failed here"
    )
    linted = marked("m.py", "print(ad(1))\n", {1: "undefined name 'ad'"}, LINT_MARK)
    assert linted == "print(ad(1))  # <- the lint found a problem here: undefined name 'ad'\n"
    assert marks_off(linted) == "print(ad(1))\n"


FIZZBUZZ_TASK = """Create `fizzbuzz.py` with a function `fizzbuzz(n)` that returns the string `"FizzBuzz"` when `n` is
divisible by both 3 and 5, and otherwise `str(n)`. Running `python3 fizzbuzz.py` prints `fizzbuzz(i)` for `i`
from 1 to 15, one per line (under `if __name__ == "__main__":`, so that importing `fizzbuzz` prints nothing).
Also write `test_fizzbuzz.py` with pytest tests, e.g. `fizzbuzz(3) == "Fizz"`, and run `python3 -m pytest -q`."""


def test_the_task_sentence_that_shares_most_words_with_the_error_is_quoted():
    # fizzbuzz, 2026-12-06: the 1.5B sent fizzbuzz.py back without its __main__ block four rounds running.
    [sentence] = task_sentences(FIZZBUZZ_TASK, "AssertionError: python3 fizzbuzz.py printed ''")
    assert sentence.startswith("Running `python3 fizzbuzz.py` prints") and sentence.endswith(
        "prints nothing)."
    )
    assert "\n" not in sentence  # one line, as quoted


def test_an_abbreviation_does_not_end_a_sentence_and_an_unrelated_error_quotes_nothing():
    [sentence] = task_sentences(FIZZBUZZ_TASK, "AssertionError: test_fizzbuzz.py has pytest tests run")
    assert sentence.startswith("Also write") and sentence.endswith("`python3 -m pytest -q`.")
    assert task_sentences(FIZZBUZZ_TASK, "KeyError: 'colour'") == []
    assert task_sentences("", "AssertionError: fizzbuzz printed") == []


def test_a_word_of_one_sentence_alone_is_enough_to_quote_it():
    # csv-totals, 2026-12-06 (run H): the hidden check printed only the totals; "books" is in one
    # sentence, the one that says how the output reads.
    task = (
        "Write `report.py` with a function `totals_by_category(path)` that returns a dict of totals, "
        "rounded to 2 decimals. Running `python3 report.py sales.csv` prints one line per category, "
        "in the form `category: total`, e.g. `books: 19.75`."
    )
    [sentence] = task_sentences(task, "AssertionError: {'books': 19.75, 'games': 79.99}")
    assert sentence.startswith("Running `python3 report.py sales.csv` prints")
