"""`agent bench --conversation`: the prompts as follow-ups in one agent session, and what each request
cost: the server's time, the tools', and the agent's own (`RequestCost`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.events import Event, TurnStarted
from agent.server.endpoint import Endpoint
from agent.session.connect import Connection
from agent.session.live import SessionSetup, open_session
from agent.session.parts import Agent, Limits, task_message
from agent.store.telemetry import TurnStats


@dataclass
class RequestCost:
    """One request of an agent session, split into who spent the time.

    span: from the request's start (for a task's first request: from the start of the task, its
    message built) to the next request's start or the end of the task. server: the server's own
    prompt_ms + predicted_ms. tools: the tool calls it led to. own: the rest, "the agent's own time"
    as wall time minus model time minus tools: the client (HTTP, SSE parsing), reading the answer,
    events, transcript, telemetry, context checks, and also what llama-server spends on a request
    outside its timings (HTTP, chat template, tokenizing), measured apart as `server_handling_s`.
    """

    request: int
    span_s: float
    server_s: float | None
    tool_s: float
    client_s: float | None  # of own: the stream's wall time beyond the server's time
    client_over_server: float | None
    stats: TurnStats = field(repr=False, default_factory=TurnStats)
    server_handling_s: float | None = None  # of own: the request replayed for one token (`server_handling`)

    @property
    def own_s(self) -> float | None:
        if self.server_s is None:
            return None
        return self.span_s - self.server_s - self.tool_s

    @property
    def agent_s(self) -> float | None:
        """Own time less the server's handling: what the agent's code spent."""
        if self.own_s is None or self.server_handling_s is None:
            return None
        return self.own_s - self.server_handling_s

    def to_dict(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 6)

        return {
            "request": self.request,
            "span_s": r(self.span_s),
            "server_s": r(self.server_s),
            "tool_s": r(self.tool_s),
            "own_s": r(self.own_s),
            "client_s": r(self.client_s),
            "server_handling_s": r(self.server_handling_s),
            "agent_s": r(self.agent_s),
            "client_over_server": self.client_over_server,
            "stats": self.stats.to_dict(),
        }


def request_costs(tasks: list[tuple[float, list[float], float, list[TurnStats]]]) -> list[RequestCost]:
    """The cost of each request from its time marks: per task (its start, each request's start, its
    end, each completed request's stats). A request that failed before completing has no stats and is
    left out (it is the task's last)."""
    costs = []
    for task_start, starts, task_end, stats in tasks:
        for j, s in enumerate(stats[: len(starts)]):
            since = task_start if j == 0 else starts[j]
            until = starts[j + 1] if j + 1 < len(starts) else task_end
            server = (s.prompt_ms or 0) / 1000 + (s.predicted_ms or 0) / 1000 if s.has_timings else None
            ratio = (
                s.client_tokens_per_second / s.predicted_per_second
                if s.client_tokens_per_second and s.predicted_per_second
                else None
            )
            costs.append(
                RequestCost(
                    request=len(costs) + 1,
                    span_s=until - since,
                    server_s=server,
                    tool_s=s.tool_s,
                    client_s=s.wall_s - server if server is not None else None,
                    client_over_server=ratio,
                    stats=s,
                )
            )
    return costs


async def server_handling(
    endpoint: Endpoint, model: str, messages: list[dict], tools: list[dict], tool_choice: str
) -> float | None:
    """What llama-server itself spends on a request outside its `timings` (HTTP, the chat template,
    tokenizing the whole prompt): the same messages sent again for one token, without streaming, by a
    bare HTTP client; its wall time minus prompt_ms + predicted_ms. None when the server reports no
    timings. (The prompt is in the server's cache by then, so the replay itself is quick.)"""
    import httpx2

    sampling = {k: v for k, v in endpoint.sampling.items() if k != "extra_body"}
    body: dict[str, Any] = {
        **sampling,
        **endpoint.sampling.get("extra_body", {}),
        **endpoint.extra_body,
        "model": model,
        "messages": messages,
        "max_tokens": 1,
        "stream": False,
        "cache_prompt": True,
    }
    if tools:
        body["tools"], body["tool_choice"] = tools, tool_choice
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    async with httpx2.AsyncClient(timeout=120, headers=headers) as http:
        began = time.perf_counter()
        response = await http.post(endpoint.base_url + "/chat/completions", json=body)
        elapsed = time.perf_counter() - began
    timings = response.json().get("timings") if response.status_code == 200 else None
    if not timings:
        return None
    return elapsed - (timings.get("prompt_ms", 0) + timings.get("predicted_ms", 0)) / 1000


async def run_conversation(
    settings,
    connection: Connection,
    prompts: dict[str, str],
    tool_choice: str,
    max_turns: int,
    actions: str | None = None,  # an action protocol's name; None: the profile's
) -> tuple[str, list[TurnStats], list[RequestCost]]:
    """The prompts as follow-ups in one agent session (real loop, real tools, a scratch workspace).

    It measures the prompt cache across turns (from the second request on, the server should only
    process what is new) and what the agent itself costs per request (`RequestCost`). After the
    session each request's messages are replayed for one token, to tell the server's own handling of
    a request apart from the agent's.
    """
    import tempfile

    endpoint = connection.endpoint
    starts: list[float] = []
    sent: list[list[dict]] = []  # each request's messages (compaction, if any, is left out)
    agent: Agent | None = None

    def marks(event: Event) -> None:
        if isinstance(event, TurnStarted):
            starts.append(time.monotonic())
            sent.append([dict(m) for m in agent.messages] if agent else [])

    tasks: list[tuple[float, list[float], float, list[TurnStats]]] = []
    costs: list[RequestCost] = []
    with tempfile.TemporaryDirectory(prefix="agent-bench-") as scratch:
        setup = SessionSetup(
            settings, Path(scratch), connection.profile, "agent bench --conversation", approval="full-auto",
            limits=Limits(max_turns=max_turns), tool_choice=tool_choice, actions=actions,
            task="agent bench --conversation", mcp_servers={}, connection=connection,
        )  # fmt: skip
        async with open_session(setup, marks) as live:
            agent, recorder = live.agent, live.recorder
            for prompt in prompts.values():
                began, before = time.monotonic(), len(recorder.stats)
                starts.clear()
                await agent.run(
                    task_message(
                        live.workbench, prompt, agent.actions, agent.context, prefix=agent.system_prompt
                    )
                )
                tasks.append((began, list(starts), time.monotonic(), recorder.stats[before:]))
            costs = request_costs(tasks)
            # the requests' own message lists, in order, for those that completed
            kept, i = [], 0
            for _, request_marks, _, stats in tasks:
                kept += sent[i : i + min(len(request_marks), len(stats))]
                i += len(request_marks)
            model = live.model
            tools = agent.actions.request_tools(agent.tools)
            for cost, messages in zip(costs, kept, strict=False):
                cost.server_handling_s = await server_handling(endpoint, model, messages, tools, tool_choice)
    return live.session_id, recorder.stats, costs
