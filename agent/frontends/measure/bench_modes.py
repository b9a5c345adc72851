"""The other two modes of `agent bench`: `--conversation` (one agent conversation, the agent's own time
per request against the server's) and `--tasks` (the task suite as real `agent run`s)."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.frontends import console
from agent.frontends.measure.bench_record import command_line, load_average
from agent.session.connect import connect, resolve_profile
from agent.settings.config import Settings

# ---------------------------------------------------------------------------------------------- conversation


def cmd_conversation(args: Namespace, settings: Settings, prompts: dict[str, str]) -> int:
    import asyncio

    from agent.frontends.measure.conversation import run_conversation

    report: dict[str, Any] = {"schema": "spec-agent.bench-conversation/1", "command": command_line(args),
                              "machine": _machine(), "profiles": {}}  # fmt: skip
    for name in args.profiles or [None]:
        profile = resolve_profile(settings, name, args.base_url if not name else None, Path.cwd())
        actions = args.actions or profile.actions
        with (
            console.build_progress() as build,
            console.start_progress(profile.name) as started,
            connect(settings, profile, start_progress=started, build_progress=build) as conn,
        ):
            load_before = load_average()
            session, stats, costs = asyncio.run(
                run_conversation(settings, conn, prompts, args.tool_choice, args.max_turns, actions)
            )
        own = _ms([c.own_s for c in costs])
        mine = _ms([c.agent_s for c in costs])
        handling = _ms([c.server_handling_s for c in costs])
        report["profiles"][profile.name] = {
            "session": session,
            "actions": actions,
            "load_average": {"before": load_before, "after": load_average()},
            "requests": [c.to_dict() for c in costs],
            "median_own_ms": _median(own),
            "max_own_ms": max(own) if own else None,
            "median_server_handling_ms": _median(handling),
            "median_agent_ms": _median(mine),
        }
        if args.json:
            continue
        table = console.table(
            "request", "cache_n", "prompt_n", "cache reuse", "tokens", "gen tok/s", "client/server",
            "server s", "tools s", "own ms", "server handling ms", "agent ms", left=(),
            title=f"{profile.name}: session {session}",
        )  # fmt: skip
        for c in costs:
            s = c.stats
            table.add_row(
                str(c.request), str(s.cache_n), str(s.prompt_n), console.pct(s.cache_reuse), str(s.output_tokens),
                console.num(s.generation_tokens_per_second), console.num(c.client_over_server, 3),
                console.num(c.server_s, 2), console.num(c.tool_s, 2), *(
                    console.num(x * 1000 if x is not None else None)
                    for x in (c.own_s, c.server_handling_s, c.agent_s)
                ),
            )  # fmt: skip
        console.out.print(table)
        later = [s.cache_reuse for s in stats[1:] if s.cache_reuse is not None]
        if later:
            console.out.print(f"requests 2-{len(stats)}: cache reuse min {min(later):.0%}, "
                              f"median {sorted(later)[len(later) // 2]:.0%}  (agent stats {session})")  # fmt: skip
        if own:
            console.out.print(
                f"own time per request (wall time minus the server's prompt_ms + predicted_ms minus tools): "
                f"median {_median(own):.1f} ms, max {max(own):.1f} ms"
            )
        if handling and mine:
            console.out.print(
                f"  of it llama-server's handling outside its timings (HTTP, chat template, tokenizing; each "
                f"request replayed for one token): median {_median(handling):.1f} ms; the agent's code: "
                f"median {_median(mine):.1f} ms"
            )
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "conversation.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        console.note(f"wrote {out / 'conversation.json'}")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


def _ms(values: list[float | None]) -> list[float]:
    return [v * 1000 for v in values if v is not None]


def _median(values: list[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None


def _machine() -> dict[str, Any]:
    from agent.frontends.measure.memory import machine

    return machine()


# ---------------------------------------------------------------------------------------------- tasks


def cmd_tasks(args: Namespace, settings: Settings) -> int:
    """The task suite on each profile in turn: one server per profile, each task a real `agent run`."""
    import tempfile

    from agent.frontends.measure.suite import discover, format_table, run_suite

    tasks = discover(Path(args.tasks), args.task or None)
    if not tasks:
        raise AgentError(f"no tasks in {args.tasks}", fix="A task is a folder holding task.md (and repo/).")
    results = {}
    for name in args.profiles or [None]:
        profile = resolve_profile(settings, name, args.base_url if not name else None, Path.cwd())
        label = profile.name + (f"/{args.actions}" if args.actions else "")
        console.note(f"{label}: {len(tasks)} tasks")
        agent_args = ["--base-url", args.base_url] if args.base_url and not name else ["-p", profile.name]
        agent_args += ["--actions", args.actions] if args.actions else []
        attempts = getattr(args, "attempts", None) or 1
        agent_args += ["--attempts", str(attempts)] if attempts > 1 else []
        fresh = getattr(args, "fresh_starts", None)
        agent_args += ["--fresh-starts", str(fresh)] if fresh is not None else []
        jobs = getattr(args, "jobs", None) or 1
        with (
            console.build_progress() as build,
            console.start_progress(profile.name) as started,
            connect(settings, profile, start_progress=started, build_progress=build, slots=attempts * jobs),
            tempfile.TemporaryDirectory(prefix="agent-tasks-") as scratch,
        ):
            out = Path(args.out) / f"{label.replace('/', '-')}.jsonl" if args.out else None
            results[label] = run_suite(
                tasks, agent_args, Path(scratch), out, timeout=args.task_timeout, jobs=jobs,
                progress=lambda r: console.note(
                    f"  {r.name}: {'solved' if r.solved else 'not solved'} in {r.seconds:.0f} s, {r.turns} turns"
                ),
            )  # fmt: skip
    if args.json:
        print(json.dumps({k: [r.to_dict() for r in v] for k, v in results.items()}, indent=2))
        return 0
    print(format_table(results))
    for label, rows in results.items():
        print(suite_line(label, rows))
    return 0


def suite_line(label: str, rows: list) -> str:
    """A profile's suite in one line: what the user asks first is which profile finishes the work
    fastest, so the solved count comes with the time and tokens it took."""
    import statistics

    def median(values: list) -> float | None:
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    solved = sum(r.solved for r in rows)
    parts = [
        f"{label}: solved {solved}/{len(rows)}",
        f"{sum(r.seconds for r in rows):.0f} s in all" + (
            f" ({sum(r.seconds for r in rows if r.solved) / solved:.0f} s per solved task)" if solved else ""
        ),
        f"{sum(r.turns for r in rows)} turns",
        f"{sum(r.output_tokens for r in rows)} tokens",
        f"median {console.num(median([r.gen_tok_s for r in rows]))} tok/s",
        f"draft {console.pct(median([r.acceptance for r in rows]))}",
        f"cache {console.pct(median([r.cache_reuse for r in rows]))}",
    ]  # fmt: skip
    return ", ".join(parts)
