"""The speed panel (Ctrl+P): every turn of the session as charts, and the session's figures.

Generation and prefill speed share one chart (prefill on its own axis scale would hide generation,
so each gets a chart); draft acceptance and cache reuse are percentages and share the third.
"""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from agent.store.telemetry import TurnStats, per_position_rates, position_line, summarise_turns

MAX_BARS = 30


class SpeedPanel(Vertical):
    def __init__(self) -> None:
        super().__init__(id="speed")
        self.turns: list[TurnStats] = []
        self.display = False

    def compose(self) -> ComposeResult:
        yield Static("", id="speed-summary")
        with Horizontal():
            yield PlotextPlot(id="speed-gen")
            yield PlotextPlot(id="speed-prefill")
            yield PlotextPlot(id="speed-ratios")

    def on_mount(self) -> None:
        self.redraw()

    def add_turn(self, stats: TurnStats) -> None:
        self.turns.append(stats)
        if self.display:
            self.redraw()

    def toggle(self) -> None:
        self.display = not self.display
        if self.display:
            self.redraw()

    def redraw(self) -> None:
        turns = list(range(1, len(self.turns) + 1))
        self._chart(
            "#speed-gen",
            "generation tok/s",
            [(s.generation_tokens_per_second, "gen", "cyan") for s in self.turns],
            turns,
        )
        self._chart(
            "#speed-prefill",
            "prefill tok/s",
            [(s.prompt_per_second if s.prompt_n else None, "prefill", "magenta") for s in self.turns],
            turns,
        )
        plot = self.query_one("#speed-ratios", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("draft acceptance · cache reuse (%)")
        for name, color, values in (
            ("draft", "green", [s.acceptance for s in self.turns]),
            ("cache", "yellow", [s.cache_reuse for s in self.turns]),
        ):
            points = [(t, v * 100) for t, v in zip(turns, values, strict=True) if v is not None]
            if points:
                plt.plot(
                    [p[0] for p in points], [p[1] for p in points], label=name, color=color, marker="braille"
                )
        plt.ylim(0, 100)
        _turn_ticks(plt, turns)
        plot.refresh()
        self.query_one("#speed-summary", Static).update(self._summary())

    def _chart(
        self, selector: str, title: str, series: list[tuple[float | None, str, str]], turns: list[int]
    ) -> None:
        plot = self.query_one(selector, PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        points = [(t, v) for t, (v, _, _) in zip(turns, series, strict=True) if v]
        if points:
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            if len(points) <= MAX_BARS:
                plt.bar(xs, ys, color=series[0][2], width=0.6)
            else:  # a long session: bars would be one column wide
                plt.plot(xs, ys, color=series[0][2], marker="braille")
        _turn_ticks(plt, turns)
        plot.refresh()

    def _summary(self) -> str:
        if not self.turns:
            return "No turns yet: the figures of every turn of this session appear here."
        s = summarise_turns(self.turns)
        parts = [f"{s['turns']} turns", f"{s['output_tokens']} tok out"]
        if s["median_gen_tok_s"]:
            parts.append(f"gen {s['median_gen_tok_s']:.1f} tok/s")
        if s["median_prefill_tok_s"]:
            parts.append(f"prefill {s['median_prefill_tok_s']:.0f} tok/s")
        if s["acceptance"] is not None:
            parts.append(f"draft acceptance {s['acceptance']:.0%}")
        if s["cache_reuse"] is not None:
            parts.append(f"cache reuse {s['cache_reuse']:.0%}")
        line = "session: " + " · ".join(parts) + "   (speeds are medians; ratios are over all turns)"
        if per_position := per_position_rates(self.turns):  # the server's /metrics counts them
            line += f"\naccepted by draft position: {position_line(per_position)}"
        broke = [(turn, t.cache_break) for turn, t in enumerate(self.turns, 1) if t.cache_break]
        if broke:
            turn, why = broke[-1]
            line += f"\ncache broke {len(broke)}x; last at turn {turn}: {escape(why or '')}"
        return line


def _turn_ticks(plt, turns: list[int]) -> None:
    """Whole turn numbers on the x axis, at most about ten of them."""
    if turns:
        step = max(1, len(turns) // 10)
        plt.xticks(turns[::step])
    plt.xlabel("turn")
