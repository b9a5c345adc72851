"""Model output fuzzed with hypothesis (issue 13, item 6): random and truncated answers through the
tool-call readers (native and text), the argument validation, the edit blocks, the history repair and
edit_file. They never crash, never run a call cut off half-way, never corrupt a file, and an edit that
is applied then undone (git checkpoints) gives back the original bytes.

Answers are drawn from the formats' own pieces (tags, fences, quotes, brackets, names) mixed with
random text, which reaches the parsers' corners far more often than uniform noise does.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.core.history import assistant_message, close_json, history_arguments, repair_history
from agent.core.llm import Completion, ToolCall
from agent.protocols.edit_blocks.parser import parse_answer, to_tool_calls
from agent.protocols.edit_blocks.protocol import BlockActions
from agent.protocols.tool_calls.parser import calls_from_text
from agent.protocols.tool_calls.protocol import ToolCallActions
from agent.store.telemetry import TurnStats
from tools.base import ToolContext, ToolError, ToolRegistry, parameters_of
from tools.bash import Bash
from tools.files import EditArgs, EditFile, MultiEdit, ReadFile, WriteFile
from tools.git import Checkpoints, open_repo
from tools.search import Grep, ListFiles
from tools.workspace import Workspace

TOOLS = ToolRegistry([Bash(), ReadFile(), EditFile(), MultiEdit(), WriteFile(), ListFiles(), Grep()])
KNOWN = set(TOOLS.names())
SCHEMAS = {t.name: parameters_of(t) for t in TOOLS.tools.values()}
# FUZZ_EXAMPLES=5000 for a deeper run than CI's (docs/reliability.md has the figures of one).
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PIECES = [
    "<tool_call>", "</tool_call>", "<tools>", "</tools>", "<function=", "<function=bash>",
    "<function=write_file>", "</function>", "<parameter=", "<parameter=command>", "<parameter=path>",
    "<parameter=content>", "</parameter>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|python_tag|>",
    "<|eom_id|>", "```", "```json", "```tool_call", "```python", "```bash", "~~~", "\n", "\n\n", " ", "\t",
    "{", "}", "[", "]", ",", ";", ":", '"', "'", '"""', "'''", "\\", "\\n", '\\"', "name", '"name"',
    '"arguments"', '"parameters"', '"function"', '"type"', '"bash"', '"read_file"', '"write_file"',
    '"edit_file"', '"nope"', '"command"', '"path"', '"content"', '"old_string"', "True", "None", "null",
    "42", "-1", "1e999", "ls -la", "é", "\u2028", "\x00", "\ud800", "<<<<<<< SEARCH", "=======",
    ">>>>>>> REPLACE", "src/app.py", "app.py", "path: x.py", "# x.py", "**x.py**", "$ ", "```diff",
]  # fmt: skip
ANSWERS = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=80).map("".join)

# Complete calls in each format the text reader knows; the fuzz cuts them anywhere.
CALLS = [
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\\ny = 2\\n"}}\n</tool_call>',
    "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n<parameter=content>\n"
    "def f():\n    return 42\n\n</parameter>\n</function>\n</tool_call>",
    "<function=bash>\n<parameter=command>\nrm -rf build/cache\n</parameter>\n</function>",
    '[TOOL_CALLS][{"name": "bash", "arguments": {"command": "rm -rf build/cache"}}]',
    '[TOOL_CALLS]bash[ARGS]{"command": "rm -rf build/cache"}',
    '<|python_tag|>{"name": "bash", "parameters": {"command": "rm -rf build/cache"}}<|eom_id|>',
    '```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": """x = 1\ny = 2\n"""}}\n```',
    '{"name": "edit_file", "arguments": {"path": "a.py", "old_string": "x = 1", "new_string": "x = 10"}}',
    "<tool_call>\n{'name': 'bash', 'arguments': {'command': 'rm -rf build/cache',}}\n</tool_call>",
]


def completion(
    content: str, tool_calls: list[ToolCall] | None = None, finish: str | None = "stop"
) -> Completion:
    stats = TurnStats.from_timings(None, finish_reason=finish)
    return Completion(content, "", tool_calls or [], stats, complete=finish is not None)


