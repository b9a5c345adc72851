"""`agent bench`: the seed's benchmark, through the agent's own client, for one or more profiles.

The user's script sent three Python code prompts (max_tokens 1200, temperature 0.7) and read
`timings` with jq. This does the same through `ModelClient`, streaming, and also reports what the
client saw: if the client's tok/s matches the server's `predicted_per_second`, streaming adds no
throttle. Profiles run one after another, so their ratios are measured side by side in one run.

Around that, what the user did by hand: one warm-up request per profile (not counted), `runs`
repetitions summarised as median, min-max and interquartile range, the speedup against the first
profile with the spread of the per-run ratios, whether the outputs at temperature 0 are the same with
and without speculation (and whether their code parses), and files to keep (`write_files`):
results.json, results.csv and charts. `run_conversation` is the other measure: the prompts as one
agent session, with what the agent itself costs per request.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import csv
import difflib
import re
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.llm import Completion, Endpoint, ModelClient
from agent.core.loop import Agent, Limits
from agent.events import Event, TurnStarted
from agent.session.connect import Connection
from agent.session.live import open_session
from agent.settings.config import state_dir
from agent.store.telemetry import TelemetryLog, TurnStats, per_position_rates, summarise_turns

SCHEMA = "spec-agent.bench/1"

SEED_PROMPTS = {
    "task-store": (
        "Write a complete Python task store module. Include a Task dataclass, TaskStatus enum, TaskStore "
        "class, add_task, update_task, delete_task, search_tasks, filter_by_status, export_to_json, "
        "get_all_tasks, and 5 tests. Return only one complete Python file."
    ),
    "kv-report": (
        "Write a complete Python key-value report module. Include a KeyValueStore class, set, get, delete, "
        "exists, list_keys, filter_by_prefix, export_to_json, load_from_json, and a generate_report "
        "function that returns total keys, empty values, prefix counts, and largest value length. Include "
        "5 tests. Return only one complete Python file."
    ),
    "linked-list": (
        "Write a complete Python doubly linked list module. Include a Node dataclass, DoublyLinkedList "
        "class, append, prepend, delete, find, reverse, to_list, from_list, clear, and 5 tests. Return only "
        "one complete Python file."
    ),
}

# The warm-up differs from every measured prompt: the same prompt would sit in the server's prompt
# cache and flatter the first measured request's prefill.
WARMUP_PROMPT = "Write a Python function that returns the sum of a list of numbers."
WARMUP_MAX_TOKENS = 32


@dataclass
class BenchResult:
    profile: str
    prompt: str
    stats: TurnStats
    run: int = 1
    content: str = ""
    warmup: bool = False

    @property
    def client_server_ratio(self) -> float | None:
        s = self.stats
        if s.client_tokens_per_second and s.predicted_per_second:
            return s.client_tokens_per_second / s.predicted_per_second
        return None

    def to_dict(self, prompt_text: str = "") -> dict[str, Any]:
        return {
            "profile": self.profile,
            "prompt": self.prompt,
            "run": self.run,
            "warmup": self.warmup,
            "stats": self.stats.to_dict(),
            "client_over_server": self.client_server_ratio,
            "content": self.content,
            "code": None if self.warmup else code_check(self.content, prompt_text, self.stats.finish_reason),
        }


@contextlib.contextmanager
def whole_answers() -> Iterator[None]:
    """The agent's client cuts an answer that keeps repeating itself (`llm.repeating_tail`): right for
    a task, wrong for a benchmark, which must read each answer whole as the seed's script does (a cut
    stream ends without `timings`, and the tiny base model loops at temperature 0). ModelClient has no
    switch for it, so for the bench's requests its check interval is set out of reach.
    """
    from agent.core import llm  # (the module itself: its constant is set and restored)

    saved = llm.REPEAT_CHECK_EVERY
    llm.REPEAT_CHECK_EVERY = sys.maxsize
    try:
        yield
    finally:
        llm.REPEAT_CHECK_EVERY = saved


async def run_prompts(
    endpoint: Endpoint,
    prompts: dict[str, str],
    max_tokens: int,
    temperature: float,
    runs: int = 1,
    *,
    seed: int | None = None,
    warmup: bool = False,
    on_result: Callable[[BenchResult], None] | None = None,
) -> list[BenchResult]:
    """Each prompt `runs` times (the whole set, then again), after one warm-up request when asked.
    The warm-up's result comes first, marked `warmup`; summaries leave it out."""
    client = ModelClient(endpoint)
    # No prompt cache: llama-server keeps earlier prompts in RAM, so from run 2 on a prompt would be
    # served from the cache (its prefill unmeasured) and generated from a restored state instead of a
    # fresh one. Each request starts as the first one of the seed's script did.
    overrides: dict[str, Any] = {"temperature": temperature, "cache_prompt": False}
    if seed is not None:
        overrides["seed"] = seed
    plan = [(WARMUP_PROMPT, "warm-up", 0, min(WARMUP_MAX_TOKENS, max_tokens))] if warmup else []
    plan += [(prompts[name], name, run, max_tokens) for run in range(1, runs + 1) for name in prompts]
    results = []
    try:
        with whole_answers():
            for text, name, run, limit in plan:
                completion: Completion | None = None
                async for item in client.stream(
                    [{"role": "user", "content": text}], max_tokens=limit, **overrides
                ):
                    if isinstance(item, Completion):
                        completion = item
                assert completion is not None
                result = BenchResult(
                    endpoint.profile, name, completion.stats, run, completion.content, run == 0
                )
                results.append(result)
                if on_result:
                    on_result(result)
    finally:
        await client.close()
    return results


