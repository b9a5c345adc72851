"""`agent server tune PROFILE`: run the sweep of tune_setups.py, show it, keep the best as a profile.

Each setup is measured on the seed's prompts, a task suite (--tasks) or the user's own recorded
sessions replayed (--from-sessions, tune_replay.py)."""

from __future__ import annotations

import asyncio
import json
import shlex
import tempfile
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

import httpx2

from agent.errors import AgentError, LLMError
from agent.frontends import console
from agent.frontends.measure.bench_prompts import SEED_PROMPTS, run
from agent.frontends.measure.tune_replay import (
    Session,
    pick_sessions,
    refuse_other_models,
    replay,
    request_line,
    summary,
)
from agent.frontends.measure.tune_setups import (
    DRAFT_LENGTHS,
    NGRAM_LENGTHS,
    SCHEMA,
    Budget,
    Setup,
    SetupResult,
    add_speedups,
    best,
    chart,
    median,
    parse_budget,
    setup_profile,
    sweep,
    terminal_chart,
    tuned_name,
    tuned_profile_text,
    write_setup_file,
)
from agent.server import machine_paths
from agent.server.dialect import read_capabilities
from agent.server.endpoint import Endpoint
from agent.server.launch_plan import resolve_binary
from agent.server.profiles import ServerProfile, get_profile
from agent.session.connect import connect
from agent.settings.config import Settings, config_dir, state_dir
from agent.store.telemetry import parse_server_counters, position_line
from tools.text_files import write_atomically


def cmd_tune(args: Namespace, settings: Settings) -> int:
    # SIGTERM unwinds like Ctrl+C: the running setup's server stops, and no profile is written.
    with console.sigterm_as_interrupt():
        return _tune(args, settings)


def command_line(args: Namespace) -> str:
    parts = ["agent", "server", "tune", args.profile, "--budget", args.budget]
    for name in ("max_tokens", "temperature", "seed", "tasks", "out"):
        value = getattr(args, name, None)
        if value is not None and value != {"max_tokens": 256, "temperature": 0.0}.get(name):
            parts += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    for task in args.task or []:
        parts += ["--task", task]
    if args.from_sessions is not None:
        parts += ["--from-sessions", *args.from_sessions]
    if args.last is not None:
        parts += ["--last", str(args.last)]
    return shlex.join(parts)


