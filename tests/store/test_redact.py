"""Secrets never reach what the agent writes: the shapes and look-alikes, then a real `agent run`
with secrets planted everywhere a run can pick them up, and every file it wrote searched for them."""

from __future__ import annotations

import json
import os
import secrets
import string
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.store.redact import REDACTED, Redactor
from tests.frontends.test_headless import agent, call, task_file
from tests.mcp_servers import PROBE, served
from tests.scripted_server import ScriptedServer
from tools.mcp import MCPServerConfig


def rand(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
GHP = "ghp_" + rand(ALNUM, 36)
AWS_ID = "AKIA" + rand(string.ascii_uppercase + string.digits, 16)
AWS_SECRET = rand(ALNUM + "/+", 40)
PEM_BODY = rand(ALNUM, 64)
PEM = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n{rand(ALNUM, 64)}\n-----END OPENSSH PRIVATE KEY-----"


@pytest.mark.parametrize(
    "text, secret, kind",
    [
        ("key sk-" + "a1B2" * 12 + " here", "sk-" + "a1B2" * 12, "openai"),
        ("sk-proj-" + "Zx9_" * 10, "sk-proj-" + "Zx9_" * 10, "openai"),
        ("ANTHROPIC_API_KEY is sk-ant-api03-" + "q" * 40, "sk-ant-api03-" + "q" * 40, "anthropic"),
        (f"token {GHP}.", GHP, "github"),
        ("gho_" + "b" * 36, "gho_" + "b" * 36, "github"),
        ("github_pat_" + "11ABC" * 10, "github_pat_" + "11ABC" * 10, "github"),
        (f"id={AWS_ID}", AWS_ID, "aws"),
        ("xoxb-123456789012-abcdefABCDEF", "xoxb-123456789012-abcdefABCDEF", "slack"),
        ("hf_" + "k" * 34, "hf_" + "k" * 34, "huggingface"),
        ("AIza" + "Sy" * 17 + "Q", "AIza" + "Sy" * 17 + "Q", "google"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIi", "jwt"),
        (f"cat key:\n{PEM}\nafter", PEM_BODY, "pem"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7 (cut off)", "MIIEowIBAAKCAQEA7", "pem"),
    ],
)
def test_token_shapes_are_redacted_with_their_kind(text, secret, kind):
    out = Redactor()(text)
    assert secret not in out and f"[REDACTED:{kind}]" in out


@pytest.mark.parametrize(
    "text, secret, kept",
    [
        ("Authorization: Bearer abc.DEF-123_456~xyz", "abc.DEF-123_456~xyz", "Authorization: Bearer "),
        ("curl -H 'authorization: Basic dXNlcjpwYXNzd29yZA=='", "dXNlcjpwYXNz", "authorization: Basic "),
        ("BEARER AbCdEfGhIjKlMnOpQrStUv", "AbCdEfGhIjKlMnOpQrStUv", "BEARER "),
        ("password=hunter22", "hunter22", "password="),
        ("DB_PASSWORD: 'Tr0ub4dor&3'", "Tr0ub4dor&3", "DB_PASSWORD: '"),
        ('{"api_key": "abcdef123"}', "abcdef123", '"api_key": "'),
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key = "),
        ("GITHUB_TOKEN=abc123456 make", "abc123456", "GITHUB_TOKEN="),
        ("client_secret: s3cr3t-value", "s3cr3t-value", "client_secret: "),
        ("İstanbul Password=Secret99", "Secret99", "Password="),  # "İ" lowers to two characters
    ],
)
def test_headers_and_assignments_keep_their_key_and_lose_the_value(text, secret, kept):
    out = Redactor()(text)
    assert secret not in out and kept + REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "the task-list and a risk-assessment-framework-document-of-2024",
        "commit 3e18786a1b2c3d4e5f60718293a4b5c6d7e8f901",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "Enter your password to continue.",
        "password:\n  (none)",
        "password=",
        "max_tokens: 4096, prompt_tokens=123456, tokenizer: gpt2",
        "token = get_token()\nkey = os.environ['X']",
        "password_file=/etc/pw",
        "the bearer of bad news",
        "ASIAN NASIA AKIAN",
        "xghp_" + "a" * 36,
        "Authorization: Bearer [REDACTED]",
    ],
)
def test_look_alikes_are_left_alone(text):
    assert Redactor()(text) == text


def test_exact_values_go_whole_and_short_ones_are_not_registered():
    redactor = Redactor(["swordfish-42", "swordfish-42-extended", "true"])
    assert redactor("a swordfish-42-extended b swordfish-42 c true") == f"a {REDACTED} b {REDACTED} c true"


def test_secret_looking_environment_variables_are_registered():
    redactor = Redactor()
    redactor.add_environment(
        {
            "MY_SERVICE_TOKEN": "tok-value-1",
            "SOME_API_KEY": "key-value-2",
            "APP_SECRET": "sec-value-3",
            "PGPASSWORD": "pg-value-4",
            "SHORT_TOKEN": "tiny",  # too short to tell from an ordinary word
            "HOME": "/home/someone",
            "KEYBOARD": "us-layout-x",
        }
    )
    out = redactor("tok-value-1 key-value-2 sec-value-3 pg-value-4 tiny /home/someone us-layout-x")
    assert out == " ".join([REDACTED] * 4 + ["tiny", "/home/someone", "us-layout-x"])


def test_mcp_env_and_header_values_are_registered(monkeypatch):
    monkeypatch.setenv("PLANTED_FOR_HEADER", "expanded-from-env")
    redactor = Redactor()
    redactor.add_mcp(
        {
            "local": MCPServerConfig(command="srv", env={"SETTING": "env-value-1"}),
            "remote": MCPServerConfig(
                url="http://h/mcp",
                headers={"Authorization": "Bearer hdr-value-2", "X-Other": "${PLANTED_FOR_HEADER}"},
            ),
            "duck": SimpleNamespace(env={"A": "duck-value-3"}, headers={}),
        }
    )
    out = redactor("env-value-1 | hdr-value-2 | expanded-from-env | duck-value-3")
    assert out == " | ".join([REDACTED] * 4)


def test_records_are_redacted_leaf_by_leaf_and_stay_json():
    redactor = Redactor(["planted-value"])
    record = {
        "type": "tool.result",
        "planted-value": 1,  # keys are names, kept
        "output": "found planted-value",
        "nested": [{"arguments": {"command": f"echo {GHP}"}}, 3.5, None, True],
        "path": Path("/tmp/planted-value"),
    }
    out = redactor.record(record)
    assert json.loads(json.dumps(out)) == out
    assert out["output"] == f"found {REDACTED}" and out["nested"][1:] == [3.5, None, True]
    assert out["nested"][0]["arguments"]["command"] == "echo [REDACTED:github]"
    assert out["path"] == f"/tmp/{REDACTED}" and "planted-value" in out


def test_the_prompt_history_file_keeps_no_pasted_key(tmp_path):
    from agent.frontends.tui.widgets.prompt_input import _save_history

    _save_history(tmp_path / "history.jsonl", f"use {GHP} to push")
    assert GHP not in (tmp_path / "history.jsonl").read_text()


# ---------------------------------------------------------------- a real run, every file it wrote


def written_files(*roots: Path) -> dict[Path, str]:
    return {
        path: path.read_text(encoding="utf-8", errors="replace")
        for root in roots
        if root.is_dir()
        for path in root.rglob("*")
        if path.is_file()
    }


@pytest.mark.slow
@pytest.mark.parametrize("json_mode", [True, False], ids=["json", "plain"])
def test_no_planted_secret_reaches_any_file_or_output_of_a_run(tmp_path, monkeypatch, json_mode):
    planted = {
        "api key": "apikey-" + secrets.token_hex(12),  # no known shape: only its registration hides it
        "mcp env": "mcpenv-" + secrets.token_hex(12),
        "mcp header": "mcphdr-" + secrets.token_hex(12),
        "env var": "envsecret-" + secrets.token_hex(12),
        "github token": GHP,
        "aws key id": AWS_ID,
        "aws secret": AWS_SECRET,
        "private key": PEM_BODY,
    }
    monkeypatch.setenv("AGENT_API_KEY", planted["api key"])
    monkeypatch.setenv("SPEC_TEST_DEPLOY_TOKEN", planted["env var"])
    monkeypatch.setenv("AGENT_CACHE_DIR", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "credentials").write_text(  # an ~/.aws/credentials file and a key the model cats
        f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n"
        f"github = {GHP}\n{PEM}\n"
    )
    replies = [
        {"tool_calls": [call("bash", command="cat credentials")]},
        {"tool_calls": [{"name": "mcp__probe__environment", "arguments": {"name": "PROBE_SETTING"}}]},
        {"tool_calls": [{"name": "mcp__web__header", "arguments": {"name": "X-Api-Token"}}]},
        # A model that repeats what it can (a bare AWS secret or key body has no shape to know it by).
        {"content": "Found: " + ", ".join(v for v in planted.values() if v not in (AWS_SECRET, PEM_BODY))},
    ]
    with served(PROBE) as url, ScriptedServer(replies) as server:
        mcp = {
            "probe": {
                "command": sys.executable,
                "args": [PROBE],
                "env": {"PROBE_SETTING": planted["mcp env"]},
            },
            "web": {"url": url, "headers": {"X-Api-Token": planted["mcp header"]}},
        }
        task = task_file(tmp_path, "Read the credentials.", approval="full-auto", mcp=mcp)
        args = ["run", str(task), "--base-url", server.url, "--workdir", str(work)]
        result = agent(*args, *(["--json"] if json_mode else []))
    assert result.returncode == 0, result.stderr
    # The run really handled the secrets: the tools gave them to the model, unredacted, in memory.
    seen = json.dumps(server.requests[-1]["messages"])
    assert [what for what, value in planted.items() if value not in seen] == ["api key", "env var"]

    state = Path(os.environ["AGENT_STATE_DIR"])
    files = written_files(state, tmp_path / "config", tmp_path / "cache")
    assert {path.parent.name for path in files} >= {"sessions", "telemetry", "logs"}  # MCP servers' logs
    transcript = next(text for path, text in files.items() if path.parent.name == "sessions")
    outputs = {Path("stdout"): result.stdout, Path("stderr"): result.stderr, **files}
    for where, text in outputs.items():
        for what, value in planted.items():
            assert value not in text, f"the {what} is in {where}"
    assert "[REDACTED" in transcript and "[REDACTED" in result.stdout
    if json_mode:
        events = [json.loads(line) for line in result.stdout.splitlines()]
        results = [e["output"] for e in events if e["type"] == "tool.result"]
        assert "aws_secret_access_key = [REDACTED]" in results[0] and results[1:] == [REDACTED] * 2
