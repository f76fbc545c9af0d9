"""Watching a run's resources: resident memory, the memory guard and the progress bar."""

from __future__ import annotations

import os
import resource
import sys

from engines.runtime.options import OptionNames, RunOptions
from optimizer.ir.errors import OptionError


class MemoryGuard:
    """Stops a run whose memory outgrows the machine with a clear error (exit 2) instead of
    the kernel's OOM killer or a MemoryError in the middle of an engine: checked after every
    batch (a batch is bounded, so the overshoot is too)."""

    def __init__(self, limit_mb: float | None, names: OptionNames) -> None:
        self.limit = limit_mb if limit_mb is not None else default_memory_limit()
        self.names = names

    def check(self, tuples_in: int) -> None:
        if self.limit is None:
            return
        rss = rss_mb()
        if rss > self.limit:
            raise OptionError(
                f"out of memory: the run uses {rss:,.0f} MB after {tuples_in:,} tuples, more "
                f"than its limit of {self.limit:,.0f} MB",
                hint="windows hold rate x range tuples (a row-engine window at least one "
                f"slide's): lower {self.names.rate}, the window range or the slide; "
                f"{self.names.memory_limit} MB sets the limit",
            )


def default_memory_limit() -> float | None:
    """90% of the memory available now plus what this process already uses (Linux)."""
    try:
        with open("/proc/meminfo") as fh:
            info = {line.split(":")[0]: line.split()[1] for line in fh}
        available = int(info["MemAvailable"]) / 1024.0
    except (OSError, KeyError, ValueError, IndexError):
        return None
    return 0.9 * (available + rss_mb())


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class ProgressBar:
    def __init__(self, total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._p = Progress(
            TextColumn("[bold]hycq run"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("tuples"),
            TimeElapsedColumn(),
            transient=True,
        )
        self._task = self._p.add_task("run", total=total)
        self._p.start()

    def advance(self, n: int) -> None:
        self._p.advance(self._task, n)

    def stop(self) -> None:
        self._p.stop()


def progress_bar(options: RunOptions, total: int | None) -> ProgressBar | None:
    show = options.progress if options.progress is not None else sys.stderr.isatty()
    return ProgressBar(total) if show else None
