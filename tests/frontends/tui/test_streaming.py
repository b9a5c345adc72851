"""The screen keeps up with a fast model (issue 25, part 4): a streamed answer costs each frame about
what arrived in it, and 2,000 tokens a second reach the screen in time, to the end of the answer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

import agent.frontends.tui
from agent.frontends.tui.widgets import conversation as conversation_module
from agent.frontends.tui.widgets.conversation import Conversation
from tests.frontends.tui.helpers import SIZE, screen_text, wait_for
from tests.frontends.tui.stream_lag import token_to_screen


class ConversationOnly(App):
    CSS_PATH = Path(agent.frontends.tui.__file__).parent / "main.tcss"

    def compose(self) -> ComposeResult:
        yield Conversation()

    @property
    def conversation(self) -> Conversation:
        return self.query_one(Conversation)


def long_code_block(chars: int) -> str:
    """What a model writing a whole file in one fence sends: no blank line outside code to cut at."""
    lines, i = ["```python\n", "def build(values):\n"], 0
    while sum(map(len, lines)) < chars:
        i += 1
        lines.append(f"    value_{i} = combine(values[{i}], value_{i - 1}, weight={i % 7})  # step {i}\n")
    return "".join(lines) + "```\n"


class CallCounter:
    """Python function calls made while it is on: a measure of work that does not depend on the
    machine's speed or load."""

    def __init__(self) -> None:
        self.calls = 0

    def _count(self, frame, event, arg) -> None:
        if event == "call":
            self.calls += 1

    def __enter__(self) -> CallCounter:
        sys.setprofile(self._count)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)


@pytest.mark.slow
async def test_a_frame_at_the_end_of_a_long_code_block_costs_what_one_at_its_start_does(monkeypatch):
    # Each frame is written at once and drawn by the pilot's pause, so the frames are the same
    # whatever the machine's speed: 20 frames of 1,500 characters each. (Before the app gathered
    # deltas into frames, the conversation did, on a timer: FRAME_S there makes it fire at once.)
    monkeypatch.setattr(conversation_module, "FRAME_S", 0.0001, raising=False)
    text = long_code_block(30_000)
    frames = [text[i : i + 1500] for i in range(0, len(text), 1500)]
    app = ConversationOnly()
    async with app.run_test(size=SIZE) as pilot:
        conversation = app.query_one(Conversation)
        work = []
        for chunk in frames:
            last = [line.rstrip() for line in chunk.splitlines() if line.strip(" `")][-1]
            with CallCounter() as counter:  # until the frame is written and drawn
                await conversation.text(chunk)
                await pilot.pause()
                await wait_for(pilot, lambda last=last: last in screen_text(app)[-5000:], what="the frame")
            work.append(counter.calls)
        await conversation.end_stream()
        await pilot.pause()
        assert "weight=3)  # step 10 " in screen_text(app)
    half = len(work) // 2
    first, second = sum(work[1:half]), sum(work[half + 1 :])  # (the first frame mounts the widget)
    # Work that grows with the block shows as a second half that costs more: 2.4x before the live
    # answer (123,000 calls in the first frame, 477,000 in the last full one), when every frame
    # highlighted the whole block again; 1.0x with it (~25,000 in each).
    assert second < 1.3 * first, f"calls per frame: {work}"


def goal_missed(lag: dict) -> list[str]:
    """The issue's goal: under 50 ms at the median and 150 ms at p99, and no backlog: the last tenth
    of the stream no slower than the first (within 20 ms), the deltas on the server's schedule (an
    app too busy to read them falls behind it before they arrive), every one of them drawn."""
    checks = {
        "median under 50 ms": lag["median_ms"] < 50,
        "p99 under 150 ms": lag["p99_ms"] < 150,
        "last tenth no slower than the first": lag["last_tenth_median_ms"]
        < lag["first_tenth_median_ms"] + 20,
        "on the server's schedule": lag["behind_schedule_at_end_ms"] < 1000,
        "every delta drawn": lag["shown"] == lag["deltas"],
    }
    return [name for name, met in checks.items() if not met]


@pytest.mark.slow
async def test_2000_tokens_a_second_reach_the_screen_in_time_to_the_end_of_a_20000_token_answer():
    # One run's hiccup (another process on this 2-core box) is not the app's lag: a second run
    # decides. Quiet, the app measured a 30-34 ms median and a 62-105 ms p99 here; the code before
    # the live answer, 614-993 ms and 1.5-2.0 s (examples/bench_tui.py, docs/benchmarks.md).
    runs = []
    for _ in range(2):
        lag = await token_to_screen(20_000, rate=2000)
        runs.append((goal_missed(lag), ", ".join(f"{k} {v:.1f}" for k, v in lag.items())))
        if not runs[-1][0]:
            return
    pytest.fail("\n".join(f"missed {missed}: {summary}" for missed, summary in runs))
