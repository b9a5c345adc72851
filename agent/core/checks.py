"""The check loop: when the model says a task is done, run the task's check; if it fails, hand the
model its output and let it go on (Aider's auto-test; it is what makes small models finish work).

The check runs in its own process group with a timeout (tools/process_group.py), and the whole group
is killed when time runs out (with any descendant that left the group by `setsid`), so a hung test
runner or the server it started does not outlive it. When the check ends by itself, whatever it left
running in its group is killed too: a check is over when its shell exits, even if a background child
still holds its output.
Its output is capped (head and tail) before it reaches the model or the transcript.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agent.core.check_output import (
    CheckFailure,
    condense,
    error_line,
    locate,
    task_sentences,
    where_it_failed,
)
from agent.events import CheckFinished, CheckStarted, Event, Notice
from tools.files import TASK_TEXT
from tools.process_group import CappedOutput, run_command_async

if TYPE_CHECKING:
    from agent.core.loop import Agent, Outcome

CHECK_TIMEOUT = 300.0
OUTPUT_LIMIT = 6000  # characters of check output kept: enough for a traceback and pytest's summary


@dataclass
class CheckResult:
    command: str
    exit_code: int | None  # None: timed out
    output: str
    seconds: float
    failed_part: str = ""  # of a check of several commands (`a && b`), the one that failed or hung

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "passed": self.passed,
            "output": self.output,
            "seconds": round(self.seconds, 2),
            **({"failed_part": self.failed_part} if self.failed_part else {}),
        }


def cap_output(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """Head and tail of a long output, with how much was left out: errors come first, summaries last."""
    if len(text) <= limit:
        return text
    head, tail = limit // 3, limit - limit // 3
    return f"{text[:head]}\n[... {len(text) - head - tail} characters left out ...]\n{text[-tail:]}"


# Each simple command bash runs is written to fd 3 before it runs, NUL-ended (a heredoc's body is
# part of it): the last one is the one that failed or hung. On the command's own line, so that bash's
# "line N" messages stay true.
_TRACE = 'exec 3>>"$AGENT_CHECK_TRACE"; trap \'printf "%s\\0" "$BASH_COMMAND" >&3\' DEBUG; '


async def run_check(command: str, workdir: Path, timeout: float = CHECK_TIMEOUT) -> CheckResult:
    """Run `command` with bash in `workdir`; never raises for the command's own failures."""
    with tempfile.NamedTemporaryFile(prefix="agent-check-", suffix=".trace") as trace:
        result = await _run_check(command, workdir, timeout, trace.name)
        if not result.passed:
            result.failed_part = _failed_part(command, Path(trace.name))
    return result


def _failed_part(command: str, trace: Path) -> str:
    """The last simple command the check ran, when the check is more than that one command."""
    try:
        ran = [c for c in trace.read_text(encoding="utf-8", errors="replace").split("\0") if c.strip()]
    except OSError:
        return ""
    last = ran[-1].strip() if ran else ""
    if not last or last == command.strip():
        return ""
    first, *rest = last.splitlines()
    return f"{first} (with the {len(rest)} lines it reads)" if rest else first


async def _run_check(command: str, workdir: Path, timeout: float, trace: str) -> CheckResult:
    output = CappedOutput(8 * OUTPUT_LIMIT)  # bytes: cap_output's head and tail, whatever the encoding
    ran = await run_command_async(
        ["bash", "-c", _TRACE + command], output=output, cwd=workdir, timeout=timeout, grace=0,
        env={**os.environ, "AGENT_CHECK_TRACE": trace}, kill_leftovers=True,
    )  # fmt: skip
    if ran.timed_out:
        code: int | None = None
        note = f"\n(timed out after {timeout:.0f} s; the check and everything it started was stopped)"
    else:
        code = ran.returncode
        note = " (command not found)" if code == 127 else ""
    return CheckResult(command, code, cap_output(output.text()) + note, ran.seconds)


def feedback(result: CheckResult, workdir: Path, task: str = "") -> CheckFailure:
    """The next user message after a failed check: its (capped, condensed) output, which part of it
    failed, the lines of the project it points at, what the task says about it, and what to do."""
    verdict = "timed out" if result.exit_code is None else f"failed (exit code {result.exit_code})"
    # The output is not fenced: small models copy a fenced output back into their answer.
    named = f"{quoted} " if (quoted := _quoted(result.command)) else ""
    part = f" at `{result.failed_part}`" if result.failed_part else ""
    locations = locate(result.output, workdir)
    where = where_it_failed(locations, workdir)
    error = error_line(result.output)
    asked = task_sentences(task, error or result.output.strip().rsplit("\n", 1)[-1])
    said = "".join(f"> {sentence}\n" for sentence in asked)
    return CheckFailure(
        f"The task is not done yet: its check {named}{verdict}{part}. Its output:\n"
        f"--- check output ---\n{condense(result.output).strip() or '(no output)'}\n--- end of check output ---\n",
        f"The check points at these lines, as they are now:\n{where}\n" if where else "",
        (f"What the task says about this:\n{said}" if said else "")
        + (NO_TESTS if _found_no_tests(result) else "Find the cause in the code, fix it, and check again. ")
        + "Do not change the check itself.",
        locations if where else [],
        error,
    )


