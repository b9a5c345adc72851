"""Slash commands: their names, arguments and help, and how a typed line is read.

The app runs them; this module only knows what exists, so completion and /help share one table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlashCommand:
    name: str
    argument: str  # "" when it takes none
    help: str


COMMANDS = [
    SlashCommand("help", "", "what each command and key does"),
    SlashCommand("profile", "NAME", "switch server profile (restarts the server after you confirm)"),
    SlashCommand("approval", "MODE", "ask, auto-edit, full-auto or read-only"),
    SlashCommand("clear", "", "start a new session on the same server"),
    SlashCommand("compact", "", "summarise the older turns to free context"),
    SlashCommand("undo", "", "restore the files as they were before the last prompt's first change"),
    SlashCommand("diff", "", "what changed since the last checkpoint"),
    SlashCommand("stats", "", "this session's speed, cache reuse and draft acceptance"),
    SlashCommand("mcp", "", "MCP servers and their tools"),
    SlashCommand("sessions", "", "this folder's recent sessions"),
    SlashCommand("resume", "ID", "continue a recorded session"),
    SlashCommand("restart", "", "restart the model server (after it stopped)"),
    SlashCommand("trust", "", "use this folder's own .agent/config.toml, .agent/profiles and .mcp.json"),
    SlashCommand("quit", "", "leave (stops the server this session started)"),
]
BY_NAME = {c.name: c for c in COMMANDS}

KEYS_HELP = [
    ("Enter", "send"),
    ("Ctrl+J", "new line"),
    ("Up/Down", "prompt history (at the first or last line)"),
    ("Tab", "complete a /command or an @file"),
    ("Esc", "interrupt the model or the running command"),
    ("Ctrl+P", "speed panel"),
    ("Ctrl+C twice", "quit"),
]


class UnknownCommand(ValueError):
    pass


def parse(line: str) -> tuple[SlashCommand, str]:
    """'/profile coder' -> (the profile command, 'coder'). Unknown names raise with a suggestion."""
    name, _, argument = line.strip()[1:].partition(" ")
    command = BY_NAME.get(name.lower())
    if command is None:
        close = [c.name for c in COMMANDS if c.name.startswith(name[:2].lower())] if name else []
        hint = f" Did you mean /{close[0]}?" if close else ""
        raise UnknownCommand(f"unknown command /{name}.{hint} /help lists them.")
    argument = argument.strip()
    if command.argument and not argument and command.name not in ("profile", "approval", "resume"):
        raise UnknownCommand(f"/{command.name} needs {command.argument}")
    return command, argument


def completions(prefix: str) -> list[SlashCommand]:
    """Commands whose name starts with what follows the slash."""
    typed = prefix.lstrip("/").lower()
    return [c for c in COMMANDS if c.name.startswith(typed)]


def help_text() -> str:
    width = max(len(c.name) + len(c.argument) for c in COMMANDS) + 3
    lines = ["Commands:"]
    lines += [f"  /{(c.name + ' ' + c.argument).strip():<{width}} {c.help}" for c in COMMANDS]
    lines += ["", "Keys:"] + [f"  {key:<14} {what}" for key, what in KEYS_HELP]
    lines += ["", "@path in a prompt names a file of this folder (Tab completes it)."]
    return "\n".join(lines)
