"""Aider against `agent run` on the task suite (examples/tasks/): one server, one model, the same checks.

Kept out of the package and its dependencies: Aider is pip-installed into a throwaway venv the first
time. Per task, Aider and then the agent (same load) work in fresh git workdirs; then this script runs
the task's check in each: "solved" means it passed, and the harness was not stopped by the timeout.

- Aider: `--edit-format whole`, the repository files that the task text names on its command line (as
  its users do), and the check as `--test-cmd` with `--auto-test` (up to 3 reflections). It sends
  temperature 0 and no max_tokens; its repo map keeps its default (1024 tokens), as a user's would.
- agent: `agent run --base-url URL --actions blocks`: temperature 0 from the task's front matter,
  max_tokens 4096 (an attached server's default), up to 3 check rounds, and the task's own time_limit.

Reproduce (figures go to docs/benchmarks.md):

    agent server start coder      # Qwen2.5-Coder 1.5B on http://127.0.0.1:8930
    python examples/compare_aider.py --base-url http://127.0.0.1:8930 --out compare-aider.jsonl
    agent server stop coder
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from agent.core.checks import run_check
from agent.frontends.measure import suite
from agent.server.launch_plan import openai_base_url
from agent.session.taskfile import Task, load_task

AIDER_VERSION = "0.86.2"
AGENT_ARGS = ["--actions", "blocks"]  # after --base-url URL: the coder profile's protocol
DEFAULT_VENV = Path("~/.cache/spec-agent/aider-venv")
_TOKENS = re.compile(r"Tokens: ([\d.]+)([kM]?) sent\b.*?, ([\d.]+)([kM]?) received")
_SCALE = {"": 1, "k": 1000, "M": 1_000_000}


def parse_tokens(output: str) -> tuple[int, int] | None:
    """(sent, received), summed over Aider's `Tokens: 1.2k sent, 300 received.` lines (one per model
    request); None when it printed none. Aider rounds its figures: 1.2k reads as 1200."""
    if not (found := _TOKENS.findall(output)):
        return None
    sent = sum(round(float(n) * _SCALE[unit]) for n, unit, _, _ in found)
    return sent, sum(round(float(n) * _SCALE[unit]) for _, _, n, unit in found)


def files_named(text: str, repo: Path) -> list[str]:
    """The files under `repo` whose path or file name the task text mentions (`notes.py` is not
    `test_notes.py`), relative to `repo` (none when it does not exist)."""
    named = []
    for path in sorted(p for p in repo.rglob("*") if p.is_file()):
        rel = path.relative_to(repo).as_posix()
        mentioned = (re.search(rf"(?<![\w./-]){re.escape(n)}(?![\w/-])", text) for n in {rel, path.name})
        if not rel.startswith(".git/") and any(mentioned):
            named.append(rel)
    return named


def aider_command(
    aider: Path, model: str, base_url: str, task: Task, repo: Path, workdir: Path
) -> tuple[list[str], list[str]]:
    """(command, files): Aider, non-interactive, on the files of `repo` that the task names. One message,
    every question answered yes, no commits of its own (the workdir is a git repository already). Its
    history files and the check script go beside the workdir (`logs`), out of the model's sight."""
    files, logs = files_named(task.body, repo), workdir.parent / f"{workdir.name}.aider"
    command = [
        str(aider), "--model", f"openai/{model}", "--openai-api-base", openai_base_url(base_url),
        "--openai-api-key", "x", "--edit-format", "whole", "--yes-always", "--no-auto-commits",
        "--no-gitignore", "--no-show-model-warnings", "--no-check-update", "--no-show-release-notes",
        "--no-analytics", "--no-pretty", "--no-fancy-input", "--no-stream",
        "--chat-history-file", f"{logs}.chat.md", "--input-history-file", f"{logs}.input",
    ]  # fmt: skip
    if task.spec.check:
        command += ["--test-cmd", f"bash {shlex.quote(f'{logs}.check.sh')}", "--auto-test"]
    return [*command, "--message", task.body, *files], files


