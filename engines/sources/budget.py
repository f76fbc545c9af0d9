"""What a data generator may be asked to write (``hycq data generate``; docs/data.md).

A generation is refused up front (OptionError, exit 2) when it cannot fit:

* on disk: the rows it would write, times a lower bound of the bytes a row takes
  (:data:`CSV_ROW_BYTES`, :data:`PARQUET_ROW_BYTES`; measured on the generated streams:
  20 to 32 bytes a CSV row, 3 to 9 a Parquet row), against the space free in the output's
  folder (a FIFO or a device, e.g. ``/dev/null``, takes any amount);
* in memory, for the generators that build each stream as one table (multiway, x3, x4):
  the rows times :data:`MEMORY_ROW_BYTES` against the memory available.

Otherwise it goes ahead, and a long one is never silent: :class:`Progress` writes how far it
got to stderr every :data:`PROGRESS_S` seconds once it has run that long. A signal stops it
at the next batch and removes the partial file (engines/interrupts.py, output_files.py).

Example:
    >>> lines = []
    >>> p = Progress(1000, "g.csv", lines.append, every=0.0)
    >>> p.add(250)
    >>> lines
    ['generating g.csv: 250 of 1,000 rows (25%)\\n']
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from optimizer.ir.errors import OptionError

#: Lower bounds of the bytes one generated row takes in a file of each format.
CSV_ROW_BYTES = 16
PARQUET_ROW_BYTES = 2
#: Bytes one row of a stream built in memory takes at least (an int64 timestamp, its
#: columns and the arrays it is computed from).
MEMORY_ROW_BYTES = 24
#: Seconds between progress lines (and before the first).
PROGRESS_S = 5.0


def check_fits(rows: int, fmt: str, out: Path, hint: str, in_memory: bool = False) -> None:
    """OptionError when ``rows`` rows in format ``fmt`` (csv or parquet) cannot be written
    to ``out`` (a file, or a folder the files go into), or built in memory first; ``hint``
    names the options that set the amount."""
    need = rows * (CSV_ROW_BYTES if fmt == "csv" else PARQUET_ROW_BYTES)
    free = _free_bytes(out)
    if free is not None and need > free:
        raise OptionError(
            f"this would write {rows:,} rows, at least {_size(need)} as {fmt.upper()}: more "
            f"than the {_size(free)} free in {_folder(out)}",
            hint=hint,
        )
    if in_memory:
        need = rows * MEMORY_ROW_BYTES
        available = _available_memory()
        if available is not None and need > available:
            raise OptionError(
                f"this would build {rows:,} rows in memory (each stream is made as one "
                f"table), at least {_size(need)}: more than the {_size(available)} available",
                hint=hint,
            )


def _folder(out: Path) -> Path:
    """The nearest existing folder of ``out`` (``out`` itself when it is one)."""
    folder = out if out.is_dir() else out.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _free_bytes(out: Path) -> int | None:
    """Bytes free where ``out`` is written; None for a FIFO or device (no limit) or when
    the file system does not say."""
    with contextlib.suppress(OSError):
        st = os.stat(out)
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            return None
    try:
        return shutil.disk_usage(_folder(out.resolve())).free
    except OSError:
        return None


def _available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError  # pragma: no cover


class Progress:
    """Progress lines of one generation on stderr (module docstring)."""

    def __init__(
        self,
        total: int,
        what: str,
        write: Callable[[str], object] | None = None,
        every: float = PROGRESS_S,
    ) -> None:
        self.total = total
        self.what = what
        self.rows = 0
        self._write = write if write is not None else sys.stderr.write
        self._every = every
        self._next = time.monotonic() + every

    def add(self, rows: int) -> None:
        """Count ``rows`` more written; a line when the last one is ``every`` seconds old."""
        self.rows += rows
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self._every
            share = f" ({100 * self.rows / self.total:.0f}%)" if self.total else ""
            self._write(f"generating {self.what}: {self.rows:,} of {self.total:,} rows{share}\n")


class Budget:
    """The ``before`` and ``progress`` hooks of one generation (the writers' arguments):
    :func:`check_fits` on the row count, then :class:`Progress` over it."""

    def __init__(self, out: Path, fmt: str, hint: str, in_memory: bool = False) -> None:
        self.out = out
        self.fmt = fmt
        self.hint = hint
        self.in_memory = in_memory
        self.progress: Progress | None = None

    def before(self, rows: int) -> None:
        """Refuse ``rows`` when they cannot fit; else start counting them."""
        check_fits(rows, self.fmt, self.out, self.hint, self.in_memory)
        self.progress = Progress(rows, str(self.out))

    def add(self, rows: int) -> None:
        if self.progress is not None:
            self.progress.add(rows)
