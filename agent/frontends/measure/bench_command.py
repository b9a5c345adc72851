"""`agent bench`: run the seed's code prompts on each profile in turn and compare them.

Each profile's server is started, measured and stopped in turn (or attached with --base-url), under
one progress bar with an estimate of the time left. Per profile: a warm-up request, the prompts
`--runs` times, and the server's memory. Then the table, the summary with spreads and speedups, the
identity report (at --temperature 0), a terminal chart, and with --out the files to keep.
"""

from __future__ import annotations

import json
import sys
import time
from argparse import Namespace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.errors import AgentError, LLMError
from agent.frontends import console
from agent.frontends.measure.bench_modes import cmd_conversation, cmd_tasks
from agent.frontends.measure.bench_prompts import SEED_PROMPTS, BenchResult, Eta, log_results, run
from agent.frontends.measure.bench_record import command_line, load_average
from agent.frontends.measure.bench_results import document, write_files
from agent.server.profiles import ServerProfile
from agent.session.connect import Connection, connect, resolve_profile
from agent.settings.config import Settings
from agent.store.telemetry import position_line


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


# ---------------------------------------------------------------------------------------------- progress


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = round(seconds)
    return (
        f"{seconds // 60}:{seconds % 60:02d}"
        if seconds < 3600
        else f"{seconds // 3600}h{seconds % 3600 // 60:02d}"
    )


class BenchProgress:
    """One bar over the whole run (every profile's warm-up and requests), the time left, and what is
    happening now: a server loading, or the last request's figures. Plain lines when stderr is not a
    terminal. It also receives the build's and the server start's progress, so only one live display
    is ever on screen."""

    def __init__(self, eta: Eta) -> None:
        self.eta = eta
        self.began = time.monotonic()
        self.bar = None
        self.task = None
        self._built = -1  # the build's last tenth shown (plain mode)

    def __enter__(self) -> BenchProgress:
        if console.err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("[bold]bench[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("left ~{task.fields[left]}"), TextColumn("[dim]{task.description}[/]"),
                console=console.err,
            )  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task("", total=self.eta.total, left=_clock(None))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()

    def status(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text[:70])

    def line(self, text: str) -> None:
        """A line that stays (plain mode: every line stays)."""
        if self.bar is not None:
            from rich.markup import escape

            self.bar.console.print(f"[dim]{escape(text)}[/]")
        else:
            print(text, file=sys.stderr, flush=True)

    def starting(self, profile: str):
        shown: set[str] = set()

        def update(elapsed: float, phase: str) -> None:
            if self.bar is not None:
                self.status(f"{profile}: {phase} {elapsed:.1f} s")
            elif phase not in shown:
                shown.add(phase)
                self.line(f"[{elapsed:5.1f}s] {profile}: {phase}")

        return update

    def building(self, fraction: float, message: str) -> None:
        if self.bar is not None:
            self.status(f"building llama-server {fraction:.0%}: {message}")
        elif int(fraction * 10) != self._built:
            self._built = int(fraction * 10)
            self.line(f"[build {fraction:4.0%}] {message}")

    def request(self, result: BenchResult) -> None:
        self.eta.request_done(result.profile, result.stats.wall_s, result.warmup)
        left = self.eta.remaining()
        s = result.stats
        what = "warm-up" if result.warmup else f"{result.prompt} run {result.run}"
        figures = f"{s.output_tokens or 0} tok, {console.num(s.generation_tokens_per_second)} tok/s"
        if s.acceptance is not None:
            figures += f", draft {console.pct(s.acceptance)}"
        if self.bar is not None:
            self.bar.update(self.task, completed=self.eta.completed, left=_clock(left),
                            description=f"{result.profile} {what}: {figures}")  # fmt: skip
        else:
            n, total = self.eta.completed, self.eta.total
            self.line(
                f"[{n:>{len(str(total))}}/{total} {_clock(time.monotonic() - self.began)}, ~{_clock(left)} left] "
                f"{result.profile} {what}: {figures}"
            )


# ---------------------------------------------------------------------------------------------- memory


def _server_pid(conn: Connection) -> int | None:
    if conn.handle is not None:
        return conn.handle.record.pid
    url = urlsplit(conn.endpoint.base_url)
    if url.hostname in ("127.0.0.1", "localhost", "::1") and url.port:
        from agent.frontends.measure.memory import listening_pid

        return listening_pid(url.port)
    return None  # a remote server: its memory is not ours to read


# ---------------------------------------------------------------------------------------------- the run


def cmd_bench(args: Namespace, settings: Settings) -> int:
    # SIGTERM unwinds like Ctrl+C, so the running request, task or agent and the profile's server stop.
    with console.sigterm_as_interrupt():
        return _bench(args, settings)


