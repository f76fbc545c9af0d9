"""One MQTT message's payload as raw CSV lines for the stream's reader, and everything a
payload can be that is not rows: each such part is *rejected* (a dead letter naming the
topic and the message) and costs only what it holds, never the rest of the message or of the
run (docs/live.md, "Bad messages").

A payload is JSON when it starts with ``{`` or ``[`` (an object with the catalog's columns
by name, or an array of such objects), else CSV lines in the stream's raw format. Rejected:

* a message over :data:`MAX_MESSAGE_BYTES` (whole; its dead letter keeps the first
  :data:`HEAD_BYTES`), an empty or blank one;
* a CSV line over :data:`MAX_LINE_BYTES`, one that is not UTF-8, one whose quote is never
  closed (it would swallow the lines after it);
* JSON the decoder refuses, whatever the reason (syntax, encoding, a number too long, nesting
  past the interpreter's recursion limit); an array element that is not an object; an
  object without a column, with an array or object as a value, or with a line break in a
  value (a raw line cannot carry it).

Values that are there but wrong (text in a number column, ``true`` as a timestamp) are the
reader's to reject, as for a file's rows.

Example:
    >>> cols = [("a", "a"), ("b", "b")]
    >>> p = payload_lines(b'1,2\\n"3,4\\n5,6', cols)
    >>> p.lines, [r.reason for r in p.rejected]
    ([b'1,2', b'5,6'], ['line 2: unterminated quote'])
    >>> p = payload_lines(b'[{"a": 5, "b": [6]}, {"a": 7, "b": null}]', cols)
    >>> p.lines, [r.reason for r in p.rejected]
    ([b'7,'], ['object 1: column b: a JSON array is not a value'])
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The largest message a stream takes (bytes): a bigger one is a dead letter, whole.
MAX_MESSAGE_BYTES = 16 << 20
#: The longest raw line (bytes): a longer one is a dead letter (a reader block holds a line).
MAX_LINE_BYTES = 1 << 20
#: Bytes of an oversize message or line its dead letter keeps.
HEAD_BYTES = 1024


@dataclass(frozen=True)
class Rejected:
    """A part of a payload that holds no row: its text (for the dead letter) and why."""

    text: str
    reason: str


@dataclass
class Payload:
    """What one message holds: raw CSV lines (no line ends), rejected parts, and whether it
    was the end-of-stream message."""

    lines: list[bytes] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    end: bool = False


def is_end_of_stream(doc: object) -> bool:
    """Whether a decoded payload is exactly ``{"end_of_stream": true}``."""
    return isinstance(doc, dict) and len(doc) == 1 and doc.get("end_of_stream") is True


def payload_lines(
    payload: bytes,
    columns: Sequence[tuple[str, str]],
    size: int | None = None,
    max_line: int = MAX_LINE_BYTES,
) -> Payload:
    """The rows of one message as raw CSV lines, and what in it is not rows (module
    docstring). ``columns``: per column of a raw line, its catalog name and its raw-format
    name (a JSON object may use either). ``size``: the message's real size when ``payload``
    holds only its head (an oversize message is not kept whole). ``max_line``: the longest
    line (a reader with small blocks takes less than :data:`MAX_LINE_BYTES`)."""
    size = len(payload) if size is None else size
    if size > MAX_MESSAGE_BYTES:
        reason = f"{size:,} bytes, over the limit of {MAX_MESSAGE_BYTES:,} bytes per message"
        return Payload(rejected=[Rejected(_head(payload), reason)])
    text = payload.strip()
    if not text:
        return Payload(rejected=[Rejected(_text(payload), "empty message (no rows)")])
    if text[:1] in (b"{", b"["):
        return _json_payload(text, columns, max_line)
    return _csv_payload(text, max_line)


def _too_long(line: bytes, max_line: int) -> str | None:
    if len(line) <= max_line:
        return None
    return f"{len(line):,} bytes, over the limit of {max_line:,} bytes per line"


def _csv_payload(text: bytes, max_line: int) -> Payload:
    """Raw lines (blank ones dropped); a line too long, not UTF-8 or with an open quote is
    rejected on its own. The checks cost nothing on a message that passes them whole."""
    out = Payload()
    whole_utf8 = _utf8_error(text) is None
    short = len(text) <= max_line
    quotes = b'"' in text
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        why = None if short else _too_long(line, max_line)
        if why is None and not whole_utf8:
            why = _utf8_error(line)
        if why is None and quotes and _open_quote(line):
            why = "unterminated quote"
        if why is None:
            out.lines.append(line)
        else:
            out.rejected.append(Rejected(_head(line), f"line {number}: {why}"))
    return out


def _json_payload(text: bytes, columns: Sequence[tuple[str, str]], max_line: int) -> Payload:
    """An object or an array of objects as raw lines, in the raw format's column order."""
    try:
        doc = json.loads(text)
    except RecursionError:
        return Payload(rejected=[Rejected(_head(text), "not valid JSON: nested too deeply")])
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, a too long integer
        return Payload(rejected=[Rejected(_head(text), f"not valid JSON: {err}")])
    if is_end_of_stream(doc):
        return Payload(end=True)
    out = Payload()
    objects = doc if isinstance(doc, list) else [doc]
    for k, obj in enumerate(objects):
        where = f"object {k + 1}: " if isinstance(doc, list) else ""
        line, why = _object_line(obj, columns)
        if why is None:
            why = _too_long(line, max_line)
        if why is None:
            out.lines.append(line)
        else:
            out.rejected.append(Rejected(_json_text(obj), where + why))
    return out