def run(
    endpoint: Endpoint,
    prompts: dict[str, str],
    max_tokens: int,
    temperature: float,
    runs: int,
    timeout: float | None = None,
    **options: Any,
) -> list[BenchResult]:
    """`timeout`: seconds for all of it; past them TimeoutError, and the request in flight is closed."""
    work = run_prompts(endpoint, prompts, max_tokens, temperature, runs, **options)
    return asyncio.run(asyncio.wait_for(work, timeout) if timeout is not None else work)


def log_results(results: list[BenchResult], endpoint: Endpoint) -> Path:
    """Bench runs are sessions of their own in the telemetry log, so `agent stats` can compare them."""
    session = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{endpoint.profile}-{uuid.uuid4().hex[:4]}"
    log = TelemetryLog(state_dir() / "telemetry" / f"{session}.jsonl")
    for turn, result in enumerate((r for r in results if not r.warmup), 1):
        log.append(
            {
                "session": session,
                "turn": turn,
                "profile": endpoint.profile,
                "model": endpoint.model,
                "spec_mode": endpoint.spec_mode,
                "prompt": result.prompt,
                "stats": result.stats.to_dict(),
            }
        )
    return log.path


# ------------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Spread:
    """Median, range and quartiles of one figure over the requests (or runs) that measured it."""

    n: int
    median: float
    min: float
    max: float
    q1: float
    q3: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @classmethod
    def of(cls, values: list[float | None]) -> Spread | None:
        """None values (not measured) are left out; None when nothing is left. Quartiles are
        `statistics.quantiles(method="inclusive")`: for 1..5, q1 2 and q3 4."""
        data = sorted(float(v) for v in values if v is not None)
        if not data:
            return None
        if len(data) == 1:
            q1 = med = q3 = data[0]
        else:
            q1, med, q3 = statistics.quantiles(data, n=4, method="inclusive")
        return cls(len(data), med, data[0], data[-1], q1, q3)

    def to_dict(self) -> dict[str, float]:
        return {
            "n": self.n,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "q1": self.q1,
            "q3": self.q3,
            "iqr": self.iqr,
        }


