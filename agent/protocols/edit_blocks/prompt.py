"""What the `blocks` protocol tells the model: the system prompt (part of the stable prefix,
agent.core.prompt) and the reminder said last, next to where the model starts writing."""

# The example's file, in the system prompt below: a block that writes it is the format copied, not work.
EXAMPLE_PATH = "path/to/example.py"
# ...and its code, in either of its versions: written under any path, it is the format copied too.
EXAMPLE_CODE = ("def example():\n    return 42", "def example():\n    return 43")

# For small models (the `blocks` protocol): they act by writing text they saw in training. Short,
# concrete, with the three formats shown once. Small models copy the example's `path/to/` folder into
# their paths; the blocks reader takes it off (agent/protocols/edit_blocks/repairs.py).
SYSTEM_PROMPT_BLOCKS = """\
You are a coding agent working in a software project on the user's machine. You act by writing blocks \
in your answer; they are applied for you and you get the results.

1. To create a file or change it, write the file's path alone on one line, then the COMPLETE new \
content of the file in a fenced code block:

path/to/example.py
```python
def example():
    return 42
```

Write the whole file, from its first line to its last. Never leave parts out and never write "..." or \
"rest unchanged".

2. For a small change in a long file, write the path, then a fenced block with SEARCH/REPLACE edits. \
The SEARCH lines must be copied exactly from the current file:

path/to/example.py
```python
<<<<<<< SEARCH
    return 42
=======
    return 43
>>>>>>> REPLACE
```

3. To run a command (tests, a script, git), write it in a bash block. You see its output in the next \
message:

```bash
python3 -m pytest -q
```

Rules:
- Paths are relative to the project folder. Commands run there and get no input.
- A file you were not shown whole is never written whole: change it with SEARCH/REPLACE blocks.
- Only these blocks are applied. Do not show code in any other way.
- Read the results you get back and fix what failed.
- When the task is done, answer with one or two sentences saying what you changed, without any block.
"""


# Said last, next to where the model starts writing: small models follow the nearest instruction.
BLOCKS_REMINDER = (
    "Act now: for each file to create or change, write its path alone on a line, then the complete new "
    "file in a fenced block. Nothing changes unless you write the blocks."
)
# ...and after a plan, naming the files it is about (the 1.5B writes the path it is shown last).
BLOCKS_REMINDER_NAMED = (
    "Act now: write {files} (and any new file the task asks for): the path alone on a line, then the "
    "complete new file in a fenced block. Nothing changes unless you write the blocks."
)
# ...and when a file the task names was too long to show whole: a whole-file block there is refused.
BLOCKS_REMINDER_PARTLY = (
    "Act now: to change {files}, write its path alone on a line, then a fenced block of SEARCH/REPLACE "
    "edits whose SEARCH lines are copied exactly from the lines shown above. To create a new file, write "
    "its path, then the complete file in a fenced block. Nothing changes unless you write the blocks."
)
# ...and when those files are Python: a small model writes a whole function far better than SEARCH
# lines copied exactly, and a block of only definitions shown whole replaces them where they stand
# (tools/definition_edit.py). Every attempt at attrs' validators wrote the file whole instead.
BLOCKS_REMINDER_DEFINITIONS = (
    "Act now: to change {files}, write its path alone on a line, then a fenced block holding only the "
    "functions or classes you change, each complete: as shown above, with your change in it. They replace "
    "the ones in the file, a new one is added at its end, and the rest of the file stays as it is. To "
    "create a new file, write its path, "
    "then the complete file in a fenced block. Nothing changes unless you write the blocks."
)
# ...and where the message showed first the definition the task seems to be about, that one by its
# name: told only the format, the 1.5B wrote the system prompt's example, `def example(): return 42`,
# as its first answer to 11 of 33 planted tasks on the GPU.
BLOCKS_REMINDER_FOCUS = (
    "Act now: the code found first is `{name}` in {file}. To change it, write {file} alone on a line, "
    "then a fenced block holding the whole `{name}` as shown above, with your change in it: it replaces "
    "the one in the file, and the rest of the file stays as it is. Change any other function or class "
    "the same way, each complete. To create a new file, write its path, then the complete file in a "
    "fenced block. Nothing changes unless you write the blocks."
)
# ...and after a failed check that points into a definition of a file too long to show, the definition
# shown whole: the same format as the first ask (BLOCKS_REMINDER_FOCUS), which the 1.5B follows anyway.
FAILED_DEFINITION_REMINDER = (
    "Act now: the check fails on `{name}` in {file}. To fix it, write {file} alone on a line, then a "
    "fenced block holding the whole `{name}` as shown above, with the fix in it: it replaces the one in "
    "the file, and the rest of the file stays as it is. Nothing changes unless you write the blocks."
)
# ...and after a failed check whose output points at lines of the project (shown with it).
SEARCH_REPLACE_REMINDER = (
    "Act now: fix the cause with a SEARCH/REPLACE block. Write the path of the file to change alone on a "
    "line, then a fenced block: <<<<<<< SEARCH, the lines to change copied exactly from that file, "
    "=======, the fixed lines, >>>>>>> REPLACE. Nothing changes unless you write the blocks."
)

# ...and after an edit that renamed a definition other files still use (tools/dangling_uses.py): the
# one command that renames them all, next to where the model writes, is what a small model copies.
RENAME_REMINDER = (
    "Act now: to rename every use left, run this bash block:\n```bash\n{command}\n```\nNothing changes "
    "unless you write the block."
)


def partly_reminder(files: list[str], focus: tuple[str, str] | None = None) -> str:
    """The format asked for when `files` were shown in part: whole definitions in Python files, the
    one found first (`focus`: its file and name) named."""
    if not all(f.endswith(".py") for f in files):
        return BLOCKS_REMINDER_PARTLY.format(files=" or ".join(files))
    if focus is not None and focus[0] in files:
        return BLOCKS_REMINDER_FOCUS.format(file=focus[0], name=focus[1])
    return BLOCKS_REMINDER_DEFINITIONS.format(files=" or ".join(files))


# A plan before the blocks. Shown a file and asked for the new one, the 1.5B copies the file back as
# it was (parse-duration: three identical answers, at 0.7 too); asked first where the bug is, it names
# the line and the fix, and then writes the file with that change in it. The plan stays in the
# history, next to where it writes (docs/benchmarks.md, "A plan before the blocks").
PLAN_TASK = (
    "Do not write any file yet. First say briefly how you will do the task: quote the lines of the "
    "files shown that must change and say how they will read, and name any new file the task asks for."
)
PLAN_FIX = (
    "Do not write any file yet. First find the cause of this failure: quote the line or lines of the "
    "code that are wrong, and say in one or two sentences how to change them."
)
APPLY_PLAN = "Now make that change. {reminder}"
# The plan's length: enough to quote a line and its fix. Asked for two sentences, the 1.5B still
# wrote the whole file into its plan, then again as the block: twice the time on a CPU (30-40 s).
PLAN_TOKENS = 256
