"""Flag dialects, checked against the recorded --help of upstream llama.cpp and BeeLlama v0.1, and against
BeeLlama v0.4.4's help as built from its documented flags (tests/fixtures/README.md: not a capture)."""

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
# Built from docs/beellama-args.md (v0.4.4), not captured from a binary: the name says so.
BEELLAMA_04_HELP = "llama-server-beellama-0.4.4-help.from-docs.txt"
BEELLAMA_04 = capabilities_from_help(
    Path("/opt/beellama-0.4.4/llama-server"), (FIXTURES / BEELLAMA_04_HELP).read_text()
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


# BeeLlama v0.4.4 (its docs) and upstream late 2026: the dialects users build today.


def test_the_v044_help_is_marked_as_built_from_the_docs_not_captured():
    text = (FIXTURES / BEELLAMA_04_HELP).read_text()
    assert "from-docs" in BEELLAMA_04_HELP
    assert text.startswith("# NOT CAPTURED FROM A REAL BINARY. Built from documented flags")
    assert "docs/beellama-args.md" in text.splitlines()[3]
    readme = (FIXTURES / "README.md").read_text()
    assert f"`{BEELLAMA_04_HELP}` is **not captured from a real binary**" in readme


def test_beellama_044_help_is_read_as_the_beellama_04_dialect():
    assert BEELLAMA_04.dialect == "beellama-0.4"
    assert "draft-dflash" in BEELLAMA_04.spec_types and "dflash" not in BEELLAMA_04.spec_types
    assert {"kvarn2", "kvarn3", "kvarn4", "kvarn5", "kvarn6", "kvarn8"} <= set(BEELLAMA_04.cache_types)
    assert not any(t.startswith("kvarn") for t in BEELLAMA_04.flags["--spec-draft-type-k"].choices)
    for flag in (
        "--spec-draft-n-max",
        "--spec-draft-n-min",
        "--spec-draft-p-min",
        "--spec-dm-controller",
        "--spec-dm-profit-min",
        "--spec-dm-profit-baseline-interval",
        "--cache-type-k-swa",
    ):
        assert BEELLAMA_04.accepts(flag), flag
    assert "--spec-dflash-cross-ctx" not in BEELLAMA_04.flags
    assert "--spec-dm-adaptive" not in BEELLAMA_04.flags
    assert BEELLAMA_04.flags["--draft-max"].removed and BEELLAMA_04.flags["--draft-min"].removed


def test_kvarn_cache_types_alone_make_a_help_beellama_04():
    kvarn = (
        (FIXTURES / "llama-server-upstream-help.txt").read_text().replace("q5_0, q5_1", "q5_0, q5_1, kvarn4")
    )
    assert capabilities_from_help(Path("/x"), kvarn).dialect == "beellama-0.4"
    assert UPSTREAM.dialect == "upstream" and BEELLAMA.dialect == "beellama-0.1"


def test_spec_type_takes_a_comma_list_on_upstream_and_v04_and_one_value_on_v01():
    assert UPSTREAM.takes_type_list and BEELLAMA_04.takes_type_list
    assert not BEELLAMA.takes_type_list


def test_upstream_has_per_type_ngram_flags_and_removed_the_shared_ones():
    assert UPSTREAM.accepts("--spec-ngram-mod-n-match") and UPSTREAM.accepts("--spec-ngram-simple-size-n")
    assert UPSTREAM.flags["--spec-ngram-size-n"].removed


@pytest.mark.parametrize("caps", [UPSTREAM, BEELLAMA_04], ids=["upstream", "beellama-0.4.4"])
def test_a_combined_type_passes_where_the_binary_takes_a_list(caps):
    argv = ["--spec-type", "draft-dflash,ngram-mod", "--spec-ngram-mod-n-match", "24"]
    result = translate_args(argv, caps, "p")
    assert result.argv == argv and result.notes == []
    # Written in v0.1's spelling, each member is translated.
    assert translate_args(["--spec-type", "dflash, ngram-mod"], caps, "p").argv == [
        "--spec-type",
        "draft-dflash,ngram-mod",
    ]


def test_a_combined_type_is_refused_with_the_reason_where_the_binary_takes_one():
    with pytest.raises(ServerError) as caught:
        translate_args(["--spec-type", "draft-dflash,ngram-mod"], BEELLAMA, "p")
    assert "--spec-type dflash,ngram-mod: this binary takes one speculative type, not a comma list" in str(
        caught.value
    )


def test_two_draft_model_types_in_one_list_are_refused():
    with pytest.raises(ServerError, match="draft-dflash and draft-mtp would share the server's one draft"):
        translate_args(["--spec-type", "draft-dflash,draft-mtp"], BEELLAMA_04, "p")


def _with_type(profile: ServerProfile, spec_type: str) -> ServerProfile:
    assert profile.speculative is not None
    return profile.model_copy(
        update={"speculative": profile.speculative.model_copy(update={"type": spec_type})}
    )


@pytest.mark.parametrize("help_fixture", ["llama-server-upstream-help.txt", BEELLAMA_04_HELP])
def test_a_profile_names_a_combined_type(tmp_path, models_dir, help_fixture):
    profile = _with_type(get_profile("qwen3.6-27b-dflash"), "draft-dflash,ngram-mod")
    binary = fake_binary(tmp_path, help_fixture)
    plan = plan_launch(profile, paths_with(None, tmp_path, models_dir), binary=str(binary))
    assert plan.argv[plan.argv.index("--spec-type") + 1] == "draft-dflash,ngram-mod"


def test_a_combined_type_profile_on_beellama_01_is_refused(tmp_path, models_dir):
    profile = _with_type(get_profile("qwen3.6-27b-dflash"), "draft-dflash,ngram-mod")
    binary = fake_binary(tmp_path, "llama-server-beellama-0.1-help.txt")
    with pytest.raises(ServerError, match="takes one speculative type, not a comma list"):
        plan_launch(profile, paths_with(None, tmp_path, models_dir), binary=str(binary))


def test_seed_baseline_command_is_accepted_by_beellama_044_unchanged(tmp_path, models_dir, monkeypatch):
    monkeypatch.chdir(models_dir.parent)
    plan = _plan(tmp_path, Path("models"), "gemma4-31b-baseline", BEELLAMA_04_HELP, host="0.0.0.0")
    assert options(plan.argv) == options(seed_argv(BASELINE))


def test_seed_dflash_on_beellama_044_is_refused_for_cross_ctx_alone(tmp_path, models_dir):
    with pytest.raises(ServerError) as caught:
        _plan(tmp_path, models_dir, "gemma4-31b-dflash", BEELLAMA_04_HELP)
    error = caught.value
    assert error.why.splitlines() == [
        "  --spec-dflash-cross-ctx: not an option of this binary. BeeLlama v0.4 removed it with the fork's "
        "DFlash ring and verifier, with no replacement: remove it"
    ]
    assert "beellama-0.4 dialect" in (error.fix or "")


@pytest.mark.parametrize("caps", [UPSTREAM, BEELLAMA_04], ids=["upstream", "beellama-0.4.4"])
def test_seed_dflash_without_cross_ctx_translates(caps):
    argv = seed_argv(DFLASH)
    at = argv.index("--spec-dflash-cross-ctx")
    del argv[at : at + 2]
    result = translate_args(argv, caps, "p")
    assert result.notes == ["--no-mmap --mlock → --load-mode mlock", "--spec-type dflash → draft-dflash"]
    assert result.argv[result.argv.index("--load-mode") + 1] == "mlock"
    assert "--no-mmap" not in result.argv and "--mlock" not in result.argv
    # The rest is the seed's own: renamed only where a note says so.
    rest = [(f, v) for f, v in options(result.argv) if f not in ("--load-mode", "--spec-type")]
    seed = [(f, v) for f, v in options(argv) if f not in ("--no-mmap", "--mlock", "--spec-type")]
    assert rest == seed


def test_one_load_switch_maps_to_its_load_mode_and_v01_keeps_the_switches():
    assert translate_args(["--no-mmap"], UPSTREAM, "p").argv == ["--load-mode", "none"]
    assert translate_args(["--mlock"], BEELLAMA_04, "p").argv == ["--load-mode", "mmap+mlock"]
    assert translate_args(["--no-mmap", "--mlock"], BEELLAMA, "p").argv == ["--no-mmap", "--mlock"]


def test_a_v01_dflash_profile_on_v044_is_told_the_v04_flag_for_each():
    v01 = [
        "--spec-type",
        "dflash",
        "--spec-dflash-cross-ctx",
        "1024",
        "--draft-max",
        "16",
        "--draft-min",
        "2",
    ]
    v01 += ["--spec-dm-adaptive", "--spec-dm-fringe-min", "0.3"]
    with pytest.raises(ServerError) as caught:
        translate_args(v01, BEELLAMA_04, "p")
    lines = caught.value.why.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(
        "  --spec-dflash-cross-ctx: not an option of this binary. BeeLlama v0.4 removed"
    )
    assert lines[0].endswith(": remove it")
    assert lines[1].endswith("adaptive draft depth: use --spec-dm-controller profit instead")
    assert "v0.4 keeps only the profit controller (--spec-dm-controller): remove it" in lines[2]
    # What has a v0.4 spelling is renamed, and each rename is a note.
    kept = ["--spec-type", "dflash", "--draft-max", "16", "--draft-min", "2"]
    result = translate_args(kept, BEELLAMA_04, "p")
    assert result.argv == [
        "--spec-type",
        "draft-dflash",
        "--spec-draft-n-max",
        "16",
        "--spec-draft-n-min",
        "2",
    ]
    assert result.notes == [
        "--spec-type dflash → draft-dflash",
        "--draft-max → --spec-draft-n-max",
        "--draft-min → --spec-draft-n-min",
    ]


def test_bee_flags_on_upstream_are_refused_as_beellamas():
    with pytest.raises(ServerError) as caught:
        translate_args(["--spec-dm-adaptive", "--spec-dm-controller", "off"], UPSTREAM, "p")
    lines = caught.value.why.splitlines()
    assert lines[0].endswith("adaptive draft depth: remove it")
    assert lines[1] == (
        "  --spec-dm-controller: not an option of this binary. BeeLlama's adaptive draft-depth controller; "
        "upstream llama.cpp has none: remove it"
    )


def test_v01_only_spec_types_are_refused_on_v04_with_what_to_use():
    with pytest.raises(
        ServerError, match=r"`copyspec` is BeeLlama v0\.1's; v0\.4 rejects it: use draft-dflash"
    ):
        translate_args(["--spec-type", "copyspec"], BEELLAMA_04, "p")


def test_cache_types_outside_the_allowed_values_are_renamed_as_v04_does_or_refused():
    result = translate_args(["-ctk", "turbo3_tcq", "--spec-draft-type-v", "turbo4"], BEELLAMA_04, "p")
    assert result.argv == ["-ctk", "kvarn3", "--spec-draft-type-v", "q4_0"]
    assert result.notes == ["-ctk turbo3_tcq → kvarn3", "--spec-draft-type-v turbo4 → q4_0"]
    with pytest.raises(ServerError, match=r"--cache-type-k kvarn4: not a value this binary allows .*KVarN"):
        translate_args(["--cache-type-k", "kvarn4"], UPSTREAM, "p")
    # Never the other way: a KVarN profile is not given BeeLlama v0.1's TurboQuant.
    with pytest.raises(ServerError, match="--cache-type-v kvarn4: not a value"):
        translate_args(["--cache-type-v", "kvarn4"], BEELLAMA, "p")
    assert translate_args(["--cache-type-k", "kvarn4"], BEELLAMA_04, "p").notes == []


def test_a_draft_length_on_n_gram_types_alone_becomes_their_own_length_flag_upstream():
    # Said with the generic flag, upstream would take it for a draft model and let ngram-mod draft 64.
    argv = ["-m", "m.gguf", "--spec-type", "ngram-mod", "--spec-draft-n-max", "32", "--spec-draft-n-min", "8"]
    t = translate_args(argv, UPSTREAM, "p")
    assert t.argv == ["-m", "m.gguf", "--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "32",
                      "--spec-ngram-mod-n-min", "8"]  # fmt: skip
    assert "--spec-draft-n-max 32 → --spec-ngram-mod-n-max 32 (n-gram drafting)" in t.notes
    old = translate_args(["--spec-type", "ngram-simple,ngram-mod", "--draft-max", "16"], UPSTREAM, "p")
    assert old.argv == ["--spec-type", "ngram-simple,ngram-mod", "--spec-ngram-simple-size-m", "16",
                        "--spec-ngram-mod-n-max", "16"]  # fmt: skip


def test_a_draft_length_stays_the_draft_models_when_one_drafts_or_the_binary_has_no_per_type_flags():
    combined = ["--spec-type", "draft-simple,ngram-mod", "--spec-draft-n-max", "8"]
    assert translate_args(combined, UPSTREAM, "p").argv == combined
    older = capabilities_from_help(  # a binary from before the per-type flags (2026-04)
        Path("llama-server"),
        "-m,    --model FNAME        model path\n--port PORT                 port\n"
        "--spec-type [none|ngram-mod]   type\n--draft-max N               tokens to draft\n",
    )
    argv = ["--spec-type", "ngram-mod", "--draft-max", "16"]
    assert translate_args(argv, older, "p").argv == argv
