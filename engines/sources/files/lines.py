"""CSV input as chunks of whole lines: a regular file (``FileLines``) or a FIFO / character
device (``Pipe``) cut at line ends, so that Arrow parses each chunk from memory.

A line is at most ``MAX_LINE_BYTES`` bytes (1 MiB, not counting its line end). A longer one
is handed out as a :class:`LongLine` (its first ``LONG_LINE_HEAD`` bytes and its length)
instead of its text, and the reader makes it a bad row: it is found in time linear in its
length and never held in memory whole, however long it is. Every read polls stop requests
(``engines.interrupts``), so a signal ends a read at once, inside a long line too.

Lines end with ``\\n``, ``\\r\\n`` or ``\\r``, as Arrow's CSV parser reads them.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from engines import interrupts
from engines.input_wait import waiting
from engines.sources.files.formats import SNIFF_BYTES

#: The longest line a CSV input may hold, in bytes (its line end not counted); a longer
#: line is a bad row (docs/data.md).
MAX_LINE_BYTES = 1 << 20

#: Bytes of a too long line that its bad-row report keeps.
LONG_LINE_HEAD = 1024

#: Bytes a pipe is read by at a time.
PIPE_READ = 1 << 16


@dataclass(frozen=True)
class LongLine:
    """A line longer than ``MAX_LINE_BYTES``, skipped: its first bytes and its length."""

    head: bytes
    length: int

    def reason(self) -> str:
        """Why the line is a bad row, for its report."""
        return (
            f"line longer than the limit of {MAX_LINE_BYTES:,} bytes ({self.length:,} bytes; "
            f"only its first {min(self.length, LONG_LINE_HEAD):,} are kept here)"
        )

    def text(self) -> str:
        """What its report shows of the line: the start, marked as cut."""
        return self.head.decode("utf-8", "replace") + "..."


class IdleChunk(bytes):
    """What a live feed's ``chunks()`` yields when it has been silent for its ``idle_s``
    wall seconds (after some data): the reader passes it on as an empty batch, and the
    merge counts the stream as progressed past its last timestamp (docs/live.md)."""


#: the one idle chunk
IDLE = IdleChunk()


class Chunk:
    """Whole lines: ``data[start:end]``. ``data`` may be a buffer its source reads the next
    chunk into: the view is valid until the next chunk is asked for, and :meth:`arrow`
    copies it into Arrow's memory pool for the parser (which then keeps nothing of it)."""

    __slots__ = ("data", "end", "start")

    def __init__(self, data: bytes | bytearray, start: int = 0, end: int | None = None):
        self.data = data
        self.start = start
        self.end = len(data) if end is None else end

    def __len__(self) -> int:
        return self.end - self.start

    def has(self, sub: bytes) -> bool:
        """Whether the lines hold ``sub`` (a memchr-speed search, no copy)."""
        return self.data.find(sub, self.start, self.end) >= 0

    def after_first_line(self) -> Chunk:
        """The lines but the first (a header), an empty chunk if there is no other."""
        end = first_line_end(self.data, self.start, True, self.end)
        if end < 0:
            return Chunk(b"")
        if self.data[end : end + 2] == b"\r\n":
            end += 1
        return Chunk(self.data, end + 1, self.end)

    def bytes(self) -> bytes:
        """A copy of the lines (for the rare paths that look at every line in Python)."""
        return bytes(memoryview(self.data)[self.start : self.end])

    def arrow(self) -> pa.Buffer:
        """The lines as an Arrow buffer: zero-copy from immutable bytes, else a copy in
        Arrow's pool (which reuses its memory: no fresh pages per chunk)."""
        if isinstance(self.data, bytes):
            return pa.py_buffer(self.data).slice(self.start, len(self))
        out = pa.allocate_buffer(len(self))
        memoryview(out).cast("B")[:] = memoryview(self.data)[self.start : self.end]
        return out


#: what a chunk source yields: whole lines (a pipe's and MQTT's as bytes), a skipped long
#: line, or IDLE (pipes)
Piece = Chunk | bytes | LongLine


