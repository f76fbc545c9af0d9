"""The CSV reader: headerless (``debs``) and headed CSV files, FIFOs and character devices,
cut into chunks of whole lines (engines/sources/files/lines.py) that Arrow's CSV parser
reads from memory, one chunk at a time.

A row is one line. Three things can go wrong with a line without spoiling its neighbours:
a wrong number of fields (the parser's invalid-row handler), a quoted value left open at
the line end (engines/sources/files/quotes.py), and a line over ``MAX_LINE_BYTES`` (a
LongLine). Each is a bad row, reported with its line number in file order with the value
problems of the rows around it (engines/sources/files/bad_rows.py)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from engines.sources.files.columns import ReaderState
from engines.sources.files.formats import first_line
from engines.sources.files.lines import (
    IDLE,
    MAX_LINE_BYTES,
    Chunk,
    FileLines,
    IdleChunk,
    LongLine,
    Piece,
    Pipe,
)
from engines.sources.files.quotes import (
    LineCounter,
    is_utf8,
    last_line_open,
    mask_open_quotes,
    mask_undecodable,
)
from optimizer.ir.errors import DataError

__all__ = ["IDLE", "IDLE_BATCH", "CsvSource", "IdleChunk", "Pipe"]

#: the raw batch a pipe's IDLE chunk becomes (BatchReader yields an empty conformed batch)
IDLE_BATCH = pa.record_batch({"idle": pa.array([], pa.int8())})

#: why a line that is not UTF-8 text is a bad row
NOT_UTF8 = "not UTF-8 text"
#: why a line that leaves a quoted value open is a bad row
UNTERMINATED_QUOTE = (
    "unterminated quote: a quoted value runs past the end of its line (a row is one line)"
)


class CsvSource(ReaderState):
    """Opens a CSV file (or pipe) as the reader's source of raw batches."""

    pipe: Pipe | None

    def _open_csv(self) -> None:
        self._line1 = first_line(self.path, self.pipe.sniff() if self.pipe else None)
        block = max(1 << 16, min(self.batch_rows * 48, 1 << 26))
        if self.fmt == "debs":
            self._file_names = list(self.profile.raw_columns)
            self._columns = list(self._file_names)
        else:
            header = next(csv.reader(io.StringIO(self._line1)), [])
            found = self._map_columns(header)
            self._file_names = header
            self._columns = [found[n] for n in self.schema.names]
        position = {n: i for i, n in enumerate(self._file_names)}
        names = self._columns
        self._raw_order = sorted(range(len(names)), key=lambda i: position.get(names[i], i))
        self._csv_convert = pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            include_columns=names,
            check_utf8=False,  # checked per cell, so one bad byte costs one row, not the file
            null_values=[""],  # only an empty cell is missing ("nan", "NULL" are values)
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,  # "" is an empty string, not a missing value
        )
        self._csv_parse = pacsv.ParseOptions(
            invalid_row_handler=self._invalid_row if self.on_bad is not None else None
        )
        self._chunk_invalid: list[tuple[int, str, str]] = []
        self._masked: dict[int, bytes] = {}
        #: the chunk's lines that are not UTF-8 (masked like open quotes), by row number
        self._undecodable: dict[int, bytes] = {}
        self._raise_after: DataError | None = None
        self._line_count = LineCounter()
        pieces: Iterator[Piece]
        if self.pipe is None:
            pieces = FileLines(self.path, block).chunks()  # opened when first iterated
        else:
            pieces = self.pipe.chunks(block)
        self._source = self._batches(pieces)

    def _batches(self, pieces: Iterator[Piece]) -> Iterator[pa.RecordBatch]:
        """Raw batches (every column as text) of the chunks, in order; the header (if any)
        taken off the first; long lines and open quotes become bad rows."""
        header = self._header_lines
        self._line_offset = 0
        for piece in pieces:
            if isinstance(piece, IdleChunk):
                yield IDLE_BATCH
                continue
            if isinstance(piece, LongLine):
                if header:
                    raise DataError(
                        f"{self.path}: the header line is longer than the limit of "
                        f"{MAX_LINE_BYTES:,} bytes",
                        hint="a CSV file's first line names its columns",
                    )
                self._long_line(piece)
                if self._raise_after is not None:
                    raise self._raise_after
                continue
            chunk = piece if isinstance(piece, Chunk) else Chunk(piece)  # bytes: a pipe's
            if header:
                chunk = chunk.after_first_line()
                self._line_offset, header = header, 0
            yield from self._parse_chunk(chunk)
            if self._raise_after is not None:  # without on_bad: the first bad line
                raise self._raise_after

    def _parse_chunk(self, chunk: Chunk) -> list[pa.RecordBatch]:
        """One chunk of whole lines as raw batches (text columns); its bad lines noted for
        the reports and the line numbering moved past it. Parsed once; again only when it
        holds a quote left open (engines/sources/files/quotes.py)."""
        if not len(chunk):
            return []
        self._undecodable = {}
        if not is_utf8(memoryview(chunk.data)[chunk.start : chunk.end]):
            masked_text = mask_undecodable(chunk.bytes(), len(self._file_names))
            if self.on_bad is None:  # the rows before the first such line, then the error
                self._raise_after = DataError(
                    f"{self.path}: row {self._line_offset + min(masked_text.lines)}: {NOT_UTF8}",
                    hint="the file must be UTF-8 text (or pass --dead-letter PATH to set such "
                    "lines aside and go on)",
                )
                chunk = Chunk(masked_text.chunk[: masked_text.first_at])
            else:
                self._undecodable = masked_text.lines
                chunk = Chunk(masked_text.chunk)
            if not len(chunk):
                return []
        quoted = chunk.has(b'"')
        batches: list[pa.RecordBatch] | None
        try:
            batches = self._read(chunk.arrow())
        except pa.ArrowInvalid:
            if not quoted or self.on_bad is not None:
                raise
            batches = None  # without on_bad: perhaps a value that ran on into the next lines
        if quoted and (batches is None or self._ran_on(batches, chunk)):
            text = chunk.bytes()
            masked = mask_open_quotes(text, len(self._file_names))
            if masked.lines and self.on_bad is None:  # the rows before it, then the error
                self._raise_after = DataError(
                    f"{self.path}: row {self._line_offset + min(masked.lines)}: "
                    f"{UNTERMINATED_QUOTE}",
                    hint="close the quote on its line, or remove it",
                )
                before = text[: masked.first_at]
                batches = self._read(pa.py_buffer(before)) if before else []
            elif masked.lines:
                batches = self._read(pa.py_buffer(masked.chunk), masked.lines)
            elif batches is None:
                batches = self._read(pa.py_buffer(text))  # raises the parser's own error
        assert batches is not None
        for number, line, reason in self._chunk_invalid:
            self._invalid_lines.append(number)
            self._invalid.append((number, line, reason))
        self._line_offset += sum(b.num_rows for b in batches) + len(self._chunk_invalid)
        return [b for b in batches if b.num_rows]

    def _ran_on(self, batches: list[pa.RecordBatch], chunk: Chunk) -> bool:
        """Whether a quoted value of the chunk may have run past a line end: the parser
        returned fewer rows than the chunk has lines (or it has blank lines), or its last
        line leaves a quote open."""
        rows = sum(b.num_rows for b in batches) + len(self._chunk_invalid)
        return rows < self._line_count(chunk) or last_line_open(chunk)

    def _read(
        self, chunk: pa.Buffer, masked: dict[int, bytes] | None = None
    ) -> list[pa.RecordBatch]:
        """Parse a chunk from memory in one block (its lines are at most MAX_LINE_BYTES),
        with Arrow's streaming reader (faster than ``read_csv`` for one block); ``masked``:
        the lines :func:`mask_open_quotes` replaced, by row number."""
        self._chunk_invalid = []
        self._masked = masked or {}
        for row, text in self._undecodable.items():
            self._masked.setdefault(row, text)
        read_options = pacsv.ReadOptions(
            column_names=self._file_names,
            block_size=chunk.size + 1,
            use_threads=self.on_bad is None,  # the row numbers of skipped rows need one thread
        )
        reader = pacsv.open_csv(
            pa.BufferReader(chunk),
            read_options=read_options,
            parse_options=self._csv_parse,
            convert_options=self._csv_convert,
        )
        return list(reader)

    def _long_line(self, line: LongLine) -> None:
        """A line over the limit: a bad row with its start as text (without on_bad: the
        error, once the rows before it are reported)."""
        number = self._line_offset + 1
        self._line_offset += 1
        if self.on_bad is None:
            self._raise_after = DataError(
                f"{self.path}: row {number}: {line.reason()}",
                hint=f"a line holds at most {MAX_LINE_BYTES:,} bytes: split or shorten it",
            )
            return
        self._invalid_lines.append(number)
        self._invalid.append((number, line.text(), line.reason()))

    def _invalid_row(self, row: Any) -> str:
        """The CSV parser's handler of a row with the wrong number of fields (or a masked
        open-quote line): defer, skip."""
        local = int(row.number) if row.number is not None else 0
        number = local + self._line_offset  # lines before the chunk
        text = self._masked.get(local)
        if text is not None:
            reason = NOT_UTF8 if local in self._undecodable else UNTERMINATED_QUOTE
            line = (number, text.decode("utf-8", "replace"), reason)
        else:
            found = f"expected {row.expected_columns} fields, found {row.actual_columns}"
            line = (number, row.text, found)
        self._chunk_invalid.append(line)
        return "skip"