def check_calls(calls: list[ToolCall]) -> None:
    """What every call read from an answer must be: validated without an exception, history-safe."""
    for call in calls:
        assert isinstance(call.name, str) and isinstance(call.arguments, str)
        parsed = TOOLS.parse(call.name, call.arguments)
        assert (parsed.error is None) == (parsed.args is not None)
        safe = history_arguments(call.arguments)
        assert isinstance(json.loads(safe), dict)
        if parsed.error is None:
            # a valid call is kept as written ("" is taken as no arguments, as the registry takes it)
            assert json.loads(safe) == json.loads(call.arguments.strip() or "{}")


# ------------------------------------------------------------------------------- text and native calls


@pytest.mark.slow
@FUZZ
@given(ANSWERS)
@example("[Élément] a line of French prose")  # once an AssertionError out of the JSON reader
@example("<tool_call>" * 2000)
@example("{" * 5000)
@example('"""' * 3000)
@example("<function=bash>" + "<parameter=x>" * 2000)
def test_any_answer_is_read_without_an_exception(answer):
    calls, rest = calls_from_text(answer, KNOWN, schemas=SCHEMAS)
    assert isinstance(rest, str)
    check_calls(calls)
    read = ToolCallActions().read(completion(answer), TOOLS)
    check_calls(read.calls)
    message = ToolCallActions().history_message(read)
    for call in message.get("tool_calls", []):
        assert isinstance(json.loads(call["function"]["arguments"]), dict)


def _runnable(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    out = []
    for call in calls:
        parsed = TOOLS.parse(call.name, call.arguments)
        if parsed.error is None:
            out.append((call.name, parsed.args.model_dump()))
    return out


@pytest.mark.slow
@FUZZ
@given(call=st.sampled_from(CALLS), cut=st.floats(0, 1), finish=st.sampled_from(["length", None]))
def test_a_call_cut_off_anywhere_is_never_run_with_other_arguments(call, cut, finish):
    """An answer cut at max_tokens (or a stream that ended without a finish reason) may hold a call
    cut half-way: what runs is the whole call or nothing, never a shorter command or a half file."""
    whole = _runnable(ToolCallActions().read(completion(call), TOOLS).calls)
    assert len(whole) == 1
    prefix = call[: int(len(call) * cut)]
    read = ToolCallActions().read(completion(prefix, finish=finish), TOOLS)
    check_calls(read.calls)
    for ran in _runnable(read.calls):
        assert ran == whole[0], f"cut at {len(prefix)}: {prefix!r}"


@pytest.mark.slow
@FUZZ
@given(
    names=st.lists(st.one_of(st.sampled_from(sorted(KNOWN)), st.text(max_size=10)), min_size=1, max_size=4),
    args=st.lists(
        st.one_of(ANSWERS, st.sampled_from(CALLS).map(lambda c: c[c.find("{") :])), min_size=4, max_size=4
    ),
    cut=st.integers(0, 400),
)
def test_native_tool_calls_with_any_arguments_are_validated_never_raised(names, args, cut):
    """Native calls as a server streams them: any name, arguments cut anywhere or not JSON at all."""
    calls = [ToolCall(f"call_{i}", name, args[i][:cut]) for i, name in enumerate(names)]
    read = ToolCallActions().read(completion("", calls, finish="length"), TOOLS)
    check_calls(read.calls)
    message = assistant_message(read.content, read.calls)
    assert [c["id"] for c in message["tool_calls"]] == [c.id for c in calls]
    for call in message["tool_calls"]:
        assert isinstance(json.loads(call["function"]["arguments"]), dict)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = ["path", "content", "command", "timeout", "old_string", "new_string", "replace_all", "edits",
          "offset", "limit", "pattern", "glob"]  # fmt: skip


@pytest.mark.slow
@FUZZ
@given(
    name=st.sampled_from(sorted(KNOWN)),
    data=st.one_of(JSON, st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=5)),
    as_text=st.booleans(),
)
def test_argument_validation_answers_every_value_with_args_or_an_error(name, data, as_text):
    # (a ToolCall's arguments are text; a dict comes from callers that parsed them already)
    parsed = TOOLS.parse(name, data if isinstance(data, dict) and not as_text else json.dumps(data))
    assert (parsed.error is None) == (parsed.args is not None)
    if parsed.error is not None:
        assert name in parsed.error  # the message names the tool it is about
    else:
        assert isinstance(parsed.args, TOOLS.tools[name].Args)


