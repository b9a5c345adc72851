"""The approval modes: how much of what the model asks for runs without asking the user.

Declared here once; tools/permissions.py decides by them, and the settings, the task file, the command
line, the slash command and ACP's mode picker list them from here. Kept free of imports: `agent --help`
reads it.
"""

from __future__ import annotations

from typing import Literal, get_args

ApprovalMode = Literal["ask", "auto-edit", "full-auto", "read-only"]
MODES: tuple[ApprovalMode, ...] = get_args(ApprovalMode)
MODES_IN_WORDS = f"{', '.join(MODES[:-1])} or {MODES[-1]}"  # "ask, auto-edit, full-auto or read-only"

# The modes in which file edits run without asking; commands run in the sandbox there (tools/sandbox.py).
EDITS_UNASKED: tuple[ApprovalMode, ...] = ("auto-edit", "full-auto")

# Each mode's name and what runs without asking in it, as a mode picker shows them.
DESCRIPTIONS: dict[ApprovalMode, tuple[str, str]] = {
    "ask": ("Ask", "Reads run; edits and commands ask first."),
    "auto-edit": ("Auto-edit", "Reads and edits run; commands ask first."),
    "full-auto": ("Full auto", "Everything runs, except what is dangerous or denied."),
    "read-only": ("Read-only", "Only reads run; nothing may change."),
}
