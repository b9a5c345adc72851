"""The ways a call is written in an answer's text, each read from where its marker begins: an echoed
`<tools>` list, `<tool_call>`, Qwen3-Coder's `<function=`, Mistral's `[TOOL_CALLS]`, Llama's
`<|python_tag|>`, a fence and bare JSON; and the call objects in JSON they share (`json_calls`).
parser.py scans the answer and hands each marker to its reader here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.protocols.tool_calls.loose_json import Answer, loads, scan_value, skip

_FENCE_OPEN = re.compile(r"[ \t]*```[ \t]*([\w+.-]*)")
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.M)
_CALL_FENCES = {"", "json", "tool_call", "tool"}
_CALL_KEYS = {"name", "arguments", "parameters", "type", "id"}
_CUT_OFF_HEAD = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|parameters)"\s*:\s*')
_FUNCTION = re.compile(r"<function=([^>\s]+)>")
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>")
_MISTRAL_NAMED = re.compile(r"\s*([\w.-]+)(?:\[CALL_ID\][\w-]*)?\[ARGS\]\s*")
_LLAMA_END = re.compile(r"\s*(?:<\|eom_id\|>|<\|eot_id\|>)")


@dataclass
class Found:
    """A stretch of the answer read as calls (or an echo, or a fence that is not a call)."""

    start: int
    end: int
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments as JSON text)
    remove: bool = True  # False: skipped over but kept in the text (a fence holding code or data)


def echoed_tools(text: Answer, start: int) -> Found:
    """The template's tool list repeated by the model: removed, and nothing in it ever runs."""
    close = text.find("</tools>", start)
    if close >= 0:
        return Found(start, close + len("</tools>"))
    # Unclosed: the echo is the tool definitions that follow the tag; the answer goes on after them.
    end = start + len("<tools>")
    while (i := skip(text, end)) < len(text) and text[i] in "{[":
        scanned = scan_value(text, i)
        if scanned is None or not scanned[1]:
            return Found(start, len(text))  # the echo was cut off: all of it is echo
        try:
            data = loads(text[i : scanned[0]])
        except ValueError:
            break
        if not all(_is_definition(item) for item in (data if isinstance(data, list) else [data])):
            break
        end = scanned[0]
    return Found(start, end)


def _is_definition(data: Any) -> bool:
    """A tool as the template lists it: {"type": "function", "function": {"name", "description",
    "parameters": {schema}}}, or its inner object. Calls have "arguments", or (Llama) "parameters"
    that are values, not a schema."""
    if not isinstance(data, dict):
        return False
    inner = data.get("function")
    tool = inner if isinstance(inner, dict) else data
    schema = tool.get("parameters")
    is_schema = isinstance(schema, dict) and ("properties" in schema or schema.get("type") == "object")
    return "arguments" not in tool and ("description" in tool or is_schema)


def tagged(text: Answer, start: int, known: Collection[str], schemas: Mapping) -> Found | None:
    """`<tool_call>` then JSON call(s) or Qwen3-Coder's `<function=`; the closing tag is optional
    (the answer ends, or the next `<tool_call>` begins). An unknown name is still a call here."""
    i = skip(text, start + len("<tool_call>"))
    fence = _FENCE_OPEN.match(text, i) if text.startswith("```", i) else None
    if text.startswith("<function=", i):
        hit = qwen3_coder(text, i, schemas)
    else:  # JSON, possibly fenced inside the tag
        hit = _json_calls(text, fence.end() if fence else i, known, explicit=True, stop="</tool_call>")
    if hit is None:
        return None
    end = hit.end
    if fence and text.startswith("```", skip(text, end)):
        end = skip(text, end) + 3
    if text.startswith("</tool_call>", skip(text, end)):
        end = skip(text, end) + len("</tool_call>")
    return Found(start, end, hit.calls)


