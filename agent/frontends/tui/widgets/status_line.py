"""The status line: the server's state, live and recent speed, draft acceptance (or "draft off" when
the profile's draft failed and the server runs without it), cache reuse, context used, the approval
mode and the checkpoints /undo can restore."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from agent.store.telemetry import TurnStats

BLOCKS = "▁▂▃▄▅▆▇█"
STATE_STYLE = {"starting": "yellow", "ready": "green", "generating": "cyan", "working": "cyan",
               "failed": "red", "down": "red", "stopped": "dim"}  # fmt: skip


def sparkline(values: list[float], width: int = 12) -> str:
    values = values[-width:]
    if not values:
        return ""
    top = max(values) or 1.0
    return "".join(BLOCKS[min(len(BLOCKS) - 1, int(v / top * (len(BLOCKS) - 1)))] for v in values)


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


class StatusLine(Static):
    state = reactive("starting")
    detail = reactive("")  # why it failed, or what is loading
    live_tok_s = reactive(0.0)
    approval = reactive("ask")
    checkpoints = reactive(0)
    context = reactive((0, 0))
    draft_off = reactive("")  # why the server runs without the profile's draft

    def __init__(self) -> None:
        super().__init__(id="status")
        self.turns: list[TurnStats] = []

    def add_turn(self, stats: TurnStats) -> None:
        self.turns.append(stats)
        self.live_tok_s = 0.0
        self.refresh()

    def render(self) -> Text:
        line = Text()
        line.append(f"● {self.state}", STATE_STYLE.get(self.state, ""))
        if self.detail:
            line.append(f" {self.detail}", "dim")
        gen = [s.generation_tokens_per_second for s in self.turns if s.generation_tokens_per_second]
        if self.state == "generating" and self.live_tok_s:
            line.append(f"  {self.live_tok_s:.0f} tok/s", "bold")
        elif gen:
            line.append(f"  {gen[-1]:.0f} tok/s")
        if gen:
            line.append(f" {sparkline(gen)}", "cyan")
        last = self.turns[-1] if self.turns else None
        if self.draft_off:
            reason = self.draft_off if len(self.draft_off) <= 48 else self.draft_off[:47] + "…"
            line.append(f"  draft off: {reason}", "yellow")
        elif last is not None and last.acceptance is not None:
            line.append(f"  draft {last.acceptance:.0%}")
        if last is not None and last.cache_reuse is not None:
            # A broken cache in yellow; the turn's figures line and the speed panel (^P) say why.
            line.append(f"  cache {last.cache_reuse:.0%}", "yellow" if last.cache_break else "")
        used, total = self.context
        if total:
            line.append(f"  ctx {_k(used)}/{_k(total)} ({used / total:.0%})")
        line.append(f"  {self.approval}", "magenta")
        if self.checkpoints:
            line.append(f"  {self.checkpoints} checkpoint{'s' if self.checkpoints != 1 else ''}")
        line.append("  ^P speed  Esc stop  /help", "dim")
        return line
