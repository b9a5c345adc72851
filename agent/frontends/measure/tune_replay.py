"""`agent server tune PROFILE --from-sessions`: the model requests of recorded sessions, replayed.

The seed's prompts are not the agent's work: an edit block copies lines the model was just shown, a
check's feedback repeats the code, and that is where n-gram drafting pays (issue 32). So each request a
recorded session made is sent again, as it was sent, to each setup's server: in order, session by
session, so that the server's prompt cache sees what it saw then; at temperature 0, with the recorded
answer's length as its limit, so every setup does the same work.

A transcript keeps the history (the messages after the system prompt, as a resume rebuilds them), the
protocol's tool calls and each turn's figures. It does not keep three things, rebuilt as a resume
rebuilds them: the system prompt (the protocol's prompt and the workspace's AGENTS.md as they are
now), the tool schemas (the built-in tools, git's unless the session said it had no repository; MCP
tools are not started) and the protocol itself (read from the session: native calls mean tools, calls
without them edit blocks). Secrets are sent as `[REDACTED]`, as the transcript holds them.
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.frontends.measure.turn_kinds import KINDS, turn_kind
from agent.server.embedded_model import embedded_key, lookup_embedded_model
from agent.server.endpoint import Endpoint
from agent.server.profiles import ServerProfile, get_profile
from agent.session.actions import acted_by
from agent.session.build_agent import request_prefix
from agent.session.live import resumed_history
from agent.session.parts import Completion, ModelClient, history_arguments
from agent.settings.config import Settings, state_dir
from agent.store.telemetry import TurnStats, per_position_rates
from agent.store.transcripts import SessionRecord, list_session_paths, load_session, sessions_dir

# An answer without a token count (a stream cut before its timings, a turn killed in its tools): its
# length in characters over this many per token stands in, within these bounds.
CHARS_PER_TOKEN = 3
MIN_TOKENS, MAX_TOKENS = 16, 4096


@dataclass
class Request:
    """One model request of a session, as it was sent, and the answer recorded for it."""

    session_id: str
    turn: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
    content: str  # the recorded answer
    calls: list[tuple[str, str]]  # its tool calls: (name, arguments as the history keeps them)

    @cached_property  # asked per setup and per line of progress; it sets the answer against the prompt
    def kind(self) -> str:
        """Whether the recorded answer copies what the model was shown, or is new (turn_kinds.py)."""
        return turn_kind(
            "\n".join([self.content, *(arguments for _, arguments in self.calls)]), self.messages
        )


@dataclass
class Session:
    session_id: str
    profile: str  # the profile it was recorded on
    model: str  # the GGUF it was recorded against (recorded_model)
    requests: list[Request]


@dataclass
class Replayed:
    request: Request
    stats: TurnStats
    same: bool  # the replayed answer is the recorded one, text and tool calls


def pick_sessions(ids: list[str], last: int | None, settings: Settings, fallback: str) -> list[Session]:
    """The sessions named, or the newest `last` (default 1) that made a model request, oldest first.
    `fallback`: the protocol of a session that never acted (the profile's)."""
    if ids:
        named = [session_of(load_session(state_dir(), i), settings, fallback) for i in ids]
        if empty := next((s for s in named if not s.requests), None):
            raise AgentError(f"session {empty.session_id} made no model request", fix="Name another session.")
        return named
    newest: list[Session] = []
    for path in reversed(list_session_paths(state_dir())):
        if len(newest) == (last or 1):
            break
        try:
            session = session_of(load_session(state_dir(), path.stem), settings, fallback)
        except AgentError:
            continue  # a corrupt transcript: `agent sessions` says so; the others still count
        if session.requests:
            newest.append(session)
    if not newest:
        raise AgentError(
            "no recorded session to replay",
            f"{sessions_dir(state_dir())} holds no session that made a model request.",
            "Record some by working on this profile: `agent` (the TUI), `agent run TASK.md -p PROFILE`, or "
            "`agent bench PROFILE --tasks`; then tune again with --from-sessions.",
        )
    return newest[::-1]


def session_of(record: SessionRecord, settings: Settings, fallback_actions: str) -> Session:
    events = record.events
    workspace = Path(record.started.get("workspace") or ".")
    actions = protocol_of(record, fallback_actions)
    # The git tools are offered in a repository only; outside one the session said so as it opened (and
    # the folder may be gone since: a suite task's, a bench's scratch).
    with_git = not any(
        e["type"] == "notice" and e.get("message", "").startswith("not a git repository") for e in events
    )
    prompt, tools = request_prefix(actions, workspace, with_git, settings.rewrite_guard)
    system = {"role": "system", "content": prompt}
    requests = []
    for i, event in enumerate(events):
        if event["type"] != "assistant.message":
            continue
        # What the agent held when it sent this request: the history of the events before its answer
        # (a compaction just before it included), rebuilt as a resume rebuilds it.
        before = SessionRecord(record.session_id, record.path, events[:i])
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in event.get("tool_calls") or []]
        length = _answer_tokens(_turn_stats(events[i + 1 :]), event["content"], calls)
        messages = [system, *resumed_history(before)]
        requests.append(
            Request(record.session_id, event["turn"], messages, tools, length, event["content"], calls)
        )
    started = record.started
    return Session(record.session_id, started.get("profile", ""), recorded_model(started), requests)


