"""Result sinks: result rows with their instant, written as Arrow to a file committed
atomically, to stdout as JSON lines, or kept in memory."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from engines.arrow_types import arrow_schema
from engines.output_files import OutputFile, check_writable
from engines.runtime.engine import Rows
from engines.runtime.safe_json import json_line
from engines.sources.mqtt import MqttPublisher, MqttUrl, is_mqtt
from engines.sources.mqtt_payload import MAX_MESSAGE_BYTES
from optimizer.ir.errors import DataError, OptionError
from optimizer.ir.plan import LogicalPlan

#: Arrow integer types of result columns -> their SQL names and ranges.
_INT_RANGES = {
    pa.int32(): ("INTEGER", -(2**31), 2**31 - 1),
    pa.int64(): ("BIGINT", -(2**63), 2**63 - 1),
}


def overflow_error(column: str, sql_type: str, value: Any, instant: Any) -> DataError:
    """The one error every placement gives for an integer result outside its type."""
    return DataError(
        f"integer overflow: column '{column}' at instant {instant} is {value}, outside the "
        f"{sql_type} range",
        hint="integer results must fit their type, as in DuckDB (docs/semantics.md); "
        "CAST the values to DOUBLE to compute with larger magnitudes",
    )


def _result_array(values: Sequence[Any], f: pa.Field, ts: list[int]) -> pa.Array:
    """One result column as Arrow; an integer out of its type's range is a DataError."""
    try:
        return pa.array(list(values), type=f.type)
    except (OverflowError, pa.ArrowInvalid):
        if f.type not in _INT_RANGES:
            raise
        sql_type, lo, hi = _INT_RANGES[f.type]
        for value, instant in zip(values, ts, strict=True):
            if isinstance(value, int) and not lo <= value <= hi:
                raise overflow_error(f.name, sql_type, value, instant) from None
        raise


def _messages(lines: list[bytes], limit: int) -> Iterator[bytes]:
    """Lines joined into messages of at most ``limit`` bytes (a longer line alone): an
    instant's results are one message unless they exceed what a stream takes in one
    (engines/sources/mqtt_payload.py), then several, each of whole lines.

    >>> list(_messages([b"ab\\n", b"cd\\n", b"efgh\\n"], 6))
    [b'ab\\ncd\\n', b'efgh\\n']
    """
    part: list[bytes] = []
    size = 0
    for line in lines:
        if part and size + len(line) > limit:
            yield b"".join(part)
            part, size = [], 0
        part.append(line)
        size += len(line)
    if part:
        yield b"".join(part)


def output_schema(plan: LogicalPlan) -> pa.Schema:
    return arrow_schema(plan.op(plan.sink).schema, [("_ts", pa.int64())])


