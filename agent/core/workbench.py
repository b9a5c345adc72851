"""The agent for one workspace, wired from the settings and a model client: tools, permissions,
checkpoints and the context window. Front ends call `build_agent` and consume its events.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from agent.core.context import CHARS_PER_TOKEN, ContextWindow, summariser
from agent.core.llm import ModelClient
from agent.core.loop import Agent, Approver, Limits
from agent.core.prompt import system_prompt, user_message
from agent.core.repomap import repository_view
from agent.errors import ConfigError
from agent.events import Event, Notice
from agent.protocols.base import ActionProtocol, ActionsMode, fence_for
from agent.protocols.registry import make_actions, protocols
from agent.settings.config import Settings
from agent.settings.trust import is_trusted
from tools.base import Tool, ToolContext, ToolRegistry
from tools.bash import Bash
from tools.files import TASK_TEXT, EditFile, MultiEdit, ReadFile, WriteFile
from tools.git import Checkpoints, GitDiff, GitLog, GitStatus, numstat, open_repo
from tools.mcp import MCPServerConfig, MCPServers, parse_servers
from tools.permissions import Permissions, Rules
from tools.sandbox import SANDBOXED_MODES, Sandbox
from tools.sandbox import unavailable as sandbox_unavailable
from tools.search import Grep, ListFiles
from tools.shown import mark_shown_whole
from tools.workspace import Workspace

FALLBACK_CONTEXT = 32768  # for servers that do not say (no /props)


def mcp_configs(settings: Settings, workspace: Path, extra: dict | None = None) -> dict[str, MCPServerConfig]:
    """MCP servers for a session: the settings', then the project's .mcp.json (in a trusted folder
    only: it names programs to start), then the task's."""
    configs = dict(settings.mcp_servers)
    project = workspace / ".mcp.json"
    if project.is_file() and is_trusted(workspace):
        try:
            configs.update(parse_servers(json.loads(project.read_text(encoding="utf-8"))))
        except (ValueError, ValidationError) as exc:
            raise ConfigError(f"{project} is not a valid MCP configuration", str(exc)) from exc
    if extra:
        configs.update(parse_servers(extra))
    return configs


async def start_mcp(
    configs: dict[str, MCPServerConfig], emit: Callable[[Event], None], log_dir: Path
) -> MCPServers:
    servers = MCPServers(configs, log_dir)
    for warning in servers.warnings:  # a key another client understands and we do not
        emit(Notice(warning))
    if not configs:
        return servers
    tools = await servers.start()
    for conn in servers.connections:
        if conn.name in servers.failures:
            emit(Notice(f"MCP server {conn.name} did not start: {servers.failures[conn.name]}; "
                        f"going on without it (its log: {log_dir / f'mcp-{conn.name}.log'})"))  # fmt: skip
        else:
            count = sum(1 for t in tools if t.connection is conn)
            emit(Notice(f"MCP server {conn.name}: {count} tool{'s' if count != 1 else ''}"))
    return servers


def default_tools(with_git: bool, rewrite_guard: float = 0.5) -> list[Tool]:
    tools: list[Tool] = [
        Bash(), ReadFile(), EditFile(), MultiEdit(), WriteFile(rewrite_guard), ListFiles(), Grep(),
    ]  # fmt: skip
    if with_git:
        tools += [GitStatus(), GitDiff(), GitLog()]
    return tools


def git_summary(repo) -> str | None:
    if repo is None:
        return None
    try:
        branch = repo.active_branch.name if not repo.head.is_detached else "detached HEAD"
    except TypeError:
        branch = "(no commits yet)"
    changed = len(repo.git.status("--porcelain").splitlines())
    return f"branch {branch}, {changed} changed file{'s' if changed != 1 else ''}"


