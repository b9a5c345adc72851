"""The slash commands as editors get them: advertised with their descriptions and input hints, and a
command's reply (agent/session/slash_commands.py's `Reply`) as the agent's answer in Markdown."""

from __future__ import annotations

from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

from agent.session.slash_commands import EDITOR_COMMANDS, Reply


def editor_commands() -> list[AvailableCommand]:
    """The slash commands editors get, as ACP names them: each with its description, and an input hint
    where it takes an argument."""
    hint = lambda c: AvailableCommandInput(UnstructuredCommandInput(hint=c.hint or c.argument))  # noqa: E731
    return [
        AvailableCommand(name=c.name, description=c.description, input=hint(c) if c.argument else None)
        for c in EDITOR_COMMANDS
    ]


def shown(reply: Reply) -> str:
    """A command's reply as the editor shows it: lines and figures fenced, kept as they are."""
    if reply.form == "diff":
        return fenced(reply.text, "diff")
    return fenced(reply.text) if reply.form in ("listing", "figures") else reply.text


def fenced(text: str, language: str = "") -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"
