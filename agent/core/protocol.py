"""The interface an action protocol implements: what the loop asks of it (read an answer, render the
results, what to send and what to show) and an answer read. The core names no protocol: the concrete
ones live in agent/protocols/ (one folder each), and the session layer builds the one a session uses
(agent/session/build_agent.py) and hands it to the loop ready-built.

Every protocol turns an answer into the same `ToolCall`s, which the loop runs through the same
permissions, checkpoints and events. They differ only in what is sent (tool schemas or none), how the
answer is read, and how results go back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.core.check_output import CheckFailure
from agent.core.llm import Completion, ToolCall
from tools.base import ToolContext, ToolRegistry, ToolResult


@dataclass
class ReadAnswer:
    """One answer, read: the calls to run, the text kept in the history, what could not be taken."""

    calls: list[ToolCall]
    content: str
    problems: list[str] = field(default_factory=list)
    notice: str = ""  # for the user, not the model
    # The protocol's next message when this answer is a step of its own rather than the end of the
    # task: a plan asked for before any block (agent/protocols/edit_blocks/protocol.py).
    followup: str = ""


class ActionProtocol(Protocol):
    mode: str  # its name, as a profile, a task file or `--actions` gives it (agent/protocols/registry.py)
    system_prompt: str  # the protocol's part of the stable prefix (agent/core/prompt.py adds the project's)
    shows_repository: bool  # the task message carries the repository's files (agent/core/repomap.py)
    native_calls: bool  # its calls arrive as the API's tool calls, kept in the assistant message
    can_plan: bool  # the protocol has a plan step (`plan_first` then turns it on)
    plan_first: bool  # ask for a plan before the actions, where the protocol has such a step

    def remind(self, partly: list[str], focus: tuple[str, str] | None = None) -> str:
        """Remind the model how to act, last in the task message, next to where it starts writing: the
        words to say ('' for none). It sets what the protocol reads next: a protocol whose plan step is
        on asks for the plan here, and reads the next answer as that plan. `partly`: the files the task
        names that were too long to show whole. `focus`: (file, `Class.name`) of the definition the
        message showed first as what the task is about, if any."""
        ...

    def files_written(self, message: dict[str, Any]) -> dict[str, str]:
        """{path: content} of the whole files a recorded message of this protocol wrote (a resumed
        session may rewrite those, as the session before it could)."""
        ...

    def request_tools(self, tools: ToolRegistry) -> list[dict[str, Any]]: ...

    def request_overrides(self) -> dict[str, Any]:
        """What the next request needs of its own (a plan's token cap); {} for nothing."""
        ...

    def answer_prefix(self) -> str:
        """How the next answer must begin, written for the model, which continues it ('' for none)."""
        ...

    def read(self, completion: Completion, tools: ToolRegistry) -> ReadAnswer: ...

    def stream_stop(self, text: str, ctx: ToolContext) -> tuple[str, str] | None:
        """While the answer streams: (the text to keep, why) to end it now, else None."""
        ...

    def history_message(self, answer: ReadAnswer) -> dict[str, Any]: ...

    def results(
        self, answer: ReadAnswer, results: list[tuple[ToolCall, ToolResult]]
    ) -> list[dict[str, Any]]: ...

    def new_task(self, task: str) -> None:
        """A new task begins (not a check round of the same one): `task` as the model was given it."""
        ...

    def after_failed_check(self, failure: CheckFailure, ctx: ToolContext) -> str:
        """The message after a failed check; what it shows of the files is recorded in `ctx` as shown
        (tools/shown.py), so that the model may write it."""
        ...
