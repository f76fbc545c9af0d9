"""Streaming readers of smart-plug data files: raw DEBS CSV, CSV with a header, Parquet.

Every reader yields ``pyarrow.RecordBatch`` es with exactly the smart-plug ``SCHEMA`` (the
columns renamed, reordered and cast), streaming: CSV through ``pyarrow.csv.open_csv``, Parquet
through ``ParquetFile.iter_batches``; no Python object is built per row.

Formats (``detect_format``):

* ``debs``: the raw DEBS 2014 CSV, no header, columns
  ``id,timestamp,value,property,plug_id,household_id,house_id``;
* ``csv``: CSV whose first row names the columns, in any order, the time column called ``ts``
  or ``timestamp``; other columns are ignored;
* ``parquet``: a Parquet file with those columns (integer ids, numeric ``value``).

Problems are :class:`~optimizer.ir.errors.DataError` naming the file, what is wrong and how
to fix it. A bad row currently fails the whole read; each batch passes through
``_BatchReader._conform``, the one place where a later dead-letter policy can divert bad rows.

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
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from engines.sources.smartplug import DEBS_COLUMNS, SCHEMA
from optimizer.ir.errors import DataError, closest

#: Formats ``read_batches`` understands.
FORMATS = ("debs", "csv", "parquet")
#: Accepted alternative names of schema columns in files with named columns.
ALIASES = {"timestamp": "ts"}

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


def _not_found(path: Path) -> DataError:
    return DataError(
        f"data file not found: {path}",
        hint="check the path (relative paths in a catalog are relative to the catalog's "
        "folder); `hycq data generate --out FILE` writes synthetic data",
    )


def _first_line(path: Path) -> str:
    """The first line of a text file (BOM and line end stripped)."""
    with path.open("rb") as f:
        head = f.read(_SNIFF_BYTES)
    if head.startswith(_PARQUET_MAGIC):
        raise DataError(f"{path}: this is a Parquet file", hint="use format 'parquet'")
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if len(head) < _SNIFF_BYTES or exc.start < len(head) - 3:
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


def detect_format(path: Path | str) -> str:
    """``"debs"``, ``"csv"`` or ``"parquet"`` from the extension or the first bytes of a file."""
    path = Path(path)
    if not path.is_file():
        raise _not_found(path)
    if path.suffix.lower() in _PARQUET_SUFFIXES:
        return "parquet"
    with path.open("rb") as f:
        if f.read(4) == _PARQUET_MAGIC:
            return "parquet"
    line = _first_line(path)
    if not line.strip():
        raise DataError(f"{path}: the file is empty", hint=_DEBS_HINT)
    first = line.split(",", 1)[0]
    return "debs" if _is_number(first) else "csv"


def read_batches(
    path: Path | str, fmt: str | None = None, batch_rows: int = 65536
) -> Iterator[pa.RecordBatch]:
    """Stream a data file as record batches with ``SCHEMA`` of at most ``batch_rows`` rows.

    ``fmt`` is ``"debs"``, ``"csv"`` or ``"parquet"``; None detects it (``detect_format``).
    The file is opened and its header / schema checked before this returns; conversion errors
    in later rows are raised while iterating. All problems are ``DataError``.
    """
    path = Path(path)
    if not path.is_file():
        raise _not_found(path)
    if fmt is None:
        fmt = detect_format(path)
    if fmt not in FORMATS:
        raise DataError(
            f"{path}: unknown data format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}"
        )
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    reader = _BatchReader(path, fmt, batch_rows)
    return iter(reader)


def _map_columns(path: Path, names: list[str]) -> dict[str, str]:
    """Schema column -> file column, for files that name their columns."""
    found: dict[str, str] = {}
    for name in names:
        key = name.strip().lower()
        key = ALIASES.get(key, key)
        if key in SCHEMA.names:
            if key in found:
                raise DataError(
                    f"{path}: columns '{found[key]}' and '{name}' both give '{key}'",
                    hint="keep only one of them",
                )
            found[key] = name
    for want in SCHEMA.names:
        if want not in found:
            near = closest(want, [n for n in names if n.strip().lower() not in found])
            extra = f"; did you mean '{near}'?" if near else ""
            listed = ", ".join(names) if names else "none"
            raise DataError(
                f"{path}: missing column '{want}' (columns found: {listed})",
                hint=_COLUMNS_HINT + extra,
            )
    return found


class _BatchReader:
    """One pass over one file: opens eagerly, yields conformed batches when iterated."""

    def __init__(self, path: Path, fmt: str, batch_rows: int) -> None:
        self.path = path
        self.fmt = fmt
        self.batch_rows = batch_rows
        self.rows_read = 0
        self._columns: list[str]  # file column for each SCHEMA column, in SCHEMA order
        self._file_names: list[str] = []  # every column of the file, in file order
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

    def _open_csv(self) -> None:
        block = max(1 << 16, min(self.batch_rows * 48, 1 << 26))
        if self.fmt == "debs":
            names = list(DEBS_COLUMNS)
            read_options = pacsv.ReadOptions(column_names=names, block_size=block)
            types = {n: f.type for n, f in zip(names, SCHEMA, strict=True)}
            self._file_names = names
        else:
            header = next(csv.reader(io.StringIO(_first_line(self.path))), [])
            found = _map_columns(self.path, header)
            self._file_names = header
            names = [found[n] for n in SCHEMA.names]
            read_options = pacsv.ReadOptions(block_size=block)
            types = {found[f.name]: f.type for f in SCHEMA}
        convert = pacsv.ConvertOptions(column_types=types, include_columns=names)
        self._columns = names
        stream = pacsv.open_csv(self.path, read_options=read_options, convert_options=convert)
        self._source = iter(stream)

    def _open_parquet(self) -> None:
        pf = pq.ParquetFile(self.path)
        schema = pf.schema_arrow
        found = _map_columns(self.path, list(schema.names))
        for field in SCHEMA:
            have = schema.field(found[field.name]).type
            ok = pa.types.is_integer(have) or (
                field.name == "value" and (pa.types.is_floating(have) or pa.types.is_decimal(have))
            )
            if not ok:
                want = "a number" if field.name == "value" else "an integer"
                raise DataError(
                    f"{self.path}: column '{found[field.name]}' has type {have}, "
                    f"expected {want} ({field.type})",
                    hint=_TS_HINT if field.name == "ts" else _COLUMNS_HINT,
                )
        self._columns = [found[n] for n in SCHEMA.names]
        self._source = pf.iter_batches(batch_size=self.batch_rows, columns=self._columns)

    # -- reading ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                raw = next(self._source)
            except StopIteration:
                return
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise self._error(exc) from None
            for start in range(0, raw.num_rows, self.batch_rows):
                yield self._conform(raw.slice(start, self.batch_rows))

    def _conform(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        """A raw batch with the file's columns -> a batch with ``SCHEMA``.

        Extension point: per-row bad-data handling (dead-lettering) belongs here.
        """
        arrays = []
        for field, name in zip(SCHEMA, self._columns, strict=True):
            col = raw.column(name)
            if col.null_count:
                row = self.rows_read + pc.index(pc.is_null(col), True).as_py() + 1
                raise DataError(
                    f"{self.path}: row {row}: column '{name}' is empty",
                    hint="every row needs a value in every column",
                )
            if col.type != field.type:
                try:
                    col = col.cast(field.type)
                except pa.ArrowInvalid as exc:
                    raise DataError(
                        f"{self.path}: column '{name}' does not fit {field.type}: {exc}",
                        hint=_COLUMNS_HINT,
                    ) from None
            arrays.append(col)
        self.rows_read += raw.num_rows
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)

    def _error(self, exc: BaseException) -> DataError:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = ""
        m = re.search(r"CSV column #(\d+)", detail)
        if m and int(m.group(1)) < len(self._file_names):
            where = f"column '{self._file_names[int(m.group(1))]}': "
        if self.fmt == "debs":
            line = ""
            with contextlib.suppress(DataError):
                line = _first_line(self.path)
            if line and not _is_number(line.split(",", 1)[0]):
                hint = "the first row looks like a header: use format 'csv'"
            else:
                hint = _DEBS_HINT
        elif self.fmt == "csv":
            hint = _COLUMNS_HINT + "; values must be numbers (ids and ts integers)"
        else:
            hint = "give a valid Parquet file"
        return DataError(f"{self.path}: cannot read {self.fmt} data: {where}{detail}", hint=hint)