def _object_line(obj: Any, columns: Sequence[tuple[str, str]]) -> tuple[bytes, str | None]:
    """One JSON object as a raw CSV line, or why it cannot be one."""
    if not isinstance(obj, dict):
        return b"", "not a JSON object"
    keys = [name if name in obj else raw for name, raw in columns]
    missing = [name for (name, _), key in zip(columns, keys, strict=True) if key not in obj]
    if missing:
        return b"", f"missing column(s) {', '.join(missing)}"
    cells = []
    for (name, _), key in zip(columns, keys, strict=True):
        value = obj[key]
        if isinstance(value, list | dict):
            kind = "array" if isinstance(value, list) else "object"
            return b"", f"column {name}: a JSON {kind} is not a value"
        cell = _cell(value)
        if "\n" in cell or "\r" in cell:
            return b"", f"column {name}: a line break in a value"
        cells.append(cell)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(cells)
    return buf.getvalue().encode(), None


def _cell(value: Any) -> str:
    """A JSON scalar as the text of a raw cell (null: empty, a missing value)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _open_quote(line: bytes) -> bool:
    """Whether the CSV parser is still inside a quoted field at the end of ``line``, by
    Arrow's rules: a field is quoted when it starts with ``"``, ``""`` inside it is a quote,
    and after its closing quote the field's other characters are literal. Linear (the
    searches run in C)."""
    i, n = 0, len(line)
    while i < n:  # ``i``: the start of a field
        if line[i : i + 1] == b'"':
            j = i + 1
            while True:
                k = line.find(b'"', j)
                if k < 0:
                    return True
                if line[k + 1 : k + 2] != b'"':
                    break
                j = k + 2
            i = k + 1
        comma = line.find(b",", i)
        if comma < 0:
            return False
        i = comma + 1
    return False


def _utf8_error(data: bytes) -> str | None:
    """Why ``data`` is not UTF-8, or None."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})"
    return None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _head(data: bytes) -> str:
    """The text a dead letter keeps of ``data``: all of it, or its first HEAD_BYTES."""
    if len(data) <= HEAD_BYTES:
        return _text(data)
    return _text(data[:HEAD_BYTES]) + f"... ({len(data):,} bytes)"


def _json_text(obj: Any) -> str:
    """An element of a JSON payload as text for its dead letter (one nested past what the
    encoder takes is named, not shown)."""
    try:
        return _head(json.dumps(obj).encode())
    except (RecursionError, ValueError, TypeError):
        return "(a JSON value nested too deeply to show)"
