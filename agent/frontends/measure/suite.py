"""The task suite behind `agent bench --tasks`: small coding tasks, each a real `agent run` with a check.

It measures how often a model solves the tasks a user gives a coding agent on day one. A task is a
folder (examples/tasks/): `task.md` (front matter with the `check`, then the task as a user writes
it), `repo/` (the starting files; absent when the task starts from an empty folder) and `solution/`
(files that, laid over repo/, make the check pass; tests/test_suite_tasks.py proves it for each).

A real-repository task (`real-*`) has `source.toml` instead of repo/: its starting files are a pinned
source distribution from PyPI (downloaded once into the cache, see `fetch_sdist`), less the `strip`ped
paths, with the task's optional `setup.patch` applied (a planted bug). Its reference solution is
`solution.patch`, a diff applied with `git apply` (tests/test_real_tasks.py proves each).

Each task runs in a fresh git repository holding its starting files, so the agent has checkpoints,
as `agent run --json` in its own process group: on timeout the group gets SIGTERM (the agent then
finishes its session record), then SIGKILL. The server is not started here: the caller starts it
once per profile and passes `-p PROFILE` or `--base-url URL` in `agent_args`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from agent.errors import AgentError, ConfigError, ExitCode
from agent.session.taskfile import load_task
from agent.settings.config import cache_dir
from agent.store.redact import redact_record
from agent.store.telemetry import TurnStats, summarise_turns
from tools.process_group import CappedOutput, run_command, run_command_async

TIMED_OUT = ExitCode.TIMED_OUT  # (the name its tests and examples/compare_aider.py use)
DEFAULT_TIMEOUT = 900.0  # seconds, for a task without a time_limit
SETUP_ALLOWANCE = 120.0  # seconds past a task's own time_limit: start-up, the last check, shutdown
STOP_GRACE = 15.0  # seconds a stopped run has, after SIGTERM, to finish its session record


@dataclass
class TaskScore:
    """How one task of the suite went: solved or not, and what it cost (`agent run`'s own outcome is a
    session.task_run.TaskResult, inside the run this was measured from)."""

    name: str
    solved: bool
    exit_code: int
    turns: int = 0
    seconds: float = 0.0
    output_tokens: int = 0
    gen_tok_s: float | None = None  # median over the turns
    acceptance: float | None = None  # draft tokens accepted / drafted; None without speculation
    cache_reuse: float | None = None  # prompt tokens served from the server's cache
    session_id: str = ""
    error: str = ""  # why it was not solved: a limit, the check's last line, a crash, a timeout
    checks: int = 0  # times the check ran (a failed one goes back to the model)
    lines_added: int = 0  # over the files the run changed (the run's `changes` summary)
    lines_deleted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 2)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskScore:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def discover(tasks_dir: Path, names: list[str] | None = None) -> list[Path]:
    """The task folders (those holding a task.md), sorted by name; only `names` when given. A name may
    be a glob (`real-*`, `*-flag`), and `!GLOB` leaves out what it matches (`!real-*`: the small tasks
    only; alone, it starts from all tasks). A name or glob that matches no task is refused."""
    if not tasks_dir.is_dir():
        raise ConfigError(f"the task folder {tasks_dir} does not exist")
    found = sorted(p for p in tasks_dir.iterdir() if (p / "task.md").is_file())
    if names:
        matched = {
            name: [p for p in found if fnmatch.fnmatchcase(p.name, name.removeprefix("!"))] for name in names
        }
        unknown = sorted(name for name, paths in matched.items() if not paths)
        if unknown:
            raise ConfigError(
                f"no task named {', '.join(unknown)} in {tasks_dir}",
                fix=f"Known tasks: {', '.join(p.name for p in found) or 'none'}.",
            )
        kept = [paths for name, paths in matched.items() if not name.startswith("!")]
        wanted = {p for paths in kept for p in paths} if kept else set(found)
        wanted -= {p for name, paths in matched.items() if name.startswith("!") for p in paths}
        found = [p for p in found if p in wanted]
    return found


def prepare_workdir(task_dir: Path, into: Path) -> Path:
    """A fresh folder under `into` holding the task's starting files, committed in a new git repository."""
    into.mkdir(parents=True, exist_ok=True)
    workdir, n = into / task_dir.name, 1
    while workdir.exists():  # never reuse (or delete) what an earlier run left
        n += 1
        workdir = into / f"{task_dir.name}-{n}"
    source = read_source(task_dir)
    if source is not None:
        unpack_sdist(fetch_sdist(source.pypi), workdir)
        for relative in source.strip:
            target = workdir / relative
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.is_file() or target.is_symlink():
                target.unlink()
            else:  # a typo would silently keep what the task meant to leave out
                shutil.rmtree(workdir)  # made just now, by us
                raise ConfigError(
                    f"{task_dir / 'source.toml'}: strip names {relative}, which {source.pypi} does not hold"
                )
    elif (task_dir / "repo").is_dir():
        shutil.copytree(task_dir / "repo", workdir, symlinks=True)
    else:
        workdir.mkdir()
    _git(workdir, "init", "-q", "--initial-branch=main")
    # Set locally, so that the commit below and the agent's own commits work without a global identity.
    _git(workdir, "config", "user.name", "agent suite")
    _git(workdir, "config", "user.email", "suite@localhost")
    _git(workdir, "config", "commit.gpgsign", "false")
    if (task_dir / "setup.patch").is_file():  # part of the starting files: a bug, a failing test
        _git(workdir, "apply", str((task_dir / "setup.patch").resolve()))
    _git(workdir, "add", "-A")
    _git(workdir, "commit", "-q", "--allow-empty", "--no-verify", "-m", f"{task_dir.name}: starting files")
    return workdir


