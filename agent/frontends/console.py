"""Terminal output for the plain commands: results to stdout, progress and errors to stderr."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

from agent.errors import AgentError, raise_terminated

# Captured output (CI logs, a pipe to a file) gets room for the wide tables instead of rich's 80 columns.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 160)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl+C inside the block (agent.errors.Terminated, a KeyboardInterrupt), so a
    long command's `finally` blocks run: the running request stops and a server it started is stopped.
    Put back afterwards."""
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def show_error(exc: AgentError) -> None:
    err.print(f"[bold red]error:[/] {exc.what}", markup=True, highlight=False)
    for part in (exc.why, exc.fix):
        if part:
            err.print(part, markup=False)


def note(message: str) -> None:
    err.print(f"[dim]{message}[/]" if not message.startswith("warning") else f"[yellow]{message}[/]")


@contextmanager
def build_progress() -> Iterator[Callable[[float, str], None]]:
    """A progress bar for the llama-server build; plain lines when stderr is not a terminal."""
    if not err.is_terminal:
        last = [-1.0]

        def plain(fraction: float, message: str) -> None:
            # One line per 10% (and every phase change): a CI log stays readable.
            step = int(fraction * 10)
            if step != last[0] or fraction in (0.0, 1.0):
                last[0] = step
                print(f"[build {fraction:4.0%}] {message}", file=sys.stderr, flush=True)

        yield plain
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    # The bar appears on the first update only: most calls find the binary built and show nothing.
    bar: Progress | None = None
    task = None

    def update(fraction: float, message: str) -> None:
        nonlocal bar, task
        if bar is None:
            bar = Progress(
                TextColumn("[bold]building llama-server[/]"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                TextColumn("[dim]{task.description}[/]"),
                console=err,
            )
            bar.start()
            task = bar.add_task("", total=1.0)
        bar.update(task, completed=fraction, description=message[:60])

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()


@contextmanager
def start_progress(label: str) -> Iterator[Callable[[float, str], None]]:
    """A one-line status while a server loads: elapsed seconds and what its log says it is doing."""
    if not err.is_terminal:
        shown: set[str] = set()

        def plain(elapsed: float, phase: str) -> None:
            if phase not in shown:
                shown.add(phase)
                print(f"[{elapsed:5.1f}s] {label}: {phase}", file=sys.stderr, flush=True)

        yield plain
        return
    with err.status(f"{label}: starting") as status:

        def update(elapsed: float, phase: str) -> None:
            status.update(f"{label}: {phase} [dim]{elapsed:.1f} s[/]")

        yield update


def format_age(started_at: float) -> str:
    seconds = max(0, int(time.time() - started_at))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def table(*columns: str, left: tuple[str, ...] | None = None, title: str | None = None):
    """The plain tables of the commands: no box, bold headers; numbers right-aligned.

    `left`: the columns aligned left (default: all of them, for tables of text).
    """
    from rich.table import Table

    grid = Table(box=None, pad_edge=False, header_style="bold", title=title)
    for column in columns:
        aligned_left = left is None or column in left
        grid.add_column(column, justify="left" if aligned_left else "right", overflow="fold")
    return grid


def pct(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def num(value: float | None, digits: int = 1) -> str:
    return f"{value:.{digits}f}" if value is not None else "-"
