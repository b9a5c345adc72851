"""What the client is shown of a session: each tool call's kind and title (and, for an edit, its diff),
the session's events as ACP updates, a recorded session replayed as updates, and the usage figures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import acp
from acp.schema import ToolCallLocation, UsageUpdate

from agent.events import (
    AssistantMessage,
    CheckFinished,
    CheckStarted,
    Compacted,
    DraftOff,
    ErrorEvent,
    Event,
    Notice,
    PermissionDecided,
    ReasoningDelta,
    TextDelta,
    ToolCallStarted,
    ToolFinished,
    TurnCompleted,
    UserMessage,
)
from agent.frontends.acp.session import AcpSession, CallView
from agent.store.telemetry import TurnStats

FIGURES_META = "spec-agent/figures"  # the `_meta` key of a usage update


def tool_kind(name: str, effect: str) -> str:
    if name in ("grep", "list_files"):
        return "search"
    if name.startswith("mcp__"):
        return "fetch"  # a call out to another server
    return {"read": "read", "edit": "edit", "exec": "execute"}.get(effect, "other")


def tool_title(name: str, arguments: Any, summary: str) -> str:
    args = arguments if isinstance(arguments, dict) else {}
    path = args.get("path")
    titles = {
        "read_file": f"Read {path}",
        "write_file": f"Write {path}",
        "edit_file": f"Edit {path}",
        "multi_edit": f"Edit {path}",
        "list_files": f"List files in {path or '.'}",
        "grep": f"Search for `{args.get('pattern', summary)}`" + (f" in {path}" if path else ""),
        "bash": f"Run `{summary}`",
        "git_status": "git status",
        "git_diff": "git diff",
        "git_log": "git log",
    }
    title = titles.get(name) or (f"{name} {summary}".strip())
    return title if len(title) <= 200 else title[:199] + "…"


def _read_text(path: Path | None) -> str | None:
    try:
        return path.read_text(encoding="utf-8") if path and path.is_file() else None
    except (OSError, UnicodeDecodeError):
        return None


def updates(session: AcpSession, event: Event, figures_line: bool) -> Iterator[Any]:
    """The ACP updates one of the session's events (already recorded) makes; most make none."""
    if isinstance(event, TextDelta):
        yield acp.update_agent_message_text(event.text)
    elif isinstance(event, ReasoningDelta):
        yield acp.update_agent_thought_text(event.text)
    elif isinstance(event, ToolCallStarted):
        args = event.arguments if isinstance(event.arguments, dict) else {}
        effect = _effect(session, event.name)
        path = session.workspace / args["path"] if isinstance(args.get("path"), str) else None
        view = CallView(
            tool_kind(event.name, effect), tool_title(event.name, event.arguments, event.summary),
            [ToolCallLocation(path=str(path))] if path else [], path,
            _read_text(path) if effect == "edit" else None,
        )  # fmt: skip
        session.calls[event.call_id] = view
        yield acp.start_tool_call(
            event.call_id, view.title, kind=view.kind, status="pending", locations=view.locations,
            raw_input=event.arguments,
        )  # fmt: skip
    elif isinstance(event, PermissionDecided):
        if event.decision == "allow":
            yield acp.update_tool_call(event.call_id, status="in_progress")
        # (a refusal ends the call: its result, "Not run: ...", follows and marks it failed)
    elif isinstance(event, ToolFinished):
        view = session.calls.pop(event.call_id, None)
        content: list[Any] = []
        if view and view.kind == "edit" and event.ok and view.path is not None:
            new_text = _read_text(view.path)
            if new_text is not None:
                content.append(acp.tool_diff_content(str(view.path), new_text, view.old_text))
        output = event.output if len(event.output) <= 8000 else event.output[:8000] + "\n…"
        if view is None or view.kind != "edit" or not event.ok:
            fence = "```" if view and view.kind == "execute" else ""
            text = f"{fence}\n{output}\n{fence}" if fence else output
            content.append(acp.tool_content(acp.text_block(text)))
        yield acp.update_tool_call(
            event.call_id, status="completed" if event.ok else "failed", content=content,
            raw_output={"ok": event.ok, "seconds": round(event.seconds, 2), **event.display},
        )  # fmt: skip
    elif isinstance(event, TurnCompleted):
        yield _usage(session, event.stats)
        if figures_line and (line := event.stats.summary()):
            # For clients that show text only: the TUI's dim line, in italics.
            yield acp.update_agent_message_text(f"\n\n*turn {event.turn} · {line}*\n\n")
    elif isinstance(event, CheckStarted | CheckFinished):
        yield from _check(session, event)
    elif isinstance(event, Compacted) and event.history:  # (an empty one is /clear, which says so itself)
        said = f"compacted: {event.tokens_before} → {event.tokens_after} tokens ({event.reason})"
        yield acp.update_agent_thought_text(f"\n{said}\n")
    elif isinstance(event, Notice | DraftOff):
        yield acp.update_agent_thought_text(f"\n{event.message}\n")
    elif isinstance(event, ErrorEvent) and event.error != "interrupted":
        yield acp.update_agent_thought_text(f"\n[{event.error}] {event.message}\n")
    elif isinstance(event, AssistantMessage | UserMessage):
        return