def agent_command(task_dir: Path, workdir: Path, base_url: str) -> list[str]:
    """What agent.frontends.measure.suite.run_suite_task runs (for --dry-run)."""
    task_file = str((task_dir / "task.md").resolve())
    return [sys.executable, "-m", "agent", "run", task_file, "--workdir", str(workdir), "--json",
            "--approval", "full-auto", "--base-url", base_url, *AGENT_ARGS]  # fmt: skip


def ensure_aider(venv: Path) -> str:
    """Aider's version (`aider 0.86.2`), installed into `venv` first when it is not there."""
    if not (venv / "bin" / "aider").exists():
        print(f"installing aider-chat=={AIDER_VERSION} into {venv} (once)", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"aider-chat=={AIDER_VERSION}"]
        subprocess.run(pip, check=True)
    version = subprocess.run([venv / "bin" / "aider", "--version"], capture_output=True, text=True)
    return version.stdout.strip()


def served_model(base_url: str) -> str:
    url = openai_base_url(base_url) + "/models"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)["data"][0]["id"]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        sys.exit(f"nothing answers at {url} ({exc}): start the server first (agent server start coder)")


def task_timeout(task_dir: Path, given: float | None) -> float:
    limit = load_task(task_dir / "task.md").spec.time_limit
    return given or (limit + suite.SETUP_ALLOWANCE if limit else suite.DEFAULT_TIMEOUT)


def verdict(check: str | None, workdir: Path, exit_code: int) -> tuple[bool, str]:
    """(solved, why not): the task's check, run here after the harness stopped."""
    if exit_code == suite.TIMED_OUT:
        return False, "stopped by the timeout"
    if not check:
        return exit_code == 0, "" if exit_code == 0 else f"exit {exit_code}"
    result = asyncio.run(run_check(check, workdir))
    last = (result.output.strip().splitlines() or [""])[-1][:200]
    return result.passed, "" if result.passed else f"check failed (exit {result.exit_code}): {last}"


def run_aider(aider: Path, model: str, base_url: str, task_dir: Path, workdir: Path, timeout: float) -> dict:
    task = load_task(task_dir / "task.md")
    command, files = aider_command(aider, model, base_url, task, workdir, workdir)
    logs = workdir.parent / f"{workdir.name}.aider"
    if task.spec.check:
        Path(f"{logs}.check.sh").write_text(task.spec.check, encoding="utf-8")
    started = time.monotonic()
    with contextlib.chdir(workdir):  # Aider works on the git repository it is started in
        code, stdout, stderr, timed_out = suite.run_in_group(command, timeout)
    seconds, code = time.monotonic() - started, suite.TIMED_OUT if timed_out else code
    Path(f"{logs}.log").write_text(stdout + stderr, encoding="utf-8")
    tokens = parse_tokens(stdout + stderr)
    solved, error = verdict(task.spec.check, workdir, code)
    return {
        "harness": "aider", "name": task_dir.name, "solved": solved,
        "exit_code": code, "seconds": round(seconds, 2),
        "sent_tokens": tokens[0] if tokens else None, "output_tokens": tokens[1] if tokens else None,
        "files": files, "error": error, "workdir": str(workdir),
    }  # fmt: skip


def run_agent(base_url: str, task_dir: Path, workdir: Path, timeout: float) -> dict:
    result = suite.run_suite_task(task_dir, workdir, ["--base-url", base_url, *AGENT_ARGS], timeout)
    solved, error = verdict(load_task(task_dir / "task.md").spec.check, workdir, result.exit_code)
    return {
        **result.to_dict(), "harness": "agent", "solved": solved, "agent_solved": result.solved,
        "error": error or result.error, "workdir": str(workdir),
    }  # fmt: skip


