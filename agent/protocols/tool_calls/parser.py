"""Tool calls as local models really write them.

Native `tool_calls` come first. When there are none, calls written as text are taken as a fallback,
because small local models often ignore the server's tool-call parsing (FACTS.md: the Qwen2.5-Coder
1.5B writes fenced or bare JSON, sometimes after echoing its template's `<tools>` list). Accepted:

- `<tool_call>{...}</tool_call>` (Hermes/Qwen2.5), also without its closing tag;
- Qwen3-Coder's `<function=NAME><parameter=K>V</parameter></function>`, bare or inside `<tool_call>`;
- Mistral's `[TOOL_CALLS][{...}]` and the newer `[TOOL_CALLS]NAME[ARGS]{...}`;
- Llama 3's `<|python_tag|>{"name": ..., "parameters": ...}`, several separated by `;`;
- a JSON call object, or a list of them, in a ```json / ```tool_call / ```tool / unlabelled fence,
  or bare, starting a line (the whole answer is the usual case);
- in all of them JSON as small models write it: Python triple-quoted strings (kept verbatim, they
  hold the file's code), single quotes, trailing commas, raw newlines, True/False/None.

Call shapes: `{"name", "arguments" | "parameters"}` and `{"function": {"name", "arguments"}}`.
What is never run: an echoed `<tools>...</tools>` block (removed from the text, with all it holds),
JSON inside a sentence, in a ```python (or any other language's) fence, or JSON that is not a call.
In fences and bare JSON a call must name a known tool, or it is data; inside the explicit markers
(`<tool_call>`, `[TOOL_CALLS]`, `<|python_tag|>`) an unknown name is still a call, so the loop answers
"Unknown tool" and the model can correct itself; a `<function=` outside `<tool_call>` needs a known one.

Arguments that are not a valid JSON object (often cut off at max_tokens) never go back into the
history as written: llama-server answers every later request with HTTP 500 when they do (FACTS.md).

One cohesive thing at ~570 lines: a single left-to-right scan whose recognisers share its cursor and
its JSON reader; cutting it would split one pass across files.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.core.llm import ToolCall

# Where a written call, or an echoed tool list, may begin. Literal alternatives searched once, left to
# right, so long answers cost one pass; a match inside a call already read is never looked at.
_START = re.compile(
    r"<tools>|<tool_call>|<function=|\[TOOL_CALLS\]|<\|python_tag\|>|^[ \t]*(?:```|[{\[])", re.M
)
_FENCE_OPEN = re.compile(r"[ \t]*```[ \t]*([\w+.-]*)")
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.M)
_CALL_FENCES = {"", "json", "tool_call", "tool"}
_CALL_KEYS = {"name", "arguments", "parameters", "type", "id"}
# A Python triple-quoted value ends at the quotes that JSON goes on after (',', '}' or ']'): quotes
# that open or close a docstring inside the code are followed by more code.
_TRIPLE_END = {q: re.compile(q * 3 + r"(?=\s*(?:[,}\]]|$))") for q in "\"'"}
_STRING_STOP = {'"': re.compile(r'[\\"]'), "'": re.compile(r"[\\']")}
_ESCAPE = re.compile(r'\\(.)|"', re.S)
_WORD = re.compile(r"[^\W\d]\w*")  # a word of any script: "[À]" is prose, not a crash
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
_CUT_OFF_HEAD = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|parameters)"\s*:\s*')
_FUNCTION = re.compile(r"<function=([^>\s]+)>")
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>")
_MISTRAL_NAMED = re.compile(r"\s*([\w.-]+)(?:\[CALL_ID\][\w-]*)?\[ARGS\]\s*")
_LLAMA_END = re.compile(r"\s*(?:<\|eom_id\|>|<\|eot_id\|>)")


@dataclass
class _Found:
    """A stretch of the answer read as calls (or an echo, or a fence that is not a call)."""

    start: int
    end: int
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments as JSON text)
    remove: bool = True  # False: skipped over but kept in the text (a fence holding code or data)


def calls_from_text(
    content: str,
    known: Collection[str],
    *,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    cut_off: bool = False,
) -> tuple[list[ToolCall], str]:
    """Tool calls written in the text, in order, and the text without them.

    `schemas` (tool name -> JSON schema of its arguments), when given, types Qwen3-Coder's raw-text
    parameter values; without it they stay strings (see `_qwen3_coder_value`).
    `cut_off`: the answer was cut (max_tokens, or no finish reason). A call that runs to its end
    without closing is then cut too: its closing tags are optional, so `rm -rf build/cache` cut to
    `rm -rf b`, or half a file, would otherwise run as written. Its arguments are kept unclosed, which
    the registry reports to the model as cut off, and nothing runs.
    """
    text = _answer(content)
    found: list[_Found] = []
    pos = 0
    while match := _START.search(text, pos):
        token = match.group().lstrip(" \t")
        start = match.end() - len(token)
        if token == "<tools>":
            hit = _echoed_tools(text, start)
        elif token == "<tool_call>":
            hit = _tagged(text, start, known, schemas or {})
        elif token == "<function=":
            hit = _qwen3_coder(text, start, schemas or {}, known)
        elif token == "[TOOL_CALLS]":
            hit = _mistral(text, start, known)
        elif token == "<|python_tag|>":
            hit = _llama(text, start, known)
        elif token == "```":
            hit = _fenced(text, match.start(), known)
        else:
            hit = _bare(text, start, known)
        if hit is None:
            pos = match.start() + 1  # not a call here: look further, from inside this match
            continue
        found.append(hit)
        pos = max(hit.end, match.start() + 1)
    if cut_off and found and found[-1].calls and _runs_to_the_cut(text, found[-1]):
        name, args = found[-1].calls[-1]
        found[-1].calls[-1] = (name, _unclosed(args))
    calls = [
        ToolCall(id=f"text_call_{i}", name=name, arguments=args)
        for i, (name, args) in enumerate(call for hit in found for call in hit.calls)
    ]
    return calls, _without(content, [hit for hit in found if hit.remove])


# How a call that was written to its end ends: a closing tag, fence, end token, or bracket.
_CLOSED = ("</tool_call>", "</function>", "```", "<|eom_id|>", "<|eot_id|>", "}", "]")


def _runs_to_the_cut(text: str, hit: _Found) -> bool:
    """Whether the answer was cut inside this call: it reaches the end, and the end closes nothing."""
    end = text.rstrip()
    return hit.end >= len(end) and not end.endswith(_CLOSED)


def _unclosed(arguments: str) -> str:
    """Arguments that must not run as they are: an object loses its closing brace (the history closes
    it again, `history_arguments`); anything else is no object already."""
    stripped = arguments.rstrip()
    return stripped[:-1] if stripped.startswith("{") and stripped.endswith("}") else arguments


def _without(content: str, cuts: list[_Found]) -> str:
    if not cuts:
        return content.strip()
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(content[last : cut.start])
        last = cut.end
    pieces.append(content[last:])
    kept = (_trim_seams(piece) for piece in pieces)
    return "\n".join(piece for piece in kept if piece).strip()


def _trim_seams(piece: str) -> str:
    """A piece without the blank lines and spaces at its ends; its first line keeps its indentation."""
    text = piece.rstrip()
    lead = len(text) - len(text.lstrip())
    return text[text.rfind("\n", 0, lead) + 1 :]


# --- the formats -------------------------------------------------------------------------------------


def _echoed_tools(text: _Answer, start: int) -> _Found:
    """The template's tool list repeated by the model: removed, and nothing in it ever runs."""
    close = text.find("</tools>", start)
    if close >= 0:
        return _Found(start, close + len("</tools>"))
    # Unclosed: the echo is the tool definitions that follow the tag; the answer goes on after them.
    end = start + len("<tools>")
    while (i := _skip(text, end)) < len(text) and text[i] in "{[":
        scanned = _scan_value(text, i)
        if scanned is None or not scanned[1]:
            return _Found(start, len(text))  # the echo was cut off: all of it is echo
        try:
            data = _loads(text[i : scanned[0]])
        except ValueError:
            break
        if not all(_is_definition(item) for item in (data if isinstance(data, list) else [data])):
            break
        end = scanned[0]
    return _Found(start, end)


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


