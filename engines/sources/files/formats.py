"""Formats of stream data files, told apart by extension or by their first bytes, and the
format profiles that adapt the readers to one kind of data (column aliases, raw column
names, messages)."""

from __future__ import annotations

import csv
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from engines.sources.files.profiles import FormatProfile
from engines.sources.smartplug_format import SMARTPLUG_FORMAT
from optimizer.ir.errors import DataError

#: Formats ``read_batches`` understands.
FORMATS = ("debs", "csv", "parquet")


#: ``on_bad(number, raw, reason)``: a bad row (line of a CSV file, row of a Parquet file).
OnBad = Callable[[int, str, str], None]


_PARQUET_SUFFIXES = (".parquet", ".pq")


_PARQUET_MAGIC = b"PAR1"


SNIFF_BYTES = 1 << 16


def default_profile() -> FormatProfile:
    """The profile of the data hycq generates and ships samples of (the smart-plug data):
    readers use it when given no schema."""
    return SMARTPLUG_FORMAT


def profile_for(schema: pa.Schema) -> FormatProfile:
    """The known profile of data with exactly ``schema`` (the smart-plug data), else a plain
    one: columns by their schema names, no aliases."""
    for known in (SMARTPLUG_FORMAT,):
        if schema.equals(known.schema):
            return known
    return FormatProfile(schema, tuple(schema.names))


def _known_aliases() -> set[str]:
    """Column aliases of every known profile (a header line may use any of them)."""
    return set(SMARTPLUG_FORMAT.aliases)


def _not_found(path: Path) -> DataError:
    return DataError(
        f"data file not found: {path}",
        hint="check the path (relative paths in a catalog are relative to the catalog's "
        "folder); `hycq data generate --out FILE` writes synthetic data",
    )


def is_stream(path: Path) -> bool:
    """A FIFO or character device: read once, front to back (a pipe given as a path)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def check_readable(path: Path) -> None:
    """DataError unless ``path`` is a regular file, a FIFO or a character device."""
    if not (path.is_file() or is_stream(path)):
        raise _not_found(path)


def _head_of(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(SNIFF_BYTES)


def first_line(path: Path, head: bytes | None = None) -> str:
    """The first line of a text file (BOM and line end stripped), from its first bytes.

    Raises ``DataError`` for a Parquet file and for a binary one: a NUL byte in the first
    64 KiB, or a first line that is not UTF-8 (invalid bytes further on are bad cells).
    """
    if head is None:
        head = _head_of(path)
    if head.startswith(_PARQUET_MAGIC):
        raise DataError(f"{path}: this is a Parquet file", hint="use format 'parquet'")
    nul = head.find(b"\x00")
    if nul >= 0:
        raise DataError(
            f"{path}: not a text (CSV) file: NUL byte at byte {nul}",
            hint="give a CSV or Parquet file",
        )
    end = head.find(b"\n")
    first = head if end < 0 else head[: end + 1]
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if end >= 0 or len(head) < SNIFF_BYTES or exc.start < len(head) - 3:
            raise DataError(
                f"{path}: not a text (CSV) file: invalid UTF-8 at byte {exc.start}",
                hint="give a CSV or Parquet file",
            ) from None
        text = head[: exc.start].decode("utf-8-sig")  # a character cut by the sniff limit
    lines = text.splitlines()
    return lines[0] if lines else ""


def _is_number(field: str) -> bool:
    try:
        float(field.strip())
    except ValueError:
        return False
    return True


def looks_like_header(line: str, names: Sequence[str] | None = None) -> bool:
    """Whether the first line of a CSV file names columns, judged by its content (quotes are
    CSV syntax, not a sign of text): it names one of ``names`` (or an alias), or none of its
    fields is a number.

    Example:
        >>> looks_like_header('"1","1377986401","2.5","1","0","0","0"')
        False
        >>> looks_like_header("ts,value,id"), looks_like_header('"plug","load"')
        (True, True)
    """
    if names is None:
        names = default_profile().raw_columns
    fields = [f.strip().lower() for f in next(csv.reader([line]), [])]
    known = {n.lower() for n in names} | _known_aliases()
    return any(f in known for f in fields) or not any(_is_number(f) for f in fields)


def format_of(path: Path, head: bytes, names: Sequence[str]) -> str:
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    line = first_line(path, head)
    if not line.strip():
        raise DataError(f"{path}: the file is empty", hint=default_profile().headerless_hint)
    return "csv" if looks_like_header(line, names) else "debs"


def empty_reason(path: Path, fmt: str) -> str | None:
    """Why a regular data file certainly holds no row (None: it may hold some), from its
    first bytes or its Parquet metadata: a CSV file with a header line and only blank lines
    after it, a Parquet file of 0 rows. (An empty or blank file is refused by
    ``detect_format``; the run checks what it read too, for pipes and what this cannot
    tell from the start of a file.)"""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.ParquetFile(path).metadata.num_rows
        except (pa.ArrowException, OSError):
            return None  # the reader says what is wrong with it
        return "a Parquet file of 0 rows" if rows == 0 else None
    if fmt != "csv":
        return None
    head = _head_of(path)
    if len(head) == SNIFF_BYTES:
        return None  # the rest is read by the run
    ends = [i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0]
    rest = head[min(ends) + 1 :] if ends else b""
    return "only a header line" if not rest.strip(b"\r\n") else None


def detect_format(path: Path | str, names: Sequence[str] | None = None) -> str:
    """``"debs"``, ``"csv"`` or ``"parquet"`` from the extension or the first bytes of a
    regular file (``names``: the columns a header would name; default: the raw columns of
    the default profile)."""
    if names is None:
        names = default_profile().raw_columns
    path = Path(path)
    if not path.is_file():
        raise _not_found(path)
    if path.suffix.lower() in _PARQUET_SUFFIXES:
        return "parquet"
    return format_of(path, _head_of(path), names)
