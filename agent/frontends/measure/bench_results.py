"""What a bench run's results say, and the files that keep them.

Per profile, the requests summarised as median, min-max and interquartile range, and the speedup
against the first profile with the spread of the per-run ratios; at temperature 0, whether the outputs
are the same with and without speculation (and whether their code parses: answers.py); results.json,
results.csv and charts (`write_files`).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.frontends.measure.answers import compare_texts
from agent.frontends.measure.bench_prompts import BenchResult
from agent.store.telemetry import TurnStats, per_position_rates, summarise_turns

SCHEMA = "spec-agent.bench/1"


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


# ------------------------------------------------------------------------------------------ identity


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
    from agent.frontends.measure.bench_charts import draw_charts  # (lazy: matplotlib, only for charts)

    return written + draw_charts(doc, out), None