def _prefill(s: TurnStats) -> float | None:
    return s.prompt_per_second if s.prompt_n else None  # a prompt served whole from the cache says nothing


# The figures summarised per profile, each read from one request.
FIGURES: dict[str, Callable[[BenchResult], float | None]] = {
    "gen_tok_s": lambda r: r.stats.generation_tokens_per_second,
    "client_tok_s": lambda r: r.stats.client_tokens_per_second,
    "client_over_server": lambda r: r.client_server_ratio,
    "prefill_tok_s": lambda r: _prefill(r.stats),
    "ttft_s": lambda r: r.stats.ttft_s,
    "wall_s": lambda r: r.stats.wall_s,
    "output_tokens": lambda r: r.stats.output_tokens,
    "acceptance": lambda r: r.stats.acceptance,
}


def _measured(results: list[BenchResult]) -> list[BenchResult]:
    return [r for r in results if not r.warmup]


def _by_profile(results: list[BenchResult]) -> dict[str, list[BenchResult]]:
    groups: dict[str, list[BenchResult]] = {}
    for r in _measured(results):
        groups.setdefault(r.profile, []).append(r)
    return groups


def _run_medians(rows: list[BenchResult]) -> dict[int, float]:
    """Per run, the median generation tok/s over its prompts."""
    per_run: dict[int, list[float]] = {}
    for r in rows:
        if r.stats.generation_tokens_per_second:
            per_run.setdefault(r.run, []).append(r.stats.generation_tokens_per_second)
    return {run: statistics.median(values) for run, values in per_run.items()}


def summarise(results: list[BenchResult]) -> dict[str, dict[str, Any]]:
    """Per profile (in the order they ran): the totals of `summarise_turns`, each figure's spread,
    and against the first profile the speedup: the median of the per-run ratios (run i's median tok/s
    over the first profile's run i), with their spread, and the ratio of medians per prompt."""
    groups = _by_profile(results)
    if not groups:
        return {}
    baseline = next(iter(groups))
    base_runs = _run_medians(groups[baseline])
    base_prompts = per_prompt(groups[baseline])
    summary: dict[str, dict[str, Any]] = {}
    for profile, rows in groups.items():
        figures = {name: Spread.of([read(r) for r in rows]) for name, read in FIGURES.items()}
        row = summarise_turns([r.stats for r in rows])
        row["median_client_over_server"] = (
            figures["client_over_server"].median if figures["client_over_server"] else None
        )
        row["figures"] = {name: s.to_dict() if s else None for name, s in figures.items()}
        row["per_prompt"] = per_prompt(rows)
        # Where in a draft the tokens stop being accepted: the case for a longer or shorter draft.
        row["acceptance_per_position"] = per_position_rates([r.stats for r in rows])
        row["speedup"] = None
        if profile != baseline:
            runs = _run_medians(rows)
            ratios = [runs[i] / base_runs[i] for i in sorted(runs) if base_runs.get(i)]
            spread = Spread.of(ratios)
            prompts = {}
            for name, cell in row["per_prompt"].items():
                base = (base_prompts.get(name) or {}).get("gen_tok_s")
                mine = cell.get("gen_tok_s")
                prompts[name] = mine["median"] / base["median"] if base and mine and base["median"] else None
            row["speedup"] = {
                "against": baseline,
                "per_run": ratios,
                "spread": spread.to_dict() if spread else None,
                "per_prompt": prompts,
            }
        summary[profile] = row
    return summary


def per_prompt(rows: list[BenchResult]) -> dict[str, dict[str, Any]]:
    """One profile's figures per prompt: generation tok/s over the runs, acceptance over the runs'
    summed draft counts."""
    by_prompt: dict[str, list[BenchResult]] = {}
    for r in rows:
        by_prompt.setdefault(r.prompt, []).append(r)
    cells = {}
    for name, group in by_prompt.items():
        gen = Spread.of([r.stats.generation_tokens_per_second for r in group])
        drafted = sum(r.stats.drafted or 0 for r in group)
        accepted = sum(r.stats.accepted or 0 for r in group)
        cells[name] = {
            "gen_tok_s": gen.to_dict() if gen else None,
            "drafted": drafted,
            "accepted": accepted,
            "acceptance": accepted / drafted if drafted else None,
        }
    return cells


