"""``read_batches``: one file streamed as record batches with exactly a target schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from engines.sources.files.bad_rows import TYPE_NAMES, BadRows
from engines.sources.files.csv_reader import IDLE_BATCH, CsvSource, Pipe
from engines.sources.files.formats import (
    FORMATS,
    OnBad,
    check_readable,
    default_profile,
    detect_format,
    format_of,
    is_stream,
    profile_for,
)
from engines.sources.files.parquet_reader import ParquetSource
from optimizer.ir.errors import DataError


def read_batches(
    path: Path | str,
    fmt: str | None = None,
    batch_rows: int = 65536,
    schema: pa.Schema | None = None,
    on_bad: OnBad | None = None,
    idle_s: float | None = None,
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
    check_readable(path)
    schema = default_profile().schema if schema is None else schema
    pipe: Pipe | None = None
    if is_stream(path):  # a FIFO or device: one pass, the format sniffed from its start
        try:
            pipe = Pipe(path, idle_s)
        except OSError as err:
            raise DataError(f"cannot read {path}: {err.strerror or err}") from None
        head = pipe.sniff()
        detected = format_of(path, head, schema.names)
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
        if f.type not in TYPE_NAMES:
            raise ValueError(f"unsupported column type {f.type} of column '{f.name}'")
    reader = BatchReader(path, fmt, batch_rows, schema, on_bad, pipe)
    return iter(reader)


class BatchReader(CsvSource, ParquetSource, BadRows):
    """One pass over one file: opens eagerly, yields conformed batches when iterated."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        batch_rows: int,
        schema: pa.Schema,
        on_bad: OnBad | None,
        pipe: Pipe | None = None,
    ) -> None:
        self.path = path
        self.pipe = pipe
        self._line1: str | None = None
        self._line_offset = 0  # rows (non-blank lines) before the chunk being parsed
        self.fmt = fmt
        self.batch_rows = batch_rows
        self.schema = schema
        self.on_bad = on_bad
        self.profile = profile_for(schema)
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

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                raw = next(self._source)
            except StopIteration:
                break
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise self._error(exc) from None
            if raw is IDLE_BATCH:  # a live feed went quiet: an empty batch tells the merge
                yield pa.RecordBatch.from_pylist([], schema=self.schema)
                continue
            for start in range(0, raw.num_rows, self.batch_rows):
                batch = self._conform(raw.slice(start, self.batch_rows))
                if batch.num_rows:
                    yield batch
        self._report_invalid(None, [])
