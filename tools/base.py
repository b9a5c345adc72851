"""The tool protocol, its result, the registry, and JSON schemas from pydantic argument models.

A tool is any object with a `name`, a `description`, an `Args` pydantic model and an async `run`.
Tools return data (`ToolResult`) instead of raising: whatever went wrong goes back to the model as
text it can act on. `ToolError` is the shorthand for that inside a tool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from tools.workspace import Workspace


class ToolError(Exception):
    """A failure the model can fix; its message is written for the model."""


@dataclass(frozen=True)
class ProposedCall:
    """A call a tool's result asks the loop to run next, as the model's own would run: asked for,
    shown and recorded like one (the rest of a rename an edit began: tools/edit_lint.py)."""

    name: str
    arguments: dict[str, Any]


@dataclass
class ToolResult:
    ok: bool
    output: str  # what the model reads
    display: dict[str, Any] = field(default_factory=dict)  # for front ends: diff, exit code, path...
    followups: list[ProposedCall] = field(default_factory=list)  # run by the loop after this call


def with_followup(output: str, name: str, followup_output: str) -> str:
    """The result of a call followed by the result of the call it proposed, as one text: where results
    answer the model's calls one by one (native tool calls), a call the model did not make has no
    message of its own, so it is told inside the one of the call that proposed it."""
    return f"{output}\n\n{name}, run next: {followup_output}"


TASK_TEXT = "task.text"  # ToolContext.state key: the task as the user gave it (front ends set it)


@dataclass
class ToolContext:
    """What a tool may use: the workspace boundary and a place for per-session tool state."""

    workspace: Workspace
    state: dict[str, Any] = field(default_factory=dict)
    sandbox: Any = None  # tools.sandbox.Sandbox where commands may run sandboxed
    # Characters of a tool's output that reach the model (the context window cuts longer ones); None:
    # no cut. A file counts as shown whole only if its text fits (tools/shown.py:SHOWN_WHOLE).
    shown_limit: int | None = None
    lint: bool = True  # each edited file is checked at once, and new problems go back with the edit
    lint_command: str | None = None  # the project's own lint, run on each edited file (tools/edit_lint.py)


@runtime_checkable
class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]]
    # "read" never changes anything; "edit" changes files in the workspace; "exec" runs commands.
    effect: ClassVar[str]

    async def run(self, args: Any, ctx: ToolContext) -> ToolResult: ...

    def summary(self, args: Any) -> str: ...


# Keywords whose value maps names to schemas: their keys are names (a property may be called `title`).
_NAMED_SCHEMAS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
# Keywords whose value is data, not a schema: left exactly as the server wrote it.
_DATA = {"default", "const", "enum", "examples"}


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A compact JSON schema: no `title` annotations, `X | None = None` shown as an optional X, the
    tool's own description instead of the schema's. Small local models and llama.cpp's grammar both
    do better with plain schemas. Only keywords are touched: a property may be called `title` or
    `default` (MCP tools have such), and a default value may be an object with a `title`."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "title":
                continue
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                out[key] = value if key in _DATA else walk(value)
        options = out.get("anyOf")
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            other = next(o for o in options if o != {"type": "null"})
            out = {**{k: v for k, v in out.items() if k != "anyOf"}, **other}
            if out.get("default", 0) is None:
                out.pop("default")
        return out

    cleaned = walk(schema)
    cleaned.pop("description", None)
    return cleaned


def parameters_of(tool: Tool) -> dict[str, Any]:
    """A tool's JSON schema: from its pydantic Args, or given as `parameters` (MCP tools)."""
    args = getattr(tool, "Args", None)
    return clean_schema(args.model_json_schema()) if args is not None else tool.parameters


def tool_schema(tool: Tool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters_of(tool)},
    }


@dataclass
class ParsedCall:
    tool: Tool | None
    args: BaseModel | None
    raw_arguments: Any  # the parsed JSON, or the raw text when it did not parse
    error: str | None = None


class ToolRegistry:
    """Tools by name, in a fixed order: the tool list is part of the cached prompt prefix."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name}")
            self.tools[tool.name] = tool

    def schemas(self) -> list[dict[str, Any]]:
        return [tool_schema(tool) for tool in self.tools.values()]

    def names(self) -> list[str]:
        return list(self.tools)

    def parse(self, name: str, arguments: str | dict | None) -> ParsedCall:
        """Validate a call; every problem comes back as an error message naming the expected schema."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools)
            return ParsedCall(None, None, arguments, f"Unknown tool '{name}'. Available tools: {known}.")
        if isinstance(arguments, dict):
            data: Any = arguments
        else:
            text = (arguments or "").strip() or "{}"
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                return ParsedCall(
                    tool,
                    None,
                    arguments,
                    f"The arguments of {name} are not valid JSON ({exc.msg} at position {exc.pos}; "
                    f"they may have been cut off). Send a complete JSON object for {self._schema(tool)}",
                )
        if not isinstance(data, dict):
            return ParsedCall(
                tool, None, data, f"The arguments of {name} must be a JSON object for {self._schema(tool)}"
            )
        if getattr(tool, "Args", None) is None:
            return self._parse_by_schema(tool, data)
        try:
            return ParsedCall(tool, tool.Args.model_validate(data), data)
        except ValidationError as exc:
            problems = "; ".join(
                f"'{'.'.join(str(p) for p in e['loc']) or '(object)'}': {e['msg']}" for e in exc.errors()
            )
            return ParsedCall(
                tool, None, data, f"Invalid arguments for {name}: {problems}. Expected: {self._schema(tool)}"
            )

    def _parse_by_schema(self, tool: Tool, data: dict) -> ParsedCall:
        import jsonschema

        try:
            jsonschema.validate(data, tool.parameters)
        except jsonschema.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path) or "(object)"
            return ParsedCall(
                tool,
                None,
                data,
                f"Invalid arguments for {tool.name}: '{where}': {exc.message}. Expected: {self._schema(tool)}",
            )
        except jsonschema.SchemaError:
            pass  # the server's schema is broken; let the server judge the call
        return ParsedCall(tool, data, data)

    @staticmethod
    def _schema(tool: Tool) -> str:
        return signature(tool)


def signature(tool: Tool) -> str:
    """A tool's arguments in one short line, 'bash(command: string, timeout?: integer)': error messages
    repeat it, and every token of them is re-read by the model on each later turn."""
    schema = parameters_of(tool)
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or "any"
        parts.append(f"{name}{'' if name in required else '?'}: {kind}")
    return f"{tool.name}({', '.join(parts)})"
