"""The seed's prompts through the agent's own client, for `agent bench` and `agent server tune`.

The user's script sent three Python code prompts (max_tokens 1200, temperature 0.7) and read
`timings` with jq. This does the same through `ModelClient`, streaming, and also reports what the
client saw: if the client's tok/s matches the server's `predicted_per_second`, streaming adds no
throttle. Profiles run one after another, so their ratios are measured side by side in one run.

Around that, what the user did by hand: one warm-up request per profile (not counted), `runs`
repetitions, and the time left while they run (`Eta`). What the results say (spreads, speedups, the
identity report) and the files to keep are in bench_results.py; conversation.py is the other
measure: the prompts as one agent session, with what the agent itself costs per request.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.frontends.measure.answers import code_check
from agent.server.endpoint import Endpoint
from agent.session.parts import Completion, ModelClient
from agent.settings.config import state_dir
from agent.store.telemetry import TelemetryLog, TurnStats

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
    # Each answer read whole, as the seed's script reads it: the agent's client cuts one that keeps
    # repeating itself, and a cut stream ends without `timings` (the tiny base model loops at temperature 0).
    client = ModelClient(endpoint, cut_repeats=False)
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
        for text, name, run, limit in plan:
            completion: Completion | None = None
            async for item in client.stream(
                [{"role": "user", "content": text}], max_tokens=limit, **overrides
            ):
                if isinstance(item, Completion):
                    completion = item
            assert completion is not None
            result = BenchResult(endpoint.profile, name, completion.stats, run, completion.content, run == 0)
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