def _turn_stats(after: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of the answer just before `after`: its turn.completed follows the tools it called, and
    a turn cut short (kill -9 while its tools ran) has none before the next answer or run."""
    for event in after:
        if event["type"] == "turn.completed":
            return event.get("stats") or {}
        if event["type"] in ("assistant.message", "session.started"):
            break
    return {}


def protocol_of(record: SessionRecord, fallback: str) -> str:
    """How the session's model acted (actions.acted_by). A session that never acted shows nothing: its
    task's front matter, else the profile's protocol, is the best guess."""
    return acted_by(record.events) or (record.started.get("options") or {}).get("actions") or fallback


def _answer_tokens(stats: dict[str, Any], content: str, calls: list[tuple[str, str]]) -> int:
    recorded = stats.get("predicted_n") or stats.get("completion_tokens")
    if recorded:
        return int(recorded)
    chars = len(content) + sum(len(arguments) for _, arguments in calls)
    return max(MIN_TOKENS, min(MAX_TOKENS, chars // CHARS_PER_TOKEN))


def model_file_name(profile: ServerProfile) -> str:
    """The GGUF a profile serves, by its file name (what llama-server names its model when nothing
    aliases it), read from the profile alone: an embedded model is never assembled to be named."""
    key = embedded_key(profile.model or "")
    if key is not None:
        return lookup_embedded_model(key).file_name
    return Path(os.path.expandvars(profile.model or "")).name


def recorded_model(started: dict[str, Any]) -> str:
    """The model a session was recorded against. A session on a profile that starts its server records
    the profile's name as its model (the endpoint asks for it by that name): its profile, looked up
    from its workspace, names the file. A session attached to a server records the name that server
    gave, which llama-server takes from the file."""
    name = started.get("profile") or ""
    if name and name != "attach":
        with contextlib.suppress(AgentError):
            profile = get_profile(name, Path(started.get("workspace") or "."))
            if profile.kind != "attach":
                return model_file_name(profile)
    return started.get("model") or ""


def refuse_other_models(sessions: list[Session], profile: ServerProfile) -> None:
    """Sessions of another model measure another model's work: refused before any server starts."""
    served = model_file_name(profile)
    for s in sessions:
        if s.model != served:
            raise AgentError(
                f"session {s.session_id} was recorded against another model than profile '{profile.name}'",
                f"It was recorded against '{s.model}' (profile '{s.profile}'); '{profile.name}' serves "
                f"'{served}'.",
                f"Replay sessions recorded on '{served}': name them by id (`agent sessions` lists them "
                "with their profile).",
            )


async def replay(
    endpoint: Endpoint,
    sessions: list[Session],
    on_request: Callable[[Replayed, int, int], None] | None = None,
) -> list[Replayed]:
    """Every request of the sessions, in order, on this server. `on_request(replayed, i, n)`: progress."""
    # The recorded length is the work to compare: an answer is read whole, never cut as a loop.
    client = ModelClient(endpoint, cut_repeats=False)
    try:
        requests = [r for s in sessions for r in s.requests]
        done = []
        for i, request in enumerate(requests, 1):
            completion: Completion | None = None
            async for item in client.stream(
                request.messages, request.tools, temperature=0.0, max_tokens=request.max_tokens
            ):
                if isinstance(item, Completion):
                    completion = item
            assert completion is not None
            calls = [(c.name, history_arguments(c.arguments)) for c in completion.tool_calls]
            same = completion.content == request.content and calls == request.calls
            done.append(Replayed(request, completion.stats, same))
            if on_request:
                on_request(done[-1], i, len(requests))
    finally:
        await client.close()
    return done


def summary(rows: list[Replayed]) -> dict[str, Any]:
    """A setup's figures over the replayed requests, and the same per kind of turn."""
    by_kind = {kind: figures([r for r in rows if r.request.kind == kind]) for kind in KINDS}
    return figures(rows) | {
        "per_position": per_position_rates([r.stats for r in rows]),
        "by_kind": {kind: f for kind, f in by_kind.items() if f["requests"]},
    }


def figures(rows: list[Replayed]) -> dict[str, Any]:
    stats = [r.stats for r in rows]
    # Generation over all the tokens, not a median of per-request rates: a five-token "Done." weighs
    # as little in it as it does in the session's time.
    timed = [s for s in stats if s.predicted_n and s.predicted_ms]
    gen = (
        sum(s.predicted_n or 0 for s in timed) / sum(s.predicted_ms or 0 for s in timed) * 1000
        if timed
        else None
    )
    prefill = [s.prompt_per_second for s in stats if s.prompt_per_second and s.prompt_n]
    drafted = sum(s.drafted or 0 for s in stats)
    return {
        "gen_tok_s": gen,
        "prefill_tok_s": statistics.median(prefill) if prefill else None,
        "acceptance": sum(s.accepted or 0 for s in stats) / drafted if drafted else None,
        "turn_s": sum(s.wall_s for s in stats) / len(stats) if stats else None,
        "requests": len(rows),
        "same_answers": sum(r.same for r in rows),
    }


def request_line(r: Replayed) -> str:
    s = r.stats
    parts = [f"{s.output_tokens or 0} tok in {s.wall_s:.1f} s"]
    if s.generation_tokens_per_second:
        parts.append(f"{s.generation_tokens_per_second:.1f} tok/s")
    if s.acceptance is not None:
        parts.append(f"draft {s.acceptance:.0%}")
    parts.append("same answer" if r.same else "another answer")
    return f"{r.request.session_id} turn {r.request.turn} ({r.request.kind}): {', '.join(parts)}"
