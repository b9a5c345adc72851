"""The `blocks` protocol: the model writes text it saw in training (a path line and the whole file in a
fence, SEARCH/REPLACE blocks, a fenced `bash` block), read by `parser`; results go back as one user
message that reads like a terminal. A 1.5B model solved 4 of 5 small tasks this way in Aider and none
with JSON tool calls (FACTS.md).

`BlockActions` is what the loop holds; it hands each part its own job: the plan step (`plan`), what is
fixed up of what the model wrote (`repairs`), the message back (`feedback`), the early end of an answer
that would be refused (`stream_stop`), over the files and the task's progress they share (`project`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.core.check_output import CheckFailure
from agent.core.llm import Completion, ToolCall
from agent.core.protocol import ReadAnswer
from agent.protocols.base import stopped_at_limit
from agent.protocols.edit_blocks import NAME
from agent.protocols.edit_blocks.feedback import Feedback
from agent.protocols.edit_blocks.parser import parse_answer, to_tool_calls
from agent.protocols.edit_blocks.plan import PlanStep
from agent.protocols.edit_blocks.project import ProjectFiles, TaskProgress
from agent.protocols.edit_blocks.prompt import (
    BLOCKS_REMINDER,
    FAILED_DEFINITION_REMINDER,
    PLAN_FIX,
    PLAN_TASK,
    SEARCH_REPLACE_REMINDER,
    SYSTEM_PROMPT_BLOCKS,
    partly_reminder,
)
from agent.protocols.edit_blocks.repairs import EXAMPLE_COPIED, AnswerRepairs, unmarked
from agent.protocols.edit_blocks.stream_stop import StreamStop
from tools.base import ToolContext, ToolRegistry, ToolResult
from tools.shown import mark_shown_definitions
from tools.workspace import Workspace


class BlockActions:
    """Edit blocks, whole files and bash fences written as text; results come back as one user message."""

    mode = NAME
    system_prompt = SYSTEM_PROMPT_BLOCKS
    shows_repository = True  # a small model acts on what it is shown; it rarely asks to read
    native_calls = False  # its calls are read from the text the model wrote
    can_plan = True

    def __init__(self, workspace: Path) -> None:
        self.workspace = Workspace(workspace)
        files = ProjectFiles(self.workspace)
        self.progress = TaskProgress()
        self.repairs = AnswerRepairs(files, self.progress)
        self.plan = PlanStep(self.progress, self.repairs)
        self.feedback = Feedback(files, self.progress)
        self.stream = StreamStop(self.workspace, self.repairs)
        self._prefix = ""  # how the next answer begins (answer_prefix), set by the last one read

    # Off by default (the `plan_first` setting, or a profile's): on the small suite three runs with it
    # solved 4, 5 and 4 of 14, against 2-4 without (docs/benchmarks.md, "A plan before the blocks").
    @property
    def plan_first(self) -> bool:
        return self.plan.enabled

    @plan_first.setter
    def plan_first(self, on: bool) -> None:
        self.plan.enabled = on

    def remind(self, partly: list[str], focus: tuple[str, str] | None = None) -> str:
        """With the plan step on, ask for a plan (PLAN_TASK) and await it, the blocks to be asked for
        once it is given; else ask for the blocks at once."""
        self.progress.partly, self.progress.focus = list(partly), focus
        return self.plan.ask(PLAN_TASK, partly_reminder(partly, focus) if partly else BLOCKS_REMINDER)

    def files_written(self, message: dict[str, Any]) -> dict[str, str]:
        content = message.get("content")
        if not isinstance(content, str) or "```" not in content:
            return {}
        return {a.path: a.content for a in parse_answer(content).actions if a.kind == "write" and a.path}

    def new_task(self, task: str) -> None:
        self.progress.new_task(task)

    def after_failed_check(self, failure: CheckFailure, ctx: ToolContext) -> str:
        """The files, the check's failure, and the format again: after a failed check small models
        tend to describe a fix instead of writing it. The 1.5B copies whole files whatever it is asked
        (asked for a SEARCH/REPLACE at a shown line, it wrote those lines back as the whole file), so
        the files the output points into are shown whole with the error written on its line, as a
        comment (taken off again from what the model writes); a located file too long to show whole
        gets its lines in the failure and a SEARCH/REPLACE asked for. The failure comes last, next to
        the instruction: the 1.5B rewrites the last file it was shown."""
        self.progress.check_failed = True
        shown, too_long, failed_in = self.feedback.check_failure(failure)
        if failed_in is not None:
            mark_shown_definitions(ctx.state, self.workspace.resolve(failed_in[0]), [failed_in[1]])
            reminder = FAILED_DEFINITION_REMINDER.format(file=failed_in[0], name=failed_in[1])
        else:
            reminder = SEARCH_REPLACE_REMINDER if too_long else BLOCKS_REMINDER
        ask = self.plan.ask(PLAN_FIX, reminder)
        return "\n\n".join([*shown, ask])

    def request_tools(self, tools: ToolRegistry) -> list[dict[str, Any]]:
        return []  # no schemas: the chat template then says nothing of JSON tool calls

    def request_overrides(self) -> dict[str, Any]:
        return self.plan.request_overrides()

    def answer_prefix(self) -> str:
        prefix, self._prefix = self._prefix, ""
        return "" if self.plan.awaited else prefix

    def stream_stop(self, text: str, ctx: ToolContext) -> tuple[str, str] | None:
        return self.stream.watch(text, ctx)

    def read(self, completion: Completion, tools: ToolRegistry) -> ReadAnswer:
        self.stream.new_answer()
        parsed = parse_answer(
            completion.content, cut_off=not completion.complete or stopped_at_limit(completion)
        )
        if not self.plan.awaited:  # in a plan, code without a path is a sketch
            parsed = self.repairs.adopt_pathless(parsed)
        written = bool(parsed.actions)
        parsed = self.repairs.without_example(parsed)
        # The format's example as the whole answer: the next one begins as the definition found first
        # does, for the model to go on from. Told in words, the 1.5B wrote the example again and again
        # until the repeat guard ended the line (8 of 91 stuck lines of one GPU run, f9cf9d4); given its
        # path line, the fence and the signature, it wrote the method out (cachetools-lrucache-setitem
        # on 2 cores).
        self._prefix = self.feedback.focus_opening() if written and not parsed.actions else ""
        # A whole file written back unchanged is the model restating its work, not a change to make:
        # an answer made only of those ends the task like a plain "done".
        actions = [unmarked(self.repairs.known_path(a)) for a in parsed.actions]
        unchanged = [a for a in actions if self.repairs.unchanged(a)]
        actions = [a for a in actions if a not in unchanged]
        if (step := self.plan.take(parsed, actions, completion)) is not None:
            return step
        problems = self.repairs.pathless_problems(parsed.problems, completion.content)
        if unchanged and not actions and self.progress.changed and not self.progress.failed:
            # The change made, given again beside the format's example: the work told, not a new try.
            problems = [p for p in problems if EXAMPLE_COPIED not in p]
        problems += self.feedback.copied_back(unchanged, acting=bool(actions))
        return ReadAnswer(to_tool_calls(actions), completion.content, problems)

    def history_message(self, answer: ReadAnswer) -> dict[str, Any]:
        # Exactly what the model wrote: the re-rendered prompt then matches the server's cache.
        return {"role": "assistant", "content": answer.content}

    def results(self, answer: ReadAnswer, results: list[tuple[ToolCall, ToolResult]]) -> list[dict[str, Any]]:
        if answer.followup:  # a plan given: the blocks asked for
            return [{"role": "user", "content": answer.followup}]
        self.progress.record(results)
        return [{"role": "user", "content": self.feedback.results(answer, results)}]


PROTOCOL = BlockActions
