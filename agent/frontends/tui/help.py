"""/help in the TUI: each command (from the session layer's table, agent/session/slash_commands.py,
which completion and editors read too) and the keys beside them."""

from __future__ import annotations

from agent.session.slash_commands import COMMANDS

KEYS_HELP = [
    ("Enter", "send"),
    ("Ctrl+J", "new line"),
    ("Up/Down", "prompt history (at the first or last line)"),
    ("Tab", "complete a /command or an @file"),
    ("Esc", "interrupt the model or the running command"),
    ("Ctrl+P", "speed panel"),
    ("Ctrl+C twice", "quit"),
]


def help_text() -> str:
    width = max(len(c.name) + len(c.argument) for c in COMMANDS) + 3
    lines = ["Commands:"]
    lines += [f"  /{(c.name + ' ' + c.argument).strip():<{width}} {c.help}" for c in COMMANDS]
    lines += ["", "Keys:"] + [f"  {key:<14} {what}" for key, what in KEYS_HELP]
    lines += ["", "@path in a prompt names a file of this folder (Tab completes it)."]
    return "\n".join(lines)
