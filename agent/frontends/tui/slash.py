"""The TUI's own slash commands, on the running app, and how a command's reply is shown. The table of
commands, the dispatch and what the commands every front end runs alike do are the session layer's
(agent/session/slash_commands.py, through agent/session/host.py); /help's text is help.py's."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

from rich.syntax import Syntax
from textual.widgets import Static

from agent.errors import AgentError
from agent.frontends.tui.help import help_text
from agent.frontends.tui.session import InteractiveSession
from agent.frontends.tui.widgets.confirm import Confirm
from agent.frontends.tui.widgets.conversation import Conversation
from agent.server.profiles import get_profile
from agent.session import slash_commands
from agent.session.slash_commands import OwnRun, Reply
from agent.settings import trust
from agent.settings.config import load_settings, state_dir
from agent.store.transcripts import load_session
from tools.approval import MODES


class SlashHost(Protocol):
    """What the slash commands use of the app (AgentApp is one); they know nothing else of it."""

    session: InteractiveSession

    @property
    def busy(self) -> bool: ...

    @property
    def conversation(self) -> Conversation: ...

    def push_screen(self, screen: Any, callback: Callable[[Any], None]) -> Any: ...

    def run_worker(self, work: Awaitable[None], *, group: str, exclusive: bool) -> Any: ...

    async def show_recorded(self, events: list[dict]) -> None: ...

    def refresh_figures(self) -> None: ...

    def run_agent_job(self, job: Callable[[], Awaitable[Any]]) -> Any: ...

    async def restart_server(self, profile: str | None = None) -> None: ...

    async def quit_app(self) -> None: ...


async def run(app: SlashHost, line: str) -> None:
    """A typed command, through the one table and dispatch (the session host's); the TUI's own
    commands, and its own way of running /profile, /clear and /compact, handed in."""
    session = app.session
    reply = await session.host.run_command(
        line, session.open_session, own=own_commands(app), busy=app.busy, workbench=session.workbench
    )
    if reply is not None:
        await show(app, reply)
        app.refresh_figures()  # (an undo takes a checkpoint back; the status line counts them)


async def show(app: SlashHost, reply: Reply) -> None:
    if reply.form == "diff":
        syntax = Syntax(reply.text, "diff", theme="ansi_dark", background_color="default")
        await app.conversation.add(Static(syntax, classes="diff"))
    elif reply.form == "figures" and "\n" in reply.text:
        await app.conversation.notice(reply.text + "  (Ctrl+P: per turn)")
    else:
        await app.conversation.notice(reply.text, reply.severity or "information")


def own_commands(app: SlashHost) -> dict[str, OwnRun]:
    return {name: functools.partial(run_own, app) for name, run_own in OWN.items()}


async def _help(app: SlashHost, _arg: str) -> None:
    await app.conversation.add(Static(help_text(), classes="notice help"))


async def _profile(app: SlashHost, name: str) -> Reply | None:
    """The TUI asks first, then stops this server before the other starts (one model in memory at a
    time), with the start shown as at launch."""
    if not name:
        current = app.session.profile.name if app.session.profile else None
        return Reply(slash_commands.profiles_line(current, app.session.workspace))
    profile = get_profile(name, app.session.workspace)  # an unknown name raises, with the list

    def confirmed(yes: bool | None) -> None:
        if yes:
            app.run_worker(app.restart_server(profile.name), group="server", exclusive=True)

    app.push_screen(
        Confirm(
            f"Switch to profile '{profile.name}'? The current server is stopped (if this session started it) and '{profile.name}' starts; the conversation carries over."
        ),
        confirmed,
    )
    return None


async def _restart(app: SlashHost, _arg: str) -> None:
    if app.session.profile and app.session.profile.kind == "attach":
        raise AgentError(
            "this session attached to a server it did not start",
            fix="Start that server again yourself, then send your prompt again.",
        )
    await app.restart_server()


async def _approval(app: SlashHost, mode: str) -> Reply:
    permissions = app.session.agent.permissions
    if not mode:
        return Reply(f"approval: {permissions.mode}. One of: {', '.join(MODES)}.")
    if mode not in MODES:
        raise AgentError(f"unknown approval mode '{mode}'", fix=f"One of: {', '.join(MODES)}.")
    permissions.mode = mode
    app.refresh_figures()  # the status line shows the mode
    return Reply(f"approval mode: {mode}")


async def _clear(app: SlashHost, _arg: str) -> Reply:
    """A new recorded session on the same server (editors keep theirs: the table's /clear)."""
    await app.session.restart_session()
    await app.show_recorded([])
    app.refresh_figures()
    return Reply(f"new session {app.session.session_id}")


async def _compact(app: SlashHost, _arg: str) -> Reply | None:
    """In the worker Esc cancels, as a prompt runs."""
    agent = app.session.agent
    if why := slash_commands.can_compact(agent):
        return Reply(why)

    async def job() -> None:
        done, said = await slash_commands.compact(agent)
        if not done:  # (a compaction shows itself: its event)
            await app.conversation.notice(said)

    app.run_agent_job(job)
    return None


async def _sessions(app: SlashHost, _arg: str) -> None:
    records = await asyncio.to_thread(app.session.recent_sessions)
    if not records:
        await app.conversation.notice("no recorded sessions in this folder yet")
        return
    lines = ["recent sessions here (/resume ID continues one):"]
    for record in records:
        when = datetime.fromtimestamp(record.started.get("time", 0)).strftime("%Y-%m-%d %H:%M")
        first = next((e["content"] for e in record.events if e["type"] == "user.message"), "")
        prompt = (record.started.get("task") or first).strip().splitlines()
        lines.append(
            f"  {record.session_id}  {when}  {record.turns:>3} turns  {(prompt[-1] if prompt else '')[:60]}"
        )
    await app.conversation.notice("\n".join(lines))


async def _resume(app: SlashHost, session_id: str) -> None:
    if not session_id:
        await _sessions(app, "")
        return
    record = load_session(state_dir(), session_id)  # an unknown id raises, naming recent ones
    await app.session.restart_session(resume=record.session_id)
    await app.show_recorded(record.events)
    await app.conversation.notice(f"resumed session {record.session_id}")
    app.refresh_figures()


async def _trust(app: SlashHost, _arg: str) -> None:
    session = app.session
    if by := trust.trusted_by(session.workspace):
        await app.conversation.notice(f"this folder is trusted already (through {by})")
        return
    folder = trust.trust(session.workspace)
    before, session.settings = session.settings, load_settings(session.workspace)  # for the next connection
    files = ", ".join(str(f.relative_to(session.workspace)) for f in trust.project_files(session.workspace))
    attached = session.profile is not None and session.profile.kind == "attach"
    lines = [
        f"trusted {folder} (`agent trust --revoke` undoes it). "
        + (f"Its {files} apply" if files else "Project files added here apply")
        + " the next time `agent` starts here"
        + ("." if attached else "; /restart applies them now, keeping the conversation.")
    ]
    if session.settings.check:  # (a prompt reads its settings afresh: no restart needed for this one)
        lines.append(
            f"Its check `{session.settings.check}` runs on each prompt's work from the next prompt on."
        )
    mode, wanted = session.agent.permissions.mode if session.agent else None, session.settings.approval
    if not attached and mode and wanted not in (mode, before.approval) and not session.options.approval:
        lines.append(f"The approval mode stays {mode} over a restart: /approval {wanted} sets the project's.")
    await app.conversation.notice("\n".join(lines))


async def _quit(app: SlashHost, _arg: str) -> None:
    await app.quit_app()


# The TUI's own commands, and its own way of running some of the table's (the rest run as the table says).
OWN = {
    "help": _help, "profile": _profile, "restart": _restart, "approval": _approval, "clear": _clear,
    "compact": _compact, "sessions": _sessions, "resume": _resume, "trust": _trust, "quit": _quit,
}  # fmt: skip