def _tagged(text: _Answer, start: int, known: Collection[str], schemas: Mapping) -> _Found | None:
    """`<tool_call>` then JSON call(s) or Qwen3-Coder's `<function=`; the closing tag is optional
    (the answer ends, or the next `<tool_call>` begins). An unknown name is still a call here."""
    i = _skip(text, start + len("<tool_call>"))
    fence = _FENCE_OPEN.match(text, i) if text.startswith("```", i) else None
    if text.startswith("<function=", i):
        hit = _qwen3_coder(text, i, schemas)
    else:  # JSON, possibly fenced inside the tag
        hit = _json_calls(text, fence.end() if fence else i, known, explicit=True, stop="</tool_call>")
    if hit is None:
        return None
    end = hit.end
    if fence and text.startswith("```", _skip(text, end)):
        end = _skip(text, end) + 3
    if text.startswith("</tool_call>", _skip(text, end)):
        end = _skip(text, end) + len("</tool_call>")
    return _Found(start, end, hit.calls)


def _qwen3_coder(
    text: _Answer, start: int, schemas: Mapping, known: Collection[str] | None = None
) -> _Found | None:
    """`<function=NAME>` with `<parameter=KEY>` raw values; closing tags optional. Also Llama 3.1's
    `<function=NAME>{json arguments}</function>`. `known` given (no `<tool_call>` around it): only
    known names, as "<function=NAME>" may be prose about the format."""
    calls, end = [], start
    while (match := _FUNCTION.match(text, _skip(text, end) if calls else end)) is not None:
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
    return _Found(start, end, calls) if calls else None


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


