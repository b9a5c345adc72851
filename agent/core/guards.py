"""Guards that end a task going round in circles, so that a small model cannot burn the time limit.

- The same failing tool call three times in a row ends the task.
- At temperature 0 a small model answers the same context with the same text, forever: after an
  answer it already gave in this task (check rounds included) the next request is sampled warmer, and
  a third repeat in a row ends the task.
- Warmer, it words the same answer a little differently each time: three answers in a row of which
  nothing could be applied (each refused: a file sent back unchanged, the instructions' example)
  end the task too. A fresh start sampled at 0.7 sent report.py back as it was nine times in a row,
  each a few tokens apart, for 100 of the task's 300 s (csv-totals).
"""

from __future__ import annotations

from typing import Any

from agent.core.llm import ToolCall
from tools.base import ToolResult

REPEAT_LIMIT = 3
RETRY_TEMPERATURE = 0.7
# llama-server's default min_p (0.05) keeps only the top token where the model is sure of itself, so
# warmer alone changed nothing: the 1.5B gave the same 60-token answer three times at 0.7.
WARMER = {"temperature": RETRY_TEMPERATURE, "min_p": 0.0}


class StopTask(Exception):
    """Ends the task with an outcome; raised by limits and by these guards."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class RepeatGuard:
    def __init__(self) -> None:
        self.failure, self.failures = "", 0
        self.last_answer, self.same_answers = "", 0
        self.refused = 0  # answers in a row of which nothing could be applied
        self.seen: set[str] = set()  # every answer of this task
        self.repeats = 0  # answers in a row that each repeat an earlier one (not only the last)
        self.nudge: dict[str, Any] = {}  # request overrides for the next request

    def warm(self) -> None:
        """Sample the next request warmer: at temperature 0 the same context gets the same answer."""
        self.nudge = dict(WARMER)

    def answer(self, content: str, refused: bool | None = False) -> None:
        """`refused`: nothing in the answer could be applied (True), something was (False), or it was
        neither (None: a plan asked for, or "done", which leave the count as it is)."""
        if refused is not None:
            self.refused = self.refused + 1 if refused else 0
        same = bool(content.strip()) and content == self.last_answer
        self.same_answers = self.same_answers + 1 if same else 0
        self.last_answer = content
        given_before = bool(content.strip()) and content in self.seen
        self.seen.add(content)
        self.repeats = self.repeats + 1 if given_before else 0
        self.nudge = dict(WARMER) if given_before else {}
        if self.same_answers >= REPEAT_LIMIT - 1:
            raise StopTask(
                "repeated", f"the model gave the same answer {REPEAT_LIMIT} times; stopping this task"
            )
        # Two refused answers in turn, A B A A B B A...: no answer three times in a row, and no call
        # failing three times in a row either; an attempt at a real-repository task spent 13 turns and 440 s so.
        if self.repeats >= REPEAT_LIMIT:
            raise StopTask(
                "repeated",
                f"the model's last {REPEAT_LIMIT} answers each repeated an earlier one; stopping this task",
            )
        if self.refused >= REPEAT_LIMIT:
            raise StopTask(
                "repeated",
                f"none of the model's last {REPEAT_LIMIT} answers could be applied; stopping this task",
            )

    def result(self, call: ToolCall, result: ToolResult) -> None:
        key = f"{call.name}\0{call.arguments}"
        if result.ok:
            self.failure, self.failures = "", 0
            return
        self.failures = self.failures + 1 if self.failure == key else 1
        self.failure = key
        if self.failures >= REPEAT_LIMIT:
            raise StopTask(
                "repeated",
                f"the model repeated the same failing {call.name} call {self.failures} times; stopping this task",
            )
