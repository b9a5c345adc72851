"""How the lines of thought at one task differ: attempts side by side (agent/session/attempts.py), and
the fresh starts of a single line that got stuck (agent/session/task_run.py).

At temperature 0 a small model gives the same wrong answer round after round, so each new line works
differently from the ones before it:

- Where the protocol has a plan step, the way alternates: with the plan step and without it. On the
  small suite the runs with the plan solved tasks that those without it never did (fix-failing-test,
  parse-duration), and lost some that those without it solved (hello, rename-function).
- The sampling gets warmer, with seeds of its own. llama-server's default `min_p` (0.05) keeps only
  the top token where the model is sure of itself, so a warmer line also sets `min_p` to 0
  (agent/core/guards.py).
"""

from __future__ import annotations

from typing import Any

# The first warmer line's temperature over the task's, and each further one's step: the 1.5B copying a
# file it was shown gave the same tokens at 0.7 three times in a row, so the spread is wide.
WARMER_BY = 0.5
WARMER_STEP = 0.2
WARMEST = 1.0
SEED_PER_ATTEMPT = 100  # fresh starts within attempt N take seeds 100N + 1, 100N + 2, ...


def plans_first(number: int, default: bool) -> bool:
    """Whether attempt `number` asks for a plan before its actions: the odd ones as the settings say,
    the even ones the other way."""
    return default if number % 2 else not default


def warmer(base: dict[str, Any], profile_temperature: float | None, rank: int, seed: int) -> dict[str, Any]:
    """The task's sampling (`base`), warmer by rank (1: WARMER_BY over the task's temperature, then
    WARMER_STEP more each), seeded, with `min_p` 0."""
    temperature = base.get("temperature", profile_temperature) or 0.0
    hotter = min(WARMEST, temperature + WARMER_BY + WARMER_STEP * (rank - 1))
    return {**base, "temperature": round(max(hotter, temperature), 2), "seed": seed, "min_p": 0.0}


def sampling_for(
    number: int, base: dict[str, Any], profile_temperature: float | None, ways: int = 1
) -> dict[str, Any]:
    """Request overrides of attempt `number`, of `ways` alternating ways of working: the task's own
    for the first of each way (seeded after the first, which tells the attempts apart in the logs);
    warmer, seeded, for the rest."""
    rank = (number - 1) // ways  # 0 for the first attempt of each way
    if rank == 0:
        return dict(base) if number == 1 else {**base, "seed": number}
    return warmer(base, profile_temperature, rank, number)


def fresh_start(
    number: int,
    default_plan: bool,
    can_plan: bool,
    base: dict[str, Any],
    profile_temperature: float | None,
    attempt: int | None = None,
) -> tuple[bool, dict[str, Any]]:
    """(plan first, request overrides) of fresh start `number` (1, 2, ...) of a line that got stuck:
    the other way from the line before it, and warmer each time. The first line ran at the task's own
    temperature, and that is where it got stuck, so no fresh start goes back to it: in runs I and J of
    the small suite the planned attempt at temperature 0 won no task, the planned one at 0.5 won six
    (docs/benchmarks.md). Within attempt `attempt` of several, the seed is its own too (SEED_PER_ATTEMPT
    apart, clear of the attempts' first seeds), so that no two lines of a run sample alike."""
    plan = plans_first(number + 1, default_plan) if can_plan else default_plan
    seed = number + 1 if attempt is None else SEED_PER_ATTEMPT * attempt + number
    return plan, warmer(base, profile_temperature, number, seed=seed)
