"""An approval the loop asks for, asked of the client: `session/request_permission` with the tool call as
the client was shown it, and the client's answer in the loop's terms (and in the transcript)."""

from __future__ import annotations

from typing import Any

import acp
from acp.schema import PermissionOption, ToolCallUpdate

from agent.events import ApprovalAnswer, ApprovalRequested, Notice
from agent.frontends.acp.session import AcpSession


async def ask_client(conn: Any, session: AcpSession, request: ApprovalRequested) -> ApprovalAnswer:
    """The client's answer; the caller has flushed the session's updates, so that the tool call's start
    reaches the client before the question."""
    view = session.calls.get(request.call_id)
    rule = request.suggested_rule
    always = request.name if rule in ("", "*") else f"{request.name} `{rule}`"
    options = [
        PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
        PermissionOption(
            option_id="allow_always",
            name=f"Always allow {always} (this session)",
            kind="allow_always",
        ),
        PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
    ]
    why = f"Needs approval: {request.reason}" + (f" (rule: `{rule}`)" if rule else "")
    tool_call = ToolCallUpdate(
        tool_call_id=request.call_id, status="pending", title=view.title if view else request.summary,
        kind=view.kind if view else None, locations=view.locations if view else None,
        content=[acp.tool_content(acp.text_block(why))],  # what clients show beside the options
    )  # fmt: skip
    response = await conn.request_permission(
        session_id=session.session_id,
        tool_call=tool_call,
        options=options,
        reason=request.reason,
        rule=rule,
    )
    outcome = response.outcome
    chosen = getattr(outcome, "option_id", None) if outcome.outcome == "selected" else "cancelled"
    # The answer, in the client's words, goes into the transcript beside the loop's decision (not back
    # to the client, who gave it).
    session.live.recorder(Notice(f"the client answered {chosen} to {request.name}: {request.summary[:200]}"))
    if chosen == "allow_always":
        return ApprovalAnswer("always")
    return ApprovalAnswer("yes" if chosen == "allow_once" else "no")
