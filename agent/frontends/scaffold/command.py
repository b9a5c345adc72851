"""`agent new`'s command: the plan (everything refused before a file is written), the skeleton and its
commit, then the agent part, headless as `agent run` runs it or in the TUI, and the commit of its work."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import AgentError, ConfigError, ExitCode
from agent.events import CheckFinished, Event
from agent.frontends.console import show_error
from agent.frontends.scaffold.git import commit_agent_work, commit_skeleton, commit_subject, require_git
from agent.frontends.scaffold.render import (
    PROJECT_CONFIG_PATH,
    Skeleton,
    declare_check,
    derive_package_name,
    package_name_note,
    render,
)
from agent.frontends.scaffold.report import Output, Report, RunObserver
from agent.frontends.scaffold.skeleton import check_folder, folder_entries, write_skeleton
from agent.frontends.scaffold.task import guarded_check, task_body, write_task_file
from agent.frontends.scaffold.templates import DEFAULT_TEMPLATE, Template, list_templates, load_template
from agent.session.parts import run_check
from agent.session.taskfile import check_command_exists
from agent.settings.config import Settings
from agent.settings.trust import is_trusted, trust
from agent.store.redact import redact


@dataclass
class Plan:
    folder: Path
    template: Template
    values: dict[str, Any]
    skeleton: Skeleton
    notes: list[str]


def plan_project(args: argparse.Namespace, settings: Settings) -> Plan:
    """Everything that can be refused, refused before anything is written."""
    if not args.dir:
        raise ConfigError(
            "give the new project's folder", fix='agent new DIR "what to build"  |  agent new --list'
        )
    if not args.no_agent and not (args.description or "").strip():
        raise ConfigError(
            "say what to build",
            fix=f'agent new {args.dir} "a command that ..."  (or --no-agent for the skeleton alone)',
        )
    if args.tui and (args.json or args.no_agent):
        raise ConfigError("--tui opens the interactive session: it does not go with --json or --no-agent")
    folder = Path(args.dir).expanduser().absolute()
    template = load_template(args.template or DEFAULT_TEMPLATE)
    project_name = folder.resolve().name if folder.exists() else folder.name
    package_name = derive_package_name(project_name)
    description = (args.description or "").strip() or f"{project_name}, a new project."
    values = {
        "project_name": project_name,
        "package_name": package_name,
        "description": description,
        "year": datetime.date.today().year,
    }
    skeleton = render(template, values)
    if args.check:
        skeleton.check = args.check
    declare_check(skeleton)
    notes = []
    if "package_name" in skeleton.placeholders and (note := package_name_note(project_name, package_name)):
        notes.append(note)
    require_git()
    check_folder(folder, args.force)
    check_command_exists(skeleton.check, Path.cwd())
    if not args.no_agent:
        from agent.session.connect import resolve_profile  # (lazy: the server layer, only with an agent part)

        resolve_profile(settings, args.profile, args.base_url, folder)
    return Plan(folder, template, values, skeleton, notes)


def cmd_new(args: argparse.Namespace, settings: Settings) -> int:
    if args.list:
        print(list_templates())
        return 0
    try:
        return _new(args, settings)
    except AgentError as exc:
        if args.json:
            print(
                json.dumps({"type": "error", "error": "config", "message": redact(str(exc)), "fatal": True}),
                flush=True,
            )
        raise


def _new(args: argparse.Namespace, settings: Settings) -> int:
    started = time.monotonic()
    plan = plan_project(args, settings)
    out = Output(args.json)
    for note in plan.notes:
        out.say(note)
    folder, skeleton = plan.folder, plan.skeleton

    fresh = not folder_entries(folder)  # nothing of anyone else's in it: the folder is ours to trust
    written = write_skeleton(skeleton, folder)
    for path in written.kept:
        out.say(f"kept {path}: it was already there, so the template's {path} was not written")
    subject = f"New project {plan.values['project_name']} from the {plan.template.name} template"
    body = f"Made by `agent new`. What it is for:\n\n{plan.values['description']}"
    sha, notes = commit_skeleton(folder, written.files, subject, body)
    for note in notes:
        out.say(note)
    out.say(
        f"created {folder}: {len(written.files)} files from the template {plan.template.name}, commit {sha[:10]}"
    )
    report = Report(folder, plan.template.name, written, sha)
    out.say(trust_new_project(folder, fresh, PROJECT_CONFIG_PATH in written.files))

    if args.no_agent:
        result = asyncio.run(run_check(skeleton.check, folder))
        out.event(
            CheckFinished(1, result.command, result.passed, result.exit_code, result.output, result.seconds)
        )
        report.check = result.to_dict()
        report.exit_code = ExitCode.SUCCESS if result.passed else ExitCode.FAILED
        if not result.passed and not args.json:
            print(result.output.strip()[-3000:], file=sys.stderr)
        out.summary(report.lines())
        return report.exit_code

    if plan.template.name == "empty" and not args.check:
        out.say(
            f"the empty template's check only asks for a README: `{skeleton.check}`; --check CMD decides better"
        )
    body_text = task_body(plan.template, skeleton, plan.values)
    if args.tui:
        return _in_tui(args, settings, plan, body_text, report, out, started)
    approval = args.approval or "full-auto"  # a new folder, made for this: nothing of the user's to guard
    report.check_shown, report.tests = skeleton.check, plan.template.spec.tests if not args.check else ""
    check = guarded_check(skeleton.check, sha, report.tests)
    report.task_file = write_task_file(folder, body_text, check, approval, args)
    _run_headless(args, settings, report, out)
    if report.exit_code == 0:
        report.agent_commit = commit_agent_work(folder, sha, commit_subject(plan.values["description"]))
        if report.agent_commit:
            out.say(report.agent_commit)
    report.seconds = time.monotonic() - started
    out.summary(report.lines())
    return report.exit_code


def trust_new_project(folder: Path, fresh: bool, declared: bool) -> str:
    """A folder `agent new` made from nothing holds only what it wrote: trusted, so that the check its
    .agent/config.toml declares runs in the sessions that follow (`agent`, editors). One that held
    files before (--force) is left for the user to judge."""
    where = PROJECT_CONFIG_PATH if declared else "its project files"
    if is_trusted(folder):
        return f"{where}: {folder} is trusted already, so they apply"
    if fresh:
        trust(folder)
        return f"trusted {folder} (it holds only what was made here), so {where} applies"
    return (
        f"{folder} held files before, so it is not trusted: {where} (the check) applies once you "
        f"run `agent trust {folder}`"
    )


def _run_headless(args: argparse.Namespace, settings: Settings, report: Report, out: Output) -> None:
    """The agent part, as `agent run TASK --workdir DIR` runs it (agent/session/task_run.py): the same session,
    check loop, events and exit codes, its events shown as `agent run` shows them."""
    # (lazy, like the TUI below: the session core and the model client, only when the agent works)
    from agent.frontends.headless import explain, print_json_error
    from agent.session.run import run_task_blocking
    from agent.session.task_run import TaskRequest

    request = TaskRequest(
        task=report.task_file, workdir=report.folder, profile=args.profile, base_url=args.base_url,
        max_turns=args.max_turns, attempts=getattr(args, "attempts", None),
        fresh_starts=getattr(args, "fresh_starts", None),
        auto_commit=False,  # on success `agent new` makes the second commit itself, with what was built
    )  # fmt: skip
    seen = RunObserver()

    def emit(event: Event) -> None:
        out.event(event)
        seen(event)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    result = None
    try:
        result = run_task_blocking(request, settings, emit, None if args.json else say)
    except AgentError as exc:  # the server did not start: the skeleton stays, the summary says so
        if args.json:
            print_json_error(exc)
        else:
            show_error(exc)
        report.exit_code, report.error = exc.exit_code, exc.what
    else:
        if result is None:
            print("terminated", file=sys.stderr)
            report.exit_code = ExitCode.TERMINATED
        else:
            report.exit_code = result.exit_code
            if not args.json and result.outcome and result.outcome.final:
                print(redact(result.outcome.final))
            if not args.json:
                explain(result)
    report.session_id = seen.session_id
    if result is not None and "attempts" in result.summary:  # several sessions: the run's result says it
        report.session_id, report.agent = result.session_id, result.status
        report.check, report.run_summary = result.summary.get("check"), result.summary
        return
    if seen.finished is not None:
        report.agent = seen.finished.outcome
        report.check = seen.finished.summary.get("check")
        report.run_summary = seen.finished.summary
        report.error = report.error or seen.finished.summary.get("error", "")
    else:
        report.agent = "error"


def _in_tui(
    args: argparse.Namespace,
    settings: Settings,
    plan: Plan,
    body: str,
    report: Report,
    out: Output,
    started: float,
) -> int:
    """The agent part in the TUI: the task waits in the prompt (Enter sends it); once the session is
    left, the check runs, and when it passes the work is committed."""
    from agent.frontends.tui.session import (  # (lazy: Textual, only with --tui)
        InteractiveSession,
        SessionOptions,
    )

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise ConfigError("--tui needs a terminal", fix="Leave out --tui to build the project headless.")
    options = SessionOptions(
        profile=args.profile, base_url=args.base_url, approval=args.approval, max_turns=args.max_turns
    )
    session = InteractiveSession(settings, plan.folder, options, emit_ui=lambda _e: None, approve=None)
    app = new_project_app(session, body)
    try:
        app.run()
    finally:
        session.disconnect()
    report.check_shown, report.tests = plan.skeleton.check, plan.template.spec.tests if not args.check else ""
    check = guarded_check(plan.skeleton.check, report.skeleton_sha, report.tests)
    return after_interactive(session, report, check, plan.values["description"], out, started)


def after_interactive(
    session, report: Report, check: str, description: str, out: Output, started: float
) -> int:
    """Once the TUI is left: the check, the commit when it passes, the summary. Exit 0: it passed."""
    report.session_id = session.session_id
    report.agent = "completed" if session.outcomes else "not started"
    if session.recorder is not None:
        report.run_summary = session.recorder.summary()
    result = asyncio.run(run_check(check, report.folder))
    out.event(
        CheckFinished(1, result.command, result.passed, result.exit_code, result.output, result.seconds)
    )
    report.check = result.to_dict()
    report.exit_code = ExitCode.SUCCESS if result.passed else ExitCode.FAILED
    if result.passed:
        report.agent_commit = commit_agent_work(
            report.folder, report.skeleton_sha, commit_subject(description)
        )
        if report.agent_commit:
            out.say(report.agent_commit)
    report.seconds = time.monotonic() - started
    out.summary(report.lines())
    return report.exit_code


def new_project_app(session, task: str):
    """The TUI with the scaffolding task already in its prompt."""
    import inspect

    from agent.frontends.tui.app import AgentApp  # (lazy: Textual, only with --tui)

    class NewProjectApp(AgentApp):
        # Textual looks for a relative CSS_PATH next to the subclass's module: name AgentApp's own file.
        CSS_PATH = str(Path(inspect.getfile(AgentApp)).parent / str(AgentApp.CSS_PATH))

        def on_mount(self) -> None:
            # Textual calls every class's on_mount along the MRO: AgentApp's own runs too.
            self.prompt.load_text(task)

    return NewProjectApp(session)
