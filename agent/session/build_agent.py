"""The agent for one workspace, assembled from the settings and a model client: the tools (built-in,
then MCP's), the permissions and the sandbox, the context window sized from the server, the action
protocol built from its name (agent/protocols/registry.py) and handed to the loop ready-built, and a
resumed history's files the model was shown whole. `open_session` (agent/session/live.py) calls it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from agent.core.context import ContextWindow, summariser
from agent.core.llm import ModelClient
from agent.core.loop import Agent, Approver, Limits
from agent.core.prompt import system_prompt
from agent.core.workbench import Workbench
from agent.events import Event, Notice
from agent.protocols.registry import make_actions, protocol_names
from agent.settings.config import Settings
from tools.base import Tool, ToolContext, ToolRegistry
from tools.bash import Bash
from tools.files import EditFile, MultiEdit, ReadFile, WriteFile
from tools.git import GitDiff, GitLog, GitStatus
from tools.permissions import Permissions, Rules
from tools.rename_symbol import RenameSymbol
from tools.sandbox import SANDBOXED_MODES, Sandbox
from tools.sandbox import unavailable as sandbox_unavailable
from tools.search import Grep, ListFiles
from tools.shown import mark_shown_whole
from tools.workspace import Workspace

FALLBACK_CONTEXT = 32768  # for servers that do not say (no /props)


def default_tools(with_git: bool, rewrite_guard: float = 0.5) -> list[Tool]:
    tools: list[Tool] = [
        Bash(), ReadFile(), EditFile(), MultiEdit(), WriteFile(rewrite_guard), RenameSymbol(), ListFiles(),
        Grep(),
    ]  # fmt: skip
    if with_git:
        tools += [GitStatus(), GitDiff(), GitLog()]
    return tools


def request_prefix(actions: str, workspace: Path, with_git: bool, rewrite_guard: float) -> tuple[str, list]:
    """What a session on this action protocol sends before its history, from its name: the system
    prompt and the tools' schemas as the protocol sends them (a replay rebuilds recorded requests)."""
    protocol = make_actions(actions, workspace)
    tools = ToolRegistry(default_tools(with_git, rewrite_guard))
    return system_prompt(workspace, protocol.system_prompt), protocol.request_tools(tools)


def shown_in_history(history: list[dict], workspace: Path) -> list[Path]:
    """Files whose current text the resumed conversation holds whole: written by the model (a
    write_file call, a whole-file block) or shown to it in a task message. A resumed session may
    rewrite those, as the session before it could."""
    readers = [make_actions(name, workspace) for name in protocol_names()]
    texts: dict[str, str] = {}
    for message in history:
        for reader in readers:  # each protocol reads its own messages (the task message's files too)
            texts.update(reader.files_written(message))
    found = []
    for rel, text in texts.items():
        path = workspace / rel
        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
            if path.is_file() and path.read_text(encoding="utf-8").rstrip("\n") == str(text).rstrip("\n"):
                found.append(path.resolve())
    return found


async def build_agent(
    settings: Settings,
    workbench: Workbench,
    client: ModelClient,
    emit: Callable[[Event], None],
    approve: Approver | None,
    approval: str | None = None,
    limits: Limits | None = None,
    tool_choice: str = "auto",
    history: list | None = None,
    extra_tools: list | None = None,
    actions: str | None = None,  # the action protocol's name; None: the registry's default
    plan_first: bool = False,  # the profile's; the setting, where set, wins
) -> Agent:
    if workbench.repo is None:
        emit(
            Notice(
                "not a git repository: no checkpoints are taken, so `agent undo` and /undo are unavailable"
            )
        )
    # Built-in tools first, then MCP tools by name: the order is part of the cached prefix.
    extra = sorted(extra_tools or [], key=lambda t: t.name)
    tools = ToolRegistry(default_tools(workbench.repo is not None, settings.rewrite_guard) + extra)
    sandbox = None
    if settings.sandbox:
        roots = [workbench.workspace, *(Path(r).expanduser().resolve() for r in settings.extra_roots)]
        sandbox = Sandbox(roots, settings.sandbox_network, mode=lambda: permissions.mode)
    # Without the sandbox, a command that writes git's hooks or config asks (tools/protected.py).
    permissions = Permissions(
        approval or settings.approval,
        Rules(**settings.permissions.model_dump()),
        workbench.workspace,
        sandboxed=lambda: sandbox is not None and sandbox.active,
    )
    if sandbox is not None and permissions.mode in SANDBOXED_MODES and (why := sandbox_unavailable()):
        emit(Notice(f"commands run unsandboxed: {why}"))
    n_ctx = await client.server.context_size(FALLBACK_CONTEXT) or FALLBACK_CONTEXT
    # lookups that fell back (no /props, no /v1/models): said, not silent
    for note in client.server.take_notices():
        emit(Notice(note))
    reserve = int(client.endpoint.sampling.get("max_tokens") or min(4096, n_ctx // 4))
    for path in shown_in_history(history or [], workbench.workspace):
        mark_shown_whole(workbench.tool_state, path)
    protocol = make_actions(actions or protocol_names()[0], workbench.workspace)
    protocol.plan_first = plan_first if settings.plan_first is None else settings.plan_first
    prompt = system_prompt(workbench.workspace, protocol.system_prompt)  # built once: it reads AGENTS.md
    context = ContextWindow(
        n_ctx, reserve, tools_chars=len(json.dumps(protocol.request_tools(tools))),
        summarise=summariser(client, tools.schemas), emit=emit,
    )  # fmt: skip
    return Agent(
        client=client,
        tools=tools,
        ctx=ToolContext(
            Workspace(workbench.workspace, list(settings.extra_roots)),
            state=workbench.tool_state,
            sandbox=sandbox,
            shown_limit=context.cap_limit(),
            lint=settings.lint,
            lint_command=settings.lint_command,
        ),
        permissions=permissions,
        system_prompt=prompt,
        emit=emit,
        approve=approve,
        limits=limits or Limits(max_turns=settings.max_turns),
        context=context,
        checkpoint=workbench.checkpoint,
        tool_choice=tool_choice,
        actions=protocol,
        # the system prompt of now before a resumed history: the prefix the server caches
        messages=[{"role": "system", "content": prompt}, *history] if history else [],
    )