def format_table(rows: list[dict[str, Any]]) -> str:
    """Tasks as rows, a group of columns per harness, and the totals: solved N/M, median time."""
    harnesses = [h for h in ("aider", "agent") if any(r["harness"] == h for r in rows)]
    names = list(dict.fromkeys(r["name"] for r in rows))
    by = {(r["harness"], r["name"]): r for r in rows}

    def cells(r: dict[str, Any]) -> list[str]:
        mark = "✓" if r["solved"] else ("✗ time" if r["exit_code"] == suite.TIMED_OUT else "✗")
        tokens = r.get("output_tokens")
        return [mark, f"{r['seconds']:.0f}s", "–" if tokens is None else str(tokens)]

    def totals(h: str) -> list[str]:
        group = [r for r in rows if r["harness"] == h]
        median = statistics.median(r["seconds"] for r in group)
        return [f"solved {sum(r['solved'] for r in group)}/{len(group)}", f"median {median:.0f}s", ""]

    table = [["task", *(f"{h} {c}" for h in harnesses for c in ("result", "time", "out tok"))]]
    table += [[n, *(c for h in harnesses for c in cells(by[(h, n)]))] for n in names]
    table += [["total", *(c for h in harnesses for c in totals(h))]]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    left = {0, *range(1, len(widths), 3)}  # the task and the results; figures to the right

    def line(row: list[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(cells)).rstrip()

    rule = "─" * len(line(table[0]))
    return "\n".join([line(table[0]), rule, *map(line, table[1:-1]), rule, line(table[-1])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--base-url", required=True, help="the running server, e.g. http://127.0.0.1:8930")
    add("--tasks", type=Path, default=Path(__file__).resolve().parent / "tasks", help="the task folder")
    add("--task", action="append", help="only this task (repeatable)")
    add("--out", type=Path, help="append one JSON line per task and harness to this file")
    add("--timeout", type=float, help="seconds per task and harness (default: its time_limit + 2 min)")
    add("--only", choices=["aider", "agent", "both"], default="both")
    add("--aider-venv", type=Path, default=DEFAULT_VENV, help="the throwaway venv for Aider")
    add("--model", help="the model name for Aider (default: the first of the server's /v1/models)")
    add("--workroot", type=Path, help="where the workdirs go (default: a new folder in the temp dir)")
    add("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)

    tasks = suite.discover(args.tasks, args.task)
    workroot = args.workroot or Path(tempfile.gettempdir()) / time.strftime("compare-aider-%Y%m%d-%H%M%S")
    aider = args.aider_venv.expanduser() / "bin" / "aider"
    harnesses = ["aider", "agent"] if args.only == "both" else [args.only]
    if args.dry_run:  # the workdirs as prepare_workdir names them in a new workroot
        model = args.model or "MODEL"
        for task_dir in tasks:
            task, aider_dir = load_task(task_dir / "task.md"), workroot / "aider" / task_dir.name
            print(f"# {task_dir.name} (timeout {task_timeout(task_dir, args.timeout):.0f} s)")
            if "aider" in harnesses:
                plan = aider_command(aider, model, args.base_url, task, task_dir / "repo", aider_dir)
                print(f"(cd {shlex.quote(str(aider_dir))} && {shlex.join(plan[0])})")
            if "agent" in harnesses:
                print(shlex.join(agent_command(task_dir, workroot / "agent" / task_dir.name, args.base_url)))
        return 0

    # Checks and commands say `python3`: make it this interpreter, which has pytest (as agent.frontends.measure.suite does).
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    version = ensure_aider(args.aider_venv.expanduser()) if "aider" in harnesses else ""
    model = args.model or served_model(args.base_url)
    print(f"{model} at {args.base_url}; {version or 'agent only'}; workdirs in {workroot}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for task_dir in tasks:
        timeout = task_timeout(task_dir, args.timeout)
        for harness in harnesses:  # Aider, then the agent, on the same task: comparable load
            workdir = suite.prepare_workdir(task_dir, workroot / harness)
            if harness == "aider":
                row = run_aider(aider, model, args.base_url, task_dir, workdir, timeout) | {"aider": version}
            else:
                row = run_agent(args.base_url, task_dir, workdir, timeout)
            rows.append(row | {"model": model, "base_url": args.base_url})
            outcome = "solved" if row["solved"] else row["error"]
            print(f"{harness} {task_dir.name}: {outcome} ({row['seconds']:.0f} s)", file=sys.stderr)
            if args.out:
                with args.out.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(rows[-1], ensure_ascii=False) + "\n")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
