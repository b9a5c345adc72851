"""`agent stats`: per-turn speed, cache reuse and draft acceptance of past sessions, and comparisons."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.frontends import console
from agent.settings.config import Settings, state_dir
from agent.store.telemetry import TurnStats, per_position_rates, position_line, read_jsonl, summarise_turns


def telemetry_dir() -> Path:
    return state_dir() / "telemetry"


def _sessions() -> list[Path]:
    folder = telemetry_dir()
    return sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []


def _find(name: str) -> Path:
    path = Path(name)
    if path.is_file():
        return path
    matches = [p for p in _sessions() if p.stem == name] or [
        p for p in _sessions() if p.stem.startswith(name)
    ]
    if len(matches) == 1:
        return matches[0]
    recent = ", ".join(p.stem for p in _sessions()[-5:]) or "none yet"
    if not matches:
        raise AgentError(f"no session '{name}' in {telemetry_dir()}", f"Recent sessions: {recent}.")
    raise AgentError(f"'{name}' matches {len(matches)} sessions", "Give more of the id.")


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    first = records[0] if records else {}
    meta = {k: first.get(k, "") for k in ("session", "profile", "spec_mode", "draft_off")}
    return meta | summarise_turns([TurnStats.from_dict(r.get("stats", {})) for r in records])


def _f(value: float | None, fmt: str = "{:.1f}") -> str:
    return fmt.format(value) if value is not None else "-"


def _turn_table(records: list[dict[str, Any]]):
    table = console.table(
        "turn", "tokens", "gen tok/s", "prefill tok/s", "cache", "draft", "ttft s", "wall s", "tools s", left=()
    )  # fmt: skip
    for r in records:
        s = TurnStats.from_dict(r.get("stats", {}))
        draft = f"{console.pct(s.acceptance)} ({s.accepted}/{s.drafted})" if s.drafted else "-"
        table.add_row(
            str(r.get("turn", "")),
            str(s.output_tokens or "-"),
            _f(s.generation_tokens_per_second),
            _f(s.prompt_per_second, "{:.0f}"),
            console.pct(s.cache_reuse),
            draft,
            _f(s.ttft_s, "{:.2f}"),
            _f(s.wall_s, "{:.2f}"),
            _f(s.tool_s, "{:.2f}"),
        )
    return table


def cache_breaks(records: list[dict[str, Any]]) -> list[str]:
    """One line per turn whose prompt cache broke, with the cause (agent/core/prompt_cache.py)."""
    return [
        f"cache broke at turn {r.get('turn', '?')}: {r['stats']['cache_break']}"
        for r in records
        if r.get("stats", {}).get("cache_break")
    ]


def chart(records: list[dict[str, Any]], width: int = 80, height: int = 14) -> str:
    """Generation tok/s per turn, with acceptance (%) on the right axis when there was drafting."""
    import plotext as plt

    stats = [TurnStats.from_dict(r.get("stats", {})) for r in records]
    turns = list(range(1, len(stats) + 1))
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    plt.plot(turns, [s.generation_tokens_per_second or 0 for s in stats], label="gen tok/s", marker="braille")
    if any(s.acceptance is not None for s in stats):
        acceptance = [100 * (s.acceptance or 0) for s in stats]
        plt.plot(turns, acceptance, label="draft accepted %", yside="right", marker="braille")
    plt.xlabel("turn")
    if len(turns) <= 20:
        plt.xticks(turns)
    return plt.uncolorize(plt.build())


def _summary_line(s: dict[str, Any]) -> str:
    return (
        f"{s['turns']} turns · {s['output_tokens']} tokens · median {_f(s['median_gen_tok_s'])} tok/s gen"
        f" · {_f(s['median_prefill_tok_s'], '{:.0f}')} tok/s prefill · draft {console.pct(s['acceptance'])}"
        f" · cache {console.pct(s['cache_reuse'])} · {_f(s['wall_s'])} s model, {_f(s['tool_s'])} s tools"
    )


def _spec(s: dict[str, Any]) -> str:
    """The session's speculation, or "draft off: <reason>" when its draft failed (agent/session/connect.py)."""
    return f"draft off: {s['draft_off']}" if s.get("draft_off") else s["spec_mode"] or "none"


def cmd_stats(args: Namespace, settings: Settings) -> int:
    sessions = _sessions()
    if args.all:
        chosen = sessions
    elif args.sessions:
        chosen = [_find(name) for name in args.sessions]
    else:
        if not sessions:
            raise AgentError(
                "no sessions recorded yet", fix="Run `agent run TASK.md` or `agent bench` first."
            )
        chosen = sessions[-1:]
    loaded = [(path, read_jsonl(path)) for path in chosen]
    loaded = [(p, r) for p, r in loaded if r]
    if not loaded:
        raise AgentError("the chosen sessions have no recorded turns")
    summaries = [summarise(records) | {"session": path.stem} for path, records in loaded]

    if args.json:
        out: dict[str, Any] = {"sessions": summaries}
        if len(loaded) == 1:
            out["turns"] = loaded[0][1]
        print(json.dumps(out, indent=2, default=str))
        return 0

    if len(loaded) == 1:
        path, records = loaded[0]
        s = summaries[0]
        console.out.print(f"[bold]{path.stem}[/]  profile {s['profile']} ({_spec(s)})")
        console.out.print(_turn_table(records))
        for line in cache_breaks(records):
            console.out.print(line, markup=False)
        if per_position := per_position_rates([TurnStats.from_dict(r.get("stats", {})) for r in records]):
            console.out.print(f"accepted by draft position: {position_line(per_position)}")
        console.out.print(_summary_line(s))
        console.out.print(chart(records), markup=False)
        return 0

    table = console.table(
        "session", "profile", "speculation", "turns", "tokens", "gen tok/s", "vs first", "prefill", "draft",
        "cache", left=("session", "profile", "speculation"),
    )  # fmt: skip
    base = summaries[0]["median_gen_tok_s"]
    for s in summaries:
        ratio = s["median_gen_tok_s"] / base if base and s["median_gen_tok_s"] else None
        table.add_row(
            s["session"],
            s["profile"],
            _spec(s),
            str(s["turns"]),
            str(s["output_tokens"]),
            _f(s["median_gen_tok_s"]),
            _f(ratio, "{:.2f}x"),
            _f(s["median_prefill_tok_s"], "{:.0f}"),
            console.pct(s["acceptance"]),
            console.pct(s["cache_reuse"]),
        )
    console.out.print(table)
    return 0
