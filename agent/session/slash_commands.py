"""Slash commands: the table (names, arguments, help, and which of them editors get over ACP), how a
typed line is read, and what the commands that every front end runs alike do.

The TUI runs every command (agent/frontends/tui/slash.py); editors get those marked `editors`
(agent/frontends/acp/agent.py advertises them in `available_commands_update` and runs them when a
prompt starts with one). What a command does to the session lives here once: /undo restores the same
checkpoint, /diff reads the same diff, /compact asks the same compaction, /stats says the same figures,
whichever front end shows the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.core.loop import Agent
from agent.core.workbench import Workbench
from agent.errors import AgentError
from agent.server.profiles import load_profiles
from agent.store.telemetry import TurnStats, summarise_turns
from tools.approval import MODES_IN_WORDS
from tools.base import ToolError
from tools.mcp import MCPServers


@dataclass(frozen=True)
class SlashCommand:
    name: str
    argument: str  # "" when it takes none
    help: str
    editors: bool = False  # editors (ACP) get it too
    editor_help: str = ""  # its help there, where it differs from the TUI's
    hint: str = ""  # what an editor shows for its argument before one is typed

    @property
    def description(self) -> str:
        return self.editor_help or self.help


COMMANDS = [
    SlashCommand("help", "", "what each command and key does"),
    SlashCommand(
        "profile",
        "NAME",
        "switch server profile (restarts the server after you confirm)",
        editors=True,
        editor_help="switch the server profile: its server starts, and the conversation carries over",
        hint="a profile name (none: list them)",
    ),
    SlashCommand("approval", "MODE", MODES_IN_WORDS),
    SlashCommand(
        "clear",
        "",
        "start a new session on the same server",
        editors=True,
        editor_help="forget the conversation and start afresh on the same server",
    ),
    SlashCommand("compact", "", "summarise the older turns to free context", editors=True),
    SlashCommand(
        "undo", "", "restore the files as they were before the last prompt's first change", editors=True
    ),
    SlashCommand("diff", "", "what changed since the last checkpoint", editors=True),
    SlashCommand("stats", "", "this session's speed, cache reuse and draft acceptance", editors=True),
    SlashCommand("mcp", "", "MCP servers and their tools", editors=True),
    SlashCommand("sessions", "", "this folder's recent sessions"),
    SlashCommand("resume", "ID", "continue a recorded session"),
    SlashCommand("restart", "", "restart the model server (after it stopped)"),
    SlashCommand("trust", "", "use this folder's own .agent/config.toml, .agent/profiles and .mcp.json"),
    SlashCommand("quit", "", "leave (stops the server this session started)"),
]
BY_NAME = {c.name: c for c in COMMANDS}
EDITOR_COMMANDS = [c for c in COMMANDS if c.editors]
OPTIONAL_ARGUMENT = ("profile", "approval", "resume")  # without it, the command says what there is


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
    if command.argument and not argument and command.name not in OPTIONAL_ARGUMENT:
        raise UnknownCommand(f"/{command.name} needs {command.argument}")
    return command, argument


def editor_command(text: str) -> tuple[SlashCommand, str] | None:
    """A prompt from an editor that is one of the commands editors get, with its argument; None for
    anything else, which goes to the model as it is (`/usr/bin/env is missing` is no command)."""
    if not text.startswith("/"):
        return None
    name, _, argument = text.strip()[1:].partition(" ")
    command = BY_NAME.get(name.lower())
    return (command, argument.strip()) if command is not None and command.editors else None


def completions(prefix: str) -> list[SlashCommand]:
    """Commands whose name starts with what follows the slash."""
    typed = prefix.lstrip("/").lower()
    return [c for c in COMMANDS if c.name.startswith(typed)]


# ------------------------------------------------------------------ what they do, in every front end


def undo(workbench: Workbench) -> str:
    """/undo: the files as they were before the last prompt's first change; what was restored."""
    if workbench.checkpoints is None:
        raise AgentError("/undo needs a git repository", "This folder is not one, so no checkpoints exist.")
    try:
        checkpoint, changed = workbench.checkpoints.undo()
    except ToolError as exc:
        raise AgentError(
            "nothing to undo",
            str(exc),
            "A checkpoint is taken before the agent's first change of each prompt.",
        ) from exc
    files = "\n".join(f"  {name}" for name in changed) or "  (no file differed)"
    return f"restored the checkpoint taken {checkpoint.message}:\n{files}"


def diff(workbench: Workbench) -> str:
    """/diff: what changed since the last checkpoint, as a unified diff ("" when nothing did)."""
    checkpoints = workbench.checkpoints
    if checkpoints is None:
        raise AgentError("/diff needs a git repository", "This folder is not one.")
    existing = checkpoints.list()
    return checkpoints.diff_since(existing[-1].sha) if existing else ""


NO_DIFF = "no changes since the last checkpoint"


def can_compact(agent: Agent) -> str:
    """Why /compact has nothing to do ("" when it has)."""
    if agent.context is None:
        return "nothing to compact: the server's context size is not known"
    return "" if len(agent.messages) >= 3 else "nothing to compact yet"


async def compact(agent: Agent) -> tuple[bool, str]:
    """/compact: the older turns summarised, whatever room is left (the loop compacts by itself only
    when the context fills). (whether anything was compacted, what to say): a compaction is also a
    `Compacted` event, which front ends show as it comes."""
    if why := can_compact(agent):
        return False, why
    assert agent.context is not None
    before = agent.context.estimate(agent.messages)
    done = await agent.context.compact(agent.messages, reason="asked for with /compact", force=True)
    if not done:
        return False, "nothing to compact: the conversation is as short as compaction keeps it"
    return (
        True,
        f"compacted the conversation: about {before} → {agent.context.estimate(agent.messages)} tokens",
    )


def stats_lines(session_id: str, stats: list[TurnStats]) -> list[str]:
    """/stats: the session's turns, tokens, time, and the medians of speed, acceptance and cache reuse."""
    s = summarise_turns(stats)
    if not s["turns"]:
        return ["no turns yet in this session"]
    lines = [
        f"session {session_id}: {s['turns']} turns, {s['output_tokens']} tokens out, "
        f"{s['wall_s']:.1f} s on the model, {s['tool_s']:.1f} s in tools"
    ]
    shown = (
        ("median_gen_tok_s", "median generation", "{:.1f} tok/s"),
        ("median_prefill_tok_s", "median prefill", "{:.0f} tok/s"),
        ("acceptance", "draft acceptance", "{:.0%}"),
        ("cache_reuse", "cache reuse", "{:.0%}"),
    )
    for key, label, fmt in shown:
        if s[key] is not None:
            lines.append(f"  {label}: {fmt.format(s[key])}")
    lines.append(f"  agent stats {session_id}")
    return lines


def profiles_line(current: str | None, workspace: Path) -> str:
    """/profile without a name: the one in use and those there are."""
    names = ", ".join(sorted(load_profiles(workspace)))
    return f"profile: {current or 'none'}. Available: {names}. /profile NAME switches."


def mcp_lines(mcp: MCPServers | None) -> list[str]:
    """/mcp: each server, and its tools or why it is down."""
    if mcp is None or not mcp.connections:
        return ["no MCP servers configured (`agent mcp add` adds one)"]
    lines = []
    for conn in mcp.connections:
        failure = mcp.failures.get(conn.name)
        tools = [t.name for t in mcp.tools if t.connection is conn]
        lines.append(
            f"{conn.name}: " + (f"down ({failure})" if failure else f"{len(tools)} tools: {', '.join(tools)}")
        )
    return lines
