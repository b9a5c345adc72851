"""The bash tool against commands that misbehave (issue 13, item 5): runaway children, a fork bomb, a
command that waits for input, 100 MB of output, invalid UTF-8.

Real processes throughout. Every test names its processes with a unique marker and asserts, by that
marker, that none of them is left running; the memory figures are the agent process's own peak RSS.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.frontends.test_headless import call, task_file
from tests.scripted_server import ScriptedServer
from tools.bash import Bash, BashArgs, CappedOutput, process_limit

REPO = Path(__file__).resolve().parents[2]
LINUX = sys.platform.startswith("linux")


def marked(marker: str) -> list[str]:
    """Pids of running (not zombie) processes whose command line holds `marker`."""
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    alive = []
    for pid in found:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            alive.append(pid)
    return alive


def left_behind(marker: str, settle: float = 5.0) -> list[str]:
    """The marked processes still running after `settle` seconds (a SIGKILL takes a moment to land)."""
    deadline = time.monotonic() + settle
    while (pids := marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def kill_marked(marker: str) -> None:
    """Clean up after a failed assertion: only the processes this test started, by their marker."""
    for pid in marked(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(pid), 9)


# ----------------------------------------------------------------------------------- runaway children


@pytest.mark.slow
async def test_runaway_children_grandchildren_and_a_setsid_escapee_all_end_at_the_timeout(ctx):
    marker = f"runaway-{uuid.uuid4().hex}"
    py = f'{sys.executable} -c "import time; time.sleep(300)" {marker}'
    command = (
        f"{py} & "  # a child
        f"bash -c '{py} & {py} & wait' & "  # grandchildren
        f"bash -c 'trap \"\" TERM; sleep 300; : {marker}' & "  # deaf to SIGTERM
        f"setsid {py} & "  # left the process group
        f"{py}"
    )
    try:
        started = time.monotonic()
        result = await Bash(grace=0.3).run(BashArgs(command=command, timeout=2), ctx)
        assert time.monotonic() - started < 15
        assert result.display["timed_out"] and "every process it started were killed" in result.output
        assert not left_behind(marker)
    finally:
        kill_marked(marker)


# ----------------------------------------------------------------------------------------- fork bomb


BOMB_RUNNER = textwrap.dedent(
    """
    import asyncio, json, os, sys, threading, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from tools.base import ToolContext
    from tools.bash import Bash, BashArgs
    from tools.workspace import Workspace

    workspace, marker, room, as_uid = Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    uid = as_uid if as_uid >= 0 else os.getuid()
    peak = 0
    stop = threading.Event()

    def count() -> int:
        total = 0
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        total += 1
                except OSError:
                    pass
        return total

    def watch() -> None:
        global peak
        while not stop.is_set():
            peak = max(peak, count())
            time.sleep(0.05)

    before = count()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    # The classic bomb; the comment names its processes (forked subshells keep the command line).
    bomb = ": {0}; bomb() {{ bomb | bomb & }}; bomb".format(marker)
    if as_uid >= 0:  # root: the bomb runs as another user (the kernel lets root past RLIMIT_NPROC)
        bomb = "setpriv --reuid={0} --regid={0} --clear-groups -- bash -c '{1}'".format(as_uid, bomb)
    started = time.monotonic()
    result = asyncio.run(
        Bash(grace=0.5, process_room=room).run(BashArgs(command=bomb, timeout=4), ToolContext(Workspace(workspace)))
    )
    seconds = time.monotonic() - started
    stop.set()
    watcher.join()
    alive = os.system("true") == 0  # this process can still start others
    print(json.dumps({"before": before, "peak": peak, "seconds": seconds, "display": result.display,
                      "output": result.output[-3000:], "parent_can_fork": alive}))
    """
)
BOMB_ROOM = 150


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="RLIMIT_NPROC counts a user's processes on Linux")
def test_a_fork_bomb_meets_the_process_limit_and_is_killed_at_the_timeout(tmp_path):
    """The kernel lets root past RLIMIT_NPROC, so under root the bomb itself runs as `nobody` (setpriv
    keeps the limit the tool set). The runner's inherited limit of +1500 is only this shared machine's
    safety net, ten times the tool's room (+150): the peak shows which of the two held."""
    as_root = os.getuid() == 0
    if as_root and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv to drop to another user")
    marker = f"forkbomb-{uuid.uuid4().hex}"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    net = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit()) + 1500

    def safety_net() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (net, net))

    try:
        result = subprocess.run(
            [sys.executable, "-c", BOMB_RUNNER, str(REPO), str(workspace), marker, str(BOMB_ROOM),
             "65534" if as_root else "-1"],
            capture_output=True, text=True, timeout=120, preexec_fn=safety_net,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout)
        print(f"fork bomb: {report['before']} -> peak {report['peak']} processes of its user, process "
              f"limit {report['display']['process_limit']}, ended after {report['seconds']:.1f} s")  # fmt: skip
        assert report["display"]["timed_out"]
        assert "Resource temporarily unavailable" in report["output"]  # the limit was met...
        assert report["peak"] <= report["display"]["process_limit"] + 20  # ...and it held
        assert report["peak"] < net - 1000  # (not the safety net)
        assert report["seconds"] < 60
        assert report["parent_can_fork"]
        assert not left_behind(marker, settle=10)
    finally:
        kill_marked(marker)