@dataclass(frozen=True)
class Source:
    """A real-repository task's `source.toml`: where its starting files come from."""

    pypi: str  # an exact pin, "requests==2.32.3": the cache is keyed by it and it never changes
    strip: tuple[str, ...] = ()  # paths (relative to the package's top folder) removed after unpacking


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


def read_source(task_dir: Path) -> Source | None:
    """The task's source.toml, validated; None for a task that starts from repo/ or nothing."""
    path = task_dir / "source.toml"
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    unknown = sorted(set(data) - {"pypi", "strip"})
    pin, strip = data.get("pypi"), data.get("strip", [])
    if unknown:
        raise ConfigError(f"{path}: unknown keys {', '.join(unknown)}", fix="Known keys: pypi, strip.")
    if not isinstance(pin, str) or not _PIN.match(pin):
        raise ConfigError(f'{path}: pypi must pin one version, as in pypi = "requests==2.32.3"')
    if not isinstance(strip, list) or not all(_is_relative(s) for s in strip):
        raise ConfigError(f"{path}: strip must be a list of relative paths without '..'")
    return Source(pin, tuple(strip))


def _is_relative(path: object) -> bool:
    return (
        isinstance(path, str) and bool(path) and not Path(path).is_absolute() and ".." not in Path(path).parts
    )


def fetch_sdist(pin: str) -> Path:
    """The source distribution of `pin` ("name==version"), downloaded once into the cache and reused."""
    folder = cache_dir() / "sdists" / pin.replace("==", "-")
    cached = _sdist_in(folder)
    if cached is not None:
        return cached
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Downloaded into a scratch folder next to the cache, then renamed: an interrupted download, or a
    # second suite downloading at the same time, never leaves a half-written archive in the cache.
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".download-") as scratch:
        _pip_download(pin, Path(scratch))
        if _sdist_in(Path(scratch)) is None:
            raise AgentError(
                f"pip downloaded no source archive for {pin}", fix="Pin a version that has an sdist."
            )
        with contextlib.suppress(OSError):  # another suite got there first: use its copy
            os.rename(scratch, folder)
    archive = _sdist_in(folder)
    if archive is None:  # the rename failed, and not because of a finished copy
        raise AgentError(f"cannot store {pin} in {folder}", fix=f"Delete {folder} and run again.")
    return archive


def _sdist_in(folder: Path) -> Path | None:
    archives = sorted(p for p in folder.glob("*") if p.name.endswith((".tar.gz", ".zip")))
    return archives[0] if archives else None