def _bench(args: Namespace, settings: Settings) -> int:
    if args.tasks:
        return cmd_tasks(args, settings)
    prompts = _prompts(args)
    if args.conversation:
        return cmd_conversation(args, settings, prompts)
    if args.runs < 1:
        raise AgentError("--runs must be at least 1")
    from agent.frontends.measure.memory import GpuProbe, MemoryWatch, machine

    names = args.profiles or [None]
    profiles = [resolve_profile(settings, n, args.base_url if not n else None, Path.cwd()) for n in names]
    labels = [p.name for p in profiles]
    if len(set(labels)) != len(labels):
        raise AgentError("a profile is named twice", fix="Bench each profile once; use --runs to repeat.")
    warmup = not args.no_warmup
    eta = Eta({p.name: len(prompts) * args.runs for p in profiles}, warmup)
    gpu = GpuProbe.find()
    where = machine()
    if gpu:
        where["gpus"] = gpu.devices
        where["gpu"] = ", ".join(d["name"] for d in gpu.devices)
    console.note(
        f"{len(profiles)} profile{'s' * (len(profiles) > 1)} × {len(prompts)} prompts × {args.runs} run"
        f"{'s' * (args.runs > 1)}{' + 1 warm-up' if warmup else ''}, max_tokens {args.max_tokens}, "
        f"temperature {args.temperature:g}" + (f", seed {args.seed}" if args.seed is not None else "")
    )
    results: list[BenchResult] = []
    about: dict[str, dict[str, Any]] = {}
    try:
        with BenchProgress(eta) as progress:
            for profile in profiles:
                load_before = load_average()
                watch = MemoryWatch(gpu)
                watch.before_load()
                began = time.monotonic()
                with connect(
                    settings, profile, start_progress=progress.starting(profile.name),
                    build_progress=progress.building,
                ) as conn:  # fmt: skip
                    ready = time.monotonic() - began
                    eta.profile_started(profile.name, ready)
                    if not conn.started_here:  # reused or attached: the "before" figures are not its
                        watch.system_before = watch.vram_before = None
                    watch.watch(_server_pid(conn))
                    try:
                        rows = run(
                            conn.endpoint, prompts, args.max_tokens, args.temperature, args.runs,
                            seed=args.seed, warmup=warmup, on_result=progress.request,
                        )  # fmt: skip
                    except LLMError as exc:
                        raise AgentError(
                            f"{profile.name}: a bench request failed", str(exc),
                            fix=f"`agent server logs {profile.name}` shows the server's side.",
                        ) from exc  # fmt: skip
                    finally:
                        memory = watch.stop()
                    path = log_results(rows, conn.endpoint)
                    record = conn.handle.record if conn.handle else None
                    about[profile.name] = {
                        "spec_mode": conn.endpoint.spec_mode,
                        "model": conn.endpoint.model,
                        "base_url": conn.endpoint.base_url,
                        "started_here": conn.started_here,
                        "ready_s": round(ready, 3) if conn.started_here else None,
                        "server_argv": [record.binary, *record.argv] if record else None,
                        "memory": memory,
                        "load_average": {"before": load_before, "after": load_average()},
                        "telemetry": str(path),
                    }
                    progress.line(f"{profile.name}: done ({_memory_line(memory)}); logged to {path}")
                results += rows
    finally:
        if gpu:
            gpu.close()

    settings_doc = {
        "profiles": labels,
        "runs": args.runs,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
        "warmup": warmup,
    }
    doc = document(results, prompts, settings_doc, about, where, command_line(args))
    _remember(doc, profiles)
    charts_missing = None
    if args.out:
        written, charts_missing = write_files(Path(args.out), doc)
        console.note(f"wrote {', '.join(str(p) for p in written)}")
        if charts_missing:
            console.note(f"warning: {charts_missing}")
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    show(doc, results)
    return 0


def _remember(doc: dict[str, Any], profiles: list[ServerProfile]) -> None:
    """Each started profile's median generation speed, for `-p auto` (agent/store/measurements.py)."""
    from agent.store.measurements import record

    for profile in profiles:
        gen = (doc["summary"].get(profile.name) or {}).get("median_gen_tok_s")
        if gen and profile.kind != "attach":
            record(profile.name, gen, "bench", doc.get("command") or "agent bench")


