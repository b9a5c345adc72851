"""Work off the event loop (agent/core/stoppable.py): the loop keeps answering while it runs, and a
cancelled caller stops it at its next check, with nothing of its result used."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent.core.stoppable import Unwanted, check_wanted, off_loop
from agent.core.task_message import task_message_off_loop
from agent.core.workbench import Workbench
from agent.protocols.registry import make_actions
from tests.big_repo import generate


async def test_the_result_and_an_error_of_the_work_come_back_to_the_caller():
    assert await off_loop(sum, [1, 2, 3]) == 6
    with pytest.raises(ZeroDivisionError):
        await off_loop(divmod, 1, 0)


async def test_the_event_loop_answers_while_the_work_runs():
    release, ticks = threading.Event(), []

    def work() -> str:
        release.wait(30)
        return "done"

    async def tick() -> None:
        ticks.append(1)
        release.set()  # the work ends only once the loop has run something else

    running = asyncio.ensure_future(off_loop(work))
    await tick()
    assert await running == "done" and ticks == [1]


async def test_a_cancelled_caller_stops_the_work_at_its_next_check_and_waits_for_it():
    started, ended = threading.Event(), []

    def work() -> None:
        started.set()
        try:
            while True:
                check_wanted()
        except Unwanted:
            ended.append("stopped")
            raise

    running = asyncio.ensure_future(off_loop(work))
    await asyncio.to_thread(started.wait, 30)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert ended == ["stopped"]  # before the caller went on


def test_outside_off_loop_a_check_never_stops_anything():
    check_wanted()


async def test_a_task_message_cancelled_during_its_search_marks_nothing_as_shown(tmp_path):
    """The files the model is shown whole are marked only once the message is made: cancelled during
    the search, nothing is marked, so no write is let through for a file the model never saw."""
    big = generate(tmp_path / "repo", files=400, commit=False)
    workbench = Workbench(big.root)
    blocks = make_actions("blocks", big.root)
    made = await task_message_off_loop(workbench, big.task, blocks)
    assert "def prorate_amount(amount, days, period_days=30):" in made and workbench.tool_state

    workbench = Workbench(big.root)
    searching = asyncio.ensure_future(task_message_off_loop(workbench, big.task, blocks))
    await asyncio.sleep(0)  # the search has begun, in its thread
    searching.cancel()
    with pytest.raises(asyncio.CancelledError):
        await searching
    assert workbench.tool_state == {}
