"""Slash commands: the one table (names, arguments, help, which of them editors get over ACP, what the
ones every front end runs alike do), how a typed line is read, and the one dispatch of a line to its
command.

The TUI runs every command; editors get those marked `editors` (agent/frontends/acp/agent.py advertises
them in `available_commands_update` and runs them when a prompt starts with one). A command with `run`
does the same whichever front end asks: /undo restores the same checkpoint, /diff reads the same diff,
/compact asks the same compaction, /stats says the same figures, and each front end shows the `Reply` its
own way. A command without `run` is a front end's own (the TUI's /help, /resume, /quit...), and a front end
may hand in its own way of running one that has `run` (the TUI asks before /profile switches). Either
way the line goes through `dispatch`: the same parse, the same refusals, the same errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.core.loop import Agent
from agent.core.workbench import Workbench
from agent.errors import AgentError
from agent.server.profiles import load_profiles
from agent.session.live import LiveSession
from agent.store.telemetry import TurnStats, summarise_turns
from tools.approval import MODES_IN_WORDS
from tools.base import ToolError
from tools.mcp import MCPServers


@dataclass(frozen=True)
class Reply:
    """What a command says. `form` tells a front end how to show it: "plain" text, a "listing" of lines
    kept as they are, the session's "figures", or a unified "diff"; `severity` is "", "warning" or "error"."""

    text: str
    form: str = "plain"
    severity: str = ""


@dataclass
class CommandTarget:
    """What a command acts on: the folder's workbench, the open session (None while the server starts),
    and the host's way to move the session to another profile (what it says of the switch)."""

    workbench: Workbench
    live: LiveSession | None
    switch_profile: Callable[[str], Awaitable[str]]


SharedRun = Callable[[CommandTarget, str], Awaitable[Reply]]
OwnRun = Callable[[str], Awaitable[Reply | None]]  # a front end's own: None when it showed the result itself


@dataclass(frozen=True)
class SlashCommand:
    name: str
    argument: str  # "" when it takes none
    help: str
    editors: bool = False  # editors (ACP) get it too
    editor_help: str = ""  # its help there, where it differs from the TUI's
    hint: str = ""  # what an editor shows for its argument before one is typed
    run: SharedRun | None = None  # what it does in every front end; None: a front end's own
    needs_session: bool = False  # refused while the server starts: it acts on the conversation
    waits: bool = False  # refused while the model works: it changes the files or the conversation

    @property
    def description(self) -> str:
        return self.editor_help or self.help


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


# ------------------------------------------------------------------ the shared commands, as the table runs them


def _lines(lines: list[str], form: str = "listing") -> Reply:
    return Reply("\n".join(lines), form)


async def _run_profile(target: CommandTarget, name: str) -> Reply:
    if not name:
        current = target.live.profile.name if target.live else None
        return Reply(profiles_line(current, target.workbench.workspace))
    return Reply(await target.switch_profile(name))


async def _run_clear(target: CommandTarget, _argument: str) -> Reply:
    assert target.live is not None
    target.live.clear()
    return Reply("Cleared the conversation: the next prompt starts afresh, on the same server.")


async def _run_compact(target: CommandTarget, _argument: str) -> Reply:
    assert target.live is not None
    _, said = await compact(target.live.agent)
    return Reply(said)


async def _run_undo(target: CommandTarget, _argument: str) -> Reply:
    return Reply(await asyncio.to_thread(undo, target.workbench), "listing")


async def _run_diff(target: CommandTarget, _argument: str) -> Reply:
    changed = await asyncio.to_thread(diff, target.workbench)
    return Reply(changed, "diff") if changed.strip() else Reply(NO_DIFF)


async def _run_stats(target: CommandTarget, _argument: str) -> Reply:
    assert target.live is not None
    return _lines(stats_lines(target.live.session_id, target.live.recorder.stats), "figures")


async def _run_mcp(target: CommandTarget, _argument: str) -> Reply:
    return _lines(mcp_lines(target.live.mcp if target.live else None))


# ------------------------------------------------------------------ the table

COMMANDS = [
    SlashCommand("help", "", "what each command and key does"),
    SlashCommand(
        "profile",
        "NAME",
        "switch server profile (restarts the server after you confirm)",
        editors=True,
        editor_help="switch the server profile: its server starts, and the conversation carries over",
        hint="a profile name (none: list them)",
        run=_run_profile,
        waits=True,
    ),
    SlashCommand("approval", "MODE", MODES_IN_WORDS, needs_session=True),
    SlashCommand(
        "clear",
        "",
        "start a new session on the same server",
        editors=True,
        editor_help="forget the conversation and start afresh on the same server",
        run=_run_clear,
        needs_session=True,
        waits=True,
    ),
    SlashCommand(
        "compact",
        "",
        "summarise the older turns to free context",
        editors=True,
        run=_run_compact,
        needs_session=True,
        waits=True,
    ),
    SlashCommand(
        "undo",
        "",
        "restore the files as they were before the last prompt's first change",
        editors=True,
        run=_run_undo,
        waits=True,
    ),
    SlashCommand("diff", "", "what changed since the last checkpoint", editors=True, run=_run_diff),
    SlashCommand(
        "stats",
        "",
        "this session's speed, cache reuse and draft acceptance",
        editors=True,
        run=_run_stats,
        needs_session=True,
    ),
    SlashCommand("mcp", "", "MCP servers and their tools", editors=True, run=_run_mcp),
    SlashCommand("sessions", "", "this folder's recent sessions"),
    SlashCommand("resume", "ID", "continue a recorded session", needs_session=True, waits=True),
    SlashCommand("restart", "", "restart the model server (after it stopped)", waits=True),
    SlashCommand("trust", "", "use this folder's own .agent/config.toml, .agent/profiles and .mcp.json"),
    SlashCommand("quit", "", "leave (stops the server this session started)"),
]
BY_NAME = {c.name: c for c in COMMANDS}
EDITOR_COMMANDS = [c for c in COMMANDS if c.editors]
OPTIONAL_ARGUMENT = ("profile", "approval", "resume")  # without it, the command says what there is


async def dispatch(
    line: str, target: CommandTarget, own: Mapping[str, OwnRun] | None = None, busy: bool = False
) -> Reply | None:
    """Run the command a typed line names: the front end's own way (`own`, by name) where it has one,
    else the table's. What went wrong is the reply (an unknown name, a command refused now, an
    AgentError a command raised); None: the front end's own command showed its result itself."""
    own = own or {}
    try:
        command, argument = parse(line)
    except UnknownCommand as exc:
        return Reply(str(exc), severity="error")
    if command.waits and busy:
        return Reply(f"/{command.name} waits until the model is done: Esc interrupts it.", severity="warning")
    if command.needs_session and target.live is None:
        return Reply(f"/{command.name} needs the server: it is not ready yet.", severity="warning")
    run = own.get(command.name)
    try:
        if run is not None:
            return await run(argument)
        if command.run is not None:
            return await command.run(target, argument)
    except AgentError as exc:
        return Reply(str(exc), severity="error")
    return Reply(f"/{command.name} does not run in this front end", severity="error")