def _owner(proc: Path) -> int:
    try:
        return proc.stat().st_uid
    except OSError:
        return -1


@pytest.mark.skipif(not LINUX, reason="/proc")
def test_the_process_limit_leaves_room_for_a_parallel_build(ctx):
    limit = process_limit(4096)
    assert limit is not None
    mine = sum(
        int(p.joinpath("stat").read_text().rsplit(")", 1)[1].split()[17])
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _owner(p) == os.getuid() and p.joinpath("stat").exists()
    )
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    assert limit >= min(soft, mine + 4000)


@pytest.mark.skipif(not LINUX, reason="ulimit -u")
async def test_the_command_runs_under_the_limit_and_cannot_raise_it(ctx):
    result = await Bash(process_room=300).run(
        BashArgs(command="ulimit -u; ulimit -Hu; ulimit -u unlimited && echo raised"), ctx
    )
    soft, hard, *_ = result.output.splitlines()
    assert int(soft) == int(hard) == result.display["process_limit"]
    if os.getuid() != 0:  # root may raise any limit (and is not bound by this one anyway)
        assert "raised" not in result.output


async def test_forty_parallel_jobs_run_fine_under_the_default_limit(ctx):
    """What a `make -j40` does: many processes at once, each starting more."""
    command = "for i in $(seq 40); do (sh -c 'sleep 0.3; echo ok') & done; wait"
    result = await Bash().run(BashArgs(command=command, timeout=60), ctx)
    assert result.ok, result.output
    assert result.output.count("ok") == 40 and "Resource temporarily unavailable" not in result.output


# ------------------------------------------------------------------------------------- waits for input


@pytest.mark.parametrize(
    "command",
    [
        'read -r line; echo "read exit $?"',
        "cat",
        f"{sys.executable} -c 'input(\"password: \")'",
        "cat /dev/tty",  # no controlling terminal: refused at once, not a wait
        "head -n 1",
        "git credential fill",  # GIT_TERMINAL_PROMPT=0 and no stdin: no prompt
    ],
)
async def test_a_command_that_waits_for_input_gets_end_of_file_at_once(ctx, command):
    started = time.monotonic()
    result = await Bash().run(BashArgs(command=command, timeout=60), ctx)
    assert time.monotonic() - started < 20
    assert not result.display["timed_out"], result.output


# -------------------------------------------------------------------------------------- huge output