# ----------------------------------------------------------------------------------------- output quality

_FENCE = re.compile(r"^```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON = {"python", "py", "python3", ""}


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block; a block cut off by max_tokens runs to the end."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def code_check(text: str, prompt: str = "", finish_reason: str | None = None) -> dict[str, Any] | None:
    """Whether the answer's Python parses (`ast`): its python (or unlabelled) fenced blocks, or, with no
    fence at all and a prompt that asks for Python, the whole answer. None: the answer holds no code."""
    blocks = [code for lang, code in code_blocks(text) if lang in _PYTHON]
    whole = False
    if not blocks:
        if any(lang for lang, _ in code_blocks(text)) or "python" not in prompt.lower() or not text.strip():
            return None
        blocks, whole = [text], True
    errors = []
    for i, code in enumerate(blocks, 1):
        try:
            ast.parse(code)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            errors.append(f"block {i}, line {line}: {getattr(exc, 'msg', str(exc))}")
    return {
        "blocks": len(blocks),
        "whole_answer": whole,
        "parses": not errors,
        "errors": errors,
        "cut_off": finish_reason == "length",
    }


def first_difference(a: str, b: str) -> int | None:
    """The index of the first character where the texts differ (the shorter one's length when one
    is a prefix of the other); None when they are equal."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _excerpt(text: str, at: int, width: int = 40) -> str:
    return text[max(0, at - width) : at + width]


def compare_texts(baseline: str, other: str) -> dict[str, Any]:
    """Identical or not; if not, where they first differ (character, line, column, both sides around it)
    and how similar they are: difflib's ratio over lines (the share of lines in common)."""
    at = first_difference(baseline, other)
    if at is None:
        return {"identical": True, "first_difference": None, "similarity": 1.0}
    line = baseline.count("\n", 0, at) + 1
    column = at - (baseline.rfind("\n", 0, at) + 1) + 1
    similarity = difflib.SequenceMatcher(
        None, baseline.splitlines(), other.splitlines(), autojunk=False
    ).ratio()
    return {
        "identical": False,
        "first_difference": {
            "char": at,
            "line": line,
            "column": column,
            "baseline": _excerpt(baseline, at),
            "other": _excerpt(other, at),
        },
        "similarity": round(similarity, 4),
    }


def identity_report(results: list[BenchResult]) -> dict[str, Any] | None:
    """Each speculative profile's output against the first profile's, prompt by prompt (run 1 of each),
    and whether each profile wrote the same thing in every run. Meaningful at temperature 0 only."""
    groups = _by_profile(results)
    if not groups:
        return None
    baseline = next(iter(groups))
    first = {
        profile: {r.prompt: r for r in sorted(rows, key=lambda r: r.run) if r.run == min(x.run for x in rows)}
        for profile, rows in groups.items()
    }
    pairs = []
    for profile in list(groups)[1:]:
        for prompt, base in first[baseline].items():
            mine = first[profile].get(prompt)
            if mine is None:
                continue
            pairs.append(
                {
                    "prompt": prompt,
                    "profile": profile,
                    "baseline": baseline,
                    "tokens": [base.stats.output_tokens, mine.stats.output_tokens],
                    **compare_texts(base.content, mine.content),
                }
            )
    repeatable: dict[str, dict[str, bool]] = {}
    for profile, rows in groups.items():
        texts: dict[str, set[str]] = {}
        for r in rows:
            texts.setdefault(r.prompt, set()).add(r.content)
        repeatable[profile] = {prompt: len(seen) == 1 for prompt, seen in texts.items()}
    return {"baseline": baseline, "pairs": pairs, "repeatable": repeatable}


# ------------------------------------------------------------------------------------------ progress


class Eta:
    """Time left in a bench run: the current profile's requests at its own measured pace, the profiles
    still to come at the pace of all requests so far plus the mean time their servers took to start.
    Warm-ups are short (WARMUP_MAX_TOKENS) and are timed apart, so they do not drag the pace down."""

    def __init__(self, plan: dict[str, int], warmup: bool = False) -> None:
        self.plan = dict(plan)  # profile -> measured requests
        self.warmup = warmup
        self.done: dict[str, list[float]] = {p: [] for p in plan}
        self.warm: dict[str, list[float]] = {p: [] for p in plan}
        self.starts: list[float] = []
        self.started: list[str] = []

    @property
    def total(self) -> int:
        return sum(self.plan.values()) + self.warmup * len(self.plan)

    @property
    def completed(self) -> int:
        return sum(len(v) for v in self.done.values()) + sum(len(v) for v in self.warm.values())

    def profile_started(self, profile: str, start_seconds: float) -> None:
        self.started.append(profile)
        self.starts.append(start_seconds)

    def request_done(self, profile: str, seconds: float, warmup: bool = False) -> None:
        (self.warm if warmup else self.done)[profile].append(seconds)

    def remaining(self) -> float | None:
        """Seconds left; None until a request has been timed."""
        measured = [s for v in self.done.values() for s in v]
        warm = [s for v in self.warm.values() for s in v]
        if not measured and not warm:
            return None
        pace = statistics.fmean(measured or warm)
        warm_pace = statistics.fmean(warm) if warm else pace
        start = statistics.fmean(self.starts) if self.starts else 0.0
        current = self.started[-1] if self.started else None
        left = 0.0
        for profile, n in self.plan.items():
            mine = self.done[profile]
            if profile == current:
                left += max(0, n - len(mine)) * (statistics.fmean(mine) if mine else pace)
                left += warm_pace * (self.warmup and not self.warm[profile])
            elif profile not in self.started:
                left += start + n * pace + warm_pace * self.warmup
        return left


# ------------------------------------------------------------------------------------------- files

CSV_COLUMNS = (
    "profile", "prompt", "run", "output_tokens", "gen_tok_s", "client_tok_s", "client_over_server",
    "prefill_tok_s", "prompt_n", "cache_n", "ttft_s", "wall_s", "draft_n", "draft_n_accepted",
    "acceptance", "finish_reason", "identical_to_baseline", "code_parses",
)  # fmt: skip


def document(
    results: list[BenchResult],
    prompts: dict[str, str],
    settings: dict[str, Any],
    profiles: dict[str, dict[str, Any]],
    machine: dict[str, Any] | None = None,
    command: str = "",
) -> dict[str, Any]:
    """Everything a bench run measured, as results.json holds it (and `--json` prints it)."""
    identity = identity_report(results) if settings.get("temperature") == 0 else None
    return {
        "schema": SCHEMA,
        "command": command,
        "machine": machine or {},
        "settings": {**settings, "prompts": prompts},
        "profiles": profiles,
        "requests": [r.to_dict(prompts.get(r.prompt, "")) for r in results if not r.warmup],
        "warmup": [r.to_dict() for r in results if r.warmup],
        "summary": summarise(results),
        "identity": identity,
    }


def csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    same = {}
    for pair in (doc.get("identity") or {}).get("pairs", []):
        same[(pair["profile"], pair["prompt"])] = pair["identical"]
    baseline = (doc.get("identity") or {}).get("baseline")
    rows = []
    for req in doc["requests"]:
        s = TurnStats.from_dict(req["stats"])
        identical = same.get((req["profile"], req["prompt"])) if req["run"] == 1 else None
        if req["profile"] == baseline and req["run"] == 1:
            identical = True
        code = req.get("code")
        rows.append(
            {
                "profile": req["profile"],
                "prompt": req["prompt"],
                "run": req["run"],
                "output_tokens": s.output_tokens,
                "gen_tok_s": s.generation_tokens_per_second,
                "client_tok_s": s.client_tokens_per_second,
                "client_over_server": req["client_over_server"],
                "prefill_tok_s": _prefill(s),
                "prompt_n": s.prompt_n,
                "cache_n": s.cache_n,
                "ttft_s": s.ttft_s,
                "wall_s": round(s.wall_s, 4),
                "draft_n": s.drafted,
                "draft_n_accepted": s.accepted,
                "acceptance": s.acceptance,
                "finish_reason": s.finish_reason,
                "identical_to_baseline": identical,
                "code_parses": code["parses"] if code else None,
            }
        )
    return rows


def write_files(out: Path, doc: dict[str, Any]) -> tuple[list[Path], str | None]:
    """results.json, results.csv and the charts in `out`; (the files, why charts are missing or None)."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json", out / "results.csv"]
    written[0].write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with written[1].open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in csv_rows(doc):
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return written, "charts need matplotlib: pip install 'spec-agent[bench]'"
    from agent.frontends.measure.charts import draw_charts  # (lazy: matplotlib, only when charts are drawn)

    return written + draw_charts(doc, out), None


# ------------------------------------------------------------------------------------- conversation


@dataclass
class RequestCost:
    """One request of an agent session, split into who spent the time.

    span: from the request's start (for a task's first request: from the start of the task, its
    message built) to the next request's start or the end of the task. server: the server's own
    prompt_ms + predicted_ms. tools: the tool calls it led to. own: the rest, "the agent's own time"
    as wall time minus model time minus tools: the client (HTTP, SSE parsing), reading the answer,
    events, transcript, telemetry, context checks, and also what llama-server spends on a request
    outside its timings (HTTP, chat template, tokenizing), measured apart as `server_handling_s`.
    """

    request: int
    span_s: float
    server_s: float | None
    tool_s: float
    client_s: float | None  # of own: the stream's wall time beyond the server's time
    client_over_server: float | None
    stats: TurnStats = field(repr=False, default_factory=TurnStats)
    server_handling_s: float | None = None  # of own: the request replayed for one token (`server_handling`)

    @property
    def own_s(self) -> float | None:
        if self.server_s is None:
            return None
        return self.span_s - self.server_s - self.tool_s

    @property
    def agent_s(self) -> float | None:
        """Own time less the server's handling: what the agent's code spent."""
        if self.own_s is None or self.server_handling_s is None:
            return None
        return self.own_s - self.server_handling_s

    def to_dict(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 6)

        return {
            "request": self.request,
            "span_s": r(self.span_s),
            "server_s": r(self.server_s),
            "tool_s": r(self.tool_s),
            "own_s": r(self.own_s),
            "client_s": r(self.client_s),
            "server_handling_s": r(self.server_handling_s),
            "agent_s": r(self.agent_s),
            "client_over_server": self.client_over_server,
            "stats": self.stats.to_dict(),
        }


def request_costs(tasks: list[tuple[float, list[float], float, list[TurnStats]]]) -> list[RequestCost]:
    """The cost of each request from its time marks: per task (its start, each request's start, its
    end, each completed request's stats). A request that failed before completing has no stats and is
    left out (it is the task's last)."""
    costs = []
    for task_start, starts, task_end, stats in tasks:
        for j, s in enumerate(stats[: len(starts)]):
            since = task_start if j == 0 else starts[j]
            until = starts[j + 1] if j + 1 < len(starts) else task_end
            server = (s.prompt_ms or 0) / 1000 + (s.predicted_ms or 0) / 1000 if s.has_timings else None
            ratio = (
                s.client_tokens_per_second / s.predicted_per_second
                if s.client_tokens_per_second and s.predicted_per_second
                else None
            )
            costs.append(
                RequestCost(
                    request=len(costs) + 1,
                    span_s=until - since,
                    server_s=server,
                    tool_s=s.tool_s,
                    client_s=s.wall_s - server if server is not None else None,
                    client_over_server=ratio,
                    stats=s,
                )
            )
    return costs


async def server_handling(
    endpoint: Endpoint, model: str, messages: list[dict], tools: list[dict], tool_choice: str
) -> float | None:
    """What llama-server itself spends on a request outside its `timings` (HTTP, the chat template,
    tokenizing the whole prompt): the same messages sent again for one token, without streaming, by a
    bare HTTP client; its wall time minus prompt_ms + predicted_ms. None when the server reports no
    timings. (The prompt is in the server's cache by then, so the replay itself is quick.)"""
    import httpx2

    sampling = {k: v for k, v in endpoint.sampling.items() if k != "extra_body"}
    body: dict[str, Any] = {
        **sampling,
        **endpoint.sampling.get("extra_body", {}),
        **endpoint.extra_body,
        "model": model,
        "messages": messages,
        "max_tokens": 1,
        "stream": False,
        "cache_prompt": True,
    }
    if tools:
        body["tools"], body["tool_choice"] = tools, tool_choice
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    async with httpx2.AsyncClient(timeout=120, headers=headers) as http:
        began = time.perf_counter()
        response = await http.post(endpoint.base_url + "/chat/completions", json=body)
        elapsed = time.perf_counter() - began
    timings = response.json().get("timings") if response.status_code == 200 else None
    if not timings:
        return None
    return elapsed - (timings.get("prompt_ms", 0) + timings.get("predicted_ms", 0)) / 1000


async def run_conversation(
    settings,
    connection: Connection,
    prompts: dict[str, str],
    tool_choice: str,
    max_turns: int,
    actions: str = "tools",
) -> tuple[str, list[TurnStats], list[RequestCost]]:
    """The prompts as follow-ups in one agent session (real loop, real tools, a scratch workspace).

    It measures the prompt cache across turns (from the second request on, the server should only
    process what is new) and what the agent itself costs per request (`RequestCost`). After the
    session each request's messages are replayed for one token, to tell the server's own handling of
    a request apart from the agent's.
    """
    import tempfile

    endpoint = connection.endpoint
    starts: list[float] = []
    sent: list[list[dict]] = []  # each request's messages (compaction, if any, is left out)
    agent: Agent | None = None

    def marks(event: Event) -> None:
        if isinstance(event, TurnStarted):
            starts.append(time.monotonic())
            sent.append([dict(m) for m in agent.messages] if agent else [])

    tasks: list[tuple[float, list[float], float, list[TurnStats]]] = []
    costs: list[RequestCost] = []
    with tempfile.TemporaryDirectory(prefix="agent-bench-") as scratch:
        async with open_session(
            settings, Path(scratch), connection.profile, marks, holder="agent bench --conversation",
            approval="full-auto", limits=Limits(max_turns=max_turns), tool_choice=tool_choice,
            actions=actions, task="agent bench --conversation", mcp_servers={}, connection=connection,
        ) as live:  # fmt: skip
            agent, recorder = live.agent, live.recorder
            for prompt in prompts.values():
                began, before = time.monotonic(), len(recorder.stats)
                starts.clear()
                await agent.run(live.workbench.task_message(prompt, actions, agent.context))
                tasks.append((began, list(starts), time.monotonic(), recorder.stats[before:]))
            costs = request_costs(tasks)
            # the requests' own message lists, in order, for those that completed
            kept, i = [], 0
            for _, request_marks, _, stats in tasks:
                kept += sent[i : i + min(len(request_marks), len(stats))]
                i += len(request_marks)
            model = live.model
            tools = agent.actions.request_tools(agent.tools)
            for cost, messages in zip(costs, kept, strict=False):
                cost.server_handling_s = await server_handling(endpoint, model, messages, tools, tool_choice)
    return live.session_id, recorder.stats, costs
