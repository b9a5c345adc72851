"""The kind of a turn's answer: one that copies what the model was shown (where n-gram drafting pays),
or new text."""

from __future__ import annotations

from agent.frontends.measure.turn_kinds import copy_share, turn_kind

SHOWN = """\
notes.py:
```python
def add_note(notes, text):
    notes.append({"text": text, "done": False})
    return notes


def finish(notes, index):
    notes[index]["done"] = True
```
"""
EDIT = """\
notes.py
```python
<<<<<<< SEARCH
def finish(notes, index):
    notes[index]["done"] = True
=======
def finish(notes, index):
    notes[index]["done"] = True
    return notes
>>>>>>> REPLACE
```
"""
NEW = """\
cli.py
```python
import argparse


def main():
    parser = argparse.ArgumentParser(description="notes")
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args()
```
"""


def messages(*texts: str) -> list[dict]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        *({"role": "user", "content": t} for t in texts),
    ]


def test_an_edit_block_of_lines_just_shown_copies_and_a_new_file_is_new():
    assert turn_kind(EDIT, messages(SHOWN)) == "copies"
    assert turn_kind(NEW, messages(SHOWN)) == "new"
    assert 0.5 <= copy_share(EDIT, messages(SHOWN)) < 1  # the added line is new


def test_a_file_re_sent_after_a_failed_check_copies_and_short_lines_count_for_nothing():
    answer = SHOWN  # the whole file again, name and fence included
    assert copy_share(answer, messages(SHOWN)) == 1.0
    assert copy_share("```\n}\n```\n", messages(SHOWN)) is None  # nothing long enough to tell
    assert turn_kind("Done.", messages(SHOWN)) == "new"


def test_tool_call_arguments_in_the_history_count_as_shown():
    history = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "write_file", "arguments": SHOWN}}]}]  # fmt: skip
    assert turn_kind(EDIT, messages() + history) == "copies"
