"""The speed panel's session figures: acceptance by draft position, and where the cache broke."""

from __future__ import annotations

from agent.frontends.tui.widgets.speed_panel import SpeedPanel
from agent.store.telemetry import TurnStats


def test_the_panel_gives_acceptance_by_position_and_the_last_cache_break_with_its_cause():
    panel = SpeedPanel()
    assert "draft position" not in panel._summary() and "cache broke" not in panel._summary()
    panel.turns = [
        TurnStats(predicted_n=10, cache_n=0, prompt_n=100, metrics_drafts=4, accepted_per_position=[4, 2]),
        TurnStats(predicted_n=10, cache_n=5, prompt_n=100, cache_break="95 tokens lost: a [bracketed] cause"),
        TurnStats(predicted_n=10, cache_n=100, prompt_n=5),
    ]
    summary = panel._summary()
    assert "accepted by draft position: 1: 100%, 2: 50% of 4 drafts" in summary
    # markup-escaped: a cause in brackets is shown, not read as a style
    assert "cache broke 1x; last at turn 2: 95 tokens lost: a \\[bracketed] cause" in summary