def qwen3_coder(
    text: Answer, start: int, schemas: Mapping, known: Collection[str] | None = None
) -> Found | None:
    """`<function=NAME>` with `<parameter=KEY>` raw values; closing tags optional. Also Llama 3.1's
    `<function=NAME>{json arguments}</function>`. `known` given (no `<tool_call>` around it): only
    known names, as "<function=NAME>" may be prose about the format."""
    calls, end = [], start
    while (match := _FUNCTION.match(text, skip(text, end) if calls else end)) is not None:
        name = match.group(1)
        if known is not None and name not in known:
            break
        body_end = _first(text, match.end(), "</function>", "<function=", "</tool_call>", "<tool_call>")
        body = text[match.end() : body_end]
        if "<parameter=" not in body and body.strip().startswith("{"):
            arguments = _arguments_text(body.strip())
        else:
            properties = (schemas.get(name) or {}).get("properties") or {}
            arguments = json.dumps(
                {key: _qwen3_coder_value(value, properties.get(key)) for key, value in _parameters(body)},
                ensure_ascii=False,
            )
        calls.append((name, arguments))
        end = body_end + len("</function>") if text.startswith("</function>", body_end) else body_end
    return Found(start, end, calls) if calls else None


def _parameters(body: str) -> list[tuple[str, str]]:
    found = []
    pos = 0
    while match := _PARAMETER.search(body, pos):
        value_end = _first(body, match.end(), "</parameter>", "<parameter=")
        value = body[match.end() : value_end]
        # The template writes "<parameter=k>\nVALUE\n</parameter>": one newline each side is layout.
        value = value[1:] if value.startswith("\n") else value
        value = value[:-1] if value.endswith("\n") else value
        found.append((match.group(1), value))
        pos = value_end
    return found


def _qwen3_coder_value(value: str, schema: Mapping[str, Any] | None) -> Any:
    """A parameter's raw text as the tool wants it.

    The template writes strings raw and everything else as JSON, so "42" may be either; only the
    schema can tell. Without one the value stays a string: write_file's content "42" or '{"a": 1}'
    must stay text, and the built-in tools' pydantic models turn "5" and "true" into int and bool.
    With a schema that does not allow a string, a value that parses as the wanted JSON type is used.
    """
    kinds = (schema or {}).get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds} if kinds else set()
    if not kinds or "string" in kinds:
        return value
    stripped = value.strip()
    try:
        parsed = json.loads(stripped.lower() if stripped in ("True", "False") else stripped)
    except (json.JSONDecodeError, RecursionError):
        return value  # the registry tells the model what type was expected
    wanted = {
        "integer": isinstance(parsed, int) and not isinstance(parsed, bool),
        "number": isinstance(parsed, int | float) and not isinstance(parsed, bool),
        "boolean": isinstance(parsed, bool),
        "array": isinstance(parsed, list),
        "object": isinstance(parsed, dict),
        "null": parsed is None,
    }
    return parsed if any(wanted.get(kind) for kind in kinds) else value


def mistral(text: Answer, start: int, known: Collection[str]) -> Found | None:
    """`[TOOL_CALLS]` then a JSON list of calls (v3), or `NAME[ARGS]{...}` (v11+, maybe with
    `[CALL_ID]id` before `[ARGS]`). Each later `[TOOL_CALLS]` is read on its own."""
    i = start + len("[TOOL_CALLS]")
    if (hit := _json_calls(text, i, known, explicit=True)) is not None:
        return Found(start, hit.end, hit.calls)
    match = _MISTRAL_NAMED.match(text, i)
    if match is None or not text.startswith("{", match.end()):
        return None
    scanned = scan_value(text, match.end())
    end = len(text) if scanned is None or not scanned[1] else scanned[0]
    return Found(start, end, [(match.group(1), _arguments_text(text[match.end() : end].rstrip()))])


def llama(text: Answer, start: int, known: Collection[str]) -> Found | None:
    """`<|python_tag|>` then `{"name", "parameters"}` objects separated by `;`. Code after the tag
    (Llama's code interpreter) is not JSON and is left alone."""
    hit = _json_calls(text, start + len("<|python_tag|>"), known, explicit=True)
    if hit is None:
        return None
    end = match.end() if (match := _LLAMA_END.match(text, hit.end)) else hit.end
    return Found(start, end, hit.calls)


