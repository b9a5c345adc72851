"""What the action protocols share and the core does not need. The interface they implement, and an
answer read, are the core's (agent/core/protocol.py).

How the model acts: the action protocols, in front of one tool layer.

- `tools`: native tool calls (JSON), with text fallbacks for local models (`agent.protocols.tool_calls`). Right
  for the large models people run on their GPUs.
- `blocks`: the model writes text it saw in training: a path line and the whole file in a fence,
  SEARCH/REPLACE blocks, a fenced `bash` block (`agent.protocols.edit_blocks`). A 1.5B model solved 4 of 5 small tasks
  this way in Aider and none with JSON tool calls (FACTS.md).

They differ only in what is sent (tool schemas or none), how the answer is read, and how results go
back: `tool` messages, or one user message that reads like a terminal.
"""

from __future__ import annotations

from agent.core.llm import Completion


def stopped_at_limit(completion: Completion) -> bool:
    """The answer stopped at the token limit: a call or block in it may be cut half-way."""
    return (completion.stats.finish_reason or "") == "length"