def _pip_download(pin: str, into: Path) -> None:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--disable-pip-version-check", "-q", "-d", str(into), pin,
    ]  # fmt: skip
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise AgentError(
            f"downloading {pin} from PyPI took over 5 minutes",
            fix="Check the network, or set pip's index (PIP_INDEX_URL) to a mirror you can reach.",
        ) from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout or "").strip().splitlines()
        why = (
            [line for line in lines if line.startswith("ERROR")]
            or lines[-1:]
            or [f"pip exited {proc.returncode}"]
        )
        raise AgentError(
            f"could not download {pin} from PyPI for a real-repository task",
            " ".join(why),
            fix=f"Check the network and the pin (`python -m pip download --no-deps --no-binary :all: {pin}` "
            "must work). The small tasks need no download: --task '!real-*' runs only them.",
        )


def unpack_sdist(archive: Path, workdir: Path) -> None:
    """The archive's files in a new folder `workdir`, without its top folder (requests-2.32.3/);
    refused when a member would land outside it (an absolute path, '..', a link out)."""
    with tempfile.TemporaryDirectory(dir=workdir.parent, prefix=".unpack-") as scratch:
        try:
            if archive.name.endswith(".zip"):
                with zipfile.ZipFile(archive) as zf:
                    _refuse_outside(archive, zf.namelist())
                    zf.extractall(scratch)
            else:
                with tarfile.open(archive) as tf:
                    members = tf.getmembers()
                    _refuse_outside(archive, [m.name for m in members])
                    # Python 3.11.4+ has the "data" filter (it also refuses links out and devices);
                    # before it, only plain files and folders are extracted.
                    if hasattr(tarfile, "data_filter"):
                        tf.extractall(scratch, filter="data")
                    else:
                        tf.extractall(scratch, members=[m for m in members if m.isfile() or m.isdir()])
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
            raise AgentError(
                f"cannot unpack {archive}", str(exc), fix=f"Delete {archive.parent} to download it again."
            ) from exc
        tops = list(Path(scratch).iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise AgentError(f"{archive.name} does not hold one top folder", f"it holds {len(tops)} entries")
        tops[0].rename(workdir)


def _refuse_outside(archive: Path, names: list[str]) -> None:
    for name in names:
        if not _is_relative(name):
            raise AgentError(
                f"{archive.name} holds a path outside its folder: {name}", fix="Pin another version."
            )


def _git(workdir: Path, *args: str) -> None:
    try:
        subprocess.run(
            ["git", *args], cwd=workdir, check=True, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except FileNotFoundError:
        raise AgentError(
            "git is not installed", fix="The task suite needs git for the agent's checkpoints."
        ) from None
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        output = getattr(exc, "stderr", "") or ""
        raise AgentError(f"`git {' '.join(args)}` failed in {workdir}", str(output).strip()) from exc


def run_suite_task(
    task_dir: Path, workdir: Path, agent_args: list[str], timeout: float | None = None
) -> TaskScore:
    """One task as `agent run --json` in `workdir`; `timeout` defaults to the task's time_limit + 2 min."""
    return asyncio.run(run_suite_task_async(task_dir, workdir, agent_args, timeout))


async def run_suite_task_async(
    task_dir: Path, workdir: Path, agent_args: list[str], timeout: float | None = None
) -> TaskScore:
    """`run_suite_task` for the event loop: cancelling it stops the run's group (SIGTERM, then SIGKILL)."""
    task_file = (task_dir / "task.md").resolve()
    if timeout is None:
        timeout = _default_timeout(task_file)
    command = [
        sys.executable, "-m", "agent", "run", str(task_file), "--workdir", str(workdir.resolve()),
        "--json", "--approval", "full-auto", *agent_args,
    ]  # fmt: skip
    env = os.environ.copy()
    # Checks and the model's commands say `python3`: make it this interpreter, which has pytest.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    started = time.monotonic()
    stdout, stderr = CappedOutput(), CappedOutput()
    ran = await run_command_async(
        command, output=stdout, errors=stderr, env=env, timeout=timeout, grace=STOP_GRACE
    )
    code = TIMED_OUT if ran.timed_out or ran.returncode is None else ran.returncode
    events = parse_events(stdout.text())
    result = result_from_events(task_dir.name, events, code, time.monotonic() - started, stderr.text())
    if ran.timed_out:
        result.solved = False
        result.error = f"stopped by the suite after {timeout:.0f} s"
    return result


def _default_timeout(task_file: Path) -> float:
    limit = load_task(task_file).spec.time_limit
    return limit + SETUP_ALLOWANCE if limit else DEFAULT_TIMEOUT


def run_in_group(
    command: list[str], timeout: float, env: dict[str, str] | None = None, grace: float = STOP_GRACE
) -> tuple[int | None, str, str, bool]:
    """(exit code, stdout, stderr, timed out): `command` in a new session; on timeout or interrupt its
    group gets SIGTERM (the agent then finishes its session record, which stdout still takes), then
    SIGKILL after `grace` seconds."""
    stdout, stderr = CappedOutput(), CappedOutput()
    ran = run_command(command, output=stdout, errors=stderr, env=env, timeout=timeout, grace=grace)
    return ran.returncode, stdout.text(), stderr.text(), ran.timed_out


def parse_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON event lines of `agent run --json`; anything else on stdout is skipped."""
    events = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                event = json.loads(line)
                if isinstance(event, dict) and "type" in event:
                    events.append(event)
    return events


def result_from_events(
    name: str, events: list[dict[str, Any]], exit_code: int, seconds: float, stderr: str = ""
) -> TaskScore:
    """What one run did, from its events: the last `session.finished` summary when the run got that
    far, else the `turn.completed` stats it left (a crash or a kill)."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_type.setdefault(event["type"], []).append(event)
    started = (by_type.get("session.started") or [{}])[0]
    finished = (by_type.get("session.finished") or [None])[-1]
    if attempts := by_type.get("attempts.finished"):  # several attempts: the winner's session counts
        winner = attempts[-1]["winner"]
        ours = [e for e in by_type.get("session.finished", []) if e.get("attempt") == (winner or 1)]
        finished = ours[-1] if ours else finished
        started = next(
            (e for e in by_type.get("session.started", []) if e.get("attempt") == (winner or 1)), started
        )
    summary = (finished or {}).get("summary") or {}
    if not finished:
        stats = [TurnStats.from_dict(e.get("stats") or {}) for e in by_type.get("turn.completed", [])]
        summary = summarise_turns(stats)
    if attempts:  # what reached the workspace: the winner's change
        summary = {**summary, "changes": attempts[-1].get("changes") or []}
    check = summary.get("check")
    solved = exit_code == 0 and finished is not None and (check is None or bool(check.get("passed")))
    return TaskScore(
        name=name,
        solved=solved,
        exit_code=exit_code,
        turns=summary.get("turns") or 0,
        seconds=seconds,
        output_tokens=summary.get("output_tokens") or 0,
        gen_tok_s=summary.get("median_gen_tok_s"),
        acceptance=summary.get("acceptance"),
        cache_reuse=summary.get("cache_reuse"),
        session_id=started.get("session_id", ""),
        error="" if solved else _why_not(finished, summary, by_type.get("error", []), exit_code, stderr),
        checks=len(by_type.get("check.result", [])),
        lines_added=sum(c.get("added") or 0 for c in summary.get("changes") or []),
        lines_deleted=sum(c.get("deleted") or 0 for c in summary.get("changes") or []),
    )


def _why_not(finished, summary: dict, errors: list[dict], exit_code: int, stderr: str) -> str:
    check = summary.get("check")
    if check and not check.get("passed"):  # what a suite's reader wants first: how the work fails
        last = (check.get("output") or "").strip().splitlines()[-1:] or [""]
        verdict = "timed out" if check.get("exit_code") is None else f"exit {check['exit_code']}"
        stopped = f" (stopped: {summary['error']})" if summary.get("error") else ""
        return f"check failed ({verdict}): {last[0][:200]}{stopped}"
    if summary.get("error"):
        return summary["error"]
    fatal = [e for e in errors if e.get("fatal")]
    if fatal:
        return fatal[-1].get("message", "")
    if finished:
        return f"{finished.get('outcome', 'failed')} (exit {exit_code})"
    tail = stderr.strip().splitlines()[-1:] or [f"exit {exit_code} before the session finished"]
    return tail[0][:300]


def run_suite(
    tasks: list[Path],
    agent_args: list[str],
    workroot: Path | None = None,
    out: Path | None = None,
    *,
    timeout: float | None = None,
    progress: Callable[[TaskScore], None] | None = None,
    jobs: int = 1,
) -> list[TaskScore]:
    """Each task in a fresh workdir under `workroot` (default: a new temporary folder, kept for a look
    at what the model did), `jobs` tasks at a time (the server needs a slot for each run, times its
    attempts), the results in the tasks' order. With `out`, one JSON line per task is appended there as
    soon as it is done. `progress` gets each result as it comes. Ctrl+C stops every run in flight."""
    # Every sdist first: a download that fails (or a bad source.toml) stops the suite before its first
    # task rather than an hour into it.
    for task_dir in tasks:
        source = read_source(task_dir)
        if source is not None:
            fetch_sdist(source.pypi)
    if workroot is None:
        workroot = Path(tempfile.mkdtemp(prefix="agent-suite-"))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_run_tasks(tasks, agent_args, workroot, out, timeout, progress, max(1, jobs)))


async def _run_tasks(
    tasks: list[Path], agent_args: list[str], workroot: Path, out: Path | None, timeout: float | None,
    progress: Callable[[TaskScore], None] | None, jobs: int,
) -> list[TaskScore]:  # fmt: skip
    gate = asyncio.Semaphore(jobs)
    results: dict[Path, TaskScore] = {}

    async def one(task_dir: Path) -> None:
        async with gate:
            workdir = prepare_workdir(task_dir, workroot)
            result = results[task_dir] = await run_suite_task_async(task_dir, workdir, agent_args, timeout)
        if out is not None:
            record = {**result.to_dict(), "agent_args": agent_args, "workdir": str(workdir)}
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(redact_record(record), ensure_ascii=False) + "\n")
        if progress:
            progress(result)

    async with asyncio.TaskGroup() as group:
        for task_dir in tasks:
            group.create_task(one(task_dir))
    return [results[task_dir] for task_dir in tasks]


