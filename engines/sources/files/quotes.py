"""Unterminated quotes: a row is one line, so a quoted value that runs past its line end
costs that line only.

Arrow's CSV parser, given a line that opens a quoted value and never closes it, reads on
into the following lines (to the end of its block) as that one value: one bad row would
hide every row after it. The reader parses a chunk of whole lines once; only when the chunk
holds a quote *and* the parser returned fewer rows than the chunk has lines (a value ran
past a line end, or there are blank lines) or its last line leaves a quote open does it
look for the lines that leave a quote
open (:func:`open_quote_lines`, one vectorised RE2 match over the chunk's lines), replace
each by a row the parser rejects at once (:func:`mask_open_quotes`) and parse the chunk
again; those lines are then reported as bad rows with their own text.

A line leaves a quote open exactly as Arrow reads it (delimiter ``,``, quote ``"``, a
doubled quote inside quotes is a quote, no escape character): a field that starts with a
quote runs to the next quote not followed by another, then to the next comma; a quote
anywhere else is a character.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines.sources.files.lines import Chunk, last_line_end

_QUOTED = r'"(?:[^"]|"")*"(?:[^,"][^,]*)?'  # then, unquoted, up to the comma
_PLAIN = r'[^,"][^,]*'
_FIELD = f"(?:{_QUOTED}|{_PLAIN}|)"
#: a line (without its line end) whose every quoted value closes on it
CLOSED_LINE = f"^{_FIELD}(?:,{_FIELD})*$"


def open_quote_lines(lines: pa.Array) -> pa.Array:
    """Indices of the ``lines`` (text or binary, no line ends) that leave a quoted value
    open at their end.

    Example:
        >>> open_quote_lines(pa.array(['1,"a"', '2,"b', 'x"y', '"c""'])).to_pylist()
        [1, 3]
    """
    closed = pc.match_substring_regex(lines, CLOSED_LINE)
    return pc.indices_nonzero(pc.invert(pc.fill_null(closed, True)))


class LineCounter:
    """Counts the lines of chunks with one reused scratch array (a fresh 3 MB mask per
    chunk would cost more in page faults than the count itself)."""

    def __init__(self) -> None:
        self._mask = np.empty(0, dtype=bool)

    def __call__(self, chunk: Chunk) -> int:
        """Lines of a chunk, blank ones included, as the parser ends them (``\\n``,
        ``\\r\\n`` or ``\\r``; the last one may lack its line end). The parser returns one
        row per non-blank line when no quoted value runs past a line end, fewer when one
        does.

        Example:
            >>> LineCounter()(Chunk(b"a\\n\\nb\\r\\nc\\rd"))
            5
        """
        n = len(chunk)
        if not n:
            return 0
        if len(self._mask) < n:
            self._mask = np.empty(n, dtype=bool)
        mask = self._mask[:n]
        data = np.frombuffer(chunk.data, np.uint8, n, chunk.start)
        ends = int(np.count_nonzero(np.equal(data, 10, out=mask)))
        if chunk.has(b"\r"):
            ends += int(np.count_nonzero(np.equal(data, 13, out=mask)))
            crlf = np.logical_and(mask[:-1], data[1:] == 10)
            ends -= int(np.count_nonzero(crlf))
        return ends + (int(data[-1]) not in (10, 13))


def last_line_open(chunk: Chunk) -> bool:
    """Whether the chunk's last line leaves a quoted value open: the one case in which a
    value runs past a line end (only its own) without costing the parser a row.

    Example:
        >>> last_line_open(Chunk(b'1,2\\n3,"4\\n')), last_line_open(Chunk(b'1,"2\\n3,4\\r\\n'))
        (True, False)
    """
    data, end = chunk.data, chunk.end
    if end > chunk.start and data[end - 1] == 10:
        end -= 1
    if end > chunk.start and data[end - 1] == 13:
        end -= 1
    start = max(last_line_end(data, chunk.start, end), chunk.start - 1) + 1
    line = bytes(memoryview(data)[start:end])
    return len(open_quote_lines(pa.array([line], pa.binary()))) > 0


@dataclass(frozen=True)
class Masked:
    """A chunk with its open-quote lines replaced (see :func:`mask_open_quotes`)."""

    #: the chunk as the parser is to read it
    chunk: bytes
    #: per replaced line, its row number in the chunk (from 1, blank lines not counted, as
    #: the parser numbers rows) and its text (no line end)
    lines: dict[int, bytes]
    #: byte offset in the chunk of the first replaced line (-1: none)
    first_at: int


def mask_open_quotes(chunk: bytes, width: int) -> Masked:
    """``chunk`` with every line that leaves a quoted value open replaced by ``width + 1``
    empty fields: a row the parser rejects as one of the wrong width, without reading on.
    (Only for chunks that hold a quote and lost rows: it makes Python objects of every
    line of the chunk.)"""
    pieces = chunk.splitlines(keepends=True)  # \n, \r\n and \r, as the parser ends lines
    bare = [p.rstrip(b"\r\n") for p in pieces]
    bad = open_quote_lines(pa.array(bare, pa.binary())).to_numpy()
    return _mask(chunk, pieces, bare, bad, width)


def is_utf8(chunk: bytes | bytearray | memoryview) -> bool:
    """Whether the lines are UTF-8 text (the parser must not see a line that is not: it
    decodes a bad row's text for its handler, and fails there)."""
    try:
        codecs.utf_8_decode(chunk, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


def mask_undecodable(chunk: bytes, width: int) -> Masked:
    """``chunk`` with every line that is not UTF-8 replaced by ``width + 1`` empty fields,
    as :func:`mask_open_quotes` replaces lines (only for chunks :func:`is_utf8` refuses)."""
    pieces = chunk.splitlines(keepends=True)
    bare = [p.rstrip(b"\r\n") for p in pieces]
    bad = np.array([i for i, b in enumerate(bare) if not is_utf8(b)], dtype=np.int64)
    return _mask(chunk, pieces, bare, bad, width)


def _mask(
    chunk: bytes, pieces: list[bytes], bare: list[bytes], bad: np.ndarray, width: int
) -> Masked:
    """``chunk`` with the lines ``bad`` (indices into ``pieces``) replaced by a marker row."""
    if not len(bad):
        return Masked(chunk, {}, -1)
    sizes = np.fromiter((len(b) for b in bare), dtype=np.int64, count=len(bare))
    rows = np.cumsum(sizes > 0)  # the parser's row number of each non-blank line
    marker = b"," * width
    lines = {}
    for i in bad.tolist():
        lines[int(rows[i])] = bare[i]
        pieces[i] = marker + pieces[i][len(bare[i]) :]
    first_at = sum(len(p) for p in pieces[: int(bad[0])])
    return Masked(b"".join(pieces), lines, first_at)
