"""Where and how to ask a model: the server's address and key, the model, the profile's sampling and
request body. `agent/session/connect.py` makes one from a profile; the model client (agent/core/llm.py)
sends every request to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Endpoint:
    """Where and how to ask a model: one per session."""

    base_url: str  # the OpenAI base, ending in /v1
    api_key: str | None = None
    model: str | None = None  # asked of /v1/models when None
    profile: str = "attach"
    spec_mode: str = "none"
    sampling: dict[str, Any] = field(default_factory=dict)  # OpenAI params; extra_body for llama.cpp's
    extra_body: dict[str, Any] = field(default_factory=dict)  # sent with every request
    metrics_url: str | None = None  # Prometheus /metrics, for draft counters
    server_log: str | None = None  # the log of a server the agent started: why its cache was dropped
