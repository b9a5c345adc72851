"""Profiles load, validate with the file and field named, and resolve their files on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import ConfigError, ServerError
from agent.server.launch_plan import api_root, openai_base_url, plan_launch
from agent.server.profiles import builtin_profiles_dir, get_profile, load_profiles
from agent.settings.config import Settings
from tests.conftest import fake_binary, paths_with

SHIPPED = {
    "gemma4-31b-baseline",
    "gemma4-31b-dflash",
    "qwen3.6-27b-dflash",
    "tiny",
    "tiny-ngram",
    "attach",
    "vllm-qwen3.6-27b-dflash",
}


def write_profile(config_dir: Path, name: str, text: str) -> Path:
    path = config_dir / "profiles" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_shipped_profile_loads():
    profiles = load_profiles()
    assert set(profiles) >= SHIPPED
    assert profiles["tiny"].kind == "embedded" and profiles["tiny"].speculative is None
    assert profiles["tiny-ngram"].speculative.type.startswith("ngram")
    assert profiles["attach"].kind == "attach"
    assert profiles["vllm-qwen3.6-27b-dflash"].launch.startswith("vllm serve")


def test_tiny_profiles_cap_tokens_and_use_a_small_context():
    for name in ("tiny", "tiny-ngram"):
        profile = get_profile(name)
        assert profile.sampling.max_tokens and profile.sampling.max_tokens <= 256
        assert profile.ctx_size and profile.ctx_size <= 8192


def test_unknown_field_names_the_file_and_the_field(tmp_path):
    path = write_profile(tmp_path / "config", "typo", 'model = "x.gguf"\nctx_sise = 4096\n')
    with pytest.raises(ConfigError) as caught:
        get_profile("typo")
    assert f"{path}: unknown field 'ctx_sise'" in str(caught.value)


def test_wrong_type_names_the_nested_field(tmp_path):
    write_profile(tmp_path / "config", "bad", 'model = "x.gguf"\n[sampling]\ntop_k = "many"\n')
    with pytest.raises(ConfigError, match=r"field 'sampling.top_k': Input should be a valid integer"):
        get_profile("bad")


def test_invalid_toml_names_the_file(tmp_path):
    path = write_profile(tmp_path / "config", "broken", "model = \n")
    with pytest.raises(ConfigError, match=f"profile {path}: not valid TOML"):
        load_profiles()


def test_a_flag_and_value_in_one_string_is_refused(tmp_path):
    write_profile(tmp_path / "config", "joined", 'model = "x.gguf"\nargs = ["--ctx-size 4096"]\n')
    with pytest.raises(ConfigError, match="write each flag and value as its own item"):
        get_profile("joined")


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ConfigError) as caught:
        get_profile("gemma5")
    assert "unknown profile 'gemma5'" in str(caught.value)
    assert "tiny-ngram" in str(caught.value)


def test_a_user_profile_replaces_the_builtin_of_the_same_name(tmp_path):
    write_profile(tmp_path / "config", "tiny", 'model = "embedded"\nport = 9999\n')
    assert get_profile("tiny").port == 9999


def test_builtin_profiles_are_found_from_the_checkout():
    assert (builtin_profiles_dir() / "tiny.toml").is_file()


def test_models_dir_comes_from_the_environment_with_user_and_vars_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MODELS_ROOT", "gguf")
    monkeypatch.setenv("AGENT_MODELS_DIR", "~/$MODELS_ROOT")
    from agent.settings.config import load_settings

    assert load_settings().resolved_models_dir() == tmp_path / "gguf"


def test_a_missing_model_file_names_the_path_and_the_models_dir(tmp_path):
    empty = tmp_path / "empty-models"
    empty.mkdir()
    with pytest.raises(ServerError) as caught:
        plan_launch(get_profile("gemma4-31b-baseline"), paths_with(None, tmp_path, empty), binary="/bin/true")
    text = str(caught.value)
    assert (
        f"the model of profile 'gemma4-31b-baseline' is missing: {empty / 'gemma-4-31B-it-Q4_K_S.gguf'}"
        in text
    )
    assert "AGENT_MODELS_DIR" in text and "Nothing is downloaded" in text


def test_a_missing_draft_file_is_named(tmp_path, models_dir):
    (models_dir / "gemma4-31b-it-dflash-Q5_K_M.gguf").unlink()
    with pytest.raises(ServerError, match="the draft model of profile 'gemma4-31b-dflash' is missing"):
        plan_launch(
            get_profile("gemma4-31b-dflash"), paths_with(None, tmp_path, models_dir), binary="/bin/true"
        )


def test_an_unset_llama_server_bin_says_what_to_set(tmp_path, models_dir):
    with pytest.raises(ServerError) as caught:
        plan_launch(get_profile("gemma4-31b-dflash"), paths_with(None, tmp_path, models_dir))
    assert "$LLAMA_SERVER_BIN, which is not set" in str(caught.value)
    assert "export LLAMA_SERVER_BIN=" in str(caught.value)


def test_llama_server_bin_names_the_binary(tmp_path, models_dir, monkeypatch):
    binary = fake_binary(tmp_path, "llama-server-beellama-0.1-help.txt")
    monkeypatch.setenv("LLAMA_SERVER_BIN", str(binary))
    plan = plan_launch(get_profile("gemma4-31b-dflash"), paths_with(None, tmp_path, models_dir))
    assert plan.binary == binary and plan.capabilities.dialect == "beellama-0.1"


def test_a_binary_that_does_not_exist_is_named(tmp_path, models_dir):
    with pytest.raises(ServerError, match="llama-server binary not found: /nowhere/llama-server"):
        plan_launch(
            get_profile("gemma4-31b-baseline"),
            paths_with(None, tmp_path, models_dir),
            binary="/nowhere/llama-server",
        )


def test_an_attach_profile_is_never_launched(tmp_path, models_dir):
    with pytest.raises(ServerError, match="it is never started here"):
        plan_launch(get_profile("attach"), paths_with(None, tmp_path, models_dir))


def test_base_urls_normalise_for_the_openai_client_and_for_llama_server():
    assert openai_base_url("http://127.0.0.1:8910") == "http://127.0.0.1:8910/v1"
    assert openai_base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    assert api_root("http://127.0.0.1:8910/v1") == "http://127.0.0.1:8910"


def test_settings_files_are_validated_naming_the_file(tmp_path):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('approval = "yolo"\n')
    from agent.settings.config import load_settings

    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"{config}: field 'approval'" in str(caught.value)
    assert Settings().approval == "ask"