def _mistral(text: _Answer, start: int, known: Collection[str]) -> _Found | None:
    """`[TOOL_CALLS]` then a JSON list of calls (v3), or `NAME[ARGS]{...}` (v11+, maybe with
    `[CALL_ID]id` before `[ARGS]`). Each later `[TOOL_CALLS]` is read on its own."""
    i = start + len("[TOOL_CALLS]")
    if (hit := _json_calls(text, i, known, explicit=True)) is not None:
        return _Found(start, hit.end, hit.calls)
    match = _MISTRAL_NAMED.match(text, i)
    if match is None or not text.startswith("{", match.end()):
        return None
    scanned = _scan_value(text, match.end())
    end = len(text) if scanned is None or not scanned[1] else scanned[0]
    return _Found(start, end, [(match.group(1), _arguments_text(text[match.end() : end].rstrip()))])


def _llama(text: _Answer, start: int, known: Collection[str]) -> _Found | None:
    """`<|python_tag|>` then `{"name", "parameters"}` objects separated by `;`. Code after the tag
    (Llama's code interpreter) is not JSON and is left alone."""
    hit = _json_calls(text, start + len("<|python_tag|>"), known, explicit=True)
    if hit is None:
        return None
    end = match.end() if (match := _LLAMA_END.match(text, hit.end)) else hit.end
    return _Found(start, end, hit.calls)


def _fenced(text: _Answer, start: int, known: Collection[str]) -> _Found:
    """A fence holding only call JSON is calls; any other fence is skipped whole and kept, so
    nothing in a ```python block (or a ```json block of data) ever runs."""
    opener = _FENCE_OPEN.match(text, start)
    assert opener is not None  # _START matched "```" here
    if opener.group(1).lower() in _CALL_FENCES:
        hit = _json_calls(text, opener.end(), known, explicit=False)
        if hit is not None:
            after = _skip(text, hit.end)
            if text.startswith("```", after):
                return _Found(start, after + 3, hit.calls)
            if after >= len(text):  # the answer ended inside the fence
                return _Found(start, len(text), hit.calls)
    line_end = text.find("\n", opener.end())
    close = _FENCE_CLOSE.search(text, line_end) if line_end >= 0 else None
    return _Found(start, close.end() if close else len(text), remove=False)