def _mib(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.2f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def _memory_line(memory: dict[str, Any]) -> str:
    rss = memory["rss_mib"]
    text = f"RSS {_mib(rss['loaded'])} loaded, {_mib(rss['peak'])} peak"
    vram = memory.get("vram")
    if vram:
        own = vram.get("process_peak_mib")
        text += (
            f"; VRAM {_mib(vram['before_mib'])} → {_mib(vram['loaded_mib'])}, peak {_mib(vram['peak_mib'])}"
        )
        text += f" (server {_mib(own)})" if own is not None else ""
    return text


def show(doc: dict[str, Any], results: list[BenchResult]) -> None:
    table = console.table(
        "profile", "prompt", "run", "tokens", "gen tok/s", "client tok/s", "client/server", "prefill tok/s",
        "draft acc/drafted", "ttft s", left=("profile", "prompt"),
    )  # fmt: skip
    for r in results:
        if r.warmup:
            continue
        s = r.stats
        draft = f"{s.accepted}/{s.drafted} ({console.pct(s.acceptance)})" if s.drafted else "-"
        table.add_row(
            r.profile, r.prompt, str(r.run), str(s.output_tokens or "-"), console.num(s.predicted_per_second),
            console.num(s.client_tokens_per_second), console.num(r.client_server_ratio, 3),
            console.num(s.prompt_per_second, 0), draft, console.num(s.ttft_s, 2),
        )  # fmt: skip
    console.out.print(table)
    console.out.print()
    summary = doc["summary"]
    runs = doc["settings"]["runs"]
    for profile, row in summary.items():
        gen = row["figures"]["gen_tok_s"]
        line = f"{profile}: gen {_spread(gen)} tok/s"
        sp = row.get("speedup")
        if sp and sp.get("spread"):
            s = sp["spread"]
            line += f", [bold]{s['median']:.2f}x[/] {sp['against']}"
            if runs > 1:
                line += f" (per-run {s['min']:.2f}-{s['max']:.2f}, IQR {s['iqr']:.2f})"
        line += f", acceptance {console.pct(row['acceptance'])}"
        line += f", client/server {console.num(row['median_client_over_server'], 3)}"
        console.out.print(line)
        console.out.print(f"  memory: {_memory_line(doc['profiles'][profile]['memory'])}", markup=False)
        per_position = row.get("acceptance_per_position")
        if per_position:
            console.out.print(f"  accepted by draft position: {position_line(per_position)}", markup=False)
    _show_identity(doc)
    chart = terminal_chart(doc)
    if chart:
        console.out.print()
        console.out.print(chart, markup=False, highlight=False)


def _spread(spread: dict[str, float] | None) -> str:
    if not spread:
        return "-"
    if spread["n"] == 1 or spread["min"] == spread["max"]:
        return f"{spread['median']:.1f}"
    return (
        f"{spread['median']:.1f} (min-max {spread['min']:.1f}-{spread['max']:.1f}, IQR {spread['iqr']:.1f})"
    )


def _show_identity(doc: dict[str, Any]) -> None:
    identity = doc.get("identity")
    if identity is None:
        if len(doc["summary"]) > 1:
            console.out.print("\noutput identity: not compared (needs --temperature 0)")
        return
    codes = {(r["profile"], r["prompt"]): r.get("code") for r in doc["requests"] if r["run"] == 1}

    def parses(profile: str, prompt: str) -> str:
        code = codes.get((profile, prompt))
        if not code:
            return "no code"
        return ("parses" if code["parses"] else "does not parse") + (" (cut off)" if code["cut_off"] else "")

    if identity["pairs"]:
        table = console.table(
            "prompt", "profile", f"same as {identity['baseline']}", "first difference", "similar lines",
            "code (baseline / profile)", title="\noutput at temperature 0, run 1",
        )  # fmt: skip
        for pair in identity["pairs"]:
            diff = pair["first_difference"]
            where = (
                "-" if diff is None else f"char {diff['char']} (line {diff['line']}, col {diff['column']})"
            )
            table.add_row(
                pair["prompt"], pair["profile"], "yes" if pair["identical"] else "no", where,
                f"{pair['similarity']:.0%}",
                f"{parses(identity['baseline'], pair['prompt'])} / {parses(pair['profile'], pair['prompt'])}",
            )  # fmt: skip
        console.out.print(table)
    unstable = [f"{p} ({', '.join(k for k, same in v.items() if not same)})"
                for p, v in identity["repeatable"].items() if not all(v.values())]  # fmt: skip
    if doc["settings"]["runs"] > 1:
        console.out.print(
            "every profile wrote the same output in every run"
            if not unstable
            else f"outputs changed between runs: {'; '.join(unstable)}"
        )


def terminal_chart(doc: dict[str, Any], width: int = 90, height: int = 16) -> str | None:
    """Median generation tok/s per prompt and profile, as bars (plotext)."""
    import plotext as plt

    summary = doc["summary"]
    prompts = list(dict.fromkeys(r["prompt"] for r in doc["requests"]))
    if not summary or not prompts:
        return None
    series = []
    for profile in summary:
        cells = summary[profile]["per_prompt"]
        series.append([((cells.get(p) or {}).get("gen_tok_s") or {}).get("median") or 0 for p in prompts])
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    plt.multiple_bar(prompts, series, labels=list(summary))
    plt.title("median generation tok/s per prompt")
    return plt.uncolorize(plt.build())
