"""`agent server tune PROFILE`: which speculative setup is fastest on this machine, measured.

A small sweep over what the profile's binary accepts: no speculation, the n-gram types, and the
profile's draft model when it has one (joined by each n-gram type too where the binary takes a list of
types), each at a few draft lengths. Every setup is its own server: started, warmed up, measured on the
bench prompts (or a task suite, or recorded sessions replayed: tune_replay.py), stopped. The sweep stays
within a time budget; the fastest setup becomes `PROFILE-tuned.toml` in the user's profile folder,
with the measurement in a comment at its top, written only once the sweep is over (an interrupted tune
leaves no half-written profile).

The setups are profiles in their own right (`setup_profile`), so a task run's `agent run -p FILE`
reaches the very server the tune started.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from agent.errors import AgentError, ConfigError
from agent.server.profiles import ServerProfile

SCHEMA = "spec-agent.tune/1"
# Types that verify a draft model's tokens; their length is --spec-draft-n-max.
DRAFT_TYPES = ("draft-simple", "draft-dflash", "dflash")
# N-gram types and the flag that sets how many tokens they propose. Their drafts are copies of
# earlier text, cheap to propose and often long (the server's defaults are 48-64), so they are swept
# over longer lengths than a draft model's.
NGRAM_TYPES = {"ngram-mod": "spec-ngram-mod-n-max", "ngram-simple": "spec-ngram-simple-size-m"}
DRAFT_LENGTHS = (4, 8, 16)
NGRAM_LENGTHS = (16, 32, 64)
TUNED_SUFFIX = "-tuned"


@dataclass(frozen=True)
class Setup:
    spec_type: str  # "none": no speculation
    length: int | None = None  # None: the server's default

    @property
    def label(self) -> str:
        return self.spec_type if self.length is None else f"{self.spec_type} n{self.length}"

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")

    def speculative(self, draft_model: str | None) -> dict[str, Any] | None:
        """The profile's [speculative] table for this setup."""
        if self.spec_type == "none":
            return None
        spec: dict[str, Any] = {"type": self.spec_type}
        if any(kind in DRAFT_TYPES for kind in self.spec_type.split(",")):  # the length is the draft model's
            spec["draft_model"] = draft_model
            if self.length is not None:
                spec["draft_max"] = self.length
        elif self.length is not None:
            flag = NGRAM_TYPES[self.spec_type]
            spec["options"] = {flag: self.length}
            if self.spec_type == "ngram-mod":  # its minimum (default 48) may not exceed the maximum
                spec["options"]["spec-ngram-mod-n-min"] = max(1, self.length * 3 // 4)
        return spec


def sweep(
    profile: ServerProfile,
    spec_types: tuple[str, ...],
    accepts: Callable[[str], bool],
    draft_lengths: tuple[int, ...] = DRAFT_LENGTHS,
    ngram_lengths: tuple[int, ...] = NGRAM_LENGTHS,
    type_list: bool = False,
) -> list[Setup]:
    """The setups in the order they run: no speculation first (the baseline), then every type at its
    middle length (the profile's draft model before the n-gram types), then the other lengths, so that
    a short budget still compares the types.

    `spec_types`: the binary's --spec-type values; `accepts(flag)`: whether it has a flag. A type it
    lacks is left out, and a length flag it lacks leaves that type at the server's default length.
    `type_list`: the binary takes a comma list of types, so the draft model also runs joined by each
    n-gram type (at its default length): n-gram drafts where the answer copies the prompt, the draft
    model's elsewhere."""
    draft = profile.speculative.draft_model if profile.speculative else None
    families: list[tuple[str, tuple[int | None, ...]]] = []
    drafting: tuple[str, tuple[int | None, ...]] | None = None
    if draft:  # the profile's own draft model first: what its user runs it for
        own = profile.speculative.type if profile.speculative else ""
        kind = next((t for t in own.split(",") if t in DRAFT_TYPES), "draft-simple")
        if kind in spec_types:
            drafting = (kind, draft_lengths if accepts("--spec-draft-n-max") else (None,))
            families.append(drafting)
    ngrams = [kind for kind in NGRAM_TYPES if kind in spec_types]
    for kind in ngrams:
        families.append((kind, ngram_lengths if accepts(f"--{NGRAM_TYPES[kind]}") else (None,)))
    if drafting and type_list:
        families += [(f"{drafting[0]},{kind}", drafting[1]) for kind in ngrams]
    setups = [Setup("none")]
    for kind, lengths in families:
        setups.append(Setup(kind, lengths[len(lengths) // 2]))
    for kind, lengths in families:
        setups += [Setup(kind, n) for n in lengths if Setup(kind, n) not in setups]
    return setups


def setup_profile(profile: ServerProfile, setup: Setup) -> ServerProfile:
    """The profile with this setup's speculation and nothing else changed. A draft that fails is a
    result here ("failed"), so the fallback that would run without it is off."""
    draft = profile.speculative.draft_model if profile.speculative else None
    spec = setup.speculative(draft)
    data = profile.model_dump(exclude={"speculative", "name", "source"})
    return ServerProfile.model_validate(
        {**data, "speculative": spec, "name": f"{profile.name}-tune-{setup.slug}", "fallback": False}
    )


# ------------------------------------------------------------------------------------------- results


@dataclass
class SetupResult:
    setup: Setup
    status: str = "not run"  # measured, failed, stopped (at the budget's end), not run (budget)
    reason: str = ""
    gen_tok_s: float | None = None  # median over the measured requests
    prefill_tok_s: float | None = None
    acceptance: float | None = None  # accepted / drafted tokens
    accepted_per_draft: float | None = None  # accepted tokens / drafts (the server's counters)
    seconds: float = 0.0  # start to stop, the warm-up included
    speedup: float | None = None  # gen tok/s over the "none" setup's
    solved: int | None = None  # with --tasks
    tasks: int | None = None
    task_seconds: float | None = None
    requests: int | None = None  # with --from-sessions: the recorded requests replayed
    turn_s: float | None = None  # their mean time, prefill and generation
    same_answers: int | None = None  # how many answers came back as recorded
    per_position: dict[str, Any] | None = None  # acceptance by draft position (the server's /metrics)
    by_kind: dict[str, Any] | None = None  # with --from-sessions: the figures per kind of turn
    server_argv: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["setup"] = {"type": self.setup.spec_type, "length": self.setup.length, "label": self.setup.label}
        return out


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def add_speedups(results: list[SetupResult]) -> None:
    base = next((r.gen_tok_s for r in results if r.setup.spec_type == "none" and r.gen_tok_s), None)
    for r in results:
        r.speedup = r.gen_tok_s / base if base and r.gen_tok_s else None


def best(results: list[SetupResult]) -> SetupResult | None:
    """The fastest measured setup; with tasks, the most tasks solved first, then the least time; with
    replayed sessions, the least time per turn (the same requests: what the user waits for)."""
    measured = [r for r in results if r.status == "measured" and r.gen_tok_s]
    if not measured:
        return None
    if any(r.turn_s is not None for r in measured):
        return min(measured, key=lambda r: r.turn_s or float("inf"))
    if any(r.solved is not None for r in measured):
        return max(measured, key=lambda r: (r.solved or 0, -(r.task_seconds or 0), r.gen_tok_s or 0))
    return max(measured, key=lambda r: r.gen_tok_s or 0)


class Budget:
    """Seconds for the whole sweep. A setup starts only when the slowest one so far would still end
    inside the budget; the first always runs (there is no comparison without a baseline)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock, self.began = seconds, clock, clock()
        self.durations: list[float] = []

    @property
    def elapsed(self) -> float:
        return self.clock() - self.began

    @property
    def left(self) -> float:
        return max(0.0, self.seconds - self.elapsed)

    def allows_another(self) -> bool:
        if not self.durations:
            return True
        return self.elapsed + max(self.durations) <= self.seconds

    def spent(self, seconds: float) -> None:
        self.durations.append(seconds)


def parse_budget(text: str) -> float:
    """'10m', '90s', '1h30m', '45' (seconds) -> seconds."""
    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*(h|min|m|s)", value)
        if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
            raise ConfigError(
                f"--budget {text!r} is not a duration", fix="Write it as 10m, 90s or 1h30m (or seconds)."
            )
        unit = {"h": 3600, "m": 60, "min": 60, "s": 1}
        seconds = sum(float(n) * unit[u] for n, u in parts)
    if seconds <= 0:
        raise ConfigError(
            f"--budget {text!r} leaves no time", fix="Give the sweep a few minutes: --budget 10m."
        )
    return seconds


# ----------------------------------------------------------------------------------- the tuned profile


def tuned_name(profile: ServerProfile) -> str:
    return profile.name.removesuffix(TUNED_SUFFIX) + TUNED_SUFFIX


def tuned_profile_text(profile: ServerProfile, chosen: SetupResult, results: list[SetupResult],
                       header: list[str]) -> str:  # fmt: skip
    """The profile's own file with the chosen [speculative] table, its comments kept, and the
    measurement on top."""
    if profile.source is None or not Path(profile.source).is_file():
        raise AgentError(f"profile '{profile.name}' has no file to derive from")
    doc = tomlkit.parse(Path(profile.source).read_text(encoding="utf-8"))
    doc["description"] = f"{profile.name} tuned on this machine: {chosen.setup.label}" + (
        f" ({chosen.speedup:.2f}x over no speculation)" if chosen.speedup else ""
    )
    if "speculative" in doc:
        del doc["speculative"]
    spec = chosen.setup.speculative(profile.speculative.draft_model if profile.speculative else None)
    body = tomlkit.dumps(doc).rstrip("\n") + "\n"
    if spec:
        table = tomlkit.table()
        for key, value in spec.items():
            table[key] = value
        body += "\n" + tomlkit.dumps({"speculative": table})
    lines = [f"# {line}" if line else "#" for line in header]
    lines += ["#", "# setup                      gen tok/s  speedup  acceptance  accepted/draft"]
    for r in results:
        if r.status == "measured":
            lines.append(
                f"#   {r.setup.label:<24} {_f(r.gen_tok_s):>9}  {_x(r.speedup):>7}  {_p(r.acceptance):>10}"
                f"  {_f(r.accepted_per_draft, 2):>14}"
            )
        else:
            lines.append(f"#   {r.setup.label:<24} {r.status}{': ' + r.reason if r.reason else ''}")
    return "\n".join(lines) + "\n\n" + body


def _f(value: float | None, digits: int = 1) -> str:
    return f"{value:.{digits}f}" if value is not None else "-"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _p(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def write_setup_file(folder: Path, profile: ServerProfile) -> Path:
    """A setup as a profile file, for the task runs' `agent run -p FILE` (which then reuse its server)."""
    data = profile.model_dump(exclude={"name", "source"}, exclude_none=True, mode="json")
    path = folder / f"{profile.name}.toml"
    path.write_text(tomlkit.dumps(data), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- chart


def chart(doc: dict[str, Any], out: Path) -> list[Path]:
    """tune.png and tune.svg: generation tok/s per setup, labelled with the speedup over none."""
    from matplotlib.figure import Figure

    rows = [r for r in doc["results"] if r["status"] == "measured" and r["gen_tok_s"]]
    if not rows:
        return []
    # grouped by type, lengths in order (they ran in another order: every type first)
    rows.sort(key=lambda r: (r["setup"]["type"] != "none", r["setup"]["type"], r["setup"]["length"] or 0))
    fig = Figure(figsize=(max(6.0, 1.1 * len(rows) + 2), 4.8), layout="constrained")
    ax = fig.subplots()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    names = [r["setup"]["label"] for r in rows]
    values = [r["gen_tok_s"] for r in rows]
    chosen = doc.get("best")
    colours = ["#55a868" if n == chosen else "#4c72b0" if n != "none" else "#8c8c8c" for n in names]
    bars = ax.bar(names, values, color=colours)
    labels = [
        f"{v:.1f}" + (f"\n{r['speedup']:.2f}×" if r.get("speedup") else "")
        for v, r in zip(values, rows, strict=True)
    ]
    ax.bar_label(bars, labels=labels, fontsize=8, padding=2)
    ax.set_ylim(0, max(values) * 1.25)
    ax.set_ylabel("generation tok/s (median)")
    ax.set_title(f"agent server tune {doc['profile']}: the best is {chosen}", fontsize=11)
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    machine = doc.get("machine") or {}
    fig.text(0.01, 0.0, f"$ {doc['command']}\n{machine.get('cpu', '')}, {machine.get('cpus', '')} cpus, "
             f"{doc['when']}", fontsize=7, color="#555555", va="bottom", family="monospace")  # fmt: skip
    fig.get_layout_engine().set(h_pad=0.4)
    written = []
    for ext in ("png", "svg"):
        path = out / f"tune.{ext}"
        fig.savefig(path, dpi=150, metadata={"Date": None} if ext == "svg" else {"Software": None})
        written.append(path)
    return written


def terminal_chart(results: list[SetupResult], width: int = 40) -> str | None:
    """Generation tok/s per setup as text bars, grouped by type, each with its speedup."""
    rows = [r for r in results if r.status == "measured" and r.gen_tok_s]
    if not rows:
        return None
    rows.sort(key=lambda r: (r.setup.spec_type != "none", r.setup.spec_type, r.setup.length or 0))
    top = max(r.gen_tok_s or 0 for r in rows)
    name_width = max(len(r.setup.label) for r in rows)
    lines = ["generation tok/s per setup"]
    for r in rows:
        bar = "█" * max(1, round((r.gen_tok_s or 0) / top * width))
        lines.append(
            f"{r.setup.label:>{name_width}} {bar} {r.gen_tok_s:.1f}"
            + (f" ({r.speedup:.2f}x)" if r.speedup else "")
        )
    return "\n".join(lines)
