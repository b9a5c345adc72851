"""Several attempts at one task at once, on one server's parallel slots: the first whose check passes
wins, and only its change reaches the workspace.

At temperature 0 a small model gives the same wrong answer round after round; independent tries,
judged by the task's check, are what the best harnesses for small models use, and a server decodes
several streams for little more than the time of one (FACTS.md). Each attempt is a session like any
other (recorded, resumable) working in its own git worktree at the workspace's starting state
(tools/worktrees.py). Each sees only its own failures.

Attempts differ in how they work as well as in how they sample (agent/session/ways.py): where the
protocol has a plan step, they alternate with it and without it, the settings' way first; the first
attempt of each way samples as the task says, the further ones warmer, with seeds. An attempt that
gets stuck with time left starts afresh within its worktree, as a single line does
(`work_with_fresh_starts`), with seeds of its own: in the 4-attempt runs I and J of the small suite,
the attempts without a plan ended stuck after 50-150 s of their 300 in 6 tasks of 14, and their
slots stood idle from then on.

Their first prompts share the repository and the task, prefilled once and copied to every slot
(agent/session/shared_prefill.py). The winner's change is applied to the workspace as one patch,
after a checkpoint (`agent undo` takes it back). The others are cancelled, which closes their streams, and so stops their generation on the
server. When none passes, the workspace is left as it was, and each attempt that changed something is
kept as a branch, as are its stuck lines (when one passes, those of every attempt go). Whatever
happens (Ctrl+C, SIGTERM, a dead server), every worktree is removed and a server this run started is
stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.core.checks import CheckResult, last_check
from agent.core.loop import Outcome
from agent.core.workbench import auto_commit_subject
from agent.errors import ConfigError, ExitCode
from agent.events import AttemptsFinished, ErrorEvent, Event, Notice
from agent.server.admin import ServerAdmin
from agent.session.connect import Connection, connect
from agent.session.live import open_session
from agent.session.shared_prefill import SharedPrefill
from agent.session.task_run import (
    SIGNAL_EXIT,
    PreparedTask,
    TaskRequest,
    TaskResult,
    prepare_task,
    result_status,
    run_interruptible,
    say_server_fate,
    start_messages,
    work_with_fresh_starts,
)
from agent.session.ways import plans_first, sampling_for
from agent.settings.config import Settings, state_dir
from agent.store.lock import AgentLocks
from agent.store.transcripts import new_session_id
from tools.git import Checkpoints
from tools.worktrees import AttemptTree, AttemptTrees

MAX_ATTEMPTS = 16


@dataclass
class AttemptResult:
    number: int
    session_id: str = ""
    status: str = "cancelled"  # completed | failed | limit | error | interrupted | cancelled
    exit_code: int | None = None
    outcome: Outcome | None = None
    check: CheckResult | None = None
    summary: dict[str, Any] = field(default_factory=dict)  # the session's figures
    seconds: float = 0.0
    temperature: float | None = None
    plan_first: bool | None = None  # None: the protocol has no plan step
    set_aside: list[str] = field(default_factory=list)  # the branches of its lines that got stuck
    error: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "completed" and self.check is not None and self.check.passed

    def to_dict(self, changes: list[dict], branch: str = "") -> dict[str, Any]:
        return {
            "attempt": self.number, "session_id": self.session_id, "status": self.status,
            "check_passed": self.check.passed if self.check else None,
            "check_exit_code": self.check.exit_code if self.check else None,
            "temperature": self.temperature, "plan_first": self.plan_first, "seconds": round(self.seconds, 2),
            "turns": self.summary.get("turns"), "output_tokens": self.summary.get("output_tokens"),
            "median_gen_tok_s": self.summary.get("median_gen_tok_s"), "changes": changes,
            **({"branch": branch} if branch else {}), **({"error": self.error} if self.error else {}),
            **({"fresh_start_branches": list(self.set_aside)} if self.set_aside else {}),
        }  # fmt: skip


def check_attempts(prep: PreparedTask, count: int) -> None:
    """Refuse, before any work starts, what attempts cannot do."""
    if not 1 <= count <= MAX_ATTEMPTS:
        raise ConfigError(f"--attempts takes 1 to {MAX_ATTEMPTS}, not {count}")
    if prep.resumed is not None:
        raise ConfigError(
            "--attempts cannot resume a session",
            "each attempt is a session of its own, in a worktree that is gone once the run ends",
            f"Resume one attempt's session alone: agent run --resume {prep.resumed.session_id}",
        )
    if not prep.check:
        raise ConfigError(
            f"{count} attempts need a check to judge them, and this task has none",
            "the first attempt whose check passes wins; without one, no attempt can win",
            "Add `check: COMMAND` to the task's front matter (the command that says the task is done), "
            'or `check = "COMMAND"` to the project\'s .agent/config.toml, or run one attempt.',
        )


async def run_attempts(
    request: TaskRequest,
    settings: Settings,
    emit: Callable[[Event], None],
    say: Callable[[str], None] | None = None,
    count: int = 2,
) -> TaskResult:
    """`count` attempts at the task, at once; the first whose check passes wins (see the module)."""
    prep = prepare_task(request, settings, say)
    check_attempts(prep, count)
    run_id = new_session_id()
    trees = AttemptTrees(prep.workdir, state_dir() / "attempts" / run_id, run_id)
    with contextlib.ExitStack() as stack:
        stack.enter_context(AgentLocks(state_dir(), prep.workdir, "agent run --attempts").holding(run_id))
        connection = stack.enter_context(
            connect(prep.settings, prep.profile, slots=count, **start_messages(prep.profile, say))
        )
        stack.callback(trees.remove)  # registered after the server: removed first, whatever happens
        attempt_trees = trees.create(count)
        await _say_slots(connection, count, emit)
        shared = SharedPrefill(connection, count, run_id, emit)
        started = time.monotonic()
        results, interrupted = await _race(prep, connection, attempt_trees, shared, emit)
        return _conclude(prep, trees, attempt_trees, results, interrupted, time.monotonic() - started, emit)
    raise AssertionError("unreachable")


async def _say_slots(connection: Connection, count: int, emit: Callable[[Event], None]) -> None:
    """On a server this run did not start with the slots, the attempts take turns: say so."""
    server = ServerAdmin(connection.endpoint)
    try:
        slots = await server.slots()
    finally:
        await server.close()
    if slots is None:
        emit(Notice(f"the server does not say how many requests it serves at once (/props): the {count} "
                    "attempts may take turns rather than run together"))  # fmt: skip
    elif slots < count:
        emit(Notice(f"the server serves {slots} request{'s' if slots != 1 else ''} at once: the {count} "
                    f"attempts take turns on its slots (start it with -np {count} for all at once)"))  # fmt: skip


async def _race(
    prep: PreparedTask,
    connection: Connection,
    trees: list[AttemptTree],
    shared: SharedPrefill,
    emit: Callable[[Event], None],
) -> tuple[dict[int, AttemptResult], int | None]:
    """Run the attempts until one passes (the others are cancelled) or all end; SIGINT and SIGTERM
    cancel them all. The results by attempt, and the signal that interrupted the run, if one did."""
    results = {tree.number: AttemptResult(tree.number) for tree in trees}
    received: list[int] = []

    async def race() -> None:
        tasks = [asyncio.ensure_future(_attempt(prep, connection, tree, results[tree.number], shared, emit))
                 for tree in trees]  # fmt: skip
        pending = set(tasks)
        try:
            while pending:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if any(results[n].passed for n in results):
                    break
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await shared.close()

    try:
        await run_interruptible(race(), None, received)
    except asyncio.CancelledError:
        return results, received[0] if received else signal.SIGINT
    return results, None


async def _attempt(
    prep: PreparedTask,
    connection: Connection,
    tree: AttemptTree,
    result: AttemptResult,
    shared: SharedPrefill,
    emit: Callable[[Event], None],
) -> None:
    """One attempt: a session in its worktree, worked until its check passes or it stops; `result` is
    filled in as it goes, so that a cancelled attempt still says what it was."""
    number, began = tree.number, time.monotonic()
    spec, check = prep.spec, prep.check or ""

    def tagged(event: Event) -> None:
        event.attempt = number
        emit(event)

    try:
        setup = prep.session_setup(
            f"agent run, attempt {number}", tree.workdir, connection=connection, trust_notice=False,
            request_gate=shared.request_gate,
        )  # fmt: skip
        async with open_session(setup, tagged) as live:
            result.session_id = live.session_id
            result.set_aside = live.workbench.set_aside  # (the same list: a cancelled attempt's too)
            agent = live.agent
            ways = 2 if agent.actions.can_plan else 1
            if agent.actions.can_plan:
                agent.actions.plan_first = result.plan_first = plans_first(number, agent.actions.plan_first)
            overrides = sampling_for(
                number, spec.sampling.model_dump(exclude_none=True), prep.profile.sampling.temperature, ways
            )
            agent.request_overrides, result.temperature = overrides, overrides.get("temperature")
            outcome: Outcome | None = None
            try:
                async with asyncio.timeout(spec.time_limit):
                    outcome, result.check = await work_with_fresh_starts(prep, live, tree.workdir, number)
            except TimeoutError:
                outcome = Outcome(
                    "limit", "", agent.turn, f"reached the time limit of {spec.time_limit:.0f} s"
                )
                live.emit(ErrorEvent("limit", outcome.error))
                result.check, outcome = await last_check(outcome, check, tree.workdir, live.emit)
            except asyncio.CancelledError:
                result.summary = live.finish(
                    "cancelled", exit_code=ExitCode.INTERRUPTED, check=None,
                    error="another attempt passed first, or the run was stopped",
                )  # fmt: skip
                raise
            finally:
                result.seconds = time.monotonic() - began
            say_server_fate(live, outcome)
            result.outcome = outcome
            result.status, result.exit_code = result_status(outcome, result.check, None)
            result.summary = live.finish(
                result.status, outcome.final, exit_code=result.exit_code,
                check=result.check.to_dict() if result.check else None, error=outcome.error,
            )  # fmt: skip
    except asyncio.CancelledError:
        result.status = "cancelled"
        raise
    except Exception as exc:  # a session that could not open (the server gone): this attempt's end only
        result.status, result.exit_code = "error", ExitCode.SERVER
        result.error = f"{type(exc).__name__}: {exc}"
        result.seconds = time.monotonic() - began
        emit(ErrorEvent("attempt_failed", f"attempt {number}: {result.error}", attempt=number))


def _conclude(
    prep: PreparedTask,
    trees: AttemptTrees,
    attempt_trees: list[AttemptTree],
    results: dict[int, AttemptResult],
    interrupted: int | None,
    seconds: float,
    emit: Callable[[Event], None],
) -> TaskResult:
    """Apply the winner's change, or keep the losers as branches; the run's summary and exit code."""
    winner = next((r for r in sorted(results.values(), key=lambda r: r.seconds) if r.passed), None)
    applied: list[dict] = []
    rows = []
    for tree in attempt_trees:
        result = results[tree.number]
        state = _safely(lambda t=tree: trees.state(t), None)  # staged once: changes and the patch share it
        changes = _safely(lambda t=tree, st=state: trees.changes(t, st), []) if state else []
        branch = ""
        if winner is not None and result is winner:
            Checkpoints(trees.repo).create(f"before attempt {tree.number}'s change")
            trees.apply(tree, state)
            applied = changes
            if prep.settings.auto_commit:
                _auto_commit(trees, prep)
        elif winner is None and changes:
            branch = _safely(lambda t=tree: trees.keep(t), "")
        if winner is not None and result.set_aside:  # the stuck lines' work: not wanted once one passed
            _safely(lambda r=result: trees.repo.git.branch("-D", *r.set_aside), None)
            result.set_aside = []
        rows.append(result.to_dict(changes, branch))
    tokens = sum(r.summary.get("output_tokens") or 0 for r in results.values())
    throughput = round(tokens / seconds, 2) if seconds and tokens else None
    emit(
        AttemptsFinished(
            winner.number if winner else None, rows, applied, round(seconds, 2), tokens, throughput
        )
    )
    if winner is not None:
        status, code, lead = "completed", ExitCode.SUCCESS, winner
    elif interrupted is not None:
        status, code = "interrupted", SIGNAL_EXIT.get(interrupted, ExitCode.INTERRUPTED)
        lead = results[1]
    else:
        lead = results[1]
        statuses = {r.status for r in results.values()}
        status, code = (
            ("error", ExitCode.SERVER) if statuses == {"error"} else
            ("limit", ExitCode.LIMIT) if statuses == {"limit"} else ("failed", ExitCode.FAILED)
        )  # fmt: skip
    summary = {
        **lead.summary, "exit_code": code, "changes": applied, "attempts": rows,
        "winner": winner.number if winner else None,
        "attempts_seconds": round(seconds, 2), "attempts_output_tokens": tokens, "attempts_tok_s": throughput,
        "check": lead.check.to_dict() if lead.check else None,
    }  # fmt: skip
    return TaskResult(lead.session_id, status, code, lead.outcome, lead.check, summary)


def _auto_commit(trees: AttemptTrees, prep: PreparedTask) -> None:
    checkpoints = Checkpoints(trees.repo)
    newest = checkpoints.list()[-1]
    checkpoints.commit_changes(auto_commit_subject(prep.task.body if prep.task else ""), newest.sha)


def _safely(make, default):
    """What `make` gives, or `default` when git refuses (the summary goes without that part)."""
    try:
        return make()
    except Exception:
        return default