def last_line_end(buf: bytes | bytearray, start: int, end: int, cr: bool = True) -> int:
    """Offset of the last line end (``\\n``, or ``\\r`` when ``cr``) in ``buf[start:end]``, or
    -1 (``cr`` False: the caller knows there is no ``\\r``, which saves a search)."""
    nl = buf.rfind(b"\n", start, end)
    return max(nl, buf.rfind(b"\r", start, end)) if cr else nl


def first_line_end(
    buf: bytes | bytearray, start: int = 0, cr: bool = True, end: int | None = None
) -> int:
    """Offset of the first line end (``\\n``, or ``\\r`` when ``cr``) in ``buf[start:end]``,
    or -1."""
    stop = len(buf) if end is None else end
    nl = buf.find(b"\n", start, stop)
    if not cr:
        return nl
    r = buf.find(b"\r", start, stop)
    return nl if r < 0 else r if nl < 0 else min(nl, r)


def long_line_at(
    buf: bytes | bytearray,
    start: int,
    limit: int = MAX_LINE_BYTES,
    cr: bool = True,
    end: int | None = None,
) -> tuple[int | None, int]:
    """Where the first line longer than ``limit`` bytes starts in ``buf[start:end]`` (which
    starts a line; the last line may be incomplete), or None; and where a later check of
    the same buffer, grown, can start (a line start).

    Linear: each search covers a window of ``limit + 1`` bytes from a line start backwards,
    and every two of them move on by at least ``limit`` bytes.

    Example:
        >>> long_line_at(b"ab\\ncdefg\\nhi", 0, 4), long_line_at(b"ab\\ncd\\nefgh", 0, 4)
        ((3, 3), (None, 6))
    """
    stop = len(buf) if end is None else end
    pos = start
    while stop - pos > limit:
        line_end = last_line_end(buf, pos, pos + limit + 1, cr)
        if line_end < 0:
            return pos, pos
        pos = line_end + 1
    return None, pos


class FileLines:
    """A regular file as whole-line chunks of about ``block`` bytes and LongLines, in file
    order. Every read goes into one buffer, from where the last whole line ended (the part
    of a line cut by a read is read again with the next one): no allocation per chunk. The
    file is open while the chunks are iterated."""

    def __init__(self, path: Path, block: int, limit: int = MAX_LINE_BYTES) -> None:
        self.path = path
        self.limit = limit
        #: a full read always holds a line end or a line over the limit
        self.block = max(block, 2 * (limit + 1))
        self._buf = bytearray(self.block)
        self._fd = -1

    def chunks(self) -> Iterator[Chunk | LongLine]:
        """The file's lines (module docstring); the last one may lack its line end. A chunk
        is a view of the buffer: valid until the next is asked for."""
        self._fd = os.open(self.path, os.O_RDONLY)
        try:
            yield from self._chunks()
        finally:
            os.close(self._fd)
            self._fd = -1

    def _read(self, pos: int) -> int:
        """Read the buffer full from file offset ``pos`` (less at the end of the file)."""
        interrupts.check_stop()
        return os.preadv(self._fd, [self._buf], pos)

    def _chunks(self) -> Iterator[Chunk | LongLine]:
        buf = self._buf
        pos = 0
        while True:
            n = self._read(pos)
            if not n:
                return
            cr = buf.find(b"\r", 0, n) >= 0
            long, _ = long_line_at(buf, 0, self.limit, cr, n)
            if long is None:
                end = n
                if n == self.block:  # not the end of the file: up to the last line end
                    end = last_line_end(buf, 0, n, cr) + 1
                yield Chunk(buf, 0, end)
                pos += end
                continue
            if long:
                yield Chunk(buf, 0, long)
            after = yield from self._skip(long, n, pos, cr)
            if after is None:
                return
            pos = after

    def _skip(
        self, start: int, n: int, pos: int, cr: bool
    ) -> Generator[Chunk | LongLine, None, int | None]:
        """Skip the long line at ``buf[start:n]`` (read from file offset ``pos``), yielding
        its LongLine; returns the file offset after its line end (None: the end of file)."""
        buf = self._buf
        head = bytes(buf[start : start + LONG_LINE_HEAD])
        end = first_line_end(buf, start, cr, n)
        if end >= 0:
            yield LongLine(head, end - start)
            return pos + end + 1
        length = n - start
        at = pos + n
        while True:
            got = self._read(at)
            if not got:
                yield LongLine(head, length)
                return None
            end = first_line_end(buf, 0, True, got)
            if end >= 0:
                yield LongLine(head, length + end)
                return at + end + 1
            length += got
            at += got


