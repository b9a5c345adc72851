"""What `agent bench` and `agent server tune` measured on this machine, kept for `-p auto`.

One JSON line per profile measured: its median generation tok/s on the bench prompts, when, by which
command, on which machine. `-p auto` takes the fastest profile measured here that can start here; a
figure from another machine (another CPU, GPU or memory size) says nothing about this one.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.settings.config import state_dir
from agent.store.telemetry import read_jsonl


def store_path() -> Path:
    return state_dir() / "measurements.jsonl"


def machine_key() -> str:
    """The host, its CPU and its memory, and the GPUs where NVML sees any: what speed depends on."""
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(ImportError):
        import psutil

        memory = f"{round(psutil.virtual_memory().total / 1024**3)} GiB"
    return " | ".join(x for x in (platform.node(), cpu, f"{os.cpu_count()} cpus", memory, _gpus()) if x)


def _gpus() -> str:
    try:
        import pynvml
    except ImportError:
        return ""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return ""
    try:
        return ", ".join(
            str(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
            for i in range(pynvml.nvmlDeviceGetCount())
        )
    finally:
        pynvml.nvmlShutdown()


def record(profile: str, gen_tok_s: float, source: str, command: str, **extra: Any) -> None:
    """Append one measurement; a store that cannot be written costs the figure, never the run."""
    line = {"time": time.time(), "machine": machine_key(), "profile": profile, "gen_tok_s": gen_tok_s,
            "source": source, "command": command, **extra}  # fmt: skip
    with contextlib.suppress(OSError):
        store_path().parent.mkdir(parents=True, exist_ok=True)
        with store_path().open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


@dataclass
class Measured:
    profile: str
    gen_tok_s: float
    when: float
    command: str


def measured_here() -> dict[str, Measured]:
    """The newest measurement of each profile on this machine."""
    here = machine_key()
    latest: dict[str, Measured] = {}
    for row in read_jsonl(store_path()):
        if row.get("machine") != here or not isinstance(row.get("gen_tok_s"), int | float):
            continue
        latest[row["profile"]] = Measured(
            row["profile"], row["gen_tok_s"], row.get("time", 0), row.get("command", "")
        )
    return latest