def _lengths(text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    if not text:
        return default
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise AgentError(f"{text!r} is not a list of draft lengths", fix="Write them as 4,8,16.")
    return values


def _tune(args: Namespace, settings: Settings) -> int:
    profile = get_profile(args.profile, Path.cwd())
    if profile.kind == "attach":
        raise AgentError(
            f"profile '{profile.name}' attaches to a server it never starts, so its setups cannot be tried",
            fix="Tune a profile that starts llama-server, e.g. `agent server tune coder`.",
        )
    budget = Budget(parse_budget(args.budget))
    tasks = _tasks(args)
    sessions = _sessions(args, settings, profile)
    refuse_other_models(sessions, profile)
    with console.build_progress() as building:
        paths = machine_paths(settings, build_progress=building)
        caps = read_capabilities(resolve_binary(profile, paths), paths.cache_dir)
    setups = sweep(
        profile, caps.spec_types, caps.accepts,
        _lengths(args.lengths, DRAFT_LENGTHS), _lengths(args.ngram_lengths, NGRAM_LENGTHS),
        type_list=caps.takes_type_list,
    )  # fmt: skip
    if args.setup:
        setups = _chosen(setups, args.setup)
    if sessions:
        what = f"{sum(len(s.requests) for s in sessions)} requests of {len(sessions)} recorded sessions"
    elif tasks:
        what = f"{len(tasks)} tasks"
    else:
        what = f"{len(SEED_PROMPTS)} bench prompts, max_tokens {args.max_tokens}"
    console.note(
        f"tune {profile.name} on {caps.label()}: {len(setups)} setups ({', '.join(s.label for s in setups)}); "
        f"{what}; budget {args.budget}"
    )
    results = [SetupResult(s) for s in setups]
    with tempfile.TemporaryDirectory(prefix="agent-tune-") as scratch:
        for i, result in enumerate(results, 1):
            if not budget.allows_another():
                result.reason = f"over the budget ({args.budget})"
                continue
            began = time.monotonic()
            variant = setup_profile(profile, result.setup)
            try:
                # The first setup is the baseline and runs whole; a later one stops at the budget's end.
                _measure(
                    result, variant, args, settings, tasks, sessions, Path(scratch),
                    None if i == 1 else budget.left,
                )  # fmt: skip
                result.status = "measured"
            except TimeoutError:
                result.status = "stopped"
                result.reason = (
                    f"stopped at the end of the budget ({args.budget}) after {time.monotonic() - began:.0f} s"
                )
            except (AgentError, LLMError) as exc:
                result.status, result.reason = "failed", str(getattr(exc, "what", exc)).splitlines()[0]
            result.seconds = round(time.monotonic() - began, 1)
            budget.spent(result.seconds)
            console.note(f"[{i}/{len(results)} {_clock(budget.elapsed)} of {args.budget}] {_line(result)}")
    add_speedups(results)
    chosen = best(results)
    doc = _document(args, profile, caps.label(), results, chosen)
    out = Path(args.out) if args.out else state_dir() / "tune" / profile.name / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    written = [out / "results.json"]
    try:
        written += chart(doc, out)
    except ImportError:
        console.note("no chart: it needs matplotlib (pip install 'spec-agent[bench]')")
    _show(results, chosen)
    console.note(f"wrote {', '.join(str(p) for p in written)}")
    if chosen is None:
        raise AgentError(
            f"no setup of '{profile.name}' could be measured",
            "; ".join(f"{r.setup.label}: {r.reason}" for r in results if r.reason),
            fix=f"`agent server check {profile.name}` shows what stops the profile from starting.",
        )
    target = config_dir() / "profiles" / f"{tuned_name(profile)}.toml"
    header = [
        f"Written by `{doc['command']}` on {doc['when']}.",
        f"Measured on {doc['machine'].get('cpu')} ({doc['machine'].get('cpus')} cpus"
        + (f", {doc['machine']['gpu']}" if doc["machine"].get("gpu") else "") + f"), binary {caps.label()}.",
        f"The fastest setup, {chosen.setup.label}: {chosen.gen_tok_s:.1f} tok/s"
        + (f", {chosen.speedup:.2f}x over no speculation." if chosen.speedup else "."),
    ]  # fmt: skip
    if chosen.turn_s is not None:
        header.append(
            f"On {chosen.requests} recorded requests replayed: {chosen.turn_s:.2f} s per turn, "
            f"{chosen.same_answers}/{chosen.requests} answers as recorded."
        )
    write_atomically(target, tuned_profile_text(profile, chosen, results, header))
    from agent.store.measurements import record

    record(target.stem, chosen.gen_tok_s or 0.0, "tune", doc["command"], setup=chosen.setup.label)
    console.out.print(f"best: {chosen.setup.label}; wrote {target} (use it with -p {target.stem})")
    return 0


def _tasks(args: Namespace) -> list[Path]:
    if not args.tasks:
        return []
    from agent.frontends.measure.suite import discover

    tasks = discover(Path(args.tasks), args.task or None)
    if not tasks:
        raise AgentError(f"no tasks in {args.tasks}", fix="A task is a folder holding task.md (and repo/).")
    return tasks


def _sessions(args: Namespace, settings: Settings, profile: ServerProfile) -> list[Session]:
    if args.from_sessions is None:
        if args.last is not None:
            raise AgentError(
                "--last goes with --from-sessions", fix="agent server tune PROFILE --from-sessions --last N"
            )
        return []
    if args.tasks:
        raise AgentError("--from-sessions and --tasks measure different work", fix="Give one of them.")
    if args.from_sessions and args.last is not None:
        raise AgentError("--from-sessions takes session ids or --last N, not both", fix="Give one of them.")
    if args.last is not None and args.last < 1:
        raise AgentError(f"--last {args.last} picks no session", fix="Give --last 1 or more.")
    return pick_sessions(args.from_sessions, args.last, settings, profile.actions)


def _measure(result: SetupResult, variant: ServerProfile, args: Namespace, settings: Settings,
             tasks: list[Path], sessions: list[Session], scratch: Path,
             seconds: float | None) -> None:  # fmt: skip
    """`seconds`: what is left of the budget for the bench prompts or the replay (a task keeps its own
    timeout)."""
    deadline = time.monotonic() + seconds if seconds is not None else None

    def left() -> float | None:
        if deadline is None:
            return None
        if (remaining := deadline - time.monotonic()) <= 0:
            raise TimeoutError
        return remaining

    label = result.setup.label
    with (
        console.start_progress(label) as started,
        connect(settings, variant, start_progress=started) as conn,
    ):
        record = conn.handle.record if conn.handle else None
        result.server_argv = [record.binary, *record.argv] if record else []
        endpoint = conn.endpoint
        run(endpoint, {}, args.max_tokens, args.temperature, 0, left(), seed=args.seed, warmup=True)
        before = _counters(endpoint)
        if tasks:
            _measure_tasks(result, variant, tasks, scratch, args)
        elif sessions:
            _measure_replay(result, endpoint, sessions, left())
        else:
            rows = run(endpoint, SEED_PROMPTS, args.max_tokens, args.temperature, 1, left(), seed=args.seed)
            result.gen_tok_s = median([r.stats.generation_tokens_per_second for r in rows])
            result.prefill_tok_s = median([r.stats.prompt_per_second for r in rows])
            drafted = sum(r.stats.drafted or 0 for r in rows)
            result.acceptance = sum(r.stats.accepted or 0 for r in rows) / drafted if drafted else None
        after = _counters(endpoint)
        drafts = after.get("drafts", 0) - before.get("drafts", 0)
        if drafts > 0:
            result.accepted_per_draft = (after.get("accepted", 0) - before.get("accepted", 0)) / drafts
            if result.acceptance is None and (drafted := after.get("drafted", 0) - before.get("drafted", 0)):
                result.acceptance = (after.get("accepted", 0) - before.get("accepted", 0)) / drafted


def _measure_tasks(result: SetupResult, variant: ServerProfile, tasks: list[Path], scratch: Path,
                   args: Namespace) -> None:  # fmt: skip
    """Each task a real `agent run -p FILE` on the setup's server, which the runs reuse (same name)."""
    from agent.frontends.measure.suite import run_suite

    profile_file = write_setup_file(scratch, variant)
    rows = run_suite(tasks, ["-p", str(profile_file)], scratch / result.setup.slug, None,
                     timeout=args.task_timeout)  # fmt: skip
    result.tasks, result.solved = len(rows), sum(r.solved for r in rows)
    result.task_seconds = round(sum(r.seconds for r in rows), 1)
    result.gen_tok_s = median([r.gen_tok_s for r in rows])
    result.acceptance = median([r.acceptance for r in rows])


def _measure_replay(
    result: SetupResult, endpoint: Endpoint, sessions: list[Session], seconds: float | None
) -> None:
    def progress(replayed, i: int, n: int) -> None:
        console.note(f"  {result.setup.label} [{i}/{n}] {request_line(replayed)}")

    work = replay(endpoint, sessions, progress)
    rows = asyncio.run(asyncio.wait_for(work, seconds) if seconds is not None else work)
    for key, value in summary(rows).items():
        setattr(result, key, value)


def _counters(endpoint: Endpoint) -> dict[str, float]:
    if not endpoint.metrics_url:
        return {}
    try:
        response = httpx2.get(endpoint.metrics_url, timeout=5)
        return parse_server_counters(response.text) if response.status_code == 200 else {}
    except (httpx2.HTTPError, ValueError):
        return {}


def _chosen(setups: list[Setup], labels: list[str]) -> list[Setup]:
    """The setups named by --setup, in the sweep's order (the baseline first when it is named)."""
    known = {s.label for s in setups}
    if unknown := [label for label in labels if label not in known]:
        raise AgentError(
            f"no setup {', '.join(repr(u) for u in unknown)} in this profile's sweep",
            f"Its setups: {', '.join(s.label for s in setups)}.",
            "Name them as listed (quote the ones with spaces), or change --lengths / --ngram-lengths.",
        )
    return [s for s in setups if s.label in labels]


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def _line(r: SetupResult) -> str:
    if r.status != "measured":
        return f"{r.setup.label}: {r.status}: {r.reason}"
    parts = [f"{console.num(r.gen_tok_s)} tok/s"]
    if r.solved is not None:
        parts.insert(0, f"solved {r.solved}/{r.tasks} in {r.task_seconds:.0f} s")
    if r.turn_s is not None:
        parts.insert(0, f"{r.turn_s:.2f} s/turn, {r.same_answers}/{r.requests} answers as recorded")
    if r.acceptance is not None:
        parts.append(f"acceptance {console.pct(r.acceptance)}")
    return f"{r.setup.label}: {', '.join(parts)} ({r.seconds:.0f} s)"


def _document(args: Namespace, profile: ServerProfile, binary: str, results: list[SetupResult],
              chosen: SetupResult | None) -> dict[str, Any]:  # fmt: skip
    from agent.frontends.measure.memory import machine

    return {
        "schema": SCHEMA,
        "command": command_line(args),
        "when": time.strftime("%Y-%m-%d %H:%M %Z"),
        "profile": profile.name,
        "binary": binary,
        "machine": machine(),
        "settings": {
            "budget": args.budget,
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "seed": args.seed,
            "tasks": args.tasks,
            "from_sessions": args.from_sessions,
            "last": args.last,
            "setups": args.setup,
        },
        "results": [r.to_dict() for r in results],
        "best": chosen.setup.label if chosen else None,
    }


def kind_table(results: list[SetupResult]):
    """The replay per kind of turn (an answer that copies what the model was shown, or new text): the
    server takes no per-request draft settings, so this is where a setup's turns say where it pays."""
    rows = [(r, kind, f) for r in results for kind, f in (r.by_kind or {}).items()]
    if not rows:
        return None
    table = console.table(
        "setup", "turns", "requests", "s/turn", "gen tok/s", "acceptance", left=("setup", "turns")
    )
    for r, kind, f in rows:
        table.add_row(r.setup.label, kind, str(f["requests"]), console.num(f["turn_s"], 2),
                      console.num(f["gen_tok_s"]), console.pct(f["acceptance"]))  # fmt: skip
    return table


def _show(results: list[SetupResult], chosen: SetupResult | None) -> None:
    tasks = any(r.solved is not None for r in results)
    replayed = any(r.turn_s is not None for r in results)
    columns = ["setup", *(["solved", "task s"] if tasks else []), *(["s/turn", "same"] if replayed else []),
               "gen tok/s", "prefill tok/s", "acceptance", "accepted/draft", "speedup", "seconds",
               "note"]  # fmt: skip
    table = console.table(*columns, left=("setup", "note"))
    for r in results:
        cells = [r.setup.label + (" *" if r is chosen else "")]
        if tasks:
            cells += [
                f"{r.solved}/{r.tasks}" if r.solved is not None else "-",
                console.num(r.task_seconds, 0),
            ]
        if replayed:
            cells += [console.num(r.turn_s, 2), f"{r.same_answers}/{r.requests}" if r.requests else "-"]
        cells += [console.num(r.gen_tok_s), console.num(r.prefill_tok_s), console.pct(r.acceptance),
                  console.num(r.accepted_per_draft, 2), f"{r.speedup:.2f}x" if r.speedup else "-",
                  console.num(r.seconds, 0), r.reason if r.status != "measured" else ""]  # fmt: skip
        table.add_row(*cells)
    console.out.print(table)
    for r in results:
        if r.per_position:
            console.out.print(f"{r.setup.label}: accepted by draft position: {position_line(r.per_position)}")
    if kinds := kind_table(results):
        console.out.print(kinds)
    if text := terminal_chart(results):
        console.out.print(text, highlight=False)
