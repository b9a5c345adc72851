"""CPU or CUDA (issue #25): the build choice, its cmake options and build key, the CLI's words, and the
offload decision from `llama-server --list-devices`.

This machine has no GPU, so `nvidia-smi`, `nvcc` and a GPU llama-server are fake scripts on a PATH
made for each test; they run as real subprocesses, and each checks the arguments it is given, so a
changed query fails here rather than on a user's GPU. The real thing ran on an H200
(docs/benchmarks.md, "On an NVIDIA H200").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.errors import ServerError
from agent.server import gpu, machine_paths
from agent.server.build import BASE_CMAKE_ARGS, build_key, embedded_build
from agent.server.gpu import choose_build, list_devices, parse_list_devices
from agent.server.launch_plan import MachinePaths, plan_launch
from agent.server.profiles import Speculative, get_profile
from agent.settings.config import load_settings
from tests.conftest import FIXTURES
from tests.gguf_files import write_gguf

VERSION = "11434.0.0"
CUDA_ARGS = (
    "-DGGML_CUDA=ON",
    "-DGGML_CUDA_FA=ON",
    "-DGGML_CUDA_FA_ALL_QUANTS=ON",
    "-DCMAKE_CUDA_ARCHITECTURES=90",
)
REPO = Path(__file__).resolve().parents[2]


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def fake_nvidia_smi(folder: Path, *gpus: str) -> Path:
    # Answers only the query the detection must make; anything else is a failure, as an old driver
    # that lacks compute_cap would give.
    # printf is the shell's own: the test PATH holds nothing but the fakes.
    lines = "".join(f"'{g}\\n' " for g in gpus)
    return script(
        folder / "nvidia-smi",
        f'[ "$1" = "--query-gpu=name,compute_cap" ] && [ "$2" = "--format=csv,noheader" ] || exit 6\n'
        f"printf %b {lines}\n",
    )


def fake_nvcc(folder: Path) -> Path:
    return script(folder / "nvcc", 'echo "Cuda compilation tools, release 13.0, V13.0.88"\n')


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH folder for this test's fake tools; NVML and /usr/local/cuda are out of reach."""
    folder = tmp_path / "fakebin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails: detection falls to nvidia-smi
    monkeypatch.setattr(gpu, "CUDA_BIN_DIRS", (tmp_path / "no-cuda" / "bin",))
    gpu._detect.cache_clear()
    return folder


def cpu_key() -> str:
    """The key of a CPU build as it was before CUDA builds existed (the compiler on PATH is part of it)."""
    return build_key(VERSION, BASE_CMAKE_ARGS)


