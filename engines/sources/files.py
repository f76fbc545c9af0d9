"""Streaming readers of stream data files: headerless CSV, CSV with a header, Parquet.

Every reader yields ``pyarrow.RecordBatch`` es with exactly a target Arrow schema (by default
the smart-plug ``SCHEMA``; the run-time passes the catalog stream's schema): the columns are
renamed, reordered and cast, streaming (CSV through ``pyarrow.csv.open_csv``, Parquet through
``ParquetFile.iter_batches``). Column types: int32, int64, float64, bool, string.

Formats (``detect_format``):

* ``debs``: CSV without a header whose columns are the schema's columns in order (for the
  smart-plug schema, the raw DEBS 2014 file
  ``id,timestamp,value,property,plug_id,household_id,house_id``);
* ``csv``: CSV whose first row names the columns, in any order; other columns are ignored
  (for the smart-plug schema the time column may be called ``ts`` or ``timestamp``);
* ``parquet``: a Parquet file with those columns (any integer width for integers, any number
  for float64).

Bad rows. A row with the wrong number of fields, an empty cell, a value that does not parse
as its column's type (or is out of its range), or a non-finite float (``nan``, ``inf``,
``1e999``) is *bad*. With ``on_bad`` the reader calls ``on_bad(number, raw, reason)`` for it
and skips it: ``number`` is the 1-based line of the file for CSV (the header is line 1; blank
lines, which are skipped, are not counted) and the 1-based row for Parquet; ``raw`` is the
row's text (for CSV the line, or the schema's fields in file order joined by commas; for
Parquet the row as JSON); ``reason`` says which column holds what. Reports come in file
order. Without ``on_bad`` the first bad row raises :class:`DataError` (``row N``).

Performance: CSV cells are read as strings and cast per column by Arrow; only when a cast
fails does the reader look for the bad cells (a regular-expression prefilter, then
bisection for values the prefilter lets through), and only the bad rows become Python
objects. File-level problems (missing file, missing column, wrong Parquet type, not a text
file) raise ``DataError`` when the reader is opened.

Example:
    >>> import tempfile
    >>> from engines.sources.smartplug import generate_to_file
    >>> folder = Path(tempfile.mkdtemp())
    >>> generate_to_file(folder / "r.csv", seconds=2, houses=1, seed=1) > 0
    True
    >>> detect_format(folder / "r.csv")
    'debs'
    >>> next(read_batches(folder / "r.csv")).schema.names[:3]
    ['id', 'ts', 'value']
    >>> _ = (folder / "bad.csv").write_text("1,1377986401,2.5,1,0,0,0\\n2,1377986401,x,1,0,0,0\\n")
    >>> seen = []
    >>> [b.num_rows for b in read_batches(folder / "bad.csv", on_bad=lambda *a: seen.append(a))]
    [1]
    >>> seen
    [(2, '2,1377986401,x,1,0,0,0', "unparsable value 'x' in column 'value' (expected DOUBLE)")]
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import io
import json
import math
import os
import re
import select
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from engines import interrupts
from engines.sources.smartplug import DEBS_COLUMNS, SCHEMA
from optimizer.ir.errors import DataError, closest

#: Formats ``read_batches`` understands.
FORMATS = ("debs", "csv", "parquet")
#: Accepted alternative names of smart-plug columns in files with named columns.
ALIASES = {"timestamp": "ts"}

#: ``on_bad(number, raw, reason)``: a bad row (line of a CSV file, row of a Parquet file).
OnBad = Callable[[int, str, str], None]

_PARQUET_SUFFIXES = (".parquet", ".pq")
_PARQUET_MAGIC = b"PAR1"
_SNIFF_BYTES = 1 << 16
_COLUMNS_HINT = (
    "expected columns id, ts (or timestamp), value, property, plug_id, household_id, house_id"
)
_TS_HINT = "ts must be integer epoch seconds"
_DEBS_HINT = (
    "a raw DEBS file has no header and 7 numeric columns per row: "
    "id,timestamp,value,property,plug_id,household_id,house_id"
)

#: SQL names of the supported column types (the catalog's vocabulary), for messages.
_TYPE_NAMES = {
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.string(): "VARCHAR",
}
#: Per (wide) type, a superset of the texts Arrow's cast accepts once surrounding whitespace
#: (and, for integers, a leading '+') is removed: cells that fail it are unparsable without a
#: cast. Integers are decimal or 0x-hexadecimal, as Arrow parses them.
_PREFILTER = {
    pa.int64(): r"^\s*([+-]?[0-9]+|0[xX][0-9a-fA-F]+)\s*$",
    pa.float64(): r"(?i)^\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|nan|inf|infinity)\s*$",
    pa.bool_(): r"(?i)^\s*(true|false|1|0)\s*$",
}
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+|0[xX][0-9a-fA-F]+")
_INT32_RANGE = (-(2**31), 2**31 - 1)


def _not_found(path: Path) -> DataError:
    return DataError(
        f"data file not found: {path}",
        hint="check the path (relative paths in a catalog are relative to the catalog's "
        "folder); `hycq data generate --out FILE` writes synthetic data",
    )


def _is_stream(path: Path) -> bool:
    """A FIFO or character device: read once, front to back (a pipe given as a path)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _check_readable(path: Path) -> None:
    """DataError unless ``path`` is a regular file, a FIFO or a character device."""
    if not (path.is_file() or _is_stream(path)):
        raise _not_found(path)


