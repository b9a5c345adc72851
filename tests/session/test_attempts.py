"""Several attempts at one task at once (`agent run --attempts N`): the first whose check passes wins
and only its change reaches the workspace; when none passes the workspace is as it was and each
attempt is a branch; a task without a check, or outside git, is refused before any work; Ctrl+C and
SIGTERM end every attempt, and no worktree is left behind.

The model is the scripted server (threaded: the attempts' requests are served at once), which tells
the attempts apart by the seed each one after the first sends.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from agent.errors import ServerError
from agent.protocols.edit_blocks.prompt import PLAN_TASK
from agent.server.launch_plan import _check_slots_fit, prefix_reusable, with_slots
from agent.server.preflight.report import Memory
from agent.server.profiles import ServerProfile
from agent.session.ways import SEED_PER_ATTEMPT, fresh_start, plans_first, sampling_for
from agent.settings import FRESH_STARTS
from tests.core.test_loop import git_repo
from tests.faults import start_agent, wait_until
from tests.frontends.test_headless import SCHEMA, agent, task_file
from tests.gguf_files import write_gguf
from tests.scripted_server import ScriptedServer
from tools.worktrees import AttemptTrees

CHECK = f"{sys.executable} -c 'from add import add; assert add(2, 3) == 5, add(2, 3)'"
RIGHT = "def add(a, b):\n    return a + b\n"


def writes(content: str) -> dict:
    return {"content": f"add.py\n```python\n{content}```"}


def by_attempt(first_turn: dict[int, dict], then: dict | None = None, delay: float = 0.0):
    """A reply by attempt (its seed; the first sends none; a fresh start within attempt N sends
    100N + its number): its first turn's answer (that of the exact seed, where given), then `then`."""

    def reply(body: dict) -> dict:
        seed = body.get("seed") or 1
        attempt = seed if seed < SEED_PER_ATTEMPT else seed // SEED_PER_ATTEMPT
        users = [m for m in body["messages"] if m["role"] == "user"]
        answer = (
            first_turn.get(seed, first_turn[attempt]) if len(users) == 1 else (then or {"content": "Done."})
        )
        return {**answer, "delay": delay} if delay else answer

    return reply


