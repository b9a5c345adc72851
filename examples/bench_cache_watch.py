"""What explaining the prompt cache costs per request (agent/core/prompt_cache.py): every message is
serialized and set against the previous request's, so it grows with the context.

    python examples/bench_cache_watch.py
"""

from __future__ import annotations

import json
import time

from agent.core.prompt_cache import CacheWatch


def main() -> None:
    messages = [{"role": "system", "content": "x" * 8000}]
    for _ in range(100):  # about a 100k-token conversation
        messages.append({"role": "user", "content": "def f(x):\n    return x\n" * 80})
        messages.append({"role": "assistant", "content": "y" * 2000})
    size = sum(len(json.dumps(m)) for m in messages)
    watch = CacheWatch()
    watch.explain(messages[:-2], [], 0, 50000)
    runs = 20
    began = time.perf_counter()
    for _ in range(runs):
        watch.explain(messages, [], 49000, 1000)
    print(
        f"{size / 1e6:.2f} MB of messages: {(time.perf_counter() - began) / runs * 1000:.1f} ms per request"
    )


if __name__ == "__main__":
    main()