class _Pipe:
    """A FIFO or character device, read once and only on the calling thread: its first line
    is sniffed for the format, then complete lines are handed out as they come (a live feed
    is not held back until a block fills). Waiting for data polls stop requests
    (engines.interrupts), so a signal ends a run that waits on a quiet pipe; nothing blocks
    inside Arrow, which parses each chunk from memory."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._buf = bytearray()
        self._eof = False

    def sniff(self) -> bytes:
        """The first bytes, up to the first line end or _SNIFF_BYTES (kept for chunks())."""
        while not self._eof and b"\n" not in self._buf and len(self._buf) < _SNIFF_BYTES:
            self._fill(None)
        return bytes(self._buf[:_SNIFF_BYTES])

    def _fill(self, timeout: float | None) -> bool:
        """Read what is there, waiting up to ``timeout`` (None: until something comes);
        False if nothing came in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not select.select([self._fd], [], [], 0.1)[0]:
            interrupts.check_stop()
            if deadline is not None and time.monotonic() >= deadline:
                return False
        data = os.read(self._fd, 1 << 16)
        if data:
            self._buf += data
        else:
            self._eof = True
        return True

    def chunks(self, block: int) -> Iterator[bytes]:
        """Complete lines, at most about ``block`` bytes at a time, as soon as the pipe goes
        quiet for a moment; the rest at the end (a last line without its line end too)."""
        while True:
            quiet = False
            if not self._eof and len(self._buf) < block:
                quiet = not self._fill(0.05)
            end = self._buf.rfind(b"\n")
            if self._eof:
                if self._buf:
                    yield bytes(self._buf)
                    self._buf.clear()
                return
            if end >= 0 and (quiet or len(self._buf) >= block):
                yield bytes(self._buf[: end + 1])
                del self._buf[: end + 1]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _lines(chunk: bytes) -> int:
    """Lines of a chunk that the CSV parser counts (empty lines are skipped, not counted)."""
    return sum(1 for line in chunk.split(b"\n") if line not in (b"", b"\r"))


