"""The recorded sessions as ACP sees them (whichever front end recorded them): a page of `session/list`,
and the one `session/load` or `session/resume` asks for."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

from acp import RequestError
from acp.schema import ListSessionsResponse, SessionInfo

from agent.errors import AgentError
from agent.settings.config import state_dir
from agent.store.transcripts import SessionRecord, SessionSummary, load_session, recorded_sessions

LIST_PAGE = 50  # sessions per session/list answer


def sessions_page(folder: Path | None, cursor: str | None) -> ListSessionsResponse:
    """The recorded sessions, newest first, of `folder` when given; a page at a time, the cursor being
    the last id of the page before. (It reads the transcripts: run it in a thread.)"""
    found = recorded_sessions(state_dir(), folder)
    after = (s for s in found if not cursor or s.session_id < cursor)
    listed = list(itertools.islice(after, LIST_PAGE + 1))
    next_cursor = listed[LIST_PAGE - 1].session_id if len(listed) > LIST_PAGE else None
    return ListSessionsResponse(sessions=[_info(s) for s in listed[:LIST_PAGE]], next_cursor=next_cursor)


def _info(summary: SessionSummary) -> SessionInfo:
    updated = datetime.fromtimestamp(summary.updated, UTC).isoformat(timespec="seconds")
    return SessionInfo(
        session_id=summary.session_id, cwd=summary.workspace, title=summary.title or None, updated_at=updated
    )


def recorded(session_id: str) -> SessionRecord:
    """A recorded session to load or resume; the protocol's "not found" when there is none."""
    try:
        return load_session(state_dir(), session_id)
    except AgentError as exc:
        raise RequestError.resource_not_found(session_id) from exc