@FUZZ
@given(st.text(max_size=60))
@example('{"a": "x\\')
@example('{"a": [1, {"b": ')
def test_close_json_gives_an_object_or_nothing(text):
    closed = close_json(text)
    if closed is not None:
        assert isinstance(json.loads(closed), dict)
    assert isinstance(json.loads(history_arguments(text)), dict)


# ---------------------------------------------------------------------------------------- history repair

IDS = st.sampled_from(["call_0", "call_1", "text_call_0", "text_call_1", "block_1", "x"])
TOOL_CALL = st.fixed_dictionaries(
    {
        "id": IDS,
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.sampled_from(sorted(KNOWN))},
            optional={
                "arguments": st.one_of(ANSWERS, st.sampled_from(CALLS).map(lambda c: c[c.find("{") :]))
            },
        ),
    }
)
MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": st.text(max_size=10)}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.text(max_size=10)},
        optional={"tool_calls": st.lists(TOOL_CALL, max_size=3, unique_by=lambda c: c["id"])},
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": IDS, "content": st.text(max_size=10)}),
)


def _answered_in_place(messages: list[dict]) -> bool:
    """Every tool call has its result among the tool messages right after its assistant message."""
    for i, message in enumerate(messages):
        after = set()
        for later in messages[i + 1 :]:
            if later.get("role") != "tool":
                break
            after.add(later.get("tool_call_id"))
        if any(call.get("id") not in after for call in message.get("tool_calls") or []):
            return False
    return True


@pytest.mark.slow
@FUZZ
@given(st.lists(MESSAGE, max_size=12))
@example(
    [  # text calls are numbered per answer: an interrupted call may share its id with an answered one
        {"role": "assistant", "content": "", "tool_calls": [{"id": "text_call_0", "type": "function",
                                                             "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "text_call_0", "content": "ok"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "text_call_0", "type": "function",
                                                             "function": {"name": "bash", "arguments": "{}"}}]},
    ]
)  # fmt: skip
def test_history_repair_leaves_every_call_answered_and_every_argument_an_object(messages):
    original = json.loads(json.dumps(messages))
    repair_history(messages)
    assert _answered_in_place(messages)
    for message in messages:
        for call in message.get("tool_calls") or []:
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
    # Nothing but synthetic results is added, and nothing said is lost or reordered.
    said = [m for m in messages if m.get("content") != "(not run: interrupted)" or m.get("role") != "tool"]
    assert [(m["role"], m.get("content")) for m in said] == [(m["role"], m.get("content")) for m in original]
    again = json.loads(json.dumps(messages))
    assert repair_history(again) == 0 and again == messages  # a repaired history needs no more repair


# ----------------------------------------------------------------------------------------- edit blocks

BLOCK_PIECES = [
    "app.py\n", "src/app.py\n", "`app.py`\n", "```python\n", "```\n", "````\n", "~~~\n", "```bash\n",
    "```markdown\n", "<<<<<<< SEARCH\n", "=======\n", ">>>>>>> REPLACE\n", "x = 1\n", "    y = 2\n", "\n",
    "ls\n", "rm -rf build\n", "Done.\n", "# README.md\n", "```python app.py\n",
]  # fmt: skip
BLOCK_ANSWERS = st.lists(st.one_of(st.sampled_from(BLOCK_PIECES), st.text(max_size=8)), max_size=40).map(
    "".join
)
WHOLE_ANSWER = (
    "I will write the module, fix the call and run the tests.\n\n"
    "app.py\n```python\ndef add(a, b):\n    return a + b\n```\n\n"
    "main.py\n```python\n<<<<<<< SEARCH\nprint(add(1, 1))\n=======\nprint(add(2, 3))\n>>>>>>> REPLACE\n```\n\n"
    "```bash\nrm -rf build/cache && python -m pytest -q\n```\n"
)


