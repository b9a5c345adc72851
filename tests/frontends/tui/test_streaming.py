"""The screen keeps up with a fast model (issue 25, part 4): a streamed answer costs each frame about
what arrived in it, and 2,000 tokens a second reach the screen whole, a frame at a time. How fast is
examples/bench_tui.py's to measure (docs/benchmarks.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

import agent.frontends.tui
from agent.frontends.tui.frames import FRAME_S
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


@pytest.mark.slow
async def test_a_20000_token_answer_at_2000_tokens_a_second_is_drawn_whole_a_frame_at_a_time():
    # Issue 25's goal, a median delay under 50 ms and a p99 under 150 ms with no backlog, is a speed
    # target: examples/bench_tui.py measures it (docs/benchmarks.md, the TUI). As a timed assert here
    # it failed CI twice, on days the 2-core box ran the app at 0.5 ms of CPU a delta, its whole core,
    # against 0.38-0.45 ms where the goal was met. What the goal rests on is counted instead, the same
    # under any load: every delta drawn, one message a frame rather than one a token (before frames,
    # ~20,000 here), and the frame's own cost kept flat (the test above).
    lag = await token_to_screen(20_000, rate=2000)
    figures = ", ".join(f"{k} {v:.1f}" for k, v in lag.items())
    assert lag["shown"] == lag["deltas"] > 20_000, figures
    frames = lag["stream_s"] / FRAME_S
    assert 0 < lag["delta_messages"] <= 1.5 * frames + 10, figures
