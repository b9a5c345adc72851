"""Every command's `--help`, pinned: a refactor of agent/cli.py (shared argument helpers, modules moved)
must not change a byte of what users read. After an intended change: `pytest tests/test_cli.py
--snapshot-update`, then read the diff of tests/__snapshots__/test_cli.ambr."""

from __future__ import annotations

import argparse

import pytest

from agent.cli import HANDLERS, build_parser


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


PATHS = [path for path, _ in parsers(build_parser())]


@pytest.mark.parametrize("path", PATHS, ids=lambda path: " ".join(("agent", *path)))
def test_help_text(path, snapshot, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps to the terminal: pin its width
    parser = dict(parsers(build_parser()))[path]
    assert parser.format_help() == snapshot


def test_every_command_has_a_handler():
    leaves = {path for path in PATHS if path and not any(p[: len(path)] == path and p != path for p in PATHS)}
    assert leaves == set(HANDLERS)
