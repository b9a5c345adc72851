"""`agent` with no command: open the TUI, then stop the server it started (unless --keep-server)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agent.errors import ConfigError
from agent.settings.config import Settings


def cmd_tui(args: Any, settings: Settings) -> int:
    from agent.frontends.tui.app import AgentApp
    from agent.frontends.tui.session import InteractiveSession, SessionOptions, newest_session

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise ConfigError(
            "`agent` with no command opens an interactive terminal session, and this is not a terminal",
            fix="For scripts and CI: agent run TASK.md. `agent --help` lists every command.",
        )
    workspace = Path.cwd()
    resume = args.tui_resume
    if args.tui_continue:
        resume = newest_session(workspace)
        if resume is None:
            raise ConfigError(
                "--continue: no recorded session in this folder yet", fix="Start one with `agent`."
            )
    options = SessionOptions(
        profile=args.tui_profile, base_url=args.tui_base_url, approval=args.tui_approval,
        keep_server=args.keep_server,
    )  # fmt: skip
    session = InteractiveSession(settings, workspace, options, emit_ui=lambda _e: None, approve=None)
    app = AgentApp(session, resume=resume)
    try:
        app.run()
    finally:
        if session.connection is not None and session.connection.started_here and not args.keep_server:
            print(f"stopping the llama-server this session started ({session.profile.name})", file=sys.stderr)
        session.disconnect()
    if session.session_id:
        print(
            f"session {session.session_id} · agent stats {session.session_id} · agent --resume {session.session_id}",
            file=sys.stderr,
        )
    return app.return_code or 0
