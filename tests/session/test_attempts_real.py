"""Attempts on the real embedded llama-server (tiny): the server the run starts gets a slot per
attempt, with each slot keeping the profile's context, the attempts stream at once, the loser is
stopped on the server, and a server killed mid-run ends every attempt with no worktree left."""

from __future__ import annotations

import json
import os
import signal

import pytest

from agent.protocols.edit_blocks.prompt import PLAN_TASK
from tests.core.test_loop import git_repo
from tests.faults import start_agent, wait_until
from tests.faults.test_server_faults import agent_server, fault_profile, finally_gone, log_of, task
from tests.session.test_attempts import worktrees

pytestmark = pytest.mark.server


def test_a_started_server_gets_a_slot_per_attempt_and_the_winner_lands(tmp_path, isolated_state, embedded):
    repo = git_repo(tmp_path / "repo")
    profile = fault_profile(isolated_state, max_tokens=48)
    # A check that passes whatever the base model writes, in a tree that has the file git ignores (a
    # generated or local one, as projects import): the first attempt to finish wins.
    (repo / ".git" / "info" / "exclude").write_text("local.cfg\n")
    (repo / "local.cfg").write_text("generated\n")
    proc = two_attempts(tmp_path, repo, profile, check="test -f local.cfg", max_turns=2)
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    argv = record.argv
    assert argv[argv.index("-np") + 1] == "2" and argv[argv.index("--ctx-size") + 1] == str(2 * 8192)
    assert "n_ctx_slot = 8192" in log_of(record) or "n_ctx_seq (8192)" in log_of(record), log_of(record)[
        -3000:
    ]
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert finished["winner"] in (1, 2)
    assert not [e for e in events if "take turns" in e.get("message", "")]  # both ran at once
    # the second attempt worked the other way: a plan asked for first, on the real server
    rows = {row["attempt"]: row for row in finished["attempts"]}
    assert (rows[1]["plan_first"], rows[2]["plan_first"]) == (False, True)
    asked = (isolated_state / "sessions" / f"{rows[2]['session_id']}.jsonl").read_text()
    assert json.dumps(PLAN_TASK)[1:-1] in asked
    assert worktrees(repo) == [f"worktree {repo}"]


def test_a_server_killed_mid_run_ends_every_attempt_and_leaves_no_worktree(
    tmp_path, isolated_state, embedded
):
    repo = git_repo(tmp_path / "repo")
    profile = fault_profile(isolated_state, max_tokens=400)
    proc = two_attempts(tmp_path, repo, profile, check="false", max_turns=3)
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        wait_until(lambda: log_of(record).count("processing task") >= 1, what="a request to reach the server")
        os.kill(record.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, out + err
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sorted(e["attempt"] for e in events if e["type"] == "session.finished") == [1, 2]
    [finished] = [e for e in events if e["type"] == "attempts.finished"]
    assert finished["winner"] is None
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not (isolated_state / "attempts").exists() or not any((isolated_state / "attempts").iterdir())


def test_the_attempts_share_one_prefill_of_their_first_prompt(tmp_path, isolated_state, embedded):
    """The first prompts differ only after the repository (each worktree's path comes later): one
    slot prefills, the others get a copy, and each attempt's first request then finds the shared
    part in its slot: the server processes only the tail."""
    repo = repo_to_share(tmp_path, functions=60)
    profile = sharing_profile(isolated_state, max_tokens=16)
    proc = two_attempts(tmp_path, repo, profile, check="false", max_turns=1)
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        out, err = proc.communicate(timeout=300)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    notices = [e["message"] for e in events if e["type"] == "notice"]
    shared = next((n for n in notices if n.startswith("one prefill of")), None)
    assert shared, f"no shared prefill: {notices}\n{err[-2000:]}"
    prompt_tokens = int(shared.split()[3].replace(",", ""))
    assert prompt_tokens > 1000, shared
    assert "serves the 2 attempts" in shared
    first_turns = [e for e in events if e["type"] == "turn.completed" and e.get("turn") == 1]
    assert sorted(e["attempt"] for e in first_turns) == [1, 2], out[-3000:]
    for turn in first_turns:  # each slot processed only what follows the shared part
        stats = turn["stats"]
        assert stats["prompt_tokens"] > 1000 and stats["prompt_n"] < 200, stats
    assert not any((isolated_state / "slots").iterdir())  # the copy is gone once restored


def test_sigterm_during_the_shared_prefill_ends_it_and_leaves_nothing(tmp_path, isolated_state, embedded):
    repo = repo_to_share(tmp_path, functions=400)  # a prompt of ~9,000 tokens: seconds of prefill
    profile = sharing_profile(isolated_state, max_tokens=16, ctx=16384)
    proc = two_attempts(tmp_path, repo, profile, check="false", max_turns=1)
    with finally_gone(isolated_state) as seen:
        record = agent_server(isolated_state, proc)
        seen.append(record)
        wait_until(lambda: "selected slot by id (0)" in log_of(record), what="the shared prefill to start")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, out + err
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not any((isolated_state / "slots").iterdir())


def repo_to_share(tmp_path, functions: int):
    """A repository whose files make a first prompt long enough to be worth sharing."""
    repo = git_repo(tmp_path / "repo")
    (repo / "notes.py").write_text(
        "".join(f"def note_{i}(x):\n    return x + {i}\n\n" for i in range(functions))
    )
    return repo


def sharing_profile(isolated_state, max_tokens: int, ctx: int = 8192) -> str:
    """The tiny profile, its cache whole: Gemma 3 attends through a sliding window, so without
    --swa-full its cache keeps only the prompt's last 512 tokens, a prefix shorter than the cached
    prompt is processed again (FACTS.md), and the agent does not share one."""
    profile = fault_profile(isolated_state, max_tokens=max_tokens)
    toml = isolated_state.parent / "config" / "profiles" / f"{profile}.toml"
    text = toml.read_text().replace('"--metrics"]', '"--metrics", "--swa-full"]')
    toml.write_text(text.replace("ctx_size = 8192", f"ctx_size = {ctx}"))
    return profile


def two_attempts(tmp_path, repo, profile: str, **front):
    """`agent run --attempts 2 --json` on a task with `front` (its check, its turns), started."""
    return start_agent(str(task(tmp_path, **front)), "-p", profile, "--workdir", str(repo),
                       "--attempts", "2", "--json")  # fmt: skip
