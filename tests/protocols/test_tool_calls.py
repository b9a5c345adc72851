"""Tool calls written as text, in the formats local models use (agent/protocols/tool_calls.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.core.history import history_arguments
from agent.protocols.tool_calls.parser import calls_from_text
from tools.base import ToolRegistry
from tools.files import ReadFile

KNOWN = {
    "bash",
    "git_status",
    "git_diff",
    "git_log",
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "grep",
}
RECORDED = Path(__file__).parents[1] / "fixtures" / "model_outputs"


def read(content: str, **kw) -> tuple[list[tuple[str, dict]], str]:
    """(name, arguments as a dict) per call, and the text left."""
    calls, remaining = calls_from_text(content, KNOWN, **kw)
    return [(c.name, json.loads(c.arguments)) for c in calls], remaining


# --- recorded answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", sorted(RECORDED.glob("*.txt")), ids=lambda p: p.stem)
def test_recorded_answers_are_read_as_expected(answer: Path):
    expected = json.loads(answer.with_suffix(".expected.json").read_text())
    calls, remaining = read(answer.read_text())
    assert calls == [(c["name"], c["arguments"]) for c in expected["calls"]]
    assert remaining == expected["remaining"]


def test_the_recordings_include_the_fizzbuzz_answer_that_was_once_lost():
    assert (RECORDED / "qwen2.5-coder-1.5b_fizzbuzz_fenced_triple_quotes.txt").exists()


# --- bare JSON ----------------------------------------------------------------------------------------


def test_a_bare_call_object_as_the_whole_answer_is_a_call():
    assert read('{"name": "read_file", "arguments": {"path": "app.py"}}') == (
        [("read_file", {"path": "app.py"})],
        "",
    )


def test_a_bare_call_on_its_own_line_after_prose_is_a_call_and_the_prose_remains():
    answer = 'I will read the file first.\n{"name": "read_file", "arguments": {"path": "app.py"}}\n'
    assert read(answer) == ([("read_file", {"path": "app.py"})], "I will read the file first.")


def test_a_multi_line_bare_call_object_is_a_call():
    answer = '{\n  "name": "bash",\n  "arguments": {\n    "command": "pytest -q"\n  }\n}'
    assert read(answer)[0] == [("bash", {"command": "pytest -q"})]


def test_an_indented_bare_call_is_a_call():
    assert read('    {"name": "git_status", "arguments": {}}')[0] == [("git_status", {})]


def test_several_bare_call_objects_are_calls_in_order():
    answer = (
        '{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        '{"name": "read_file", "arguments": {"path": "b.py"}}\n'
    )
    assert read(answer)[0] == [("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})]


def test_a_json_list_of_call_objects_is_calls():
    answer = '[{"name": "git_status", "arguments": {}}, {"name": "git_diff", "arguments": {"staged": true}}]'
    assert read(answer)[0] == [("git_status", {}), ("git_diff", {"staged": True})]


def test_the_parameters_key_is_taken_as_arguments():
    assert read('{"name": "bash", "parameters": {"command": "ls"}}')[0] == [("bash", {"command": "ls"})]


def test_the_function_wrapper_shape_is_a_call():
    answer = '{"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}'
    assert read(answer)[0] == [("bash", {"command": "ls"})]


def test_arguments_written_as_a_json_string_become_the_object():
    answer = '{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}'
    assert read(answer)[0] == [("read_file", {"path": "a.py"})]


def test_a_call_without_arguments_gets_an_empty_object():
    calls, _ = calls_from_text('{"name": "git_status"}', KNOWN)
    assert calls[0].arguments == "{}"


def test_a_bare_call_followed_by_prose_on_the_same_line_is_not_a_call():
    answer = '{"name": "bash", "arguments": {"command": "ls"}} is how a call looks.'
    assert read(answer) == ([], answer)


def test_a_forgotten_final_brace_still_gives_the_call():
    answer = '{"name": "read_file", "arguments": {"path": "app.py"}\n'
    assert read(answer) == ([("read_file", {"path": "app.py"})], "")


def test_arguments_cut_off_at_the_end_become_a_call_the_registry_reports_as_invalid():
    calls, _ = calls_from_text('{"name": "read_file", "arguments": {"path": "app', KNOWN)
    assert [(c.name, c.arguments) for c in calls] == [("read_file", '{"path": "app')]
    error = ToolRegistry([ReadFile()]).parse(calls[0].name, calls[0].arguments).error
    assert "not valid JSON" in error and "cut off" in error
    assert json.loads(history_arguments(calls[0].arguments)) == {"path": "app"}


# --- <tool_call> tags ---------------------------------------------------------------------------------


def test_a_tagged_call_is_a_call_and_the_text_before_it_remains():
    answer = 'Let me read it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>'
    assert read(answer) == ([("read_file", {"path": "a"})], "Let me read it.")


def test_a_tagged_call_without_its_closing_tag_at_the_end_is_a_call():
    assert read('<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}') == (
        [("read_file", {"path": "a"})],
        "",
    )


def test_a_tagged_call_without_its_closing_tag_ends_where_the_next_tag_begins():
    answer = (
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n'
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "b"}}\n</tool_call>'
    )
    assert read(answer) == ([("read_file", {"path": "a"}), ("read_file", {"path": "b"})], "")


def test_unclosed_arguments_in_a_tool_call_tag_end_at_its_closing_tag():
    answer = '<tool_call>{"name": "bash", "arguments": {"command": "ls"</tool_call>\nDone.'
    calls, remaining = calls_from_text(answer, KNOWN)
    assert [(c.name, c.arguments) for c in calls] == [("bash", '{"command": "ls"')]
    assert remaining == "Done."


def test_an_unknown_name_in_a_tool_call_tag_is_a_call_the_registry_rejects():
    calls, _ = calls_from_text('<tool_call>\n{"name": "delete_all", "arguments": {}}\n</tool_call>', KNOWN)
    assert [c.name for c in calls] == ["delete_all"]
    error = ToolRegistry([ReadFile()]).parse(calls[0].name, calls[0].arguments).error
    assert error.startswith("Unknown tool 'delete_all'")


def test_the_templates_placeholder_call_echoed_in_a_tag_is_not_a_call():
    answer = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    assert read(answer) == ([], answer)


def test_a_fenced_call_inside_a_tool_call_tag_is_a_call():
    answer = '<tool_call>\n```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```\n</tool_call>'
    assert read(answer) == ([("bash", {"command": "ls"})], "")


def test_a_fenced_call_in_a_tool_call_tag_without_its_closing_tag_leaves_no_fence_behind():
    answer = '<tool_call>\n```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```\nDone.'
    assert read(answer) == ([("bash", {"command": "ls"})], "Done.")


def test_a_tool_call_tag_inside_a_written_files_content_is_not_a_second_call():
    content = 'print("<tool_call>")\n'
    answer = json.dumps({"name": "write_file", "arguments": {"path": "t.py", "content": content}})
    assert read(answer)[0] == [("write_file", {"path": "t.py", "content": content})]


# --- an echoed <tools> block --------------------------------------------------------------------------


def test_an_echoed_tools_block_alone_is_removed_and_is_no_call():
    answer = (
        "<tools>\n"
        '{"type": "function", "function": {"name": "bash", "description": "Run a command.", '
        '"parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}\n'
        "</tools>"
    )
    assert read(answer) == ([], "")


def test_a_call_inside_an_echoed_tools_block_never_runs():
    answer = (
        "<tools>\n"
        '{"name": "bash", "arguments": {"command": "rm -rf ."}}\n'
        '<tool_call>{"name": "bash", "arguments": {"command": "rm -rf ."}}</tool_call>\n'
        "</tools>\nWhat should I do?"
    )
    assert read(answer) == ([], "What should I do?")


def test_an_unclosed_tools_echo_ends_after_its_definitions():
    answer = (
        '<tools>\n{"type": "function", "function": {"name": "bash", "description": "Run.", "parameters": {}}}\n'
        '{"name": "read_file", "arguments": {"path": "app.py"}}'
    )
    assert read(answer)[0] == [("read_file", {"path": "app.py"})]


def test_an_openai_shaped_call_after_an_unclosed_tools_echo_is_a_call():
    answer = (
        '<tools>\n{"type": "function", "function": {"name": "bash", "description": "Run.", "parameters": {}}}\n'
        '{"type": "function", "function": {"name": "git_status", "arguments": {}}}'
    )
    assert read(answer) == ([("git_status", {})], "")


def test_a_llama_shaped_call_after_an_unclosed_tools_echo_is_a_call():
    answer = (
        '<tools>\n{"name": "bash", "description": "Run.", "parameters": {"type": "object", "properties": {}}}\n'
        '{"name": "read_file", "parameters": {"path": "a"}}'
    )
    assert read(answer) == ([("read_file", {"path": "a"})], "")


def test_a_tool_definition_written_bare_is_not_a_call():
    answer = '{"type": "function", "function": {"name": "bash", "description": "Run.", "parameters": {}}}'
    assert read(answer) == ([], answer)


# --- Qwen3-Coder ----------------------------------------------------------------------------------------

QWEN3_WRITE = """<tool_call>
<function=write_file>
<parameter=path>
src/app.py
</parameter>
<parameter=content>
def main():
    print("it's \\"quoted\\"")

