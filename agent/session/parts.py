"""The core's parts a front end names, handed on by the session layer: a front end imports the session
layer and the ground, never agent.core (tests/test_layers.py). The loop's types (a session's `Agent`,
its `Limits`, a task's `Outcome`, the `Approver` a front end answers with), the workbench and its
changes in lines, a check's run, the task message; and, for the measuring commands, which send their
own requests, the model client and what a recorded history needs to be sent again."""

from __future__ import annotations

from agent.core.checks import run_check
from agent.core.history import history_arguments
from agent.core.llm import Completion, ModelClient
from agent.core.loop import Agent, Approver, Limits, Outcome
from agent.core.task_message import task_message
from agent.core.workbench import Workbench, changes_lines

__all__ = [
    "Agent",
    "Approver",
    "Completion",
    "Limits",
    "ModelClient",
    "Outcome",
    "Workbench",
    "changes_lines",
    "history_arguments",
    "run_check",
    "task_message",
]