def _bare(text: _Answer, start: int, known: Collection[str]) -> _Found | None:
    """JSON starting a line: calls only when the line holds nothing else after them, so a sentence
    that begins with an example object is not run."""
    hit = _json_calls(text, start, known, explicit=False)
    if hit is None:
        return None
    line_end = text.find("\n", hit.end)
    rest = text[hit.end : len(text) if line_end < 0 else line_end]
    return hit if not rest.strip(" \t;,") else None


# --- JSON as small models write it -------------------------------------------------------------------


def _json_calls(
    text: _Answer, i: int, known: Collection[str], *, explicit: bool, stop: str = ""
) -> _Found | None:
    """Call objects (or lists of them) from text[i], separated by space, ',' or ';'. None unless the
    first value is a call. `explicit`: inside a call marker, so unknown names count too."""
    calls: list[tuple[str, str]] = []
    end = i
    while (j := _skip(text, end, ",;" if calls else "")) < len(text) and text[j] in "{[":
        scanned = _scan_value(text, j)
        if scanned is None:
            break
        close, complete = scanned
        if not complete:  # runs to the end: cut off, or its last brace forgotten
            if (call := _cut_off_call(text, j, known, explicit, stop)) is not None:
                calls.append(call[0])
                end = call[1]
            break
        try:
            data = _loads(text[j:close])
        except ValueError:
            break
        items = data if isinstance(data, list) else [data]
        got = [_call_of(item, known, explicit) for item in items]
        if not got or None in got:
            break
        calls.extend(call for call in got if call is not None)
        end = close
    return _Found(i, end, calls) if calls else None


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
    text: _Answer, i: int, known: Collection[str], explicit: bool, stop: str
) -> tuple[tuple[str, str], int] | None:
    """A call object that never closes: its arguments when they close (the model forgot the outer
    brace), else the raw rest, which the loop reports as invalid JSON, cut off."""
    head = _CUT_OFF_HEAD.match(text, i)
    if head is None or (not explicit and head.group(1) not in known):
        return None
    args_start = head.end()
    scanned = _scan_value(text, args_start) if text.startswith(("{", "["), args_start) else None
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
            parsed = _loads(args)
        except ValueError:
            return args
        return json.dumps(parsed, ensure_ascii=False) if isinstance(parsed, dict) else args
    return json.dumps(args, ensure_ascii=False)


def _loads(text: str) -> Any:
    """JSON, else JSON after `_normalise`; ValueError when neither reads. Raw newlines and tabs in
    strings are taken as they are (strict=False)."""
    try:
        try:
            return json.loads(text, strict=False)
        except json.JSONDecodeError:
            return json.loads(_normalise(text), strict=False)
    except RecursionError as exc:  # thousands of nested brackets: a degenerate answer, not a call
        raise ValueError("nested too deeply") from exc