</parameter>
</function>
</tool_call>"""


def test_a_qwen3_coder_call_in_a_tool_call_tag_is_a_call():
    assert read(QWEN3_WRITE)[0][0][0] == "write_file"


def test_a_qwen3_coder_value_keeps_its_lines_quotes_and_final_newline():
    ((_, arguments),) = read(QWEN3_WRITE)[0]
    assert arguments == {"path": "src/app.py", "content": 'def main():\n    print("it\'s \\"quoted\\"")\n'}


def test_a_qwen3_coder_call_without_its_closing_tags_is_a_call():
    answer = "<tool_call>\n<function=bash>\n<parameter=command>\nls -la\n"
    assert read(answer) == ([("bash", {"command": "ls -la"})], "")


def test_qwen3_coder_values_stay_strings_without_a_schema():
    answer = "<tool_call><function=read_file><parameter=path>42</parameter><parameter=limit>5</parameter></function>"
    assert read(answer)[0] == [("read_file", {"path": "42", "limit": "5"})]


def test_qwen3_coder_string_values_of_numbers_are_what_the_builtin_tools_accept():
    calls, _ = calls_from_text(
        "<tool_call><function=read_file><parameter=path>a</parameter><parameter=limit>5</parameter>", KNOWN
    )
    parsed = ToolRegistry([ReadFile()]).parse(calls[0].name, calls[0].arguments)
    assert parsed.error is None and parsed.args.limit == 5


def test_qwen3_coder_values_are_typed_by_the_schema_when_one_is_given():
    schema = {
        "properties": {
            "path": {"type": "string"},
            "limit": {"type": "integer"},
            "exact": {"type": "boolean"},
            "tags": {"type": "array"},
            "depth": {"type": ["integer", "null"]},
        }
    }
    answer = (
        "<tool_call><function=search><parameter=path>42</parameter><parameter=limit>5</parameter>"
        '<parameter=exact>True</parameter><parameter=tags>["a"]</parameter><parameter=depth>x</parameter>'
        "</function></tool_call>"
    )
    calls, _ = calls_from_text(answer, {"search"}, schemas={"search": schema})
    assert json.loads(calls[0].arguments) == {
        "path": "42",
        "limit": 5,
        "exact": True,
        "tags": ["a"],
        "depth": "x",
    }


def test_a_qwen3_coder_unknown_function_in_a_tag_is_a_call():
    assert read("<tool_call>\n<function=nope>\n</function>\n</tool_call>")[0] == [("nope", {})]


def test_a_function_tag_in_prose_with_an_unknown_name_is_not_a_call():
    answer = "Qwen3-Coder writes <function=NAME> then its parameters."
    assert read(answer) == ([], answer)


def test_a_bare_function_tag_with_json_arguments_is_a_call():
    assert read('<function=bash>{"command": "ls"}</function>') == ([("bash", {"command": "ls"})], "")


# --- Mistral and Llama 3 ------------------------------------------------------------------------------


def test_mistral_tool_calls_with_a_json_list_are_calls():
    answer = '[TOOL_CALLS] [{"name": "bash", "arguments": {"command": "ls"}, "id": "a1b2c3d4e"}]'
    assert read(answer) == ([("bash", {"command": "ls"})], "")


def test_mistral_tool_calls_name_args_form_is_calls():
    answer = '[TOOL_CALLS]bash[ARGS]{"command": "ls"}[TOOL_CALLS]read_file[CALL_ID]x1[ARGS]{"path": "a"}'
    assert read(answer) == ([("bash", {"command": "ls"}), ("read_file", {"path": "a"})], "")


def test_an_unknown_name_after_mistrals_marker_is_a_call():
    assert read("[TOOL_CALLS]nope[ARGS]{}")[0] == [("nope", {})]


def test_llama_python_tag_call_with_parameters_is_a_call():
    answer = '<|python_tag|>{"name": "bash", "parameters": {"command": "ls"}}<|eom_id|>'
    assert read(answer) == ([("bash", {"command": "ls"})], "")


def test_llama_python_tag_calls_separated_by_semicolons_are_calls():
    answer = '<|python_tag|>{"name": "git_status", "parameters": {}}; {"name": "git_log", "parameters": {"max_count": 3}}'
    assert read(answer)[0] == [("git_status", {}), ("git_log", {"max_count": 3})]


def test_llama_python_tag_code_is_not_a_call():
    answer = "<|python_tag|>print(1 + 1)"
    assert read(answer) == ([], answer)


# --- JSON as small models write it --------------------------------------------------------------------


def test_a_triple_quoted_value_keeps_its_newlines_quotes_and_backslashes_exactly():
    code = "def f():\n    return \"a\\n\" + 'b'\n"
    answer = '{"name": "write_file", "arguments": {"path": "f.py", "content": """' + code + '"""}}'
    assert read(answer)[0] == [("write_file", {"path": "f.py", "content": code})]


def test_a_triple_quoted_value_holding_docstrings_is_read_whole():
    code = 'def f():\n    """Say hi."""\n    return 1\n'
    answer = '{"name": "write_file", "arguments": {"path": "f.py", "content": """' + code + '"""}}'
    assert read(answer)[0] == [("write_file", {"path": "f.py", "content": code})]


def test_a_single_quote_triple_quoted_value_is_read():
    answer = '{"name": "write_file", "arguments": {"path": "f.py", "content": \'\'\'x = "1"\n\'\'\'}}'
    assert read(answer)[0] == [("write_file", {"path": "f.py", "content": 'x = "1"\n'})]


def test_single_quoted_strings_are_read():
    answer = "{'name': 'bash', 'arguments': {'command': 'echo \"it\\'s\"'}}"
    assert read(answer)[0] == [("bash", {"command": 'echo "it\'s"'})]


def test_trailing_commas_are_dropped():
    answer = '{"name": "bash", "arguments": {"command": "ls",},}'
    assert read(answer)[0] == [("bash", {"command": "ls"})]


def test_raw_newlines_and_tabs_inside_strings_are_kept():
    answer = '{"name": "write_file", "arguments": {"path": "m", "content": "all:\n\techo hi\n"}}'
    assert read(answer)[0] == [("write_file", {"path": "m", "content": "all:\n\techo hi\n"})]


def test_python_literals_become_json_ones():
    answer = '{"name": "grep", "arguments": {"pattern": "x", "ignore_case": True, "glob": None}}'
    assert read(answer)[0] == [("grep", {"pattern": "x", "ignore_case": True, "glob": None})]


def test_an_invalid_escape_in_a_regex_keeps_its_backslash():
    answer = '{"name": "grep", "arguments": {"pattern": "\\d+\\s"}}'
    assert read(answer)[0] == [("grep", {"pattern": "\\d+\\s"})]


def test_json_that_cannot_be_normalised_is_no_call_and_stays():
    answer = '{"name": "bash", "arguments": {"command": ls}}'
    assert read(answer) == ([], answer)


# --- fences ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["json", "tool_call", "tool", ""])
def test_a_call_in_a_json_tool_or_unlabelled_fence_is_a_call(label):
    answer = f'Now list.\n```{label}\n{{"name": "list_files", "arguments": {{}}}}\n```'
    assert read(answer) == ([("list_files", {})], "Now list.")


def test_a_one_line_fence_with_a_call_is_a_call():
    assert read('```json {"name": "list_files", "arguments": {}}```')[0] == [("list_files", {})]


def test_a_fence_left_open_at_the_end_of_the_answer_holds_a_call():
    assert read('```json\n{"name": "list_files", "arguments": {}}\n')[0] == [("list_files", {})]


def test_a_fence_marker_inside_a_fenced_calls_content_does_not_end_it():
    content = "# Build\n```bash\nmake\n```\n"
    answer = (
        '```json\n{"name": "write_file", "arguments": {"path": "README.md", "content": """'
        + content
        + '"""}}\n```'
    )
    assert read(answer)[0] == [("write_file", {"path": "README.md", "content": content})]


