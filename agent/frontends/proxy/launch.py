"""`agent launch AGENT`: another agent on the managed server, through the recording proxy.

It starts the profile's server and the proxy, points the agent at the proxy through that agent's own
documented settings (environment variables, or a configuration file of ours named by one: the user's own
files are never touched), runs it in the foreground, and when it exits prints the session's figures and
stops what it started. `agent launch -- COMMAND ...` runs any command the same way, with the OpenAI and
Anthropic variables that most clients read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import tempfile
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.errors import ConfigError
from agent.frontends import console
from agent.frontends.proxy.command import Proxied, free_port, print_figures, server_for, serving
from agent.session.proxy_sessions import proxied_summary
from agent.settings.config import Settings

KEY = "local"  # the server takes any key (or the profile's, which the proxy adds); clients need one


@dataclass(frozen=True)
class Client:
    """How one agent is pointed at the proxy."""

    command: str
    api: str  # which API it speaks through the proxy
    install: str  # the command that installs it
    setup: Callable[
        [Proxied, Path], tuple[dict[str, str], list[str]]
    ]  # (environment, arguments before the user's)


def common_env(p: Proxied) -> dict[str, str]:
    """The variables most OpenAI and Anthropic clients read."""
    return {
        "OPENAI_BASE_URL": p.openai_base_url,
        "OPENAI_API_BASE": p.openai_base_url,
        "OPENAI_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": p.url,
        "ANTHROPIC_API_KEY": KEY,
    }


def aider(p: Proxied, scratch: Path) -> tuple[dict[str, str], list[str]]:
    # litellm's "openai/" prefix sends any model name to OPENAI_API_BASE; its price list is read from the
    # package, not fetched (the machine may be offline). The server's context and the profile's answer
    # length go in as Aider's own model files, in our scratch folder.
    model, limit = f"openai/{p.model}", limits(p).get("limit", {})
    metadata = {model: {"max_input_tokens": limit.get("context"), "max_output_tokens": limit.get("output"),
                        "litellm_provider": "openai", "mode": "chat",
                        "input_cost_per_token": 0.0, "output_cost_per_token": 0.0}}  # fmt: skip
    settings = (
        [{"name": model, "extra_params": {"max_tokens": limit["output"]}}] if limit.get("output") else []
    )
    (scratch / "aider-models.json").write_text(json.dumps(metadata))
    (scratch / "aider-settings.yml").write_text(json.dumps(settings))  # JSON is YAML
    env = {**common_env(p), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return env, ["--model", model, "--model-metadata-file", str(scratch / "aider-models.json"),
                 "--model-settings-file", str(scratch / "aider-settings.yml"),
                 "--no-show-model-warnings", "--no-check-update", "--analytics-disable"]  # fmt: skip


def limits(p: Proxied) -> dict:
    """The server's context and the profile's answer length, for agents that size their requests by them."""
    profile = p.connection.profile
    context = p.context or profile.ctx_size
    limit = {"context": context, "output": profile.sampling.max_tokens}
    return {"limit": {k: v for k, v in limit.items() if v}} if context else {}


def opencode(p: Proxied, scratch: Path) -> tuple[dict[str, str], list[str]]:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "spec-agent": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "spec-agent proxy",
                "options": {"baseURL": p.openai_base_url, "apiKey": KEY},
                "models": {p.model: {"name": p.model, **limits(p)}},
            }
        },
        "model": f"spec-agent/{p.model}",
        "autoupdate": False,
        "share": "disabled",
    }
    path = scratch / "opencode.json"
    path.write_text(json.dumps(config, indent=2))
    return {**common_env(p), "OPENCODE_CONFIG": str(path)}, []


def claude(p: Proxied, scratch: Path) -> tuple[dict[str, str], list[str]]:
    env = {
        **common_env(p),
        "ANTHROPIC_AUTH_TOKEN": KEY,
        "ANTHROPIC_MODEL": p.model,
        "ANTHROPIC_SMALL_FAST_MODEL": p.model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    output = limits(p).get("limit", {}).get("output")
    if output:  # it asks for 32,000 tokens an answer otherwise
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(output)
    return env, []


def codex(p: Proxied, scratch: Path) -> tuple[dict[str, str], list[str]]:
    # Codex names no answer length (a server we start caps it: profiles.py, --n-predict); it takes the
    # context window, so that it compacts before the server refuses a prompt.
    provider = f'{{name="spec-agent", base_url="{p.openai_base_url}", env_key="OPENAI_API_KEY", wire_api="responses"}}'
    context = limits(p).get("limit", {}).get("context")
    window = ["-c", f"model_context_window={context}"] if context else []
    return common_env(p), ["-c", f"model_providers.spec-agent={provider}", "-c", 'model_provider="spec-agent"',
                           *window, "-m", p.model]  # fmt: skip


def goose(p: Proxied, scratch: Path) -> tuple[dict[str, str], list[str]]:
    env = {**common_env(p), "GOOSE_PROVIDER": "openai", "GOOSE_MODEL": p.model, "OPENAI_HOST": p.url,
           "OPENAI_BASE_PATH": "v1/chat/completions"}  # fmt: skip
    return env, []


def any_command(p: Proxied, scratch: Path) -> tuple[dict[str, str], list[str]]:
    return {**common_env(p), "AGENT_PROXY_MODEL": p.model}, []


CLIENTS: dict[str, Client] = {
    "aider": Client("aider", "OpenAI chat completions", "pipx install aider-chat", aider),
    "opencode": Client("opencode", "OpenAI chat completions", "npm install -g opencode-ai", opencode),
    "claude": Client("claude", "Anthropic messages", "npm install -g @anthropic-ai/claude-code", claude),
    "codex": Client("codex", "OpenAI responses", "npm install -g @openai/codex", codex),
    "goose": Client("goose", "OpenAI chat completions",
                    "curl -fsSL https://github.com/block/goose/releases/download/stable/download_cli.sh | bash", goose),
}  # fmt: skip


def plan(args: Namespace) -> tuple[Client, list[str]]:
    """The client and its command line. A known agent: our options (-p, --port...) up to `--` are read
    into `args`, and the rest, with what follows `--`, is the agent's. Any other name is a command, given
    after `--`, whose arguments are all its own."""
    from agent.cli import proxied_server_options

    name, rest = args.agent, list(args.rest)
    if name is None:
        raise ConfigError(
            "agent launch: no agent named",
            fix=f"Name one of {', '.join(CLIENTS)}, or give a command after --.",
        )
    client = CLIENTS.get(name)
    if client is None:
        if shutil.which(name) is None:
            raise ConfigError(
                f"agent launch: '{name}' is neither a known agent nor a command on PATH",
                fix=f"Known agents: {', '.join(CLIENTS)}; any other program: agent launch -- COMMAND [ARGS].",
            )
        return Client(name, "OpenAI and Anthropic variables", "", any_command), [name, *rest]
    cut = rest.index("--") if "--" in rest else len(rest)
    ours = argparse.ArgumentParser(prog=f"agent launch {name}", add_help=False)
    proxied_server_options(ours, None)
    _, theirs = ours.parse_known_args(rest[:cut], namespace=args)
    return client, [client.command, *theirs, *rest[cut + 1 :]]


def cmd_launch(args: Namespace, settings: Settings) -> int:
    client, argv = plan(args)
    if shutil.which(argv[0]) is None:
        hint = f"Install it: {client.install}" if client.install else "Check the command's name and PATH."
        raise ConfigError(f"agent launch: '{argv[0]}' is not installed here (not on PATH)", fix=hint)
    with (
        server_for(args, settings) as connection,
        tempfile.TemporaryDirectory(prefix="agent-launch-") as scratch,
    ):
        return asyncio.run(_launch(connection, client, argv, args.port or free_port(), Path(scratch)))


async def _launch(connection, client: Client, argv: list[str], port: int, scratch: Path) -> int:
    async with serving(connection, port, quiet=True, single=True) as proxied:
        env, ours = client.setup(proxied, scratch)
        command = [argv[0], *ours, *argv[1:]]
        console.note(f"{client.command} through {proxied.url} ({client.api}) on {connection.profile.name}")
        # The agent owns the terminal: Ctrl+C is its to handle (the terminal sends it to both of us). A
        # handler, unlike SIG_IGN, is not inherited through exec, so the agent still gets it.
        previous = signal.signal(signal.SIGINT, lambda *_: None)
        loop = asyncio.get_running_loop()
        try:
            process = await asyncio.create_subprocess_exec(*command, env={**os.environ, **env})
            # Asked to stop (a closed terminal, `kill`): the agent is asked first, and what we started
            # is stopped after it exits, as on any other exit.
            for sig in (signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(sig, process.terminate)
            code = await process.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
            for sig in (signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)
        summaries = proxied_summary(proxied.sessions.conversations)
    print_figures(summaries)
    return code if code >= 0 else 128 - code
