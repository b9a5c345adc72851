"""The prompt: a stable prefix (system prompt and the project's instructions) and the dynamic facts.

The prefix must stay byte-identical from turn to turn, so that llama-server's prompt cache reuses it
(FACTS.md: anything that changes early forces the whole prompt to be processed again). Nothing in it
depends on the time, the turn or the state of the repository; those facts go into the newest user
message instead (`environment_note`).
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

SYSTEM_PROMPT = """\
You are a coding agent working in a software project on the user's machine. You act only through tools.

How to work:
- Look before you change: use list_files, grep and read_file to find and read the code first.
- Change files with edit_file (old_string copied exactly from read_file output, without the line numbers), \
multi_edit for several changes to one file, or write_file for new files and full rewrites.
- Run commands with bash: tests, linters, build tools, git. Commands get no input: use flags such as -y.
- After a change, check it: run the tests or the program.
- When a tool returns an error, read it and fix the call. Do not repeat a call that failed.
- Paths are relative to the workspace root.
- Keep going until the task is done. Then reply, without calling a tool, with a short summary: what you \
changed and how you checked it.
"""

# For small models (the `blocks` protocol): they act by writing text they saw in training. Short,
# concrete, with the three formats shown once. Small models copy the example's `path/to/` folder into
# their paths; the blocks reader takes it off (agent/protocols/actions.py).
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

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")  # the first one present is used
MAX_INSTRUCTIONS = 20_000


def project_instructions(workspace: Path) -> tuple[str, str] | None:
    for name in INSTRUCTION_FILES:
        path = workspace / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace").strip()
            if len(text) > MAX_INSTRUCTIONS:
                text = text[:MAX_INSTRUCTIONS] + "\n[... the rest of the file was left out ...]"
            return name, text
    return None


def system_prompt(workspace: Path, actions: str = "tools") -> str:
    """The stable prefix: the same bytes for the whole session."""
    parts = [SYSTEM_PROMPT_BLOCKS if actions == "blocks" else SYSTEM_PROMPT]
    found = project_instructions(workspace)
    if found:
        name, text = found
        parts.append(f"# Project instructions ({name})\n\n{text}\n")
    return "\n".join(parts)


def environment_note(workspace: Path, git_summary: str | None) -> str:
    """Facts that change: given with each new user message, after the cached prefix."""
    lines = [
        f"workspace: {workspace}",
        f"os: {platform.system()} {platform.machine()}",
        f"date: {time.strftime('%Y-%m-%d')}",
        f"git: {git_summary}" if git_summary else "git: not a git repository",
    ]
    return "<environment>\n" + "\n".join(lines) + "\n</environment>"


# Said last, next to where the model starts writing: small models follow the nearest instruction.
BLOCKS_REMINDER = (
    "Act now: for each file to create or change, write its path alone on a line, then the complete new "
    "file in a fenced block. Nothing changes unless you write the blocks."
)
# ...and when a file the task names was too long to show whole: a whole-file block there is refused.
BLOCKS_REMINDER_PARTLY = (
    "Act now: to change {files}, write its path alone on a line, then a fenced block of SEARCH/REPLACE "
    "edits whose SEARCH lines are copied exactly from the lines shown above. To create a new file, write "
    "its path, then the complete file in a fenced block. Nothing changes unless you write the blocks."
)


def user_message(
    task: str, workspace: Path, git_summary: str | None, files: str = "", reminder: str = ""
) -> str:
    parts = [environment_note(workspace, git_summary), files, task.strip(), reminder]
    return "\n\n".join(p for p in parts if p)