class Workbench:
    """What a session needs besides the loop: the repository, its checkpoints, the task message."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace.resolve()
        self.repo = open_repo(self.workspace)
        self.checkpoints = Checkpoints(self.repo) if self.repo else None
        # The checkpoint from before the current task's first change: auto-commit commits what differs
        # from it. Front ends set it back to None when a new task (prompt) starts.
        self.task_start: str | None = None
        # The tools' per-session state (build_agent hands it to the agent's ToolContext): what the model
        # was shown whole, which the task message adds to, and the task's own words.
        self.tool_state: dict = {}

    def task_message(
        self, task: str, protocol: ActionProtocol | None = None, context: ContextWindow | None = None
    ) -> str:
        """The task with the environment note; where the protocol shows the repository, its files too,
        cut to what the context has room for once the prompt prefix and the task are in, and the
        protocol's reminder last."""
        self.tool_state[TASK_TEXT] = task
        if protocol is None or not protocol.shows_repository:
            return user_message(task, self.workspace, git_summary(self.repo))
        budget = self.files_budget(task, context, len(system_prompt(self.workspace, protocol.mode)))
        view = repository_view(self.workspace, task, budget, fence_for, self.recent_files())
        for rel in view.whole:
            mark_shown_whole(self.tool_state, self.workspace / rel)
        reminder = protocol.reminder(view.partly)
        return user_message(task, self.workspace, git_summary(self.repo), view.text, reminder)

    def files_budget(self, task: str, context: ContextWindow | None, prompt_chars: int) -> int:
        """Characters for the repository in the task message: 40% of the budget, and never more than
        what is left once the prefix (system prompt and instructions: `prompt_chars`, tools) and the
        task are counted."""
        budget = context.budget if context else 8192
        prefix = (context.tools_chars if context else 0) + prompt_chars
        left = budget * CHARS_PER_TOKEN - prefix - len(task) - 2000  # the note, the reminder, markup
        return max(1000, int(min(budget * 0.4 * CHARS_PER_TOKEN, left * 0.8)))

    def recent_files(self, commits: int = 20) -> list[str]:
        """Files that the last commits touched: what is being worked on ranks higher in the map."""
        if self.repo is None:
            return []
        try:
            out = self.repo.git.log(f"-{commits}", "--name-only", "--format=", "--no-renames")
        except Exception:  # no commits yet, or git refusing: the map goes without
            return []
        return list(dict.fromkeys(line for line in out.splitlines() if line))

    def checkpoint(self, label: str) -> str | None:
        if self.checkpoints is None:
            return None
        made = self.checkpoints.create(label)
        if self.task_start is None:
            # None from create: the tree is the newest checkpoint's, so that one is the task's start
            self.task_start = made.sha if made else self.checkpoints.list()[-1].sha
        if made is None:
            return None
        number = made.ref.rsplit("/", 1)[1]
        return f"checkpoint {number} taken ({label}); `agent undo` (or /undo in the TUI) restores it"

    def changes(self) -> list[dict]:
        """Lines added and deleted per file since the task's first checkpoint, new files included:
        the end of a run lists them, so that a large deletion cannot go unseen."""
        if self.checkpoints is None or self.task_start is None:
            return []
        try:
            listing = self.checkpoints.diff_since(self.task_start, "--numstat", "--no-renames")
        except Exception:  # git refusing (a lock, a broken object): the summary goes without it
            return []
        return numstat(listing)

    def auto_commit(self, subject: str) -> str | None:
        """Commit the files the agent changed in this task; the notice to show, None when nothing did."""
        if self.checkpoints is None or self.task_start is None:
            return None
        done = self.checkpoints.commit_changes(subject, self.task_start)
        return done.notice if done else None


def changes_lines(changes: list[dict], limit: int = 20) -> list[str]:
    """The files a run changed, each with its lines added and deleted; a big deletion is flagged."""
    if not changes:
        return []
    lines = [f"changed {len(changes)} file{'s' if len(changes) != 1 else ''} (lines added, deleted):"]
    for change in changes[:limit]:
        added, deleted = change.get("added"), change.get("deleted")
        if added is None:
            lines.append(f"  {change['path']}  (binary)")
            continue
        flag = (
            "   <- deleted more than it added; `agent undo` restores it"
            if deleted > max(20, 2 * added)
            else ""
        )
        lines.append(f"  {change['path']}  +{added} -{deleted}{flag}")
    if len(changes) > limit:
        lines.append(f"  ... and {len(changes) - limit} more (`git status`)")
    return lines


def shown_in_history(history: list[dict], workspace: Path) -> list[Path]:
    """Files whose current text the resumed conversation holds whole: written by the model (a
    write_file call, a whole-file block) or shown to it in a task message. A resumed session may
    rewrite those, as the session before it could."""
    readers = [make_actions(mode, workspace) for mode in sorted(protocols(), reverse=True)]  # tools, blocks
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
    actions: ActionsMode = "tools",
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
    n_ctx = await client.server_context_size(FALLBACK_CONTEXT) or FALLBACK_CONTEXT
    for note in client.take_notices():  # lookups that fell back (no /props, no /v1/models): said, not silent
        emit(Notice(note))
    reserve = int(client.endpoint.sampling.get("max_tokens") or min(4096, n_ctx // 4))
    for path in shown_in_history(history or [], workbench.workspace):
        mark_shown_whole(workbench.tool_state, path)
    protocol = make_actions(actions, workbench.workspace)
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
        system_prompt=system_prompt(workbench.workspace, protocol.mode),
        emit=emit,
        approve=approve,
        limits=limits or Limits(max_turns=settings.max_turns),
        context=context,
        checkpoint=workbench.checkpoint,
        tool_choice=tool_choice,
        actions=protocol,
        messages=list(history or []),
    )