def read_results(path: Path) -> list[TaskScore]:
    """The results `run_suite` appended to `path`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [TaskScore.from_dict(json.loads(line)) for line in lines if line.strip()]


_COLUMNS = ("result", "turns", "time", "tok/s", "draft", "cache")


def _cells(result: TaskScore | None) -> list[str]:
    if result is None:
        return ["–", "", "", "", "", ""]

    def pct(value: float | None) -> str:
        return "–" if value is None else f"{value:.0%}"

    timed_out = result.exit_code == TIMED_OUT and not result.solved
    return [
        "✓" if result.solved else ("✗ time" if timed_out else f"✗ {result.exit_code}"),
        str(result.turns),
        f"{result.seconds:.0f}s",
        "–" if result.gen_tok_s is None else f"{result.gen_tok_s:.0f}",
        pct(result.acceptance),
        pct(result.cache_reuse),
    ]


def format_table(results: dict[str, list[TaskScore]]) -> str:
    """Tasks as rows, one group of columns per label (a profile, a mode), and 'solved 7/12' per group."""
    k = len(_COLUMNS)
    names = list(dict.fromkeys(r.name for group in results.values() for r in group))
    by_label = {label: {r.name: r for r in group} for label, group in results.items()}
    rows = [["task", *(c for _ in results for c in _COLUMNS)]]
    rows += [[name, *(c for label in results for c in _cells(by_label[label].get(name)))] for name in names]
    solved = [f"solved {sum(r.solved for r in group)}/{len(group)}" for group in results.values()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for g, label in enumerate(results):  # a long label widens its group's last column
        spare = sum(widths[1 + g * k : 1 + (g + 1) * k]) + 2 * (k - 1)
        widths[(g + 1) * k] += max(0, len(label) - spare, len(solved[g]) - spare)
    group_width = [sum(widths[1 + g * k : 1 + (g + 1) * k]) + 2 * (k - 1) for g in range(len(results))]

    def line(cells: list[str]) -> str:
        # The task name and the result are left-aligned, the figures right-aligned.
        parts = [
            cell.ljust(widths[i]) if i == 0 or (i - 1) % k == 0 else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        ]
        groups = ["  ".join(parts[1 + g * k : 1 + (g + 1) * k]) for g in range(len(results))]
        return "  │  ".join([parts[0], *groups]).rstrip()

    def spanning(first: str, cells: list[str]) -> str:
        groups = [cell.ljust(w) for cell, w in zip(cells, group_width, strict=True)]
        return "  │  ".join([first.ljust(widths[0]), *groups]).rstrip()

    rule = "─" * (widths[0] + sum(group_width) + 5 * len(results))
    return "\n".join(
        [
            spanning("", list(results)),
            line(rows[0]),
            rule,
            *(line(r) for r in rows[1:]),
            rule,
            spanning("", solved),
        ]
    )