def check_title(command: str, round_number: int) -> str:
    lines = command.strip().splitlines() or [""]
    shown = lines[0][:100] + (" …" if len(lines) > 1 or len(lines[0]) > 100 else "")
    return f"Check `{shown}` (round {round_number})"


def _check(session: AcpSession, event: CheckStarted | CheckFinished) -> Iterator[Any]:
    """Each round of the project's check is a tool call of its own: running, then its verdict with the
    output, which the model gets back while rounds are left."""
    if isinstance(event, CheckStarted):
        call_id = session.check_call = f"check-{uuid4().hex[:12]}"
        session.check_rounds_left = event.rounds_left
        title = check_title(event.command, event.round)
        session.calls[call_id] = CallView("execute", title, [])
        yield acp.start_tool_call(
            call_id, title, kind="execute", status="in_progress",
            raw_input={"command": event.command, "round": event.round, "rounds_left": event.rounds_left},
        )  # fmt: skip
        return
    call_id, session.check_call = session.check_call or f"check-{uuid4().hex[:12]}", ""
    if session.calls.pop(call_id, None) is None:  # (no start seen: the round shows whole)
        yield acp.start_tool_call(call_id, check_title(event.command, event.round), kind="execute")
    yield acp.update_tool_call(
        call_id, status="completed" if event.passed else "failed",
        content=[acp.tool_content(acp.text_block(_check_text(event.to_json(), session.check_rounds_left)))],
        raw_output={"passed": event.passed, "exit_code": event.exit_code, "seconds": round(event.seconds, 2)},
    )  # fmt: skip


def _check_text(event: dict[str, Any], rounds_left: int | None) -> str:
    output = event["output"].strip() or "(no output)"
    output = output if len(output) <= 8000 else "…\n" + output[-8000:]
    if event["passed"]:
        verdict = f"Passed in {event['seconds']:.1f} s."
    else:
        code = event["exit_code"]
        verdict = "Timed out." if code is None else f"Failed (exit code {code})."
        if rounds_left is not None:
            verdict += " Its output goes back to the model." if rounds_left else " No rounds are left."
    return f"{verdict}\n```\n{output}\n```"


def _usage(session: AcpSession, stats: TurnStats) -> UsageUpdate:
    agent = session.live.agent
    size = agent.context.n_ctx if agent.context else 0
    used = (stats.prompt_tokens or 0) + (stats.completion_tokens or 0)
    if not used and agent.context:
        used = agent.context.estimate(agent.messages)
    figures = {
        "generation_tokens_per_second": stats.generation_tokens_per_second,
        "prefill_tokens_per_second": stats.prompt_per_second,
        "draft_acceptance": stats.acceptance,
        "cache_reuse": stats.cache_reuse,
        "cache_break": stats.cache_break,  # why the server re-processed more than the new messages
        "output_tokens": stats.output_tokens,
        "ttft_s": stats.ttft_s,
        "summary": stats.summary(),
    }
    return UsageUpdate(
        session_update="usage_update", used=used, size=max(size, used), field_meta={FIGURES_META: figures}
    )


def _effect(session: AcpSession, name: str) -> str:
    """read, edit or exec; a tool the registry does not know (a misspelt call) counts as exec."""
    return getattr(session.live.agent.tools.tools.get(name), "effect", "exec")


def replayed(session: AcpSession, event: dict[str, Any]) -> Iterator[Any]:
    """A recorded event as the client saw it live (load_session): prompts, answers, tool calls."""
    kind = event["type"]
    if kind == "user.message":
        yield acp.update_user_message_text(event.get("typed") or event["content"])
    elif kind == "assistant.message" and event["content"].strip():
        yield acp.update_agent_message_text(event["content"])
    elif kind == "tool.call":
        name, arguments = event["name"], event.get("arguments")
        title = tool_title(name, arguments, event.get("summary", ""))
        yield acp.start_tool_call(
            event["call_id"], title, kind=tool_kind(name, _effect(session, name)), status="pending",
            raw_input=arguments,
        )  # fmt: skip
    elif kind == "tool.result":
        output = acp.tool_content(acp.text_block(event.get("output", "")[:8000]))
        status = "completed" if event.get("ok") else "failed"
        yield acp.update_tool_call(event["call_id"], status=status, content=[output])
    elif kind == "check.result":
        yield acp.start_tool_call(
            f"check-{uuid4().hex[:12]}", check_title(event["command"], event["round"]), kind="execute",
            status="completed" if event["passed"] else "failed",
            content=[acp.tool_content(acp.text_block(_check_text(event, None)))],
        )  # fmt: skip
