"""The `tools` protocol: native tool calls (JSON), with the calls a local model writes as text taken too
(`parser`); results go back as `tool` messages. Right for the large models people run on their GPUs."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from agent.core.check_output import CheckFailure
from agent.core.history import assistant_message
from agent.core.llm import Completion, ToolCall
from agent.core.protocol import ReadAnswer
from agent.protocols.base import stopped_at_limit
from agent.protocols.tool_calls import NAME
from agent.protocols.tool_calls.parser import calls_from_text
from agent.protocols.tool_calls.prompt import SYSTEM_PROMPT
from tools.base import ToolContext, ToolRegistry, ToolResult, parameters_of, with_followup

FENCED_CODE = re.compile(r"^```[ \t]*(\w[\w+-]*)?[ \t]*$", re.M)
MAX_TOOL_CORRECTIONS = 2  # per task: then prose is taken as the answer (mini-swe-agent's format error)


class ToolCallActions:
    """Native tool calls; calls written as text are taken too; code in prose is never run."""

    mode = NAME
    system_prompt = SYSTEM_PROMPT
    shows_repository = False  # the model reads what it needs with read_file
    native_calls = True
    can_plan = False  # native tool calls have no plan step
    plan_first = False

    def __init__(self, workspace: Path | None = None) -> None:
        self.corrections = 0

    def remind(self, partly: list[str], focus: tuple[str, str] | None = None) -> str:
        return ""

    def files_written(self, message: dict[str, Any]) -> dict[str, str]:
        written = {}
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") == "write_file":
                with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
                    args = json.loads(function.get("arguments") or "{}")
                    written[args["path"]] = str(args["content"])
        return written

    def request_overrides(self) -> dict[str, Any]:
        return {}

    def answer_prefix(self) -> str:
        return ""  # a tool call is the API's to begin

    def new_task(self, task: str) -> None:
        self.corrections = 0

    def request_tools(self, tools: ToolRegistry) -> list[dict[str, Any]]:
        return tools.schemas()

    def after_failed_check(self, failure: CheckFailure, ctx: ToolContext) -> str:
        return failure.message  # a model that calls tools reads the files again itself

    def stream_stop(self, text: str, ctx: ToolContext) -> tuple[str, str] | None:
        return None  # a write_file call's arguments come whole, and its guard refuses it then

    def read(self, completion: Completion, tools: ToolRegistry) -> ReadAnswer:
        calls, content = completion.tool_calls, completion.content
        if not calls and content:
            schemas = {t.name: parameters_of(t) for t in tools.tools.values()}
            cut_off = not completion.complete or stopped_at_limit(
                completion
            )  # a call cut half-way must not run
            calls, content = calls_from_text(content, set(tools.names()), schemas=schemas, cut_off=cut_off)
        problems = []
        if not calls and self._code_without_call(content) and self.corrections < MAX_TOOL_CORRECTIONS:
            # The model wrote code for the user to paste instead of acting: tell it once or twice.
            self.corrections += 1
            problems.append(
                "Your answer holds code in fences, but nothing was written or run: code in prose is never "
                "executed. To change a file, call write_file (whole content) or edit_file; to run a "
                "command, call bash. Call the tool now. Answer without a tool call only when the task "
                "is done."
            )
        notice = ""
        if problems and self.corrections == MAX_TOOL_CORRECTIONS:
            notice = (
                "the model keeps writing code instead of calling tools; small models do better with "
                'edit blocks: --actions blocks (or actions = "blocks" in the profile)'
            )
        return ReadAnswer(calls, content, problems, notice)

    @staticmethod
    def _code_without_call(content: str) -> bool:
        return any(m.group(1) not in (None, "text", "markdown", "md") for m in FENCED_CODE.finditer(content))

    def history_message(self, answer: ReadAnswer) -> dict[str, Any]:
        return assistant_message(answer.content, answer.calls)

    def results(self, answer: ReadAnswer, results: list[tuple[ToolCall, ToolResult]]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for call, result in results:
            if call.proposed_by and messages:  # no call of the model's to answer: told in the one before
                messages[-1]["content"] = with_followup(messages[-1]["content"], call.name, result.output)
            else:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result.output})
        if answer.problems:
            messages.append({"role": "user", "content": "\n".join(answer.problems)})
        return messages


PROTOCOL = ToolCallActions
