"""Token to screen: how long a streamed delta takes from its arrival in the app to the screen.

The scripted server runs as its own process (as llama-server would) and streams a long Markdown
answer at a fixed rate. For each delta, the delay is from its event in the app to the first screen
update (layout and render of the changed lines) after it is in the answer's widget. Shared by
`examples/bench_tui.py` (the figures in docs/benchmarks.md) and tests/frontends/tui/test_streaming.py.
"""

from __future__ import annotations

import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from textual.screen import Screen
from textual.widgets import Markdown

from agent.events import TextDelta
from tests.frontends.tui.helpers import SIZE, git_workspace, make_app, send, wait_for

REPO = Path(__file__).resolve().parents[2]
CHARS_PER_DELTA = 6  # what the scripted server sends in one chunk

SECTION = """## Step {i}

The store keeps tasks in a dict keyed by id; this step adds **{i}** more checks and explains
why each one matters for `delete_task`, with a short example below.

```python
def test_delete_{i}(store):
    task = store.add("write step {i}")
    assert store.delete_task(task) is True
    assert store.delete_task(task) is False
```

- the first call removes it
- the second finds nothing

"""
WORDS = [
    "store",
    "task",
    "delete",
    "add",
    "check",
    "index",
    "value",
    "result",
    "error",
    "list",
    "file",
    "test",
    "path",
    "line",
    "field",
]