class Pipe:
    """A FIFO or character device, read once and only on the calling thread: its first line
    is sniffed for the format, then complete lines are handed out as they come (a live feed
    is not held back until a block fills). Every read polls stop requests
    (engines.interrupts), so a signal ends a run that waits on a quiet pipe or reads a long
    line; nothing blocks inside Arrow, which parses each chunk from memory. A line over the
    limit is dropped as it arrives (a LongLine): the buffer never holds much more than
    ``block + limit`` bytes."""

    def __init__(
        self, path: Path, idle_s: float | None = None, limit: int = MAX_LINE_BYTES
    ) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._buf = bytearray()
        self._eof = False
        self.limit = limit
        #: wall seconds of silence (after some data) before an IDLE chunk; None: never
        self.idle_s = idle_s
        self._cr = False  # a \r came: line ends are searched for both \n and \r
        self._checked = 0  # a line start: the lines before it are within the limit
        self._long: tuple[bytes, int] | None = None  # a long line being skipped: head, length

    def sniff(self) -> bytes:
        """The first bytes, up to the first line end or SNIFF_BYTES (kept for chunks())."""
        while not self._eof and b"\n" not in self._buf and len(self._buf) < SNIFF_BYTES:
            self._fill(None)
        return bytes(self._buf[:SNIFF_BYTES])

    def _fill(self, timeout: float | None) -> bool:
        """Read what is there, waiting up to ``timeout`` (None: until something comes);
        False if nothing came in time. A pending stop request raises first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interrupts.check_stop()
        with waiting():  # a live run's lag leaves out the time the source kept it waiting
            while not select.select([self._fd], [], [], 0.1)[0]:
                interrupts.check_stop()
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        data = os.read(self._fd, PIPE_READ)
        if data:
            self._buf += data
            self._cr = self._cr or b"\r" in data
        else:
            self._eof = True
        return True

    def chunks(self, block: int) -> Iterator[bytes | LongLine]:
        """Complete lines, at most about ``block`` bytes at a time, as soon as the pipe goes
        quiet for a moment; the rest at the end (a last line without its line end too).
        A line over the limit is a LongLine, in its place."""
        last: float | None = None  # when the last chunk (or IDLE) was handed out
        quiet = False
        while True:
            if self._long is not None:
                done = self._skip_long()
                if done is not None:
                    yield done
                elif not self._eof:
                    self._fill(0.05)
                else:
                    return
                continue
            long, self._checked = long_line_at(self._buf, self._checked, self.limit, self._cr)
            if long is not None:
                if long:
                    last = time.monotonic()
                    yield bytes(self._buf[:long])
                self._long = (bytes(self._buf[long : long + LONG_LINE_HEAD]), 0)
                del self._buf[:long]
                self._checked = 0
                continue
            if self._eof:
                if self._buf:
                    yield bytes(self._buf)
                    self._buf.clear()
                return
            end = last_line_end(self._buf, 0, len(self._buf), self._cr)
            if end >= 0 and (quiet or len(self._buf) >= block):
                last = time.monotonic()
                yield bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                self._checked = max(0, self._checked - end - 1)
                quiet = False
                continue
            quiet = not self._fill(0.05)
            if (
                quiet
                and end < 0
                and self.idle_s is not None
                and last is not None
                and time.monotonic() - last >= self.idle_s
            ):
                last = time.monotonic()
                yield IDLE

    def _skip_long(self) -> LongLine | None:
        """Drop the buffered part of the long line being skipped; its LongLine once its
        line end (or the end of the input) has come, else None."""
        assert self._long is not None
        head, length = self._long
        end = first_line_end(self._buf, 0, self._cr)
        if end < 0 and not self._eof:
            self._long = (head, length + len(self._buf))
            self._buf.clear()
            return None
        if end < 0:
            end = len(self._buf)
        self._long = None
        del self._buf[: end + 1]
        return LongLine(head, length + end)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
