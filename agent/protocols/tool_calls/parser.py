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

One left-to-right scan, here: at each place a call may begin, the reader of that format
(call_formats.py) takes what it can and the scan goes on after it. The readers share one JSON reader
(loose_json.py), whose `Answer` remembers what it scanned, so a long answer costs one pass.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from agent.core.llm import ToolCall
from agent.protocols.tool_calls.call_formats import (
    Found,
    bare,
    echoed_tools,
    fenced,
    llama,
    mistral,
    qwen3_coder,
    tagged,
)
from agent.protocols.tool_calls.loose_json import as_answer

# Where a written call, or an echoed tool list, may begin. Literal alternatives searched once, left to
# right, so long answers cost one pass; a match inside a call already read is never looked at.
_START = re.compile(
    r"<tools>|<tool_call>|<function=|\[TOOL_CALLS\]|<\|python_tag\|>|^[ \t]*(?:```|[{\[])", re.M
)


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
    text = as_answer(content)
    found: list[Found] = []
    pos = 0
    while match := _START.search(text, pos):
        token = match.group().lstrip(" \t")
        start = match.end() - len(token)
        if token == "<tools>":
            hit = echoed_tools(text, start)
        elif token == "<tool_call>":
            hit = tagged(text, start, known, schemas or {})
        elif token == "<function=":
            hit = qwen3_coder(text, start, schemas or {}, known)
        elif token == "[TOOL_CALLS]":
            hit = mistral(text, start, known)
        elif token == "<|python_tag|>":
            hit = llama(text, start, known)
        elif token == "```":
            hit = fenced(text, match.start(), known)
        else:
            hit = bare(text, start, known)
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


def _runs_to_the_cut(text: str, hit: Found) -> bool:
    """Whether the answer was cut inside this call: it reaches the end, and the end closes nothing."""
    end = text.rstrip()
    return hit.end >= len(end) and not end.endswith(_CLOSED)


def _unclosed(arguments: str) -> str:
    """Arguments that must not run as they are: an object loses its closing brace (the history closes
    it again, `history_arguments`); anything else is no object already."""
    stripped = arguments.rstrip()
    return stripped[:-1] if stripped.startswith("{") and stripped.endswith("}") else arguments


def _without(content: str, cuts: list[Found]) -> str:
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