RSS_RUNNER = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from tools.base import ToolContext
    from tools.bash import Bash, BashArgs
    from tools.workspace import Workspace

    ctx = ToolContext(Workspace(Path(sys.argv[2])))
    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    asyncio.run(Bash().run(BashArgs(command="echo warm up"), ctx))
    before = peak()
    result = asyncio.run(Bash().run(BashArgs(command=sys.argv[3], timeout=120), ctx))
    print(json.dumps({"before_kib": before, "after_kib": peak(), "display": result.display,
                      "chars": len(result.output), "head": result.output[:40], "tail": result.output[-60:]}))
    """
)
# (`yes`, not /dev/zero: a headless run refuses reads outside the workspace)
HUNDRED_MB = "yes xxxxxxxxxxxxxxx | head -c 100000000; echo; echo the-end"


@pytest.mark.skipif(sys.platform == "darwin", reason="ru_maxrss is in bytes there")
def test_100_mb_of_output_is_capped_and_the_tool_s_memory_stays_flat(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", RSS_RUNNER, str(REPO), str(tmp_path), HUNDRED_MB],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    grown_mib = (report["after_kib"] - report["before_kib"]) / 1024
    print(f"bash tool, 100 MB of output: peak RSS {report['before_kib'] / 1024:.0f} -> "
          f"{report['after_kib'] / 1024:.0f} MiB (+{grown_mib:.1f} MiB); {report['chars']} characters kept")  # fmt: skip
    assert report["display"]["bytes"] == 100_000_000 + len("\nthe-end\n")
    assert report["chars"] < 16_000 + 200
    assert report["head"].startswith("xxxx") and "the-end\n[exit code 0]" in report["tail"]
    assert grown_mib < 16  # 100 MB went through; at most a few 64 KiB chunks were held at once


PEAK_RUNNER = textwrap.dedent(
    """
    import resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    sys.stdout.write(done.stdout)
    # The largest RSS among the waited-for descendants: the agent process (bash and tr are far smaller).
    print("PEAK_KIB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)
    """
)


def _agent_run_peak(tmp_path: Path, command: str, name: str) -> tuple[int, int, list[dict], Path]:
    """(peak RSS KiB of the `agent run` process, exit code, its --json events, its transcript)."""
    folder = tmp_path / name
    folder.mkdir()
    task = task_file(folder, "Run the command.", approval="full-auto")
    replies = [{"tool_calls": [call("bash", command=command)]}, {"content": "Ran it."}]
    with ScriptedServer(replies) as server:
        done = subprocess.run(
            [sys.executable, "-c", PEAK_RUNNER, sys.executable, "-m", "agent", "run", str(task),
             "--base-url", server.url, "--workdir", str(folder), "--json"],
            capture_output=True, text=True, timeout=300, cwd=REPO,
        )  # fmt: skip
    *lines, last = done.stdout.strip().splitlines()
    _, peak, code = last.split()
    events = [json.loads(line) for line in lines]
    transcript = next((Path(os.environ["AGENT_STATE_DIR"]) / "sessions").glob(f"{events[0]['session_id']}*"))
    return int(peak), int(code), events, transcript


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "darwin", reason="ru_maxrss is in bytes there")
def test_100_mb_of_output_through_agent_run_keeps_the_agent_s_peak_memory_flat(tmp_path):
    small_peak, small_code, _, _ = _agent_run_peak(tmp_path, "echo small", "small")
    big_peak, big_code, events, transcript = _agent_run_peak(tmp_path, HUNDRED_MB, "big")
    assert small_code == big_code == 0
    [result] = [e for e in events if e["type"] == "tool.result"]
    grown_mib = (big_peak - small_peak) / 1024
    print(f"agent run, 100 MB of bash output: peak RSS {small_peak / 1024:.0f} MiB (echo) vs "
          f"{big_peak / 1024:.0f} MiB (100 MB); transcript {transcript.stat().st_size} bytes")  # fmt: skip
    assert result["display"]["bytes"] > 100_000_000 and len(result["output"]) < 17_000
    assert transcript.stat().st_size < 200_000
    assert grown_mib < 32


# ------------------------------------------------------------------------------------- invalid UTF-8


async def test_invalid_utf8_in_output_is_shown_as_replacement_characters(ctx):
    command = r"printf 'ok \xff\xfe bad \xc3( cut \xe2\x82 nul \x00 end\n'; printf '\xed\xa0\x80 surrogate\n'"
    result = await Bash().run(BashArgs(command=command), ctx)
    assert result.ok
    assert result.output.startswith("ok \ufffd\ufffd bad \ufffd( cut \ufffd nul \x00 end")
    assert "surrogate" in result.output
    result.output.encode("utf-8")  # no lone surrogates: it can be sent and written as it is
    json.dumps(result.output, ensure_ascii=False).encode("utf-8")


def test_a_character_cut_by_the_output_cap_does_not_break_decoding():
    out = CappedOutput(10)
    out.feed("aaaa€".encode() + b"x" * 100 + "€bbbb".encode())  # € is 3 bytes, cut at both seams
    text = out.text()
    assert text.startswith("aaaa") and text.endswith("bbbb") and "dropped" in text
    text.encode("utf-8")


@pytest.mark.slow
def test_invalid_utf8_reaches_the_model_and_the_transcript_as_valid_text(tmp_path, isolated_state):
    task = task_file(tmp_path, "Print it.", approval="full-auto")
    replies = [
        {"tool_calls": [call("bash", command=r"printf 'caf\xe9 \xff\xfe\n'")]},
        {"content": "Printed."},
    ]
    with ScriptedServer(replies) as server:
        done = subprocess.run(
            [sys.executable, "-m", "agent", "run", str(task), "--base-url", server.url, "--workdir",
             str(tmp_path), "--json"], capture_output=True, text=True, timeout=120, cwd=REPO,
        )  # fmt: skip
        sent = server.requests[1]["messages"]
    assert done.returncode == 0, done.stderr
    [result] = [json.loads(x) for x in done.stdout.splitlines() if '"tool.result"' in x]
    assert result["output"].startswith("caf\ufffd \ufffd\ufffd")
    assert any(m["role"] == "tool" and m["content"].startswith("caf\ufffd") for m in sent)
    [transcript] = (isolated_state / "sessions").glob("*.jsonl")
    for line in transcript.read_bytes().splitlines():
        json.loads(line.decode("utf-8"))  # strict UTF-8, one JSON object a line


# ---------------------------------------------------------------------------- the wrapper around it


async def test_wait_in_the_command_does_not_wait_for_the_agent_s_watchdog(ctx):
    """`a & b & wait` used to wait for the watchdog too, which lives as long as the agent: every such
    command hung until its timeout."""
    result = await Bash().run(BashArgs(command="sleep 0.2 & sleep 0.1 & wait; echo waited", timeout=30), ctx)
    assert result.ok and result.output.startswith("waited") and result.display["seconds"] < 10


async def test_a_stray_parenthesis_is_a_syntax_error_not_an_escape_from_the_wrapper(ctx):
    marker = ctx.workspace.root / "escaped"
    result = await Bash().run(BashArgs(command=f"echo a ); touch {marker}"), ctx)
    assert "syntax error" in result.output and result.display["exit_code"] == 2
    assert not marker.exists()


async def test_the_command_s_own_exit_trap_does_not_keep_the_watchdog_alive(ctx):
    marker = f"trap-{uuid.uuid4().hex}"
    result = await Bash().run(BashArgs(command=f"trap 'echo {marker}' EXIT; true"), ctx)
    assert result.ok and marker in result.output
    # The watchdog's subshell runs `sleep 1` in a loop: its command line is the wrapper's, with the marker.
    assert not left_behind(marker, settle=3)


# ------------------------------------------------------------------------------------ the agent dies


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", [True, False], ids=["sandboxed", "unsandboxed"])
def test_when_the_agent_is_killed_the_command_and_its_children_go_too(tmp_path, isolated_state, sandbox):
    """kill -9 of `agent run` mid-command: the watchdog ends the command's group. Under bubblewrap the
    group's leader is bwrap, so `kill -$$` from the shell named no group and the command ran on."""
    if sandbox and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    marker = f"agent-dies-{uuid.uuid4().hex}"
    started = tmp_path / "started"
    config = isolated_state.parent / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"sandbox = {'true' if sandbox else 'false'}\n")
    sleeper = f'{sys.executable} -c "import time; time.sleep(120)" {marker}'
    task = task_file(tmp_path, "Wait.", approval="full-auto")
    replies = [{"tool_calls": [call("bash", command=f"touch {started}; {sleeper} & {sleeper}")]}]
    try:
        with ScriptedServer(replies) as server:
            proc = subprocess.Popen(
                [sys.executable, "-m", "agent", "run", str(task), "--base-url", server.url, "--workdir",
                 str(tmp_path)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
            deadline = time.monotonic() + 60
            while not (started.exists() and len(marked(marker)) >= 2) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(marked(marker)) >= 2, "the command did not start"
            os.kill(proc.pid, 9)
            proc.wait()
        assert not left_behind(marker, settle=10)
    finally:
        kill_marked(marker)