# pytest's exit 5 prints only "no tests ran": there is no line to point at and no code at fault. The
# 1.5B, told to find the cause in the code, wrote linked_list.py back unchanged until the repeat guard
# ended the task; the test file the task asked for was never written (linked-list).
NO_TESTS = (
    "pytest found no tests to run: it runs the functions named `test_...` of the files named "
    "`test_*.py` or `*_test.py`. Write the tests the task asks for in such a file. "
)


def _found_no_tests(result: CheckResult) -> bool:
    return result.exit_code == 5 and "no tests ran" in result.output


# After a failed check, an answer that changed nothing is not "done": the check would fail the same way
# (27 of 41 checks of one suite run re-ran on unchanged files).
NOTHING_CHANGED = (
    "You changed nothing since the check failed, so it would fail the same way. The task is not done. "
)


async def work_until_checked(
    agent: Agent,
    message: str | None,
    check: str | None,
    workdir: Path,
    rounds: int,
    emit: Callable[[Event], None],
    timeout: float = CHECK_TIMEOUT,
    typed: str = "",
) -> tuple[Outcome, CheckResult | None]:
    """Run the agent on `message` (`typed`: the person's own words in it); while the check fails and
    rounds are left, send it the failure. The rounds are one task: the repeat guard carries over, and
    an answer that changed nothing since the failure is sent back, sampled warmer, without running the
    check again."""
    outcome = await agent.run(message, typed)
    result = None
    failure: CheckFailure | None = None
    changes_at_failure = -1
    round_number = 0
    for round_number in range(1, rounds + 2):
        if not check or outcome.status != "completed":
            break
        if failure is not None and agent.changes == changes_at_failure:
            emit(Notice("the model changed nothing since the check failed: not checked again, told so"))
            if round_number > rounds:
                break
            retry = NOTHING_CHANGED + agent.actions.after_failed_check(failure, agent.ctx)
            outcome = await agent.run(retry, followup=True, warmer=True)
            continue
        result = await _checked(check, workdir, timeout, round_number, emit, rounds + 1 - round_number)
        if result.passed or round_number > rounds:
            break
        failure, changes_at_failure = (
            feedback(result, workdir, agent.ctx.state.get(TASK_TEXT, "")),
            agent.changes,
        )
        outcome = await agent.run(agent.actions.after_failed_check(failure, agent.ctx), followup=True)
    if check and outcome.status != "completed":
        result, outcome = await last_check(outcome, check, workdir, emit, round_number, timeout)
    return outcome, result


def _quoted(command: str) -> str:
    """The check's command in backticks, to name it to the model; '' for a long one (a script with
    hidden assertions), which small models copy into their answer."""
    return f"`{command}`" if len(command) <= 80 and "\n" not in command else ""


def fresh_start_note(result: CheckResult, undone: bool) -> str:
    """Said with the task when a line that got stuck starts afresh (agent/session/task_run.py): the one
    line its check failed on, and whether its changes were undone (else the files are as it left
    them). Not the whole output: a fresh start is there to leave the stuck line's context behind."""
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    error = error_line(result.output) or (lines[-1][:200] if lines else "")
    named = f" {quoted}" if (quoted := _quoted(result.command)) else ""
    part = f" at `{result.failed_part}`" if result.failed_part else ""
    verdict = "timed out" if result.exit_code is None else "failed"
    failed = f"its check{named} {verdict}{part}" + (f": {error}" if error else "")
    if undone:
        return (
            f"An earlier try at this task did not pass: {failed}\nIts changes were undone, so the files "
            "are as they were before it. Do the task again, and avoid that failure."
        )
    return f"An earlier try at this task left the files as they are now, and {failed}\nFind what is wrong, and fix it."


async def _checked(
    check: str,
    workdir: Path,
    timeout: float,
    round_number: int,
    emit: Callable[[Event], None],
    rounds_left: int = 0,
) -> CheckResult:
    emit(CheckStarted(round_number, check, rounds_left))
    result = await run_check(check, workdir, timeout)
    emit(
        CheckFinished(
            round_number, result.command, result.passed, result.exit_code, result.output, result.seconds
        )
    )
    return result


async def last_check(
    outcome: Outcome,
    check: str,
    workdir: Path,
    emit: Callable[[Event], None],
    round_number: int = 1,
    timeout: float = CHECK_TIMEOUT,
) -> tuple[CheckResult, Outcome]:
    """The loop stopped before the model said it was done (a limit, a repeated answer, a failed
    request): the check judges the work as it stands, once. Finished work counts: a model that fixed
    the bug and then kept repeating itself has still done the task."""
    result = await _checked(check, workdir, timeout, max(1, round_number), emit)
    if result.passed:
        emit(Notice(f"the task's check passes, so the task is done ({outcome.error or outcome.status})"))
        outcome = replace(outcome, status="completed", error="")
    return result, outcome
