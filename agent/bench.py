"""`agent bench`: the seed's benchmark, through the agent's own client, for one or more profiles.

The user's script sent three Python code prompts (max_tokens 1200, temperature 0.7) and read
`timings` with jq. This does the same through `ModelClient`, streaming, and also reports what the
client saw: if the client's tok/s matches the server's `predicted_per_second`, streaming adds no
throttle. Profiles run one after another, so their ratios are measured side by side in one run.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config import state_dir
from agent.llm import Completion, Endpoint, ModelClient
from agent.telemetry import TelemetryLog, TurnStats, summarise_turns

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


@dataclass
class BenchResult:
    profile: str
    prompt: str
    stats: TurnStats

    @property
    def client_server_ratio(self) -> float | None:
        s = self.stats
        if s.client_tokens_per_second and s.predicted_per_second:
            return s.client_tokens_per_second / s.predicted_per_second
        return None


async def run_prompts(
    endpoint: Endpoint, prompts: dict[str, str], max_tokens: int, temperature: float, runs: int = 1
) -> list[BenchResult]:
    client = ModelClient(endpoint)
    results = []
    try:
        for _ in range(runs):
            for name, prompt in prompts.items():
                completion: Completion | None = None
                async for item in client.stream(
                    [{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=temperature
                ):
                    if isinstance(item, Completion):
                        completion = item
                assert completion is not None
                results.append(BenchResult(endpoint.profile, name, completion.stats))
    finally:
        await client.close()
    return results


def log_results(results: list[BenchResult], endpoint: Endpoint) -> Path:
    """Bench runs are sessions of their own in the telemetry log, so `agent stats` can compare them."""
    session = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{endpoint.profile}-{uuid.uuid4().hex[:4]}"
    log = TelemetryLog(state_dir() / "telemetry" / f"{session}.jsonl")
    for turn, result in enumerate(results, 1):
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


def summarise(results: list[BenchResult]) -> dict[str, dict[str, Any]]:
    by_profile: dict[str, list[BenchResult]] = {}
    for r in results:
        by_profile.setdefault(r.profile, []).append(r)
    summary = {}
    for profile, rows in by_profile.items():
        ratios = [r.client_server_ratio for r in rows if r.client_server_ratio]
        summary[profile] = summarise_turns([r.stats for r in rows]) | {
            "median_client_over_server": statistics.median(ratios) if ratios else None
        }
    return summary


def run(
    endpoint: Endpoint, prompts: dict[str, str], max_tokens: int, temperature: float, runs: int
) -> list[BenchResult]:
    return asyncio.run(run_prompts(endpoint, prompts, max_tokens, temperature, runs))


async def run_conversation(
    settings, endpoint: Endpoint, prompts: dict[str, str], tool_choice: str, max_turns: int
) -> tuple[str, list[TurnStats]]:
    """The prompts as follow-ups in one agent session (real loop, real tools, a scratch workspace).

    What it measures is the prompt cache across turns: from the second request on, the server should
    only process what is new.
    """
    import tempfile

    from agent.events import SessionStarted
    from agent.loop import Limits
    from agent.recorder import SessionRecorder
    from agent.session import new_session_id
    from agent.wiring import Workbench, build_agent

    client = ModelClient(endpoint)
    model = await client.model_name()
    session_id = new_session_id()
    recorder = SessionRecorder(state_dir(), session_id, endpoint.profile, model, endpoint.spec_mode)
    try:
        with tempfile.TemporaryDirectory(prefix="agent-bench-") as scratch:
            workbench = Workbench(Path(scratch))
            recorder(
                SessionStarted(session_id, endpoint.profile, model, scratch, "agent bench --conversation")
            )
            agent = await build_agent(
                settings, workbench, client, recorder, approve=None, approval="full-auto",
                limits=Limits(max_turns=max_turns), tool_choice=tool_choice,
            )  # fmt: skip
            for prompt in prompts.values():
                await agent.run(workbench.task_message(prompt))
    finally:
        recorder.close()
        await client.close()
    return session_id, recorder.stats
