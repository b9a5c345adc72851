"""The layers of the code, and the test that keeps imports pointing down them, without circles.

Every module under agent/ and tools/ belongs to one layer; a module may import from its own layer and
those below it, never from one above, and a front end only from the session layer and the ground (it
reaches the core and the protocols through the session layer). Imports count wherever they are
written: at the top, inside a function (lazy, for `agent --help`'s speed), or under `if TYPE_CHECKING:`
(a circle for the type checker is still a circle for the reader). docs/architecture.md explains the
layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Low to high. Each entry is a module, or a package's modules with `.*` (the package's __init__ too).
LAYERS: dict[str, list[str]] = {
    "ground": [
        "tools.*",  # what the model can call
        "agent.server.*",  # llama-server: profiles, build, launch, preflight
        "agent",  # the package's __init__: its version
        "agent.events",  # the events every front end consumes
        "agent.errors",
        "agent.settings.*",  # settings, trust, where state lives
        "agent.store.*",  # transcripts, telemetry, locks, measurements, redaction
    ],
    "core": [
        "agent.core.*",  # the loop, the model client, the context window, checks, guards, the workbench,
        # and the interface a protocol implements (agent.core.protocol): the core names no protocol
    ],
    "protocols": [
        "agent.protocols.*",  # the action protocols (tool calls, edit blocks) and the registry of them
    ],
    "session": [
        "agent.session.*",  # connect, assembly (build_agent), open_session, a task run, the task-file format
    ],
    "front": [
        "agent.frontends.*",  # the TUI, headless, ACP, `agent new`, the measuring and plain commands
        "agent.cli",
        "agent.__main__",
    ],
}
PACKAGES = ("agent", "tools")
SKIPPED = ("agent/templates",)  # template files rendered into new projects, not the agent's code

# Circles known today; each goes when it is fixed. None are left.
KNOWN_CIRCLES: list[set[str]] = []


def module_files(root: Path, packages=PACKAGES, skipped=SKIPPED) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if any(rel.as_posix().startswith(s) for s in skipped):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports, anywhere in its file (a package import counts as its
    __init__; `from pkg import mod` as the module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            # the longest known module the dotted name starts with
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path, packages=PACKAGES, skipped=SKIPPED) -> dict[str, set[str]]:
    files = module_files(root, packages, skipped)
    known = set(files)
    graph = {name: imports_of(name, path, known) for name, path in files.items()}
    # `from agent.frontends.tui import slash` also names the package agent.frontends.tui; a package's __init__ importing
    # nothing, that edge says nothing (and would make every package a circle with its modules).
    for targets in graph.values():
        for target in list(targets):
            if target in files and files[target].name == "__init__.py" and not graph[target]:
                targets.discard(target)
    return graph


def layer_of(module: str, layers: dict[str, list[str]]) -> str | None:
    for layer, entries in layers.items():
        for entry in entries:
            package = entry.removesuffix(".*")
            if module == package or (entry.endswith(".*") and module.startswith(package + ".")):
                return layer
    return None


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(group)
    return found


def upward_imports(graph: dict[str, set[str]], layers: dict[str, list[str]]) -> list[str]:
    order = list(layers)
    found = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if here and there and order.index(there) > order.index(here):
                found.append(f"{module} ({here}) imports {target} ({there})")
    return found


# What a layer may import besides its own modules, where that is less than every layer below it.
SKIPS_NOT: dict[str, set[str]] = {"front": {"core", "protocols"}}  # through the session layer


def skipped_layers(
    graph: dict[str, set[str]], layers: dict[str, list[str]], barred: dict[str, set[str]] = SKIPS_NOT
) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if there in barred.get(here or "", set()):
                found.append(f"{module} ({here}) imports {target} ({there})")
    return found


def unplaced(graph: dict[str, set[str]], layers: dict[str, list[str]]) -> list[str]:
    return sorted(m for m in graph if layer_of(m, layers) is None)


# ------------------------------------------------------------------------------------------ the tests


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_every_module_has_a_layer(graph):
    assert unplaced(graph, LAYERS) == []


def test_no_module_imports_from_a_higher_layer(graph):
    assert upward_imports(graph, LAYERS) == []


def test_front_ends_reach_the_core_and_the_protocols_only_through_the_session_layer(graph):
    assert skipped_layers(graph, LAYERS) == []


def test_no_import_circles(graph):
    found = [group for group in circles(graph) if group not in KNOWN_CIRCLES]
    assert found == []


def test_the_checker_reports_a_planted_circle_and_an_upward_import(tmp_path):
    (tmp_path / "pkg" / "front").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "front" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "front" / "view.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "a.py").write_text("from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"
    )
    (tmp_path / "pkg" / "low.py").write_text("def show():\n    from pkg.front.view import X\n    return X\n")
    layers = {"low": ["pkg", "pkg.a", "pkg.b", "pkg.low"], "high": ["pkg.front.*"]}

    planted = import_graph(tmp_path, packages=("pkg",), skipped=())

    assert circles(planted) == [{"pkg.a", "pkg.b"}]
    assert upward_imports(planted, layers) == ["pkg.low (low) imports pkg.front.view (high)"]


def test_the_checker_reports_a_core_import_of_a_protocol_and_a_front_end_import_of_the_core():
    planted = {
        "agent.core.loop": {"agent.protocols.registry", "agent.core.protocol"},
        "agent.frontends.headless": {"agent.core.workbench", "agent.session.parts", "agent.errors"},
        "agent.frontends.acp.pickers": {"agent.protocols.registry"},
        "agent.session.live": {"agent.core.loop", "agent.protocols.registry"},
    }

    assert upward_imports(planted, LAYERS) == [
        "agent.core.loop (core) imports agent.protocols.registry (protocols)"
    ]
    assert skipped_layers(planted, LAYERS) == [
        "agent.frontends.acp.pickers (front) imports agent.protocols.registry (protocols)",
        "agent.frontends.headless (front) imports agent.core.workbench (core)",
    ]


# A protocol is a folder (agent/protocols/NAME/): outside the folders, only the registry (which finds
# them) and what they share are imported, never a concrete one; the session layer builds the protocol.
PROTOCOL_SHARED = {"agent.protocols", "agent.protocols.base", "agent.protocols.registry"}


def concrete_protocol_imports(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        if not module.startswith("agent.protocols.")
        for target in sorted(targets)
        if target.startswith("agent.protocols") and target not in PROTOCOL_SHARED
    ]


def test_nothing_outside_the_protocols_imports_a_concrete_one(graph):
    assert concrete_protocol_imports(graph) == []


def test_the_protocol_rule_reports_a_planted_import():
    planted = {"agent.session.live": {"agent.protocols.edit_blocks.protocol", "agent.protocols.registry"}}
    assert concrete_protocol_imports(planted) == [
        "agent.session.live imports agent.protocols.edit_blocks.protocol"
    ]


def test_the_registry_finds_every_protocol_folder():
    from agent.protocols.registry import protocol_names, protocols

    folders = {p.name for p in (ROOT / "agent" / "protocols").iterdir() if (p / "protocol.py").is_file()}
    assert {cls.__module__.split(".")[2] for cls in protocols().values()} == folders
    assert list(protocols()) == protocol_names() == ["tools", "blocks"]