def test_a_dict_in_a_python_fence_is_not_a_call():
    answer = 'Use this:\n```python\n{"name": "bash", "arguments": {"command": "ls"}}\n```'
    assert read(answer) == ([], answer)


def test_json_data_in_a_json_fence_is_not_a_call():
    answer = 'Here is the package file:\n```json\n{"name": "grep", "version": "3.11", "arguments": []}\n```'
    assert read(answer) == ([], answer)


def test_a_fence_with_a_call_and_more_text_is_not_a_call():
    answer = '```json\n{"name": "bash", "arguments": {"command": "ls"}}\nand then this\n```'
    assert read(answer) == ([], answer)


# --- never run ------------------------------------------------------------------------------------------


def test_json_inline_in_a_sentence_is_not_a_call():
    answer = 'The config looks like {"name": "bash", "arguments": {"command": "ls"}} in the docs.'
    assert read(answer) == ([], answer)


def test_a_bare_object_naming_an_unknown_tool_is_not_a_call():
    answer = '{"name": "delete_everything", "arguments": {}}'
    assert read(answer) == ([], answer)


def test_an_object_with_a_known_name_and_other_keys_is_data_not_a_call():
    answer = '{"name": "bash", "version": "5.2", "license": "GPL"}'
    assert read(answer) == ([], answer)


def test_a_list_mixing_calls_and_data_is_not_calls():
    answer = '[{"name": "bash", "arguments": {"command": "ls"}}, {"name": "x", "size": 3}]'
    assert read(answer) == ([], answer)


def test_an_answer_without_calls_comes_back_stripped():
    assert calls_from_text("  Done: all tests pass.\n", KNOWN) == ([], "Done: all tests pass.")


# --- order ----------------------------------------------------------------------------------------------


def test_calls_in_several_formats_come_in_order_of_appearance_with_sequential_ids():
    answer = (
        "First:\n"
        '```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```\n'
        "Then:\n"
        '<tool_call>{"name": "read_file", "arguments": {"path": "b"}}</tool_call>\n'
        '{"name": "read_file", "arguments": {"path": "c"}}\n'
        "<tool_call><function=read_file><parameter=path>d</parameter></function></tool_call>"
    )
    calls, remaining = calls_from_text(answer, KNOWN)
    assert [(c.id, json.loads(c.arguments)["path"]) for c in calls] == [
        ("text_call_0", "a"),
        ("text_call_1", "b"),
        ("text_call_2", "c"),
        ("text_call_3", "d"),
    ]
    assert remaining == "First:\nThen:"