def run(
    tmp_path: Path, server: ScriptedServer, *extra: str, **front
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    front = {"approval": "full-auto", "actions": "blocks", "check": CHECK, "check_rounds": 1, **front}
    task = task_file(tmp_path, "Write add.py with add(a, b).", **front)
    result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path / "repo"),
                   "--json", *extra, timeout=180)  # fmt: skip
    return result, [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def worktrees(repo: Path) -> list[str]:
    return [
        line
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def test_the_first_attempt_whose_check_passes_wins_and_only_its_change_is_applied(tmp_path, isolated_state):
    repo = git_repo(tmp_path / "repo")
    reply = by_attempt({1: writes("def add(a, b):\n    return a - b\n"), 2: writes(RIGHT)})
    with ScriptedServer(default=reply) as server:
        result, events = run(tmp_path, server, "--attempts", "2")
    assert result.returncode == 0, result.stderr
    assert (repo / "add.py").read_text() == RIGHT
    for event in events:
        jsonschema.validate(event, SCHEMA)
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert finished["winner"] == 2
    assert finished["changes"] == [{"path": "add.py", "added": 2, "deleted": 0}]
    assert {e.get("attempt") for e in events if e["type"] == "session.started"} == {1, 2}
    sessions = {e["attempt"]: e["outcome"] for e in events if e["type"] == "session.finished"}
    assert sessions[2] == "completed" and sessions[1] in ("failed", "cancelled")
    # the scripted server serves one slot: the run says the attempts take turns
    assert any("take turns on its slots" in e.get("message", "") for e in events if e["type"] == "notice")
    assert worktrees(repo) == [f"worktree {repo}"]
    assert "agent/attempts/" not in git(repo, "branch", "--list", "--all")
    assert not (isolated_state / "attempts").exists() or not any((isolated_state / "attempts").iterdir())
    # `agent undo` takes the change back, and only that: the attempts' own checkpoints went with them
    checkpoints = git(repo, "for-each-ref", "--format=%(contents:subject)", "refs/spec-agent/checkpoints")
    assert checkpoints.splitlines() == ["before attempt 2's change"]


def test_each_attempt_has_the_files_git_ignores_one_by_one_and_only_the_tracked_change_lands(tmp_path):
    # A generated version module, as setuptools-scm writes it: ignored, and imported by the code.
    repo = git_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("_version.py\n.venv/\n")
    (repo / "_version.py").write_text("VERSION = '1.0'\n")
    (repo / ".venv").mkdir()
    (repo / ".venv" / "marker").write_text("a whole ignored folder\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore")
    check = f"{sys.executable} -c 'from add import add; assert add(2, 3) == 5'"
    right = "from _version import VERSION\n\n\ndef add(a, b):\n    return a + b\n"
    # The check imports add, which imports the ignored module: without it no attempt can pass.
    assert AttemptTrees(repo, tmp_path / "trees", "r").ignored_files() == ["_version.py"]
    reply = by_attempt({1: writes(right), 2: writes(right)})
    with ScriptedServer(default=reply) as server:
        result, events = run(tmp_path, server, "--attempts", "2", check=check)
    assert result.returncode == 0, result.stderr
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert finished["winner"] in (1, 2)
    assert finished["changes"] == [{"path": "add.py", "added": 5, "deleted": 0}]
    assert (repo / "add.py").read_text() == right and (
        repo / "_version.py"
    ).read_text() == "VERSION = '1.0'\n"


def test_an_ignored_file_gone_between_its_listing_and_the_copy_is_left_out_of_the_attempts(
    tmp_path, monkeypatch
):
    """A build may clean a generated file while the worktrees are made: the attempts go without it, as
    the workspace now does, instead of the run failing to make them."""
    repo = git_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("*.gen\n")
    (repo / "a.gen").write_text("a\n")
    (repo / "b.gen").write_text("b\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore")
    trees = AttemptTrees(repo, tmp_path / "trees", "r")
    listed = trees.ignored_files()
    assert listed == ["a.gen", "b.gen"]
    (repo / "a.gen").unlink()  # gone after the listing, before the copy
    monkeypatch.setattr(trees, "ignored_files", lambda: listed)
    try:
        [attempt] = trees.create(1)
        assert not (attempt.root / "a.gen").exists() and (attempt.root / "b.gen").read_text() == "b\n"
    finally:
        trees.remove()
    assert worktrees(repo) == [f"worktree {repo}"]


def test_attempts_alternate_the_plan_step_and_sample_warmer_after_the_first_of_each_way(tmp_path):
    repo = git_repo(tmp_path / "repo")
    reply = by_attempt({n: writes(RIGHT) for n in range(1, 6)}, delay=0.2)
    with ScriptedServer(default=reply) as server:
        result, events = run(tmp_path, server, "--attempts", "5", sampling={"temperature": 0})
        first_requests = {body.get("seed"): body for body in server.requests if len(body["messages"]) == 2}
    assert result.returncode == 0, result.stderr
    temperatures = [first_requests[seed]["temperature"] for seed in (None, 2, 3, 4, 5)]
    assert temperatures == [0, 0, 0.5, 0.5, 0.7]  # the first of each way as the task says
    planned = [PLAN_TASK in first_requests[seed]["messages"][-1]["content"] for seed in (None, 2, 3, 4, 5)]
    assert planned == [False, True, False, True, False]
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert [row["plan_first"] for row in finished["attempts"]] == planned
    assert (repo / "add.py").read_text() == RIGHT


def test_attempts_with_native_tool_calls_have_no_plan_step_to_alternate(tmp_path):
    git_repo(tmp_path / "repo")
    reply = by_attempt({1: {"content": "Nothing to do."}, 2: {"content": "Nothing to do."}})
    with ScriptedServer(default=reply) as server:
        _, events = run(tmp_path, server, "--attempts", "2", actions="tools", sampling={"temperature": 0})
        first_requests = {body.get("seed"): body for body in server.requests if len(body["messages"]) == 2}
    assert (first_requests[None]["temperature"], first_requests[2]["temperature"]) == (0, 0.5)
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert [row["plan_first"] for row in finished["attempts"]] == [None, None]


def test_when_no_attempt_passes_the_workspace_is_as_it_was_and_each_attempt_is_a_branch(tmp_path):
    repo = git_repo(tmp_path / "repo")
    reply = by_attempt(
        {1: writes("def add(a, b):\n    return a - b\n"), 2: writes("def add(a, b):\n    return 0\n")}
    )
    with ScriptedServer(default=reply) as server:
        result, events = run(tmp_path, server, "--attempts", "2")
    assert result.returncode == 1, result.stderr
    assert not (repo / "add.py").exists()
    assert git(repo, "status", "--porcelain") == ""
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert finished["winner"] is None and finished["changes"] == []
    branches = {row["attempt"]: row["branch"] for row in finished["attempts"]}
    assert set(branches) == {1, 2} and all(b.startswith("agent/attempts/") for b in branches.values())
    assert [row["check_passed"] for row in finished["attempts"]] == [False, False]
    # each got stuck, started afresh as often as it may within its worktree, and its stuck lines are
    # branches too
    stuck = {row["attempt"]: row["fresh_start_branches"] for row in finished["attempts"]}
    assert all(len(kept) == FRESH_STARTS for kept in stuck.values()), stuck
    kept = sorted(branch for branches in stuck.values() for branch in branches)
    assert sorted(git(repo, "branch", "--list", "agent/fresh-starts/*").split()) == kept
    assert worktrees(repo) == [f"worktree {repo}"]
    # what the summary says to type takes one
    taken = subprocess.run(f"git diff {branches[2]}~1 {branches[2]} | git apply", shell=True, cwd=repo)
    assert taken.returncode == 0 and (repo / "add.py").read_text() == "def add(a, b):\n    return 0\n"


def test_a_stuck_attempt_starts_afresh_in_its_worktree_and_can_win_and_no_stuck_line_is_kept(tmp_path):
    repo = git_repo(tmp_path / "repo")
    wrong = writes("def add(a, b):\n    return a - b\n")
    reply = by_attempt({1: wrong, 2: writes("def add(a, b):\n    return 0\n"), 101: writes(RIGHT)})
    with ScriptedServer(default=reply) as server:
        result, events = run(tmp_path, server, "--attempts", "2", sampling={"temperature": 0})
        fresh = next(body for body in server.requests if body.get("seed") == 101)
    assert result.returncode == 0, result.stderr
    assert (repo / "add.py").read_text() == RIGHT
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert finished["winner"] == 1
    # attempt 1 (no plan, at 0) started afresh the other way, warmer, with a seed no attempt has
    assert fresh["temperature"] == 0.5 and PLAN_TASK in fresh["messages"][-1]["content"]
    assert [m["role"] for m in fresh["messages"]] == ["system", "user"]
    assert any(
        f"starting afresh (1 of {FRESH_STARTS})" in e.get("message", "")
        for e in events
        if e.get("attempt") == 1
    )
    # the stuck lines' work, of the winner and of the others, is not wanted once one passed
    assert git(repo, "branch", "--list", "agent/*") == ""
    assert all("fresh_start_branches" not in row for row in finished["attempts"])
    assert worktrees(repo) == [f"worktree {repo}"]


def test_the_human_summary_lists_each_attempt_and_how_to_take_a_kept_one(tmp_path):
    git_repo(tmp_path / "repo")
    reply = by_attempt(
        {1: writes("def add(a, b):\n    return a - b\n"), 2: writes("def add(a, b):\n    return 0\n")}
    )
    with ScriptedServer(default=reply) as server:
        task = task_file(tmp_path, "Write add.py.", approval="full-auto", actions="blocks", check=CHECK,
                         check_rounds=0)  # fmt: skip
        result = agent("run", str(task), "--base-url", server.url, "--workdir", str(tmp_path / "repo"),
                       "--attempts", "2", timeout=180)  # fmt: skip
    assert result.returncode == 1
    assert "no attempt of 2 passed its check: the workspace is as it was" in result.stderr
    assert "  attempt 1: failed, check failed (exit 1), 1 files +2 -0" in result.stderr
    [second] = [line for line in result.stderr.splitlines() if line.startswith("  attempt 2: ")]
    assert ", a plan first, session " in second  # the way it worked, beside its sampling
    assert "| git apply`" in result.stderr and "[attempt 2] " in result.stderr
    assert "    its lines that got stuck before it started afresh: agent/fresh-starts/" in result.stderr
    assert "tok/s summed over the server's slots" in result.stderr


def test_attempts_without_a_check_are_refused_before_any_work(tmp_path, isolated_state):
    repo = git_repo(tmp_path / "repo")
    with ScriptedServer() as server:
        result, _ = run(tmp_path, server, "--attempts", "3", check=None)
        assert server.requests == []
    assert result.returncode == 2
    assert "3 attempts need a check to judge them, and this task has none" in result.stderr
    assert "Add `check: COMMAND`" in result.stderr
    assert worktrees(repo) == [f"worktree {repo}"] and not (isolated_state / "attempts").exists()


def test_attempts_outside_a_git_repository_are_refused_with_how_to_make_one(tmp_path):
    (tmp_path / "repo").mkdir()
    with ScriptedServer() as server:
        result, _ = run(tmp_path, server, "--attempts", "2")
        assert server.requests == []
    assert result.returncode == 2
    assert "attempts need a git repository" in result.stderr and "git init" in result.stderr


def test_attempts_from_the_task_file(tmp_path):
    repo = git_repo(tmp_path / "repo")
    reply = by_attempt({1: writes("def add(a, b):\n    return 1\n"), 2: writes(RIGHT)})
    with ScriptedServer(default=reply) as server:
        result, events = run(tmp_path, server, attempts=2)
    assert result.returncode == 0, result.stderr
    assert (repo / "add.py").read_text() == RIGHT
    assert [e["winner"] for e in events if e["type"] == "attempts.finished"] == [2]


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_end_every_attempt_and_leave_no_worktree(tmp_path, isolated_state, sig, code):
    repo = git_repo(tmp_path / "repo")
    (repo / "keep.txt").write_text("the user's file\n")
    reply = by_attempt({1: writes(RIGHT), 2: writes(RIGHT)}, delay=60)
    with ScriptedServer(default=reply) as server:
        task = task_file(tmp_path, "Write add.py.", approval="full-auto", actions="blocks", check=CHECK)
        proc = start_agent(
            str(task), "--base-url", server.url, "--workdir", str(repo), "--attempts", "2", "--json"
        )
        wait_until(lambda: len(server.requests) >= 2, timeout=60, what="both attempts to ask the model")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sorted(e["attempt"] for e in events if e["type"] == "session.finished") == [1, 2]
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not (isolated_state / "attempts").exists() or not any((isolated_state / "attempts").iterdir())
    assert not (repo / "add.py").exists() and (repo / "keep.txt").read_text() == "the user's file\n"


def test_sampling_for_keeps_the_first_attempt_as_the_task_says():
    assert sampling_for(1, {"temperature": 0.0, "top_p": 0.9}, 0.2) == {"temperature": 0.0, "top_p": 0.9}
    assert sampling_for(2, {}, None) == {"temperature": 0.5, "seed": 2, "min_p": 0.0}
    assert sampling_for(4, {}, 0.7) == {"temperature": 1.0, "seed": 4, "min_p": 0.0}  # capped
    # two ways of working: the first of each as the task says
    assert sampling_for(2, {"temperature": 0.0}, None, ways=2) == {"temperature": 0.0, "seed": 2}
    assert sampling_for(4, {}, 0.2, ways=2) == {"temperature": 0.7, "seed": 4, "min_p": 0.0}


def test_the_plan_step_alternates_from_the_settings_way():
    assert [plans_first(n, False) for n in (1, 2, 3, 4)] == [False, True, False, True]
    assert [plans_first(n, True) for n in (1, 2, 3, 4)] == [True, False, True, False]


def test_fresh_starts_work_the_other_way_each_time_and_never_at_the_stuck_temperature():
    assert fresh_start(1, False, True, {}, 0.0) == (True, {"temperature": 0.5, "seed": 2, "min_p": 0.0})
    assert fresh_start(2, False, True, {}, 0.0) == (False, {"temperature": 0.7, "seed": 3, "min_p": 0.0})
    assert fresh_start(1, True, True, {"top_p": 0.9}, None) == (
        False, {"top_p": 0.9, "temperature": 0.5, "seed": 2, "min_p": 0.0}
    )  # fmt: skip
    # no plan step (native tool calls): warmer only
    assert fresh_start(3, False, False, {}, 0.2) == (False, {"temperature": 1.0, "seed": 4, "min_p": 0.0})


def test_slots_give_each_slot_the_profiles_context():
    profile = ServerProfile(name="p", model="m.gguf", ctx_size=16384, args=["-np", "1", "--jinja"])
    slotted = with_slots(profile, 4)
    assert slotted.args == ["--jinja", "-np", "4"] and slotted.ctx_size == 65536


def test_a_prompt_prefix_is_shared_across_slots_only_where_the_model_can_reuse_one(tmp_path):
    """Sliding-window attention keeps the last window only (unless --swa-full), and recurrent layers
    keep a state: there a copied prefix would be processed again, so the slot folder is not asked for."""
    plain = write_gguf(tmp_path / "qwen2.gguf", "qwen2")
    windowed = write_gguf(tmp_path / "gemma3.gguf", "gemma3", extra={"gemma3.attention.sliding_window": 512})
    recurrent = write_gguf(tmp_path / "mamba.gguf", "mamba", extra={"mamba.ssm.conv_kernel": 4})
    assert prefix_reusable(plain, ["--jinja"])
    assert not prefix_reusable(windowed, ["--jinja"]) and prefix_reusable(windowed, ["--swa-full"])
    assert not prefix_reusable(recurrent, ["--swa-full"])
    assert not prefix_reusable(tmp_path / "missing.gguf", [])


def test_slots_that_do_not_fit_are_refused_saying_how_many_do():
    gib = 2**30
    memory = Memory(weights=1 * gib, kv_cache=4 * gib, free=3 * gib, where="RAM", ctx=4 * 16384)
    profile = ServerProfile(name="coder", model="m.gguf", ctx_size=16384)
    with pytest.raises(ServerError) as refused:
        _check_slots_fit(memory, 4, profile)
    said = str(refused.value)
    assert "4 parallel slots of 16,384 tokens do not fit profile 'coder'" in said
    assert "2 slots would fit" in said and "Ask for 2 attempts" in said
