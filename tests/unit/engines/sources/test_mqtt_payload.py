"""engines/sources/mqtt_payload.py: what a message holds, and what in it is not rows. The
quote rule is checked against Arrow's CSV parser itself (the reader the lines go to)."""

from __future__ import annotations

import doctest
import itertools

import pyarrow as pa
import pyarrow.csv as pacsv

from engines.sources import mqtt_payload
from engines.sources.mqtt_payload import (
    MAX_LINE_BYTES,
    MAX_MESSAGE_BYTES,
    _open_quote,
    payload_lines,
)

COLUMNS = [("a", "a"), ("b", "b")]


def test_doctests() -> None:
    from engines.runtime import sinks  # an instant's results split into messages that fit

    assert doctest.testmod(mqtt_payload).failed == 0
    assert doctest.testmod(sinks).failed == 0


def _arrow_rows(data: bytes) -> list[str]:
    """The rows Arrow's parser sees in ``data`` (as the invalid-row handler gets them)."""
    texts: list[str] = []

    def handler(row: pacsv.InvalidRow) -> str:
        texts.append(row.text)
        return "skip"

    pacsv.read_csv(
        pa.BufferReader(data),
        read_options=pacsv.ReadOptions(column_names=[f"c{i}" for i in range(20)]),
        parse_options=pacsv.ParseOptions(invalid_row_handler=handler),
        convert_options=pacsv.ConvertOptions(column_types={}, check_utf8=False),
    )
    return texts


def test_open_quote_agrees_with_arrow_on_every_short_line() -> None:
    """Every line of up to 7 characters over ``"``, ``,`` and ``x``: the line swallows the
    next one in Arrow exactly when ``_open_quote`` says its quote is still open."""
    for n in range(1, 8):
        for chars in itertools.product('",x', repeat=n):
            line = "".join(chars).encode()
            rows = _arrow_rows(line + b"\nSENTINEL\n")
            assert _open_quote(line) == (rows[-1] != "SENTINEL"), (line, rows)


def test_limits_and_empty_messages() -> None:
    over = payload_lines(b"1,2", COLUMNS, size=MAX_MESSAGE_BYTES + 1)
    assert not over.lines and "per message" in over.rejected[0].reason
    long = payload_lines(b"1,2\n" + b"3" * (MAX_LINE_BYTES + 1) + b"\n4,5", COLUMNS)
    assert long.lines == [b"1,2", b"4,5"]
    assert long.rejected[0].reason.startswith("line 2: ") and "per line" in long.rejected[0].reason
    assert len(long.rejected[0].text) < 2 * mqtt_payload.HEAD_BYTES
    for blank in (b"", b"  ", b"\n\r\n"):
        assert payload_lines(blank, COLUMNS).rejected[0].reason == "empty message (no rows)"


def test_json_that_is_not_rows() -> None:
    for text in (b"[" * 50_000, b'{"a":' * 50_000):
        found = payload_lines(text, COLUMNS)
        assert found.rejected[0].reason == "not valid JSON: nested too deeply"
    for text in (b"{broken", b'{"a": 1, "b": ' + b"9" * 5000 + b"}", b"[\xff]"):
        assert payload_lines(text, COLUMNS).rejected[0].reason.startswith("not valid JSON: ")
    found = payload_lines(
        b'[1, {"a": 1}, {"a": {"x": 1}, "b": 2}, {"a": "x\\ny", "b": 2}]', COLUMNS
    )
    assert [r.reason for r in found.rejected] == [
        "object 1: not a JSON object",
        "object 2: missing column(s) b",
        "object 3: column a: a JSON object is not a value",
        "object 4: column a: a line break in a value",
    ]
    # the end of stream is exactly {"end_of_stream": true}
    assert payload_lines(b'{"end_of_stream": true}', COLUMNS).end
    for almost in (b'{"end_of_stream": 1}', b'{"end_of_stream": true, "a": 1}'):
        assert not payload_lines(almost, COLUMNS).end


def test_values_become_raw_cells() -> None:
    found = payload_lines(b'{"a": true, "b": null}\n', COLUMNS)
    assert found.lines == [b"true,"]
    found = payload_lines(b'[{"a": "x,y", "b": 1.5}]', COLUMNS)
    assert found.lines == [b'"x,y",1.5'] and not _open_quote(found.lines[0])


def test_published_batches_fit_a_message() -> None:
    """``hycq data publish --batch N``: a batch whose payload would pass the message limit
    is sent as halves, each a message the stream takes whole, every row once, in order."""
    from hycq.publish import _payload, _payloads

    rows = pa.table({"a": list(range(1000)), "b": [f"x{k}" for k in range(1000)]})
    whole = _payload(rows, "csv")
    parts = list(_payloads(rows, "csv", limit=len(whole) // 5))
    assert len(parts) > 5 and all(len(p) <= len(whole) // 5 for p in parts)
    assert b"".join(parts) == whole
    assert list(_payloads(rows, "csv")) == [whole]
    one = list(_payloads(rows.slice(0, 1), "json", limit=1))  # one row over the limit: alone
    assert len(one) == 1 and payload_lines(one[0], [("a", "a"), ("b", "b")]).lines == [b"0,x0"]


def test_a_json_object_too_long_for_a_line_is_rejected() -> None:
    """A JSON value can make a line as long as the message: the line limit applies to the
    line an object becomes (the reader's block must hold it), whatever ``max_line``."""
    big = "v" * 5000
    found = payload_lines(
        f'[{{"a": 1, "b": "{big}"}}, {{"a": 2, "b": 3}}]'.encode(), COLUMNS, None, 4096
    )
    assert found.lines == [b"2,3"]
    assert (
        found.rejected[0].reason == "object 1: 5,002 bytes, over the limit of 4,096 bytes per line"
    )
    csv_found = payload_lines(b"1,2\n" + b"3" * 5000 + b"\n", COLUMNS, None, 4096)
    assert csv_found.lines == [b"1,2"] and "per line" in csv_found.rejected[0].reason