def _head_of(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(_SNIFF_BYTES)


def _first_line(path: Path, head: bytes | None = None) -> str:
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
        if end >= 0 or len(head) < _SNIFF_BYTES or exc.start < len(head) - 3:
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


def looks_like_header(line: str, names: Sequence[str] = DEBS_COLUMNS) -> bool:
    """Whether the first line of a CSV file names columns, judged by its content (quotes are
    CSV syntax, not a sign of text): it names one of ``names`` (or an alias), or none of its
    fields is a number.

    Example:
        >>> looks_like_header('"1","1377986401","2.5","1","0","0","0"')
        False
        >>> looks_like_header("ts,value,id"), looks_like_header('"plug","load"')
        (True, True)
    """
    fields = [f.strip().lower() for f in next(csv.reader([line]), [])]
    known = {n.lower() for n in names} | set(ALIASES)
    return any(f in known for f in fields) or not any(_is_number(f) for f in fields)


def _format_of(path: Path, head: bytes, names: Sequence[str]) -> str:
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    line = _first_line(path, head)
    if not line.strip():
        raise DataError(f"{path}: the file is empty", hint=_DEBS_HINT)
    return "csv" if looks_like_header(line, names) else "debs"


def detect_format(path: Path | str, names: Sequence[str] = DEBS_COLUMNS) -> str:
    """``"debs"``, ``"csv"`` or ``"parquet"`` from the extension or the first bytes of a
    regular file (``names``: the columns a header would name)."""
    path = Path(path)
    if not path.is_file():
        raise _not_found(path)
    if path.suffix.lower() in _PARQUET_SUFFIXES:
        return "parquet"
    return _format_of(path, _head_of(path), names)


def read_batches(
    path: Path | str,
    fmt: str | None = None,
    batch_rows: int = 65536,
    schema: pa.Schema | None = None,
    on_bad: OnBad | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream a data file as record batches with ``schema`` of at most ``batch_rows`` rows.

    ``fmt`` is ``"debs"``, ``"csv"`` or ``"parquet"``; None detects it (``detect_format``).
    ``schema`` is the target Arrow schema (default: the smart-plug ``SCHEMA``). The file is
    opened and its header / schema checked before this returns (file-level problems raise
    ``DataError`` here). Bad rows found while iterating go to ``on_bad(number, raw, reason)``
    and are skipped; without ``on_bad`` the first one raises ``DataError``. Batches that lose
    every row are not yielded.
    """
    path = Path(path)
    _check_readable(path)
    schema = SCHEMA if schema is None else schema
    pipe: _Pipe | None = None
    if _is_stream(path):  # a FIFO or device: one pass, the format sniffed from its start
        try:
            pipe = _Pipe(path)
        except OSError as err:
            raise DataError(f"cannot read {path}: {err.strerror or err}") from None
        head = pipe.sniff()
        detected = _format_of(path, head, schema.names)
        if detected == "parquet" or fmt == "parquet":
            pipe.close()
            raise DataError(
                f"{path}: Parquet cannot be read from a pipe or device",
                hint="give a Parquet file, or stream CSV lines",
            )
        fmt = fmt or detected
    elif fmt is None:
        fmt = detect_format(path, schema.names)
    if fmt not in FORMATS:
        raise DataError(
            f"{path}: unknown data format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}"
        )
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    for f in schema:
        if f.type not in _TYPE_NAMES:
            raise ValueError(f"unsupported column type {f.type} of column '{f.name}'")
    reader = _BatchReader(path, fmt, batch_rows, schema, on_bad, pipe)
    return iter(reader)


def _type_name(t: pa.DataType) -> str:
    return _TYPE_NAMES.get(t, str(t))


def _or(a: pa.Array | None, b: pa.Array | None) -> pa.Array | None:
    if a is None:
        return b
    if b is None:
        return a
    return pc.or_(a, b)


def _mask_of(indices: list[int], n: int) -> pa.Array:
    mask = np.zeros(n, dtype=bool)
    mask[indices] = True
    return pa.array(mask)


def _cast_locate(arr: pa.Array, target: pa.DataType, offset: int = 0) -> tuple[pa.Array, list[int]]:
    """Cast ``arr``; cells whose cast fails become null and their indices are returned.

    One cast when every cell converts; otherwise bisection, so a few bad cells among many cost
    O(bad * log n) casts of shrinking slices.
    """
    try:
        if target == pa.string():
            arr.validate(full=True)  # UTF-8 (the CSV reader does not check it)
            return arr, []
        return pc.cast(arr, target), []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        if len(arr) == 1:
            return pa.nulls(1, target), [offset]
    mid = len(arr) // 2
    left, bad_left = _cast_locate(arr.slice(0, mid), target, offset)
    right, bad_right = _cast_locate(arr.slice(mid), target, offset + mid)
    return pa.concat_arrays([left, right]), bad_left + bad_right


class _BatchReader:
    """One pass over one file: opens eagerly, yields conformed batches when iterated."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        batch_rows: int,
        schema: pa.Schema,
        on_bad: OnBad | None,
        pipe: _Pipe | None = None,
    ) -> None:
        self.path = path
        self.pipe = pipe
        self._line1: str | None = None
        self._line_offset = 0  # lines before the chunk being parsed (pipes)
        self.fmt = fmt
        self.batch_rows = batch_rows
        self.schema = schema
        self.on_bad = on_bad
        self.smartplug = schema.equals(SCHEMA)
        self.text = fmt != "parquet"
        self.rows_read = 0  # rows the file parser delivered so far (not counting skipped ones)
        self._columns: list[str] = []  # file column for each schema column, in schema order
        self._file_names: list[str] = []  # every column of the file, in file order
        self._raw_order: list[int] = []  # schema columns in file order (to render a CSV row)
        self._header_lines = 1 if fmt == "csv" else 0
        # Rows with a wrong field count, reported by the CSV parser (lines ascending) and
        # passed on to on_bad in line order with the value problems of the batches around them.
        self._invalid: list[tuple[int, str, str]] = []
        self._invalid_lines: list[int] = []
        self._invalid_done = 0  # invalid lines before the rows still to come
        self._source: Iterator[pa.RecordBatch]
        try:
            if fmt == "parquet":
                self._open_parquet()
            else:
                self._open_csv()
        except DataError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise self._error(exc) from None

    # -- opening ----------------------------------------------------------------------------

    def _columns_hint(self) -> str:
        if self.smartplug:
            return _COLUMNS_HINT
        return "expected columns " + ", ".join(self.schema.names)

    def _map_columns(self, names: list[str]) -> dict[str, str]:
        """Schema column -> file column, for files that name their columns."""
        aliases = ALIASES if self.smartplug else {}
        wanted = {n.lower(): n for n in self.schema.names}
        found: dict[str, str] = {}
        for name in names:
            key = name.strip().lower()
            key = aliases.get(key, key)
            if key in wanted:
                key = wanted[key]
                if key in found:
                    raise DataError(
                        f"{self.path}: columns '{found[key]}' and '{name}' both give '{key}'",
                        hint="keep only one of them",
                    )
                found[key] = name
        for want in self.schema.names:
            if want not in found:
                taken = set(found.values())
                near = closest(want, [n for n in names if n not in taken])
                extra = f"; did you mean '{near}'?" if near else ""
                listed = ", ".join(names) if names else "none"
                raise DataError(
                    f"{self.path}: missing column '{want}' (columns found: {listed})",
                    hint=self._columns_hint() + extra,
                )
        return found

    def _open_csv(self) -> None:
        self._line1 = _first_line(self.path, self.pipe.sniff() if self.pipe else None)
        block = max(1 << 16, min(self.batch_rows * 48, 1 << 26))
        # Line numbers of skipped rows are only known to a serial parser.
        threads = self.on_bad is None
        if self.fmt == "debs":
            names = list(DEBS_COLUMNS) if self.smartplug else list(self.schema.names)
            read_options = pacsv.ReadOptions(
                column_names=names, block_size=block, use_threads=threads
            )
            self._file_names = names
        else:
            header = next(csv.reader(io.StringIO(self._line1)), [])
            found = self._map_columns(header)
            self._file_names = header
            names = [found[n] for n in self.schema.names]
            read_options = pacsv.ReadOptions(block_size=block, use_threads=threads)
        self._columns = names
        position = {n: i for i, n in enumerate(self._file_names)}
        self._raw_order = sorted(range(len(names)), key=lambda i: position.get(names[i], i))
        convert = pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            include_columns=names,
            check_utf8=False,  # checked per cell, so one bad byte costs one row, not the file
            null_values=[""],  # only an empty cell is missing ("nan", "NULL" are values)
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,  # "" is an empty string, not a missing value
        )
        parse = pacsv.ParseOptions(
            invalid_row_handler=self._invalid_row if self.on_bad is not None else None
        )
        if self.pipe is None:
            stream = pacsv.open_csv(
                self.path, read_options=read_options, parse_options=parse, convert_options=convert
            )
            self._source = iter(stream)
            return
        # A pipe: each chunk of complete lines is parsed from memory, the header (if any)
        # taken off the first; invalid rows are numbered from the chunk's first line.
        read_options = pacsv.ReadOptions(
            column_names=self._file_names, block_size=block, use_threads=threads
        )
        self._source = self._pipe_batches(block, read_options, parse, convert)

    def _pipe_batches(
        self,
        block: int,
        read_options: pacsv.ReadOptions,
        parse: pacsv.ParseOptions,
        convert: pacsv.ConvertOptions,
    ) -> Iterator[pa.RecordBatch]:
        assert self.pipe is not None
        header = self._header_lines
        self._line_offset = 0
        for chunk in self.pipe.chunks(block):
            if header:
                end = chunk.find(b"\n")
                chunk = chunk[end + 1 :] if end >= 0 else b""
                self._line_offset, header = header, 0
            if not _lines(chunk):
                continue
            table = pacsv.read_csv(
                pa.BufferReader(chunk),
                read_options=read_options,
                parse_options=parse,
                convert_options=convert,
            )
            self._line_offset += _lines(chunk)
            yield from table.combine_chunks().to_batches()

    def _invalid_row(self, row: Any) -> str:
        """The CSV parser's handler of a row with the wrong number of fields: defer, skip."""
        number = int(row.number) if row.number is not None else 0
        number += self._line_offset  # a pipe's chunk: lines before it
        self._invalid_lines.append(number)
        self._invalid.append(
            (
                number,
                row.text,
                f"expected {row.expected_columns} fields, found {row.actual_columns}",
            )
        )
        return "skip"

    def _open_parquet(self) -> None:
        pf = pq.ParquetFile(self.path)
        schema = pf.schema_arrow
        found = self._map_columns(list(schema.names))
        for field in self.schema:
            have = schema.field(found[field.name]).type
            want = field.type
            if pa.types.is_integer(want):
                ok, what = pa.types.is_integer(have), "an integer"
            elif pa.types.is_floating(want):
                ok = (
                    pa.types.is_integer(have)
                    or pa.types.is_floating(have)
                    or pa.types.is_decimal(have)
                )
                what = "a number"
            elif pa.types.is_boolean(want):
                ok, what = pa.types.is_boolean(have), "a boolean"
            else:
                ok = pa.types.is_string(have) or pa.types.is_large_string(have)
                what = "a string"
            if not ok:
                ts_hint = self.smartplug and field.name == "ts"
                raise DataError(
                    f"{self.path}: column '{found[field.name]}' has type {have}, "
                    f"expected {what} ({want})",
                    hint=_TS_HINT if ts_hint else self._columns_hint(),
                )
        self._columns = [found[n] for n in self.schema.names]
        self._file_names = list(schema.names)
        self._source = pf.iter_batches(batch_size=self.batch_rows, columns=self._columns)

    # -- reading ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                raw = next(self._source)
            except StopIteration:
                break
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise self._error(exc) from None
            for start in range(0, raw.num_rows, self.batch_rows):
                batch = self._conform(raw.slice(start, self.batch_rows))
                if batch.num_rows:
                    yield batch
        self._report_invalid(None, [])

    def _line(self, k: int) -> int:
        """The line (CSV) or row (Parquet) number of the k-th row the parser delivered."""
        if not self.text:
            return k + 1
        first = self._header_lines + k + 1 + self._invalid_done
        j = 0  # skipped lines before the row's line, among those not yet passed
        while True:
            j2 = bisect.bisect_right(self._invalid_lines, first + j)
            if j2 == j:
                return first + j
            j = j2

    def _conform(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        """A raw batch with the file's columns -> a batch with the schema, bad rows removed."""
        arrays = []
        masks = []
        bad = None
        for field, name in zip(self.schema, self._columns, strict=True):
            values, mask = self._convert(raw.column(name), field.type)
            arrays.append(values)
            masks.append(mask)
            bad = _or(bad, mask)
        first = self.rows_read
        self.rows_read += raw.num_rows
        problems: list[tuple[int, str, str]] = []
        if bad is not None and pc.any(bad).as_py():
            problems = self._describe(raw, masks, pc.indices_nonzero(bad), first)
            keep = pc.invert(bad)
            arrays = [pc.filter(a, keep) for a in arrays]
        if self.text:
            self._report_invalid(self._line(self.rows_read - 1), problems)
        else:
            self._report(problems)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _convert(self, col: pa.Array, target: pa.DataType) -> tuple[pa.Array, pa.Array | None]:
        """One column cast to ``target``: (values, mask of bad cells or None).

        The fast path is one Arrow cast (plus a finiteness check for floats and a range check
        for int32, which is parsed as int64 so that too large values are out of range rather
        than unparsable); only when it fails are the bad cells located.
        """
        bad = col.is_null() if col.null_count else None
        if col.type == target and target != pa.string():
            values = col
        elif target == pa.string():
            try:
                if self.text:
                    col.validate(full=True)  # UTF-8, which the CSV reader does not check
                values = col if col.type == target else pc.cast(col, target)
            except pa.ArrowInvalid:
                values, failed = _cast_locate(col, target)
                bad = _or(bad, _mask_of(failed, len(col)))
        else:
            wide = pa.int64() if pa.types.is_integer(target) else target
            try:
                values = col if col.type == wide else pc.cast(col, wide)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                values, failed_mask = self._convert_slow(col, wide)
                bad = _or(bad, failed_mask)
            if wide != target:
                low, high = _INT32_RANGE
                lo_hi = pc.min_max(values)
                lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
                if lo is not None and (lo < low or hi > high):
                    out = pc.fill_null(
                        pc.or_(pc.less(values, low), pc.greater(values, high)), False
                    )
                    bad = _or(bad, out)
                    values = pc.if_else(out, pa.scalar(None, wide), values)
                values = pc.cast(values, target)
        if pa.types.is_floating(target):
            finite = pc.is_finite(values)
            if not pc.all(finite).as_py():
                bad = _or(bad, pc.invert(pc.fill_null(finite, True)))
        return values, bad

    def _convert_slow(self, col: pa.Array, wide: pa.DataType) -> tuple[pa.Array, pa.Array]:
        """Locate the cells that do not cast: (values with those cells null, their mask)."""
        n = len(col)
        if not self.text:
            values, failed = _cast_locate(col, wide)
            return values, _mask_of(failed, n)
        ok = pc.fill_null(pc.match_substring_regex(col, _PREFILTER[wide]), True)
        text = pc.if_else(ok, col, pa.scalar(None, pa.string()))
        try:
            values, failed = pc.cast(text, wide), []
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            text = pc.ascii_trim_whitespace(text)
            if pa.types.is_integer(wide):
                text = pc.replace_substring_regex(text, r"^\+", "")
            values, failed = _cast_locate(text, wide)
        unparsable = pc.invert(ok)
        if failed:
            unparsable = pc.or_(unparsable, _mask_of(failed, n))
        return values, unparsable

    # -- bad rows ---------------------------------------------------------------------------

    def _describe(
        self, raw: pa.RecordBatch, masks: list[pa.Array | None], rows: pa.Array, first: int
    ) -> list[tuple[int, str, str]]:
        """(number, raw text, reason) of the bad ``rows`` of a raw batch (Python objects for
        those rows only)."""
        flags = [None if m is None else pc.take(m, rows).to_pylist() for m in masks]
        cells: dict[str, list[Any]] = {}
        for name in self._columns:
            col = pc.take(raw.column(name), rows)
            if self.text:  # bytes, so that invalid UTF-8 shows as replacement characters
                cells[name] = [
                    None if b is None else bytes(b).decode("utf-8", "replace")
                    for b in col.cast(pa.binary()).to_pylist()
                ]
            else:
                cells[name] = col.to_pylist()
        out = []
        for r, i in enumerate(rows.to_pylist()):
            reasons = [
                self._cell_reason(name, field.type, cells[name][r])
                for field, name, flag in zip(self.schema, self._columns, flags, strict=True)
                if flag is not None and flag[r]
            ]
            if self.text:
                fields = [cells[self._columns[c]][r] for c in self._raw_order]
                line = io.StringIO()
                csv.writer(line, lineterminator="").writerow(
                    ["" if f is None else f for f in fields]
                )
                text = line.getvalue()
            else:
                text = json.dumps({n: cells[n][r] for n in self._columns}, default=str)
            out.append((self._line(first + i), text, "; ".join(reasons)))
        return out

    def _cell_reason(self, name: str, target: pa.DataType, value: Any) -> str:
        """Why one cell (text for CSV, a typed value for Parquet) was rejected."""
        if value is None:
            return f"missing value in column '{name}'"
        if not self.text:
            if isinstance(value, float) and not math.isfinite(value):
                return f"non-finite value {value} in column '{name}'"
            return f"value {value} out of range for {_type_name(target)} in column '{name}'"
        if target == pa.string():
            return f"invalid UTF-8 in value {value!r} of column '{name}'"
        text = value.strip()
        if pa.types.is_floating(target):
            with contextlib.suppress(ValueError):
                if not math.isfinite(float(text)):
                    return f"non-finite value {value!r} in column '{name}'"
        elif pa.types.is_integer(target) and _INTEGER_TEXT.fullmatch(text):
            return f"value {value!r} out of range for {_type_name(target)} in column '{name}'"
        return f"unparsable value {value!r} in column '{name}' (expected {_type_name(target)})"

    def _report_invalid(self, last: int | None, problems: list[tuple[int, str, str]]) -> None:
        """Report a batch's value problems with the skipped rows before its ``last`` line (None:
        all the rest, at the end of the file), in line order."""
        upto = (
            len(self._invalid_lines)
            if last is None
            else bisect.bisect_left(self._invalid_lines, last)
        )
        if upto:
            problems = sorted(problems + self._invalid[:upto])
            del self._invalid[:upto]
            del self._invalid_lines[:upto]
            self._invalid_done += upto
        self._report(problems)

    def _report(self, problems: list[tuple[int, str, str]]) -> None:
        if not problems:
            return
        if self.on_bad is None:
            number, _, reason = problems[0]
            m = re.fullmatch(r"missing value in (column '.*')", reason)
            if m:  # in a file, a missing value is an empty cell
                reason = f"{m.group(1)} is empty" if self.text else f"{m.group(1)} is null"
            raise DataError(f"{self.path}: row {number}: {reason}", hint=self._hint())
        for number, text, reason in problems:
            self.on_bad(number, text, reason)

    # -- errors -----------------------------------------------------------------------------

    def _hint(self) -> str:
        if self.fmt == "debs":
            line = self._line1 or ""
            if line and looks_like_header(line, self.schema.names):
                return "the first row looks like a header: use format 'csv'"
            if self.smartplug:
                return _DEBS_HINT
            return f"a headerless CSV file has {len(self.schema)} columns per row: " + ",".join(
                self.schema.names
            )
        if self.fmt == "csv":
            if self.smartplug:
                return _COLUMNS_HINT + "; values must be numbers (ids and ts integers)"
            return self._columns_hint() + " (with a value in every column)"
        return "give a valid Parquet file"

    def _error(self, exc: BaseException) -> DataError:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = ""
        m = re.search(r"CSV column #(\d+)", detail)
        if m and int(m.group(1)) < len(self._file_names):
            where = f"column '{self._file_names[int(m.group(1))]}': "
        return DataError(
            f"{self.path}: cannot read {self.fmt} data: {where}{detail}", hint=self._hint()
        )
