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


def system_prompt(workspace: Path, protocol_prompt: str) -> str:
    """The stable prefix: the same bytes for the whole session: the action protocol's prompt (its
    `system_prompt`, from its folder), then the project's instructions."""
    parts = [protocol_prompt]
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


def user_message(
    task: str, workspace: Path, git_summary: str | None, files: str = "", reminder: str = "", note: str = ""
) -> str:
    """The files, the environment note, the task, a `note` on it (a fresh start's), the reminder.

    The files come first: attempts at one task (agent/session/attempts.py) work in worktrees at
    different paths, and with the path after the files, their first prompts are the same bytes up to
    the environment note, so that one prefill of the repository serves all of them
    (agent/session/shared_prefill.py)."""
    parts = [files, environment_note(workspace, git_summary), task.strip(), note, reminder]
    return "\n\n".join(p for p in parts if p)
