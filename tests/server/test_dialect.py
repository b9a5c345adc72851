"""Flag dialects, checked against the recorded --help of upstream llama.cpp and BeeLlama v0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import ServerError
from agent.server.dialect import capabilities_from_help, read_capabilities, translate_args
from agent.server.launch_plan import plan_launch
from agent.server.profiles import ServerProfile, Speculative, get_profile
from tests.conftest import FIXTURES, fake_binary, paths_with
from tests.seed_commands import BASELINE, DFLASH, options, seed_argv

UPSTREAM = capabilities_from_help(
    Path("/opt/upstream/llama-server"), (FIXTURES / "llama-server-upstream-help.txt").read_text()
)
BEELLAMA = capabilities_from_help(
    Path("/opt/beellama/llama-server"), (FIXTURES / "llama-server-beellama-0.1-help.txt").read_text()
)


def test_upstream_help_is_read_as_the_upstream_dialect():
    assert UPSTREAM.dialect == "upstream"
    assert "draft-dflash" in UPSTREAM.spec_types and "dflash" not in UPSTREAM.spec_types
    assert UPSTREAM.flags["-c"].names == ("-c", "--ctx-size") and UPSTREAM.flags["-c"].takes_value
    assert not UPSTREAM.flags["--jinja"].takes_value


def test_flags_upstream_removed_are_not_accepted():
    assert "--draft-max" in UPSTREAM.flags and UPSTREAM.flags["--draft-max"].removed
    assert not UPSTREAM.accepts("--draft-max")
    assert UPSTREAM.accepts("--spec-draft-n-max")


def test_beellama_help_is_read_as_the_beellama_01_dialect():
    assert BEELLAMA.dialect == "beellama-0.1"
    assert "dflash" in BEELLAMA.spec_types
    assert BEELLAMA.accepts("--spec-dflash-cross-ctx")


def test_a_help_text_that_is_not_llama_server_is_refused():
    with pytest.raises(ServerError, match="does not look like llama-server"):
        capabilities_from_help(
            Path("/bin/ls"), "Usage: ls [OPTION]... [FILE]...\n  -a, --all   do not ignore"
        )


def _plan(tmp_path, models_dir, name, help_fixture, **kw):
    profile = get_profile(name)
    paths = paths_with(None, tmp_path, models_dir)
    binary = fake_binary(tmp_path, help_fixture)
    return plan_launch(profile, paths, binary=str(binary), **kw)


def test_seed_baseline_profile_is_the_seed_command_flag_for_flag(tmp_path, models_dir, monkeypatch):
    monkeypatch.chdir(models_dir.parent)
    plan = _plan(
        tmp_path, Path("models"), "gemma4-31b-baseline", "llama-server-beellama-0.1-help.txt", host="0.0.0.0"
    )
    assert options(plan.argv) == options(seed_argv(BASELINE))
    assert plan.notes[-1].startswith("warning: listening on 0.0.0.0 without an API key")


def test_seed_baseline_command_is_accepted_by_upstream_unchanged(tmp_path, models_dir, monkeypatch):
    monkeypatch.chdir(models_dir.parent)
    plan = _plan(
        tmp_path, Path("models"), "gemma4-31b-baseline", "llama-server-upstream-help.txt", host="0.0.0.0"
    )
    assert options(plan.argv) == options(seed_argv(BASELINE))


def test_seed_dflash_profile_is_the_seed_command_flag_for_flag(tmp_path, models_dir, monkeypatch):
    monkeypatch.chdir(models_dir.parent)
    plan = _plan(
        tmp_path, Path("models"), "gemma4-31b-dflash", "llama-server-beellama-0.1-help.txt", host="0.0.0.0"
    )
    assert options(plan.argv) == options(seed_argv(DFLASH))
    assert not any("→" in note for note in plan.notes)


def test_profiles_listen_on_loopback_unless_told_otherwise(tmp_path, models_dir):
    plan = _plan(tmp_path, models_dir, "gemma4-31b-dflash", "llama-server-beellama-0.1-help.txt")
    assert plan.argv[plan.argv.index("--host") + 1] == "127.0.0.1"
    assert not any(note.startswith("warning") for note in plan.notes)


def test_seed_dflash_on_upstream_is_refused_naming_flag_profile_and_binary(tmp_path, models_dir):
    with pytest.raises(ServerError) as caught:
        _plan(tmp_path, models_dir, "gemma4-31b-dflash", "llama-server-upstream-help.txt")
    text = str(caught.value)
    assert "--spec-dflash-cross-ctx" in text
    assert "gemma4-31b-dflash" in text
    assert str(tmp_path / "bin" / "llama-server") in text
    # `dflash` itself has a known upstream spelling, so it is not among the refusals.
    assert "--spec-type dflash" not in text


def test_spec_type_dflash_is_translated_for_upstream():
    argv = ["-m", "m.gguf", "--spec-type", "dflash", "--spec-draft-model", "d.gguf"]
    result = translate_args(argv, UPSTREAM, "p")
    assert result.argv == ["-m", "m.gguf", "--spec-type", "draft-dflash", "--spec-draft-model", "d.gguf"]
    assert result.notes == ["--spec-type dflash → draft-dflash"]


def test_draft_dflash_is_translated_for_beellama_01(tmp_path, models_dir):
    plan = _plan(tmp_path, models_dir, "qwen3.6-27b-dflash", "llama-server-beellama-0.1-help.txt")
    assert plan.argv[plan.argv.index("--spec-type") + 1] == "dflash"
    assert "beellama-0.4" in plan.notes[0] and "draft-dflash → dflash" in plan.notes[0]


def test_removed_draft_max_is_renamed_where_the_binary_has_the_new_name():
    result = translate_args(["--draft-max", "16", "--draft-min", "2"], UPSTREAM, "p")
    assert result.argv == ["--spec-draft-n-max", "16", "--spec-draft-n-min", "2"]


def test_an_unknown_flag_is_refused_by_name():
    with pytest.raises(ServerError, match="--no-such-flag: not an option of this binary"):
        translate_args(["-m", "x", "--no-such-flag", "3"], UPSTREAM, "p")


def test_an_unknown_spec_type_lists_the_known_ones():
    with pytest.raises(ServerError, match=r"--spec-type suffix: unknown speculative type \(it knows: none,"):
        translate_args(["--spec-type", "suffix"], UPSTREAM, "p")


def test_negative_numbers_are_values_not_flags():
    result = translate_args(["-ngl", "-1", "--ctx-size", "4096"], UPSTREAM, "p")
    assert result.argv == ["-ngl", "-1", "--ctx-size", "4096"]


def test_help_is_cached_per_binary(tmp_path):
    binary = fake_binary(tmp_path, "llama-server-upstream-help.txt")
    first = read_capabilities(binary, tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "help").glob("*.txt"))) == 1
    binary.write_text("#!/bin/sh\nexit 1\n")  # a changed binary is read again, not served from the cache
    with pytest.raises(ServerError):
        read_capabilities(binary, tmp_path / "cache")
    assert first.dialect == "upstream"


def test_profile_speculative_options_render_as_flags():
    profile = ServerProfile(
        name="p",
        model="m",
        speculative=Speculative(
            type="dflash", options={"spec-dflash-cross-ctx": 512, "spec-dm-adaptive": True}
        ),
    )
    argv = profile.server_args("m.gguf", None, None)
    assert argv[argv.index("--spec-dflash-cross-ctx") + 1] == "512"
    assert "--spec-dm-adaptive" in argv
