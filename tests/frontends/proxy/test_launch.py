"""`agent launch` and `agent watch` as real processes: a real client program as the launched agent (on
the scripted model server, so its answers are known), its figures at exit, its exit code passed on, a
stop asked by SIGTERM, and the live view of its turns. tests/frontends/proxy/test_clients_real.py runs
the published agents (OpenCode from npm, Aider from PyPI) on the real llama-server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.cli import build_parser
from agent.errors import ConfigError
from agent.frontends.proxy.command import Proxied
from agent.frontends.proxy.launch import CLIENTS, plan
from agent.server.profiles import ServerProfile
from agent.store.transcripts import list_session_paths, load_session
from tests.scripted_server import ScriptedServer

CLIENT = textwrap.dedent(
    """
    import os, sys, openai
    assert os.environ["OPENAI_BASE_URL"].startswith("http://127.0.0.1:"), os.environ["OPENAI_BASE_URL"]
    client = openai.OpenAI(max_retries=0)
    for text in sys.argv[1:]:
        answer = client.chat.completions.create(
            model=os.environ["AGENT_PROXY_MODEL"], messages=[{"role": "user", "content": text}], stream=True
        )
        print("".join(c.choices[0].delta.content or "" for c in answer if c.choices), flush=True)
    if os.environ.get("WAIT"):
        import time
        time.sleep(60)
    sys.exit(int(os.environ.get("EXIT", "0")))
    """
)


def launch(args: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agent", "launch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def parsed(*argv: str):
    args = build_parser().parse_args(["launch", *argv])
    return args, plan(args)


def test_a_known_agent_takes_our_options_before_dash_dash_and_its_own_after():
    args, (client, command) = parsed(
        "opencode", "-p", "coder-ngram", "--port", "9001", "--", "run", "-p", "x"
    )
    assert client.command == "opencode"
    assert (args.profile, args.port) == ("coder-ngram", 9001)
    assert command == ["opencode", "run", "-p", "x"]
    # Options that are not ours go to the agent, wherever they are.
    args, (_, command) = parsed("aider", "--yes-always", "-p", "tiny")
    assert command == ["aider", "--yes-always"] and args.profile == "tiny"


def test_each_agent_is_told_the_servers_context_and_the_profiles_answer_length(tmp_path: Path):
    profile = ServerProfile(name="p", model="m.gguf", ctx_size=4096, sampling={"max_tokens": 512})
    proxied = Proxied("http://127.0.0.1:1", "p", None, SimpleNamespace(profile=profile), context=8192)
    told = {name: client.setup(proxied, tmp_path) for name, client in CLIENTS.items()}
    models = json.loads((tmp_path / "aider-models.json").read_text())["openai/p"]
    assert (models["max_input_tokens"], models["max_output_tokens"]) == (8192, 512)
    opencode = json.loads(Path(told["opencode"][0]["OPENCODE_CONFIG"]).read_text())
    assert opencode["provider"]["spec-agent"]["models"]["p"]["limit"] == {"context": 8192, "output": 512}
    assert told["claude"][0]["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "512"
    assert "model_context_window=8192" in told["codex"][1]
    assert profile.server_args("m.gguf", None, None)[-2:] == ["--n-predict", "512"]  # Codex names no length


def test_any_other_command_after_dash_dash_keeps_all_its_arguments():
    args, (client, command) = parsed("-p", "tiny", "--", "python3", "client.py", "-p", "q")
    assert command == ["python3", "client.py", "-p", "q"] and args.profile == "tiny"
    assert client.install == ""


def test_an_unknown_name_and_a_missing_agent_say_what_to_do(tmp_path: Path, monkeypatch):
    with pytest.raises(ConfigError) as unknown:
        parsed("no-such-agent-here")
    assert "aider, opencode, claude, codex, goose" in unknown.value.fix
    monkeypatch.setenv("PATH", str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-m", "agent", "launch", "aider"], capture_output=True, text=True, env=os.environ
    )
    assert out.returncode != 0
    assert "'aider' is not installed here" in out.stderr and "pipx install aider-chat" in out.stderr


def test_a_launched_program_goes_through_the_proxy_as_one_session_and_its_figures_print_at_exit(
    isolated_state: Path, tmp_path: Path
):
    (tmp_path / "client.py").write_text(CLIENT)
    with ScriptedServer([{"content": "first answer"}, {"content": "second answer"}]) as server:
        run = launch(["--base-url", server.url, "--", sys.executable, str(tmp_path / "client.py"), "one", "two"],
                     env={"EXIT": "3"})  # fmt: skip
        out, _ = run.communicate(timeout=60)
    assert run.returncode == 3, out  # the agent's own exit code
    assert "first answer" in out and "second answer" in out
    [path] = list_session_paths(isolated_state)
    record = load_session(isolated_state, path.stem)
    assert record.turns == 2 and record.started["options"]["via"] == "proxy"
    assert f"{path.stem}: 2 turns" in out  # the figures at exit


def test_sigterm_stops_the_agent_first_then_what_launch_started(isolated_state: Path, tmp_path: Path):
    (tmp_path / "client.py").write_text(CLIENT)
    with ScriptedServer([{"content": "hello"}]) as server:
        run = launch(["--base-url", server.url, "--", sys.executable, str(tmp_path / "client.py"), "hi"],
                     env={"WAIT": "1"})  # fmt: skip
        line = ""
        deadline = time.monotonic() + 60
        while "hello" not in line and time.monotonic() < deadline:
            line = run.stdout.readline()
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=30)
    assert run.returncode == 128 + signal.SIGTERM  # the agent was terminated; launch said how
    assert "1 turn" in out
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "client.py")], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_watch_shows_each_proxied_turn_live_and_the_totals_at_the_end(isolated_state: Path, tmp_path: Path):
    (tmp_path / "client.py").write_text(CLIENT)
    watch = subprocess.Popen(
        [sys.executable, "-m", "agent", "watch"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        time.sleep(1.5)  # watching before the session exists
        with ScriptedServer([{"content": "an answer"}]) as server:
            run = launch(["--base-url", server.url, "--", sys.executable, str(tmp_path / "client.py"), "hi"])
            run.communicate(timeout=60)
        [path] = list_session_paths(isolated_state)
        time.sleep(1.0)
    finally:
        watch.send_signal(signal.SIGINT)
        out, _ = watch.communicate(timeout=30)
    assert f"session {path.stem} from OpenAI/Python" in out
    assert f"{path.stem} turn 1: " in out and "tok/s gen" in out
    assert "totals" in out and f"{path.stem} (OpenAI/Python" in out
    once = subprocess.run([sys.executable, "-m", "agent", "watch", "--once"], capture_output=True, text=True)
    assert f"{path.stem} turn 1: " in once.stdout


def test_stats_and_sessions_list_proxied_sessions_beside_the_agents_own(isolated_state: Path, tmp_path: Path):
    (tmp_path / "client.py").write_text(CLIENT)
    with ScriptedServer([{"content": "an answer"}]) as server:
        launch(
            ["--base-url", server.url, "--", sys.executable, str(tmp_path / "client.py"), "a question"]
        ).communicate(timeout=60)
    listed = subprocess.run(
        [sys.executable, "-m", "agent", "sessions", "--json"], capture_output=True, text=True
    )
    [row] = json.loads(listed.stdout)
    assert row["task"] == "a question" and row["turns"] == 1
    stats = subprocess.run([sys.executable, "-m", "agent", "stats", "--json"], capture_output=True, text=True)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)
