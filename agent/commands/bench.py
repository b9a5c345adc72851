"""`agent bench`: run the seed's code prompts on each profile in turn and compare them."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

from agent import console
from agent.bench import SEED_PROMPTS, BenchResult, log_results, run, summarise
from agent.config import Settings
from agent.connect import connect, resolve_profile
from agent.errors import AgentError


def _prompts(args: Namespace) -> dict[str, str]:
    if not args.prompt_file:
        return SEED_PROMPTS
    path = Path(args.prompt_file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentError(f"cannot read prompt file {path}", str(exc)) from exc
    prompts = [p.strip() for p in text.split("\n---\n") if p.strip()]
    if not prompts:
        raise AgentError(f"prompt file {path} holds no prompt", fix="Separate prompts with a line '---'.")
    return {f"{path.stem}-{i}": p for i, p in enumerate(prompts, 1)}


def cmd_conversation(args: Namespace, settings: Settings, prompts: dict[str, str]) -> int:
    import asyncio

    from agent.bench import run_conversation

    for name in args.profiles or [None]:
        profile = resolve_profile(settings, name, args.base_url if not name else None, Path.cwd())
        with (
            console.build_progress() as build,
            console.start_progress(profile.name) as started,
            connect(settings, profile, start_progress=started, build_progress=build) as conn,
        ):
            session, stats = asyncio.run(
                run_conversation(settings, conn.endpoint, prompts, args.tool_choice, args.max_turns)
            )
        table = console.table(
            "request", "cache_n", "prompt_n", "cache reuse", "tokens", "gen tok/s", left=(),
            title=f"{profile.name}: session {session}",
        )  # fmt: skip
        for i, s in enumerate(stats, 1):
            table.add_row(str(i), str(s.cache_n), str(s.prompt_n), console.pct(s.cache_reuse), str(s.output_tokens),
                          console.num(s.generation_tokens_per_second))  # fmt: skip
        console.out.print(table)
        later = [s.cache_reuse for s in stats[1:] if s.cache_reuse is not None]
        if later:
            console.out.print(f"requests 2-{len(stats)}: cache reuse min {min(later):.0%}, "
                              f"median {sorted(later)[len(later) // 2]:.0%}  (agent stats {session})")  # fmt: skip
    return 0


def cmd_tasks(args: Namespace, settings: Settings) -> int:
    """The task suite on each profile in turn: one server per profile, each task a real `agent run`."""
    import signal
    import tempfile

    from agent.suite import discover, format_table, run_suite

    # SIGTERM unwinds like Ctrl+C, so the running task's agent and the profile's server are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    tasks = discover(Path(args.tasks), args.task or None)
    if not tasks:
        raise AgentError(f"no tasks in {args.tasks}", fix="A task is a folder holding task.md (and repo/).")
    results = {}
    for name in args.profiles or [None]:
        profile = resolve_profile(settings, name, args.base_url if not name else None, Path.cwd())
        label = profile.name + (f"/{args.actions}" if args.actions else "")
        console.note(f"{label}: {len(tasks)} tasks")
        agent_args = ["--base-url", args.base_url] if profile.kind == "attach" else ["-p", profile.name]
        agent_args += ["--actions", args.actions] if args.actions else []
        with (
            console.build_progress() as build,
            console.start_progress(profile.name) as started,
            connect(settings, profile, start_progress=started, build_progress=build),
            tempfile.TemporaryDirectory(prefix="agent-tasks-") as scratch,
        ):
            out = Path(args.out) / f"{label.replace('/', '-')}.jsonl" if args.out else None
            results[label] = run_suite(
                tasks, agent_args, Path(scratch), out, timeout=args.task_timeout,
                progress=lambda r: console.note(
                    f"  {r.name}: {'solved' if r.solved else 'not solved'} in {r.seconds:.0f} s, {r.turns} turns"
                ),
            )  # fmt: skip
    if args.json:
        print(json.dumps({k: [r.to_dict() for r in v] for k, v in results.items()}, indent=2))
    else:
        print(format_table(results))
    return 0


def cmd_bench(args: Namespace, settings: Settings) -> int:
    if args.tasks:
        return cmd_tasks(args, settings)
    names = args.profiles or [None]
    prompts = _prompts(args)
    if args.conversation:
        return cmd_conversation(args, settings, prompts)
    results: list[BenchResult] = []
    for name in names:
        profile = resolve_profile(settings, name, args.base_url if not name else None, Path.cwd())
        console.note(f"{profile.name}: {len(prompts)} prompts × {args.runs}, max_tokens {args.max_tokens}")
        with (
            console.build_progress() as build,
            console.start_progress(profile.name) as started,
            connect(settings, profile, start_progress=started, build_progress=build) as conn,
        ):
            rows = run(conn.endpoint, prompts, args.max_tokens, args.temperature, args.runs)
            path = log_results(rows, conn.endpoint)
            console.note(f"logged to {path}")
        results += rows

    if args.json:
        print(
            json.dumps(
                {
                    "results": [
                        {
                            "profile": r.profile,
                            "prompt": r.prompt,
                            "stats": r.stats.to_dict(),
                            "client_over_server": r.client_server_ratio,
                        }
                        for r in results
                    ],
                    "summary": summarise(results),
                },
                indent=2,
            )
        )
        return 0

    table = console.table(
        "profile", "prompt", "tokens", "gen tok/s", "client tok/s", "client/server", "prefill tok/s",
        "draft acc/drafted", "ttft s", left=("profile", "prompt"),
    )  # fmt: skip
    for r in results:
        s = r.stats
        draft = f"{s.accepted}/{s.drafted} ({console.pct(s.acceptance)})" if s.drafted else "-"
        table.add_row(
            r.profile,
            r.prompt,
            str(s.output_tokens or "-"),
            console.num(s.predicted_per_second),
            console.num(s.client_tokens_per_second),
            console.num(r.client_server_ratio, 3),
            console.num(s.prompt_per_second, 0),
            draft,
            console.num(s.ttft_s, 2),
        )
    console.out.print(table)
    summary = summarise(results)
    first = next(iter(summary))
    base = summary[first]["median_gen_tok_s"]
    console.out.print()
    for profile, row in summary.items():
        speedup = row["median_gen_tok_s"] / base if base and row["median_gen_tok_s"] else None
        console.out.print(
            f"{profile}: median {console.num(row['median_gen_tok_s'])} tok/s"
            + (f", {speedup:.2f}x {first}" if profile != first else "")
            + f", acceptance {console.pct(row['acceptance'])}, client/server {console.num(row['median_client_over_server'], 3)}"
        )
    return 0
