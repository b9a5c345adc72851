"""How long redaction (agent/store/redact.py) takes on 1 MB of text: what the transcript pays per MB written.

python examples/bench_redact.py
"""

from __future__ import annotations

import time
from pathlib import Path

from agent.store.redact import Redactor

REPO = Path(__file__).resolve().parents[1]
MB = 1_000_000


def one_mb(text: str) -> str:
    return (text * (MB // len(text) + 1))[:MB]


def best_ms(redactor: Redactor, text: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        redactor(text)
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def main() -> None:
    redactor = Redactor(["registered-value-1", "another-registered-value"])
    redactor.add_environment()
    # This repository's own source holds every hint (agent/store/redact.py names them all): no shape is skipped.
    source = "".join(p.read_text() for p in sorted((REPO / "agent").rglob("*.py")))
    cases = {
        "prose, no secrets": one_mb("The agent runs the tests, reads the output and edits the file again. "),
        "this repository's Python source": one_mb(source),
        "a secret in every ~1 KB": one_mb(
            "x" * 900 + " ghp_" + "a" * 36 + " password=hunter22 sk-" + "b" * 40 + " registered-value-1\n"
        ),
    }
    print("| 1 MB of | redaction |\n|---|---|")
    for name, text in cases.items():
        print(f"| {name} | {best_ms(redactor, text):.1f} ms |")


if __name__ == "__main__":
    main()
