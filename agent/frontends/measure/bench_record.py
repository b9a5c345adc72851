"""What every mode of `agent bench` records beside its figures: the command that reproduces them, and the
machine's load while they were measured (figures on a shared machine are noisy)."""

from __future__ import annotations

import os
import shlex
from argparse import Namespace


def command_line(args: Namespace) -> str:
    """The command as it could be typed again: the profiles and every option away from its default."""
    parts = ["agent", "bench", *(args.profiles or [])]
    defaults = {"max_tokens": 1200, "temperature": 0.7, "runs": 1, "tool_choice": "auto", "max_turns": 4,
                "task_timeout": 600}  # fmt: skip
    for name in ("base_url", "prompt_file", "seed", "out", "actions", "tasks"):
        value = getattr(args, name, None)
        if value is not None:
            parts += [f"--{name.replace('_', '-')}", str(value)]
    for name, default in defaults.items():
        value = getattr(args, name, default)
        if value != default:
            parts += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    for flag in ("conversation", "json"):
        if getattr(args, flag, False):
            parts.append(f"--{flag}")
    if getattr(args, "no_warmup", False):
        parts.append("--no-warmup")
    for task in getattr(args, "task", None) or []:
        parts += ["--task", task]
    return shlex.join(parts)


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: what else ran on the machine meanwhile."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