def _normalise(text: str) -> str:
    """Almost-JSON made JSON, token by token: Python strings (triple-quoted, single-quoted) become
    JSON strings, invalid escapes ("\\d" in a regex) keep their backslash, trailing commas go,
    True/False/None become JSON. No guessing beyond that: what does not parse then is not a call.

    We do not use json-repair: FACTS.md saw it turn a triple-quoted file into an empty string.
    """
    text = _answer(text)
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            end = _string_end(text, i)
            if end is None:
                raise ValueError("unterminated string")
            out.append(_json_string(text[i:end]))
            i = end
        elif ch == ",":
            j = _skip(text, i + 1)
            if j >= n or text[j] not in "}]":
                out.append(ch)
            i = j
        elif ch.isalpha() or ch == "_":
            word = _WORD.match(text, i)
            assert word is not None
            out.append(_PYTHON_LITERALS.get(word.group(), word.group()))
            i = word.end()
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _json_string(token: str) -> str:
    quote = token[0]
    if token.startswith(quote * 3):
        # Verbatim, no escape processing: the model writes the file's text between the quotes, and
        # a "\n" in that code must stay a backslash and an n.
        return json.dumps(token[3:-3], ensure_ascii=False)

    def escape(match: re.Match[str]) -> str:
        char = match.group(1)
        if char is None:
            return '\\"'  # a bare " inside a single-quoted string
        if char == "'":
            return "'"
        return match.group() if char in '"\\/bfnrtu' else "\\\\" + char

    return '"' + _ESCAPE.sub(escape, token[1:-1]) + '"'


class _Answer(str):
    """The answer being read, remembering what its brackets and triple quotes were found to match,
    so that no stretch of a long answer is scanned again for each bracket that opens in it."""

    brackets: dict[int, tuple[int, bool] | None]  # where a bracket's value ends, as _scan_value says
    triple_ends: dict[str, list[int]]  # per quote: the ends of the closing triple quotes, in order


def _answer(text: str) -> _Answer:
    if isinstance(text, _Answer):
        return text
    answer = _Answer(text)
    answer.brackets, answer.triple_ends = {}, {}
    return answer


def _scan_value(text: _Answer, i: int) -> tuple[int, bool] | None:
    """The end of the bracketed value at text[i], respecting strings of every kind above.
    (end, True) when it closes; (len(text), False) when the text ends first; None on a mismatched
    bracket.

    Every bracket opened on the way is answered too: its value is the same characters, read from the
    same state (outside strings), so it closes where it closed here, or meets the same end of text or
    the same wrong closer. Lines of unclosed "{" would otherwise cost a scan to the end each.
    """
    memo = text.brackets
    if i in memo:
        return memo[i]
    opened: list[int] = []
    n = len(text)
    j = i
    while j < n:
        ch = text[j]
        if ch in "\"'":
            end = _string_end(text, j)
            if end is None:
                break
            j = end
            continue
        if ch in "{[":
            opened.append(j)
        elif ch in "}]":
            if ("}" if text[opened[-1]] == "{" else "]") != ch:
                memo.update(dict.fromkeys(opened))
                return None
            memo[opened.pop()] = (j + 1, True)
            if not opened:
                return j + 1, True
        j += 1
    memo.update(dict.fromkeys(opened, (n, False)))
    return n, False


def _string_end(text: _Answer, i: int) -> int | None:
    """The end of the string opened at text[i]; a tripled quote opens a Python triple-quoted one
    (in JSON three quotes in a row never start a value), closed by the quotes that JSON goes on after."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        if quote not in text.triple_ends:  # found once per answer, so each string costs a bisection
            text.triple_ends[quote] = [m.end() for m in _TRIPLE_END[quote].finditer(text)]
        ends = text.triple_ends[quote]
        at = bisect.bisect_left(ends, i + 6)  # the closing quotes begin after the opening ones
        if at < len(ends):
            return ends[at]
        first = text.find(quote * 3, i + 3)
        return None if first < 0 else first + 3
    stop = _STRING_STOP[quote]
    j = i + 1
    while match := stop.search(text, j):
        if match.group() == quote:
            return match.end()
        j = match.end() + 1  # skip the escaped character
    return None


def _skip(text: str, i: int, also: str = "") -> int:
    """The first index at or after i that is not whitespace (nor one of `also`)."""
    n = len(text)
    while i < n and (text[i].isspace() or text[i] in also):
        i += 1
    return i


def _first(text: str, start: int, *needles: str) -> int:
    """Where the first of the needles occurs from start on; the end of the text when none does."""
    found = [at for needle in needles if (at := text.find(needle, start)) >= 0]
    return min(found, default=len(text))