def test_gpu_and_toolkit_build_for_cuda_at_the_gpus_architecture(machine: Path, tmp_path: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    fake_nvcc(machine)
    choice = choose_build("auto")
    assert choice.backend == "cuda"
    assert choice.cmake_args == CUDA_ARGS
    assert choice.gpus == (gpu.Gpu("NVIDIA H200", "9.0"),)
    build = embedded_build(tmp_path, VERSION, (), choice)
    assert build.cmake_args == (*BASE_CMAKE_ARGS, *CUDA_ARGS)
    assert build.root.name.startswith(f"{VERSION}-cuda90-")
    assert build.root.name != cpu_key()
    assert "CUDA, architecture 90 (NVIDIA H200 (compute 9.0))" in gpu.announce(choice, cores=16)
    assert "expect about 6 min on 16 cores" in gpu.announce(choice, cores=16)


def test_gpu_without_toolkit_builds_for_the_cpu_and_says_what_to_install(
    machine: Path, tmp_path: Path
) -> None:
    fake_nvidia_smi(machine, "NVIDIA GeForce RTX 4090, 8.9")
    choice = choose_build("auto")
    assert choice.backend == "cpu"
    assert choice.cmake_args == ()
    [note] = choice.notes
    assert "NVIDIA GeForce RTX 4090 (compute 8.9)" in note
    assert "CUDA toolkit" in note and "nvcc" in note and "agent server install --cuda" in note
    assert embedded_build(tmp_path, VERSION, (), choice).root.name == cpu_key()


def test_neither_gpu_nor_toolkit_keeps_the_cpu_build_and_its_old_key(machine: Path, tmp_path: Path) -> None:
    choice = choose_build("auto")
    assert (choice.backend, choice.cmake_args, choice.notes) == ("cpu", (), ())
    # The key of the builds made before CUDA existed: caches (CI's too) stay valid.
    assert embedded_build(tmp_path, VERSION, (), choice).root.name == cpu_key()


def test_nvidia_smi_that_cannot_answer_the_query_means_no_gpu(machine: Path) -> None:
    script(
        machine / "nvidia-smi", "echo 'Field \"compute_cap\" is not a valid field to query.' >&2; exit 2\n"
    )
    fake_nvcc(machine)
    assert choose_build("auto").backend == "cpu"


def test_forced_cpu_wins_over_a_gpu_and_toolkit(machine: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    fake_nvcc(machine)
    choice = choose_build("cpu")
    assert (choice.backend, choice.cmake_args) == ("cpu", ())


def test_forced_cuda_without_toolkit_says_what_why_and_what_to_do(machine: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    with pytest.raises(ServerError) as caught:
        choose_build("cuda")
    error = caught.value
    assert "nvcc" in error.what
    assert "CUDA build compiles the GPU kernels with the CUDA toolkit's compiler" in error.why
    assert "Install the CUDA toolkit" in error.fix and "--cpu" in error.fix


def test_forced_cuda_without_a_gpu_asks_for_the_architecture(machine: Path, tmp_path: Path) -> None:
    fake_nvcc(machine)
    with pytest.raises(ServerError, match="no NVIDIA GPU") as caught:
        choose_build("cuda")
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in caught.value.fix
    # Named by the user, it builds (a cross-build for a GPU elsewhere).
    choice = choose_build("cuda", ("-DCMAKE_CUDA_ARCHITECTURES=89",))
    assert choice.backend == "cuda" and "-DCMAKE_CUDA_ARCHITECTURES=89" not in choice.cmake_args
    build = embedded_build(tmp_path, VERSION, ("-DCMAKE_CUDA_ARCHITECTURES=89",), choice)
    assert build.cmake_args[-1] == "-DCMAKE_CUDA_ARCHITECTURES=89"


def test_nvcc_outside_path_is_found_and_named_to_cmake(machine: Path, tmp_path: Path, monkeypatch) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    cuda_bin = tmp_path / "cuda" / "bin"
    nvcc = fake_nvcc(cuda_bin)
    monkeypatch.setattr(gpu, "CUDA_BIN_DIRS", (cuda_bin,))
    choice = choose_build("auto")
    assert choice.backend == "cuda"
    assert choice.cmake_args == (*CUDA_ARGS, f"-DCMAKE_CUDA_COMPILER={nvcc}")


def test_several_architectures_build_all_and_say_so_in_the_key(machine: Path, tmp_path: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA B200, 10.0", "NVIDIA H200, 9.0", "NVIDIA GeForce RTX 4090, 8.9")
    fake_nvcc(machine)
    choice = choose_build("auto")
    assert "-DCMAKE_CUDA_ARCHITECTURES=89;90;100" in choice.cmake_args  # in numeric order
    assert embedded_build(tmp_path, VERSION, (), choice).root.name.startswith(f"{VERSION}-cuda89-90-100-")


def test_cpu_and_cuda_builds_are_cached_side_by_side(machine: Path, tmp_path: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    fake_nvcc(machine)
    cuda = embedded_build(tmp_path, VERSION, (), choose_build("auto"))
    cpu = embedded_build(tmp_path, VERSION, (), choose_build("cpu"))
    assert cuda.root.parent == cpu.root.parent and cuda.root != cpu.root
    assert (cuda.backend, cpu.backend) == ("cuda", "cpu")


# --- the CLI -------------------------------------------------------------------------------------


def agent_cli(*args: str, path: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": str(path), "AGENT_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    # As the `machine` fixture: no NVML, and no toolkit in /usr/local/cuda (this machine has one there).
    code = (
        "import sys; sys.modules['pynvml'] = None; import agent.server.gpu as g; g.CUDA_BIN_DIRS = (); "
        "from agent.cli import main; sys.exit(main())"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60, cwd=REPO
    )


def test_install_cuda_without_nvcc_is_a_clear_error(machine: Path, tmp_path: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    result = agent_cli("server", "install", "--cuda", path=machine, cache=tmp_path / "cache")
    assert result.returncode != 0
    assert "cannot build llama-server for CUDA: `nvcc` is not installed" in result.stderr
    assert "Install the CUDA toolkit" in result.stderr
    assert "Traceback" not in result.stderr


def test_install_announces_the_cuda_build_before_it_starts(machine: Path, tmp_path: Path) -> None:
    # No cmake on this PATH: the build stops at its first step, after the announcement.
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    fake_nvcc(machine)
    result = agent_cli("server", "install", "--jobs", "16", path=machine, cache=tmp_path / "cache")
    out = result.stdout + result.stderr
    assert "building llama-server for CUDA, architecture 90" in out
    assert "expect about 6 min on 16 cores" in out
    assert out.index("expect about") < out.index("`cmake` is not installed")
    assert result.returncode != 0


def test_install_finds_the_cached_cuda_build_and_forced_cpu_its_own(machine: Path, tmp_path: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    fake_nvcc(machine)
    cache = tmp_path / "cache"
    cuda = embedded_build(cache, VERSION, (), choose_build("auto"))
    script(cuda.binary, "echo version: 0\n")
    (cuda.root / "build.json").write_text("{}")
    result = agent_cli("server", "install", path=machine, cache=cache)
    assert result.returncode == 0, result.stderr
    assert f"llama-server (cuda (arch 90)) is already built: {cuda.binary}" in result.stdout
    # --cpu is another build, not this one: it would build (and here stops for want of cmake).
    result = agent_cli("server", "install", "--cpu", path=machine, cache=cache)
    assert "building llama-server for the CPU" in result.stdout + result.stderr
    assert "runs use the cuda build unless told otherwise" in result.stdout + result.stderr


# --- the binary's devices and the offload ---------------------------------------------------------

H200_DEVICES = "Available devices:\n  CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)\n"  # seen on the H200
CPU_DEVICES = "Available devices:\n  (none)\n"  # the embedded CPU build's answer


def fake_server(folder: Path, devices: str) -> Path:
    """A llama-server that answers --list-devices (counting the calls) and --help (upstream's text)."""
    return script(
        folder / "llama-server",
        f'if [ "$1" = "--list-devices" ]; then echo x >> "{folder}/list-devices.calls"; printf "{devices}"; '
        f"exit 0; fi\ncat '{FIXTURES / 'llama-server-upstream-help.txt'}'\n",
    )


def test_parse_list_devices() -> None:
    assert parse_list_devices(H200_DEVICES) == ["CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)"]
    assert parse_list_devices(CPU_DEVICES) == []
    two = "load_backend: loaded CUDA\nAvailable devices:\n  CUDA0: A (1 MiB, 1 MiB free)\n  CUDA1: B (2 MiB, 2 MiB free)\n"
    assert parse_list_devices(two) == ["CUDA0: A (1 MiB, 1 MiB free)", "CUDA1: B (2 MiB, 2 MiB free)"]
    assert parse_list_devices("error: unknown argument: --list-devices") == []


def test_list_devices_asks_each_binary_once(tmp_path: Path) -> None:
    binary = fake_server(tmp_path / "gpu", H200_DEVICES)
    assert list_devices(binary, tmp_path / "cache") == ["CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)"]
    assert list_devices(binary, tmp_path / "cache") == ["CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)"]
    assert (tmp_path / "gpu" / "list-devices.calls").read_text().count("x") == 1


def plan_tiny(tmp_path: Path, binary: Path, **update):
    model = write_gguf(tmp_path / "models" / "m.gguf", "gemma3")
    profile = get_profile("tiny").model_copy(
        update={"model": str(model), "chat_template_file": None, "preflight": False, **update}
    )

    def no(*_a):
        raise AssertionError("not needed")

    paths = MachinePaths(tmp_path / "models", tmp_path / "cache", tmp_path / "state", lambda: binary, no, no)
    return plan_launch(profile, paths, port=18999)


def test_embedded_profile_offloads_all_layers_on_a_gpu_binary(tmp_path: Path) -> None:
    plan = plan_tiny(tmp_path, fake_server(tmp_path / "gpu", H200_DEVICES))
    assert plan.argv[plan.argv.index("-ngl") + 1] == "all"
    assert "all layers on the GPU: CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)" in plan.notes


def test_embedded_profile_on_a_cpu_binary_names_no_offload(tmp_path: Path) -> None:
    plan = plan_tiny(tmp_path, fake_server(tmp_path / "cpu", CPU_DEVICES))
    assert "-ngl" not in plan.argv
    assert not any("GPU" in note for note in plan.notes)


def test_a_profile_that_names_its_layers_keeps_them_and_asks_nothing(tmp_path: Path) -> None:
    binary = fake_server(tmp_path / "gpu", H200_DEVICES)
    plan = plan_tiny(tmp_path, binary, gpu_layers=10)
    assert plan.argv[plan.argv.index("-ngl") + 1] == "10"
    assert not (tmp_path / "gpu" / "list-devices.calls").exists()


def test_a_draft_model_goes_to_the_gpu_too(tmp_path: Path) -> None:
    draft = write_gguf(tmp_path / "models" / "d.gguf", "gemma3")
    plan = plan_tiny(
        tmp_path,
        fake_server(tmp_path / "gpu", H200_DEVICES),
        speculative=Speculative(type="draft-simple", draft_model=str(draft)),
    )
    assert plan.argv[plan.argv.index("-ngl") + 1] == "all"
    assert plan.argv[plan.argv.index("--spec-draft-ngl") + 1] == "all"


def test_the_build_is_chosen_only_when_the_embedded_binary_is_needed(machine: Path, monkeypatch) -> None:
    # AGENT_BUILD=cuda without nvcc: a profile with its own binary still plans; the embedded one says why.
    monkeypatch.setenv("AGENT_BUILD", "cuda")
    settings = load_settings()
    assert settings.build == "cuda"
    paths = machine_paths(settings)
    with pytest.raises(ServerError, match="nvcc"):
        paths.embedded_binary()


# --- `agent server install --source`: the user's checkout takes the same choice ----------------------


def test_a_source_build_takes_the_same_cuda_choice_and_says_it_in_its_key(
    machine: Path, tmp_path: Path
) -> None:
    from agent.server import select_source_build
    from agent.server.source_build import SourceCheckout, build_folder

    fake_nvidia_smi(machine, "NVIDIA GeForce RTX 4090, 8.9")
    fake_nvcc(machine)
    checkout = SourceCheckout(tmp_path / "beellama.cpp", commit="ba1fdce59" + "0" * 31)
    cuda = select_source_build(load_settings(), checkout)
    # The seed's options (GGML_CUDA, GGML_CUDA_FA, GGML_CUDA_FA_ALL_QUANTS) at the GPU's architecture.
    assert cuda.cmake_args == (
        *BASE_CMAKE_ARGS,
        "-DGGML_CUDA=ON",
        "-DGGML_CUDA_FA=ON",
        "-DGGML_CUDA_FA_ALL_QUANTS=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=89",
    )
    assert cuda.root.name.startswith("src-beellama.cpp-ba1fdce59000-cuda89-")
    cpu = select_source_build(load_settings(), checkout, "cpu")
    assert cpu.backend == "cpu" and cpu.root != cuda.root
    # Each has its own kept build folder: a CMake cache holds one set of options.
    assert build_folder(tmp_path, checkout, cpu) != build_folder(tmp_path, checkout, cuda)


def test_install_source_cuda_without_nvcc_is_a_clear_error(machine: Path, tmp_path: Path) -> None:
    fake_nvidia_smi(machine, "NVIDIA H200, 9.0")
    source = tmp_path / "llama.cpp"
    (source / "tools" / "server").mkdir(parents=True)
    (source / "CMakeLists.txt").write_text("project(llama.cpp)\n")
    (source / "tools" / "server" / "CMakeLists.txt").write_text("set(TARGET llama-server)\n")
    result = agent_cli(
        "server", "install", "--source", str(source), "--cuda", path=machine, cache=tmp_path / "c"
    )
    assert result.returncode == 4
    assert "cannot build llama-server for CUDA: `nvcc` is not installed" in result.stderr
    assert "Traceback" not in result.stderr