def fenced(text: Answer, start: int, known: Collection[str]) -> Found:
    """A fence holding only call JSON is calls; any other fence is skipped whole and kept, so
    nothing in a ```python block (or a ```json block of data) ever runs."""
    opener = _FENCE_OPEN.match(text, start)
    assert opener is not None  # _START matched "```" here
    if opener.group(1).lower() in _CALL_FENCES:
        hit = _json_calls(text, opener.end(), known, explicit=False)
        if hit is not None:
            after = skip(text, hit.end)
            if text.startswith("```", after):
                return Found(start, after + 3, hit.calls)
            if after >= len(text):  # the answer ended inside the fence
                return Found(start, len(text), hit.calls)
    line_end = text.find("\n", opener.end())
    close = _FENCE_CLOSE.search(text, line_end) if line_end >= 0 else None
    return Found(start, close.end() if close else len(text), remove=False)


def bare(text: Answer, start: int, known: Collection[str]) -> Found | None:
    """JSON starting a line: calls only when the line holds nothing else after them, so a sentence
    that begins with an example object is not run."""
    hit = _json_calls(text, start, known, explicit=False)
    if hit is None:
        return None
    line_end = text.find("\n", hit.end)
    rest = text[hit.end : len(text) if line_end < 0 else line_end]
    return hit if not rest.strip(" \t;,") else None


# --- call objects in JSON -----------------------------------------------------------------------------


def _json_calls(
    text: Answer, i: int, known: Collection[str], *, explicit: bool, stop: str = ""
) -> Found | None:
    """Call objects (or lists of them) from text[i], separated by space, ',' or ';'. None unless the
    first value is a call. `explicit`: inside a call marker, so unknown names count too."""
    calls: list[tuple[str, str]] = []
    end = i
    while (j := skip(text, end, ",;" if calls else "")) < len(text) and text[j] in "{[":
        scanned = scan_value(text, j)
        if scanned is None:
            break
        close, complete = scanned
        if not complete:  # runs to the end: cut off, or its last brace forgotten
            if (call := _cut_off_call(text, j, known, explicit, stop)) is not None:
                calls.append(call[0])
                end = call[1]
            break
        try:
            data = loads(text[j:close])
        except ValueError:
            break
        items = data if isinstance(data, list) else [data]
        got = [_call_of(item, known, explicit) for item in items]
        if not got or None in got:
            break
        calls.extend(call for call in got if call is not None)
        end = close
    return Found(i, end, calls) if calls else None


def _call_of(data: Any, known: Collection[str], explicit: bool) -> tuple[str, str] | None:
    """(name, arguments) when data is a call object, else None: data that merely has a "name"."""
    if not isinstance(data, dict):
        return None
    body = data
    if "name" not in data and isinstance(data.get("function"), dict):
        if not explicit and set(data) - {"function", "type", "id"}:
            return None
        body = data["function"]
    name = body.get("name")
    if not isinstance(name, str) or not name or "description" in body:  # a tool definition, echoed
        return None
    if not explicit and (name not in known or set(body) - _CALL_KEYS):
        return None
    return name, _arguments_text(body.get("arguments", body.get("parameters")))


def _cut_off_call(
    text: Answer, i: int, known: Collection[str], explicit: bool, stop: str
) -> tuple[tuple[str, str], int] | None:
    """A call object that never closes: its arguments when they close (the model forgot the outer
    brace), else the raw rest, which the loop reports as invalid JSON, cut off."""
    head = _CUT_OFF_HEAD.match(text, i)
    if head is None or (not explicit and head.group(1) not in known):
        return None
    args_start = head.end()
    scanned = scan_value(text, args_start) if text.startswith(("{", "["), args_start) else None
    if scanned is not None and scanned[1]:
        end = scanned[0]
    else:  # up to the closing tag, when there is one: the rest is the arguments as written
        at = text.find(stop, args_start) if stop else -1
        end = at if at >= 0 else len(text)
    return (head.group(1), _arguments_text(text[args_start:end].rstrip())), end


def _arguments_text(args: Any) -> str:
    """Arguments as JSON object text; text that is no object is kept for the registry to report."""
    if args is None:
        return "{}"
    if isinstance(args, str):
        try:
            parsed = loads(args)
        except ValueError:
            return args
        return json.dumps(parsed, ensure_ascii=False) if isinstance(parsed, dict) else args
    return json.dumps(args, ensure_ascii=False)


def _first(text: str, start: int, *needles: str) -> int:
    """Where the first of the needles occurs from start on; the end of the text when none does."""
    found = [at for needle in needles if (at := text.find(needle, start)) >= 0]
    return min(found, default=len(text))