@FUZZ
@given(BLOCK_ANSWERS, st.booleans())
def test_any_blocks_answer_is_read_without_an_exception(answer, cut_off):
    parsed = parse_answer(answer, cut_off=cut_off)
    calls = to_tool_calls(parsed.actions)
    check_calls(calls)
    assert all(isinstance(p, str) and p for p in parsed.problems)


@FUZZ
@given(st.integers(0, len(WHOLE_ANSWER)))
def test_a_blocks_answer_cut_anywhere_applies_only_whole_blocks_of_the_full_answer(cut):
    full = parse_answer(WHOLE_ANSWER).actions
    assert len(full) == 3
    actions = parse_answer(WHOLE_ANSWER[:cut], cut_off=True).actions
    assert actions == full[: len(actions)], f"cut at {cut}: {WHOLE_ANSWER[:cut]!r}"


@pytest.mark.slow
@FUZZ
@given(st.integers(0, len(WHOLE_ANSWER)))
def test_blocks_actions_never_run_a_cut_block(cut):
    workspace = Path(tempfile.mkdtemp(prefix="fuzz-blocks-"))
    try:
        read = BlockActions(workspace).read(completion(WHOLE_ANSWER[:cut], finish="length"), TOOLS)
        full = to_tool_calls(parse_answer(WHOLE_ANSWER).actions)
        for call in read.calls:
            assert (call.name, call.arguments) in [(c.name, c.arguments) for c in full]
    finally:
        subprocess.run(["rm", "-rf", str(workspace)], check=False)


# ------------------------------------------------------------------------------------------ edit_file

LINES = st.lists(
    st.one_of(
        st.sampled_from(
            ["x = 1", "    y = 2", "def f():", "        return x", "", "# é ü 中", "\t\tz", "x = 1"]
        ),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00\r\n"), max_size=12),
    ),
    max_size=25,
)


@st.composite
def edit_cases(draw) -> tuple[str, str, str, bool]:
    """(file text, old_string, new_string, replace_all): old is mostly a piece of the file."""
    lines = draw(LINES)
    text = "\n".join(lines) + draw(st.sampled_from(["\n", ""]))
    if text and draw(st.integers(0, 4)):
        start = draw(st.integers(0, len(text) - 1))
        old = text[start : draw(st.integers(start + 1, len(text)))]
        old = draw(st.sampled_from([old, old.strip(), "  " + old, old.replace("    ", "  ")]))
    else:
        old = draw(st.text(max_size=12))
    new = draw(st.one_of(st.text(max_size=15), st.sampled_from(["", "\n", old.upper(), old + "\n# added"])))
    return text, old, new, draw(st.booleans())


def _edit(root: Path, rel: str, old: str, new: str, replace_all: bool):
    ctx = ToolContext(Workspace(root))
    try:
        args = EditArgs(path=rel, old_string=old, new_string=new, replace_all=replace_all)
        return asyncio.run(EditFile().run(args, ctx))
    except ToolError as exc:  # the loop turns these into an error result for the model
        return exc


def _expected_exact(text: str, old: str, new: str) -> str | None:
    """The file after an edit whose old_string occurs exactly once and is no whole-line special case."""
    if not old or old == new or text.count(old) != 1:
        return None
    at = text.index(old)
    if old.endswith("\n") and at > text.rfind("\n", 0, at) + 1:
        return None  # whole lines matched from inside their indentation: edit_file re-indents
    after = text.replace(old, new, 1)
    if text and not text.endswith("\n") and after.endswith("\n"):
        after = after[:-1]  # the file keeps having no final newline
    return after


