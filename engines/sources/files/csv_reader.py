"""The CSV reader: headerless (``debs``) and headed CSV files, streamed by Arrow's CSV
reader; a FIFO or character device is read once, chunk by chunk, as lines come."""

from __future__ import annotations

import csv
import io
import os
import select
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from engines import interrupts
from engines.input_wait import waiting
from engines.sources.files.columns import ReaderState
from engines.sources.files.formats import SNIFF_BYTES, first_line


class IdleChunk(bytes):
    """What a live feed's ``chunks()`` yields when it has been silent for its ``idle_s``
    wall seconds (after some data): the reader passes it on as an empty batch, and the
    merge counts the stream as progressed past its last timestamp (docs/live.md)."""


#: the one idle chunk
IDLE = IdleChunk()


class Pipe:
    """A FIFO or character device, read once and only on the calling thread: its first line
    is sniffed for the format, then complete lines are handed out as they come (a live feed
    is not held back until a block fills). Waiting for data polls stop requests
    (engines.interrupts), so a signal ends a run that waits on a quiet pipe; nothing blocks
    inside Arrow, which parses each chunk from memory."""

    def __init__(self, path: Path, idle_s: float | None = None) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._buf = bytearray()
        self._eof = False
        #: wall seconds of silence (after some data) before an IDLE chunk; None: never
        self.idle_s = idle_s

    def sniff(self) -> bytes:
        """The first bytes, up to the first line end or SNIFF_BYTES (kept for chunks())."""
        while not self._eof and b"\n" not in self._buf and len(self._buf) < SNIFF_BYTES:
            self._fill(None)
        return bytes(self._buf[:SNIFF_BYTES])

    def _fill(self, timeout: float | None) -> bool:
        """Read what is there, waiting up to ``timeout`` (None: until something comes);
        False if nothing came in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with waiting():  # a live run's lag leaves out the time the source kept it waiting
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
        last: float | None = None  # when the last chunk (or IDLE) was handed out
        while True:
            quiet = False
            if not self._eof and len(self._buf) < block:
                quiet = not self._fill(0.05)
                if (
                    quiet
                    and self.idle_s is not None
                    and last is not None
                    and time.monotonic() - last >= self.idle_s
                    and b"\n" not in self._buf
                ):
                    last = time.monotonic()
                    yield IDLE
                    continue
            end = self._buf.rfind(b"\n")
            if self._eof:
                if self._buf:
                    yield bytes(self._buf)
                    self._buf.clear()
                return
            if end >= 0 and (quiet or len(self._buf) >= block):
                last = time.monotonic()
                yield bytes(self._buf[: end + 1])
                del self._buf[: end + 1]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


#: the raw batch a pipe's IDLE chunk becomes (BatchReader yields an empty conformed batch)
IDLE_BATCH = pa.record_batch({"idle": pa.array([], pa.int8())})


def _lines(chunk: bytes) -> int:
    """Lines of a chunk that the CSV parser counts (empty lines are skipped, not counted)."""
    return sum(1 for line in chunk.split(b"\n") if line not in (b"", b"\r"))


class CsvSource(ReaderState):
    """Opens a CSV file (or pipe) as the reader's source of raw batches."""

    pipe: Pipe | None

    def _open_csv(self) -> None:
        self._line1 = first_line(self.path, self.pipe.sniff() if self.pipe else None)
        block = max(1 << 16, min(self.batch_rows * 48, 1 << 26))
        # Line numbers of skipped rows are only known to a serial parser.
        threads = self.on_bad is None
        if self.fmt == "debs":
            names = list(self.profile.raw_columns)
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
            if isinstance(chunk, IdleChunk):
                yield IDLE_BATCH
                continue
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