def answer_text(chars: int) -> str:
    """Markdown that reads like an answer: paragraphs, code blocks and lists, never repeating (a
    repeating stream is cut by the client's loop guard)."""
    rng = random.Random(7)
    text, i = "", 0
    while len(text) < chars:
        name = "_".join(rng.sample(WORDS, 2))
        prose = " ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 60)))
        text += SECTION.format(i=f"{i}_{name}").replace(
            "The store keeps", prose.capitalize() + ". The store keeps"
        )
        i += 1
    return text[:chars]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def scripted_server(replies: list[dict]) -> tuple[subprocess.Popen, str]:
    """The scripted server as its own process: its JSON encoding and pacing cost this one nothing."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "SCRIPTED_REPLIES": json.dumps(replies)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.scripted_server", "--as-llama-server", "--port", str(port)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError("the scripted server did not start")


class _Written:
    """How much of the answer is in its widgets, and when the screen was updated after that.

    Both renderers are watched: the live answer's writes, and Markdown.append (what streamed before
    it), so that the same measure compares them."""

    def __init__(self) -> None:
        self.chars = 0
        self.markdown: dict = {}  # Markdown widgets (a long answer spanned several)
        self.drawn: list[tuple[float, int]] = []  # (time, chars in the widgets) at each screen update
        self.messages = 0  # the messages to the app that carried text deltas
        self._undo: list = []

    def __enter__(self) -> _Written:
        self._wrap(Markdown, "append", self._markdown_append)
        try:
            from agent.frontends.tui.widgets.live_answer import LiveAnswer
        except ImportError:
            pass
        else:
            self._wrap(LiveAnswer, "write", self._live_write)
        self._wrap(Screen, "_on_timer_update", self._screen_update)
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in self._undo:
            setattr(cls, name, original)

    def _wrap(self, cls: type, name: str, make) -> None:
        original = getattr(cls, name)
        self._undo.append((cls, name, original))
        setattr(cls, name, make(original))

    def _markdown_append(self, original):
        written = self

        async def append(widget, markdown: str):
            result = await original(widget, markdown)
            written.markdown[widget] = len(widget.source)
            written.chars = sum(written.markdown.values())
            return result

        return append

    def _live_write(self, original):
        written = self

        def write(widget, text: str) -> None:
            original(widget, text)
            if "answer" in widget.classes:
                written.chars += len(text)

        return write

    def count_messages(self, app) -> None:
        """Count the messages to `app` that carry streamed text: a message a frame, or one a token."""
        original = app.post_message

        def post_message(message) -> bool:
            events = getattr(message, "events", None) or [getattr(message, "event", None)]
            self.messages += any(isinstance(event, TextDelta) for event in events)
            return original(message)

        app.post_message = post_message

    def _screen_update(self, original):
        written = self

        def update(screen) -> None:
            original(screen)
            if not screen.app._batch_count:
                written.drawn.append((time.perf_counter(), written.chars))

        return update


async def token_to_screen(
    deltas: int, rate: float | None = None, chunk_delay: float = 0.001, profile: str | None = None
) -> dict:
    """Stream `deltas` deltas of a Markdown answer: at `rate` a second on the server's fixed schedule,
    else with `chunk_delay` between them. Returns the delays' median and p99 (ms), overall and in the
    first and last tenth of the stream, how far the deltas fell behind the schedule, CPU, and the
    messages that carried the deltas to the app.

    With `profile`, the app starts that profile's real llama-server instead (a GPU's own rate, issue
    25): the answer is whatever the model writes, as long as the profile's max_tokens."""
    proc = url = None
    if profile is None:
        text = answer_text(deltas * CHARS_PER_DELTA)
        pace = {"chunks_per_s": rate} if rate else {"chunk_delay": chunk_delay}
        proc, url = scripted_server([{"content": text, **pace}])
    else:
        rate = None  # the model sets the pace
    arrivals: list[tuple[float, int]] = []  # (time, answer length after this delta)
    scratch = tempfile.TemporaryDirectory(prefix="token-to-screen-ws-")
    try:
        ws = git_workspace(Path(scratch.name))
        app = make_app(ws, base_url=url, profile=profile)
        with _Written() as written:
            written.count_messages(app)
            async with app.run_test(size=SIZE) as pilot:
                await wait_for(pilot, lambda: app.ready, timeout=30 if proc else 600, what="the server")
                app.prompt.cursor_blink = False
                forward = app.session.emit_ui
                length = 0

                def emit(event):
                    nonlocal length
                    if isinstance(event, TextDelta):
                        length += len(event.text)
                        arrivals.append((time.perf_counter(), length))
                    forward(event)

                app.session.emit_ui = emit
                cpu0, wall0 = time.process_time(), time.perf_counter()
                await send(pilot, "explain the tests")
                await wait_for(pilot, lambda: len(app.status.turns) >= 1, timeout=600, what="the answer")
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                await pilot.pause()  # the last frame drawn
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        scratch.cleanup()
    delays, j, drawn = [], 0, written.drawn
    for arrived, needed in arrivals:
        while j < len(drawn) and (drawn[j][1] < needed or drawn[j][0] < arrived):
            j += 1
        if j == len(drawn):
            break
        delays.append((drawn[j][0] - arrived) * 1000)
    n = len(arrivals)
    stream_s = arrivals[-1][0] - arrivals[0][0]
    tenth = max(1, n // 10)
    # Behind the server's schedule (from the first delta on): a client that cannot keep up falls
    # behind before its deltas reach the app, which the delays above do not see.
    behind = (stream_s - (n - 1) / rate) * 1000 if rate else 0.0
    return {
        "deltas": n, "shown": len(delays), "delivered_per_s": n / stream_s if stream_s else 0.0,
        "behind_schedule_at_end_ms": behind,
        "median_ms": statistics.median(delays), "p99_ms": percentile(delays, 0.99),
        "first_tenth_median_ms": statistics.median(delays[:tenth]), "last_tenth_median_ms": statistics.median(delays[-tenth:]),
        "first_tenth_p99_ms": percentile(delays[:tenth], 0.99), "last_tenth_p99_ms": percentile(delays[-tenth:], 0.99),
        "cpu_ms_per_delta": cpu / n * 1000, "cpu_share": cpu / wall,
        "stream_s": stream_s, "delta_messages": written.messages,
    }  # fmt: skip