@pytest.mark.slow
@FUZZ
@given(edit_cases(), st.sampled_from(["\n", "\r\n"]))
def test_edit_file_never_corrupts_a_file(case, newline):
    """The file is either exactly as before (and the model is told why) or holds the edit; an exact,
    unique old_string is replaced exactly; line endings stay the file's."""
    text, old, new, replace_all = case
    with tempfile.TemporaryDirectory(prefix="fuzz-edit-") as folder:
        root = Path(folder)
        path = root / "f.txt"
        before = text.replace("\n", newline).encode()
        path.write_bytes(before)
        result = _edit(root, "f.txt", old, new, replace_all)
        after = path.read_bytes()
        ok = not isinstance(result, ToolError) and result.ok
        if not ok:
            assert after == before, "a failed edit changed the file"
            assert str(result if isinstance(result, ToolError) else result.output).strip()
            return
        assert after != before
        after.decode("utf-8")  # still UTF-8 text
        if newline == "\r\n" and "\n" in text:
            lf = after.count(b"\n")
            assert after.count(b"\r\n") == lf, "a CRLF file got LF lines"
        expected = _expected_exact(text, old, new)
        if expected is not None and newline == "\n" and not replace_all:
            assert after.decode() == expected
        assert list(root.iterdir()) == [path]  # no temp file left behind


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.mark.slow
@settings(max_examples=max(60, EXAMPLES // 5), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=edit_cases(),
    newline=st.sampled_from(["\n", "\r\n"]),
    attributes=st.sampled_from(["", "* text=auto\n", "*.txt text eol=lf\n"]),
    autocrlf=st.sampled_from([None, "true", "input"]),
    tail=st.binary(max_size=6),
    created=st.sampled_from(["new.txt", "café.txt", "sub/dir/x y.txt", 'q"uote.txt', "tab\tname.txt"]),
)
def test_an_edit_then_undo_gives_back_the_original_bytes(case, newline, attributes, autocrlf, tail, created):
    """The checkpoint the loop takes before the first change, then `agent undo`: byte for byte the file
    from before, whatever the repository's line-ending settings (.gitattributes, core.autocrlf), and a
    file made after the checkpoint is gone again, whatever its name."""
    text, old, new, replace_all = case
    with tempfile.TemporaryDirectory(prefix="fuzz-undo-") as folder:
        root = Path(folder)
        _git(root, "init", "-q")
        if autocrlf:
            _git(root, "config", "core.autocrlf", autocrlf)
        if attributes:
            (root / ".gitattributes").write_text(attributes)
        path = root / "f.txt"
        original = text.replace("\n", newline).encode() + (tail if b"\0" not in tail else b"")
        path.write_bytes(original)
        other = root / "other.bin"
        other.write_bytes(b"\r\n\x00\xff" + tail)
        checkpoints = Checkpoints(open_repo(root))
        assert checkpoints.create("before edit_file") is not None
        _edit(root, "f.txt", old, new, replace_all)  # made or refused: undo restores either way
        (root / created).parent.mkdir(parents=True, exist_ok=True)
        (root / created).write_bytes(b"made after the checkpoint\r\n")
        checkpoints.undo()
        assert path.read_bytes() == original
        assert other.read_bytes() == b"\r\n\x00\xff" + tail
        assert not (root / created).exists()


@pytest.mark.parametrize("attributes", ["", "* text=auto\n"])
def test_undo_restores_a_crlf_file_exactly(tmp_path, attributes):
    """The plain case of the property above, kept as an example that always runs."""
    _git(tmp_path, "init", "-q")
    if attributes:
        (tmp_path / ".gitattributes").write_text(attributes)
    path = tmp_path / "f.txt"
    original = b"x = 1\r\ny = 2\r\n"
    path.write_bytes(original)
    checkpoints = Checkpoints(open_repo(tmp_path))
    checkpoints.create("before edit_file")
    result = _edit(tmp_path, "f.txt", "y = 2", "y = 3", False)
    assert not isinstance(result, ToolError) and result.ok
    assert path.read_bytes() == b"x = 1\r\ny = 3\r\n"
    checkpoints.undo()
    assert path.read_bytes() == original