class ResultSink:
    """Collects result rows with their instant and writes them as Arrow (atomically).

    ``output``: a ``.parquet``/``.csv``/``.jsonl`` path (committed when the run ends), ``-``
    (JSON lines on stdout, written and flushed as each instant fires), or None
    (keep the table in memory for the API and tests when ``keep``, else only count rows).
    JSON lines write NaN and infinities as null.
    """

    FLUSH_ROWS = 65536

    def __init__(
        self,
        schema: pa.Schema,
        output: str | None,
        keep: bool = True,
        label: str = "output",
        partial: Path | None = None,
        append: bool = False,
    ) -> None:
        self.schema = schema
        self.output = output
        self.keep = keep
        self.rows = 0
        self._buffer: Rows = []
        self._ts: list[int] = []
        self._batches: list[pa.RecordBatch] = []
        self._writer: Any = None
        self._out: OutputFile | None = None
        self._fh: Any = None
        #: --output mqtt://...: each instant's results published as one message
        self.publisher: Any = None
        #: stdout and MQTT are written as each instant fires; files when the run ends
        self._live = output == "-" or is_mqtt(output)
        if is_mqtt(output):
            assert output is not None
            self.publisher = MqttPublisher(MqttUrl.parse(output, label), label)
        elif output is not None and output != "-":
            path = Path(output)
            suffix = path.suffix.lower()
            if suffix not in (".parquet", ".csv", ".jsonl"):
                raise OptionError(
                    f"{label} must end in .parquet, .csv or .jsonl (or be -), got '{output}'"
                )
            check_writable(path, label)
            # a checkpointed run writes at ``partial`` and continues it on resume
            self._out = OutputFile(path, label, partial, append)
            try:
                with self._out.errors():
                    if suffix == ".parquet":
                        import pyarrow.parquet as pq

                        self._writer = pq.ParquetWriter(self._out.file("wb"), schema)
                    elif suffix == ".csv":
                        import pyarrow.csv as pacsv

                        header = not (append and partial is not None and partial.stat().st_size)
                        self._writer = pacsv.CSVWriter(
                            self._out.file("wb"),
                            schema,
                            write_options=pacsv.WriteOptions(include_header=header),
                        )
                    else:
                        self._fh = self._out.file("w")
            except BaseException:
                self._out.abort()
                raise
        elif output == "-":
            self._fh = sys.stdout

    def write(self, instant: int, rows: Rows | pa.Table) -> None:
        """Add the result rows of one instant (tuples, or an Arrow table from a MIG)."""
        if isinstance(rows, pa.Table):
            self._write_table(instant, rows)
            return
        if not rows:
            return
        if self.output is None and not self.keep:
            self.rows += len(rows)
            return
        self._buffer.extend(rows)
        self._ts.extend([instant] * len(rows))
        self.rows += len(rows)
        if len(self._buffer) >= self.FLUSH_ROWS or self._live:
            self.flush()
            self._stdout_flush()

    def _stdout_flush(self) -> None:
        """Results on stdout appear as each instant fires (a live source's reader watches)."""
        if self.output == "-":
            self._fh.flush()

    def _write_table(self, instant: int, table: pa.Table) -> None:
        n = table.num_rows
        if n == 0:
            return
        self.rows += n
        if self.output is None and not self.keep:
            return
        self.flush()
        width = len(self.schema) - 1
        arrays = [
            table.column(i).cast(self.schema.field(i).type).combine_chunks() for i in range(width)
        ]
        arrays.append(pa.array([instant] * n, type=pa.int64()))
        self._write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self._stdout_flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        width = len(self.schema) - 1
        cols = list(zip(*self._buffer, strict=True)) if self._buffer else [()] * width
        arrays = [_result_array(cols[i], self.schema.field(i), self._ts) for i in range(width)]
        arrays.append(pa.array(self._ts, type=pa.int64()))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._buffer, self._ts = [], []
        self._write_batch(batch)

    def _write_batch(self, batch: pa.RecordBatch) -> None:
        if self.publisher is not None:
            names = self.schema.names
            rows = [json_line({n: row[n] for n in names}).encode() for row in batch.to_pylist()]
            for message in _messages(rows, MAX_MESSAGE_BYTES):
                self.publisher.publish(message)
        elif self._writer is not None:
            assert self._out is not None
            with self._out.errors():
                self._writer.write_batch(batch)
        elif self._fh is not None:
            names = self.schema.names
            lines = "".join(json_line({n: row[n] for n in names}) for row in batch.to_pylist())
            if self._out is not None:
                with self._out.errors():
                    self._fh.write(lines)
            else:
                self._fh.write(lines)
        else:
            self._batches.append(batch)

    def sync(self) -> int | None:
        """Write out what is buffered and return the output file's committed size in bytes
        (None: not a file; stdout and MQTT were written as each instant fired, and MQTT's
        messages are acknowledged when this returns: a checkpoint never counts a result the
        broker may not have)."""
        self.flush()
        if self._out is None:
            if self._fh is not None:
                self._fh.flush()
            if self.publisher is not None:
                self.publisher.flush()
            return None
        return self._out.sync()

    def close(self) -> pa.Table | None:
        """Flush, commit the output file (rename), and return the in-memory table if any."""
        self.flush()
        if self._out is not None:
            with self._out.errors():
                if self._writer is not None:
                    self._writer.close()
            self._out.commit()
        elif self._fh is not None:
            self._fh.flush()
        elif self.publisher is not None:
            self.publisher.close()
        if self.output is None and self.keep:
            return pa.Table.from_batches(self._batches, schema=self.schema)
        return None

    def abort(self) -> None:
        """Drop the output: nothing appears at its path."""
        if self.publisher is not None:
            self.publisher.abort()
        if self._writer is not None:
            writer, self._writer = self._writer, None
            with contextlib.suppress(Exception):
                writer.close()
            if hasattr(writer, "is_open"):
                writer.is_open = False  # a failed close is not retried (and reported) by __del__
        if self._out is not None:
            self._out.abort()
