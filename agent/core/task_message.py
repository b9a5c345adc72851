"""The task message: a prompt as the model gets it first, with the environment note (the folder, git's
state) and, where the action protocol shows the repository, its files cut to what the context has room
for once the cached prefix and the task are in, the protocol's reminder last."""

from __future__ import annotations

from agent.core.context import CHARS_PER_TOKEN, ContextWindow
from agent.core.prompt import user_message
from agent.core.protocol import ActionProtocol
from agent.core.repomap import RepositoryView, repository_view
from agent.core.stoppable import check_wanted, off_loop
from agent.core.workbench import Workbench
from tools.files import TASK_TEXT
from tools.outline import fence_for
from tools.shown import mark_shown_definitions, mark_shown_whole, mark_task_focus


def task_message(
    workbench: Workbench,
    task: str,
    protocol: ActionProtocol | None = None,
    context: ContextWindow | None = None,
    note: str = "",
    prefix: str = "",
) -> str:
    """The task with the environment note; where the protocol shows the repository, its files too,
    cut to what the context has room for once the prompt prefix and the task are in, and the
    protocol's reminder last. `note`: said after the task (a fresh start's, agent/core/checks.py).
    `prefix`: the system prompt the agent sends (`Agent.system_prompt`), which the files leave room for."""
    return _made(
        workbench, task, protocol, note, *_searched(workbench, task, protocol, context, note, prefix)
    )


async def task_message_off_loop(
    workbench: Workbench,
    task: str,
    protocol: ActionProtocol | None = None,
    context: ContextWindow | None = None,
    note: str = "",
    prefix: str = "",
) -> str:
    """`task_message` as a session sends it: git and the repository read in a thread
    (agent/core/stoppable.py), so that a signal or a cancel is heard while a large one is searched,
    and the search stops then. State changes only once the search is done: a cancelled one leaves no
    file marked as shown and no plan awaited."""
    searched = await off_loop(_searched, workbench, task, protocol, context, note, prefix)
    return _made(workbench, task, protocol, note, *searched)


def _searched(
    workbench: Workbench,
    task: str,
    protocol: ActionProtocol | None,
    context: ContextWindow | None,
    note: str,
    prefix: str,
) -> tuple[str | None, RepositoryView | None]:
    """git's state and the repository view (None where the protocol shows none), changing nothing."""
    view = None
    if protocol is not None and protocol.shows_repository:
        budget = files_budget(task + note, context, len(prefix))
        view = repository_view(workbench.workspace, task, budget, fence_for, recent_files(workbench))
        check_wanted()
    return git_summary(workbench.repo), view


def _made(
    workbench: Workbench,
    task: str,
    protocol: ActionProtocol | None,
    note: str,
    summary: str | None,
    view: RepositoryView | None,
) -> str:
    """The message; the task and what it shows whole recorded for the tools (tools/shown.py)."""
    workbench.tool_state[TASK_TEXT] = task
    if protocol is None or view is None:
        return user_message(task, workbench.workspace, summary, note=note)
    for rel in view.whole:
        mark_shown_whole(workbench.tool_state, workbench.workspace / rel)
    for rel, names in view.definitions.items():
        mark_shown_definitions(workbench.tool_state, workbench.workspace / rel, names)
        mark_task_focus(workbench.tool_state, workbench.workspace / rel, names)
    focus = next(
        ((rel, names[0]) for rel, names in view.definitions.items() if names and rel in view.partly), None
    )
    reminder = protocol.remind(view.partly, focus)
    return user_message(task, workbench.workspace, summary, view.text, reminder, note)


def files_budget(task: str, context: ContextWindow | None, prompt_chars: int) -> int:
    """Characters for the repository in the task message: 40% of the budget, and never more than
    what is left once the prefix (system prompt and instructions: `prompt_chars`, tools) and the
    task are counted."""
    budget = context.budget if context else 8192
    prefix = (context.tools_chars if context else 0) + prompt_chars
    left = budget * CHARS_PER_TOKEN - prefix - len(task) - 2000  # the note, the reminder, markup
    return max(1000, int(min(budget * 0.4 * CHARS_PER_TOKEN, left * 0.8)))


def recent_files(workbench: Workbench, commits: int = 20) -> list[str]:
    """Files that the last commits touched: what is being worked on ranks higher in the map."""
    if workbench.repo is None:
        return []
    try:
        out = workbench.repo.git.log(f"-{commits}", "--name-only", "--format=", "--no-renames")
    except Exception:  # no commits yet, or git refusing: the map goes without
        return []
    return list(dict.fromkeys(line for line in out.splitlines() if line))


def git_summary(repo) -> str | None:
    if repo is None:
        return None
    try:
        branch = repo.active_branch.name if not repo.head.is_detached else "detached HEAD"
    except TypeError:
        branch = "(no commits yet)"
    changed = len(repo.git.status("--porcelain").splitlines())
    return f"branch {branch}, {changed} changed file{'s' if changed != 1 else ''}"
