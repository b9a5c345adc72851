"""Why the prompt cache broke, from what two requests sent and what the server counted. The same
causes come from a real server in tests/core/test_prompt_cache_real.py."""

from __future__ import annotations

from agent.core.prompt_cache import COMPACTION, RESUMED, CacheWatch, ServerSide
from agent.store.telemetry import TurnStats

SYSTEM = {"role": "system", "content": "You are a coding agent. " * 50}
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def conversation(turns: int) -> list[dict]:
    messages = [SYSTEM]
    for n in range(turns):
        messages += [
            {"role": "user", "content": f"step {n}: " + "do the next thing " * 40},
            {"role": "assistant", "content": f"done {n} " * 30},
        ]
    return messages


def watched(first: list[dict], tokens: int = 1000) -> CacheWatch:
    watch = CacheWatch()
    assert watch.explain(first, TOOLS, cache_n=0, prompt_n=tokens) is None  # a fresh session starts cold
    return watch


def test_a_conversation_that_only_appends_and_is_served_from_the_cache_names_no_cause():
    watch = watched(conversation(2))
    assert watch.explain(conversation(3), TOOLS, cache_n=997, prompt_n=300) is None
    # A few tokens re-processed at the joint (a template re-rendering the last answer) are not a break.
    assert watch.explain(conversation(4), TOOLS, cache_n=1250, prompt_n=350) is None


def test_a_changed_system_prompt_is_named_with_the_tokens_it_cost():
    watch = watched(conversation(2))
    changed = [{"role": "system", "content": "You are a careful coding agent. " * 50}, *conversation(3)[1:]]
    why = watch.explain(changed, TOOLS, cache_n=0, prompt_n=1300)
    assert why == "1,000 tokens lost: the agent changed the system prompt"


def test_a_changed_tool_list_and_a_changed_or_removed_message_are_named():
    tools = [*TOOLS, {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    assert "the agent changed the tool list" in watched(conversation(2)).explain(
        conversation(3), tools, cache_n=5, prompt_n=1300
    )
    edited = conversation(3)
    edited[3] = {"role": "user", "content": "step 1: something else"}
    why = watched(conversation(2)).explain(edited, TOOLS, cache_n=600, prompt_n=700)
    assert "the agent changed message 4 (user)" in why
    assert "kept only" not in why  # the server kept what came before the change: no more to say
    why = watched(conversation(3)).explain(conversation(1), TOOLS, cache_n=20, prompt_n=500)
    assert "the agent removed messages 4-7" in why


def test_a_server_that_kept_less_than_the_unchanged_messages_is_named_too():
    edited = conversation(3)
    edited[3] = {"role": "user", "content": "step 1: something else"}
    why = watched(conversation(2)).explain(edited, TOOLS, cache_n=0, prompt_n=1300)
    assert "the agent changed message 4 (user)" in why
    assert "the server kept only 0 of the ~" in why and "sliding-window" in why


def test_the_agents_own_notes_name_a_compaction_and_a_resumed_session():
    watch = watched(conversation(4), tokens=3000)
    summarised = [SYSTEM, {"role": "user", "content": "<summary of the earlier conversation>..."}]
    assert watch.explain(summarised, TOOLS, 700, 200, note=COMPACTION).endswith(
        "a compaction summarised the history"
    )
    resumed = CacheWatch().explain(conversation(4), TOOLS, cache_n=0, prompt_n=2000, note=RESUMED)
    assert resumed == "2,000 tokens lost: a resumed session, not cached on this server"
    assert CacheWatch().explain(conversation(4), TOOLS, cache_n=1990, prompt_n=10, note=RESUMED) is None


def test_the_servers_side_another_client_its_log_and_its_own_reason_are_named():
    watch = watched(conversation(2))
    why = watch.explain(conversation(3), TOOLS, 0, 1300, server=ServerSide(foreign_tokens=1234))
    assert why == "1,000 tokens lost: another client used the server (1,234 tokens)"
    why = watch.explain(conversation(4), TOOLS, 0, 1600, server=ServerSide(full_reprocess_logged=True))
    assert "sliding-window or hybrid layers forced a full re-process (server log)" in why
    why = watch.explain(conversation(5), TOOLS, 0, 1900, server=ServerSide(reason="slot evicted"))
    assert why.endswith("the server: slot evicted")
    why = watch.explain(conversation(6), TOOLS, 0, 2200)
    assert why.endswith("the server's slot no longer held the prompt (reused or evicted)")


def test_a_server_without_timings_is_never_said_to_have_broken_its_cache():
    watch = watched(conversation(2))
    assert watch.explain(conversation(3), TOOLS, cache_n=None, prompt_n=None) is None
    assert watch.explain(conversation(4), TOOLS, cache_n=0, prompt_n=1600) is None  # nothing to compare


def test_the_figures_line_gives_the_cause_after_the_cache_figure():
    stats = TurnStats(
        cache_n=0, prompt_n=1300, cache_break="1,000 tokens lost: the agent changed the system prompt"
    )
    assert "cache 0% (1,000 tokens lost: the agent changed the system prompt)" in stats.summary()
    assert "(" not in TurnStats(cache_n=990, prompt_n=10).summary()
    assert TurnStats.from_dict(stats.to_dict()).cache_break == stats.cache_break
