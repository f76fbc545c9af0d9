"""Data-file readers: DEBS CSV, CSV with a header, Parquet; format detection; errors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from engines.sources.files import detect_format, read_batches
from engines.sources.smartplug import SCHEMA, SmartPlugGenerator, generate_to_file
from optimizer.ir.errors import DataError

REAL_DATA = Path(__file__).resolve().parents[4].parent / "shared" / "data"

HEADER = "id,ts,value,property,plug_id,household_id,house_id"


def read_all(path: Path, fmt: str | None = None, batch_rows: int = 65536) -> pa.Table:
    return pa.Table.from_batches(list(read_batches(path, fmt, batch_rows)), schema=SCHEMA)


@pytest.fixture(scope="module")
def original() -> pa.Table:
    return SmartPlugGenerator(houses=3, seed=5, rate=700.5).table(4)


# -- round trips ---------------------------------------------------------------------------------


def test_debs_csv_round_trip(tmp_path: Path, original: pa.Table) -> None:
    path = tmp_path / "readings.csv"
    assert generate_to_file(path, seconds=4, rate=700.5, houses=3, seed=5) == original.num_rows
    assert detect_format(path) == "debs"
    batches = list(read_batches(path, batch_rows=500))
    assert all(b.schema == SCHEMA for b in batches)
    assert max(b.num_rows for b in batches) == 500
    assert pa.Table.from_batches(batches).equals(original)
    assert read_all(path, "debs").equals(original)


def test_csv_with_header_any_order_and_timestamp_alias(tmp_path: Path, original: pa.Table) -> None:
    shuffled = original.select(
        ["house_id", "value", "ts", "id", "plug_id", "property", "household_id"]
    ).rename_columns(
        ["house_id", "value", "timestamp", "id", "plug_id", "property", "household_id"]
    )
    extra = shuffled.append_column("note", pa.array(["x"] * original.num_rows))
    path = tmp_path / "with_header.csv"
    pacsv.write_csv(extra, path)
    assert detect_format(path) == "csv"
    assert read_all(path).equals(original)
    assert read_all(path, "csv", batch_rows=1000).equals(original)


def test_csv_header_named_ts(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text(f"{HEADER}\n7,1377986401,19.927,1,11,0,0\n8,1377986402,0,1,3,0,0\n")
    table = read_all(path)
    assert table.to_pylist()[0] == {
        "id": 7, "ts": 1377986401, "value": 19.927, "property": 1,
        "plug_id": 11, "household_id": 0, "house_id": 0,
    }  # fmt: skip
    assert table.num_rows == 2


def test_parquet_round_trip_and_casts(tmp_path: Path, original: pa.Table) -> None:
    path = tmp_path / "r.parquet"
    generate_to_file(path, seconds=4, rate=700.5, houses=3, seed=5)
    assert detect_format(path) == "parquet"
    assert read_all(path).equals(original)
    assert max(b.num_rows for b in read_batches(path, batch_rows=300)) == 300
    # Other integer widths, an integer value column, "timestamp", other order: cast.
    narrow = pa.table(
        {
            "timestamp": pa.array([1, 2], pa.int32()),
            "id": pa.array([1, 2], pa.uint32()),
            "value": pa.array([5, 0], pa.int64()),
            "property": pa.array([1, 0], pa.int8()),
            "plug_id": pa.array([3, 4], pa.int64()),
            "household_id": pa.array([0, 0], pa.int16()),
            "house_id": pa.array([9, 9], pa.int64()),
        }
    )
    other = tmp_path / "narrow.data"  # no extension: detected by the magic bytes
    pq.write_table(narrow, other)
    assert detect_format(other) == "parquet"
    table = read_all(other)
    assert table.schema == SCHEMA
    assert table.column("value").to_pylist() == [5.0, 0.0]
    assert table.column("ts").to_pylist() == [1, 2]


def test_empty_csv_with_header_reads_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "empty_rows.csv"
    path.write_text(HEADER + "\n")
    assert read_all(path).num_rows == 0


def test_detect_format(tmp_path: Path) -> None:
    debs = tmp_path / "a.txt"
    debs.write_text("1,1377986401,68.451,0,11,0,0\n")
    header = tmp_path / "b.csv"
    header.write_text(HEADER + "\n1,1377986401,68.451,0,11,0,0\n")
    pq_ext = tmp_path / "c.pq"
    pq.write_table(pa.table({"a": [1]}), pq_ext)
    assert [detect_format(p) for p in (debs, header, pq_ext)] == ["debs", "csv", "parquet"]
    assert detect_format(str(debs)) == "debs"


# -- errors --------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    with pytest.raises(DataError) as err:
        read_batches(path)  # raised on the call, before iterating
    assert str(err.value) == f"data file not found: {path}"
    assert err.value.hint
    with pytest.raises(DataError, match="not found"):
        detect_format(path)


def test_missing_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("id,timestamp,valu,property,plug_id,household_id,house_id\n1,2,3,1,0,0,0\n")
    with pytest.raises(DataError) as err:
        read_batches(path)
    assert "missing column 'value'" in str(err.value)
    assert str(path) in str(err.value)
    assert err.value.hint and "valu" in err.value.hint


def test_parquet_missing_and_mistyped_columns(tmp_path: Path) -> None:
    path = tmp_path / "w.parquet"
    good = {n: [1] for n in SCHEMA.names}
    pq.write_table(pa.table({k: v for k, v in good.items() if k != "house_id"}), path)
    with pytest.raises(DataError, match="missing column 'house_id'"):
        read_batches(path)
    pq.write_table(pa.table({**good, "ts": ["2013-09-01"]}), path)
    with pytest.raises(DataError, match="column 'ts' has type string") as err:
        read_batches(path)
    assert err.value.hint and "epoch seconds" in err.value.hint


def test_bad_value_names_file_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    rows = "".join(f"{i},1377986401,1.5,1,0,0,0\n" for i in range(1, 5))
    path.write_text(rows + "5,1377986401,abc,1,0,0,0\n")
    with pytest.raises(DataError) as err:
        list(read_batches(path))
    assert str(path) in str(err.value) and "column 'value'" in str(err.value)
    assert err.value.hint


def test_empty_cell_is_reported_with_its_row(tmp_path: Path) -> None:
    path = tmp_path / "hole.csv"
    path.write_text("1,1377986401,1.5,1,0,0,0\n2,1377986401,2.5,1,0,0,0\n3,,2.5,1,0,0,0\n")
    with pytest.raises(DataError, match=r"row 3: column 'timestamp' is empty"):
        list(read_batches(path, batch_rows=2))


def test_wrong_column_count(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("1,1377986401,1.5,1,0,0\n")
    with pytest.raises(DataError, match="Expected 7 columns") as err:
        list(read_batches(path))
    assert err.value.hint and "7 numeric columns" in err.value.hint


def test_header_file_read_as_debs_gets_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text(HEADER + "\n1,1377986401,1.5,1,0,0,0\n")
    with pytest.raises(DataError) as err:
        list(read_batches(path, "debs"))
    assert err.value.hint and "use format 'csv'" in err.value.hint


def test_unreadable_inputs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet at all")
    for path in (empty, binary, fake):
        with pytest.raises(DataError) as err:
            list(read_batches(path))
        assert str(path) in str(err.value) and err.value.hint
    with pytest.raises(DataError, match="unknown data format"):
        read_batches(empty, "json")
    parquet = tmp_path / "p.parquet"
    pq.write_table(pa.table({"a": [1]}), parquet)
    with pytest.raises(DataError, match="Parquet"):
        read_batches(parquet, "csv")


# -- the real samples ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rows"),
    [
        ("debs14_first2s_40houses__springone-demo.csv", 5000),
        ("debs14_house0_1min_107plugs__springone-demo.csv", 103195),
        ("debs14_house_minute_load__spring-xd-samples_Apache2.csv", 40107),
    ],
)
def test_reads_the_real_samples(name: str, rows: int) -> None:
    path = REAL_DATA / name
    if not path.is_file():
        pytest.skip(f"real DEBS samples not present: {path}")
    assert detect_format(path) == "debs"
    table = read_all(path)
    assert table.num_rows == rows
    assert table.schema == SCHEMA
    first = table.slice(0, 1).to_pylist()[0]
    assert first["ts"] == 1377986401
    assert np.isin(table.column("property").to_numpy(), [0, 1]).all()


# -- bad rows reported through on_bad --------------------------------------------------------

GOOD = "{i},1377986401,1.5,1,0,0,0"
#: Bad DEBS rows (id 9xx) and the reason the reader gives for each.
BAD_ROWS = [
    ("901,1377986401,1.5,1,0,0", "expected 7 fields, found 6"),
    ("902,1377986401,1.5,1,0,0,0,7", "expected 7 fields, found 8"),
    ("903,1377986401,abc,1,0,0,0", "unparsable value 'abc' in column 'value' (expected DOUBLE)"),
    ("904,,1.5,1,0,0,0", "missing value in column 'timestamp'"),
    ("905,1377986401,nan,1,0,0,0", "non-finite value 'nan' in column 'value'"),
    ("906,1377986401,-inf,1,0,0,0", "non-finite value '-inf' in column 'value'"),
    ("907,1377986401,1e999,1,0,0,0", "non-finite value '1e999' in column 'value'"),
    ("908,1377986401,1.5,2147483648,0,0,0",
     "value '2147483648' out of range for INTEGER in column 'property'"),
    ("909,99999999999999999999,1.5,1,0,0,0",
     "value '99999999999999999999' out of range for BIGINT in column 'timestamp'"),
    ("910,1377986401,1.5,1.5,0,0,0",
     "unparsable value '1.5' in column 'property' (expected INTEGER)"),
    ("x911,1377986401,1.5,1,0,0,oops",
     "unparsable value 'x911' in column 'id' (expected BIGINT); "
     "unparsable value 'oops' in column 'house_id' (expected INTEGER)"),
]  # fmt: skip


class Collect:
    """An on_bad callback that keeps what it is given."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, str]] = []

    def __call__(self, number: int, raw: str, reason: str) -> None:
        self.seen.append((number, raw, reason))


def lenient(
    path: Path, fmt: str | None = None, batch_rows: int = 65536, schema: pa.Schema | None = None
) -> tuple[pa.Table, Collect]:
    """Read a whole file with an on_bad callback: (the table, what the callback got)."""
    bad = Collect()
    batches = list(read_batches(path, fmt, batch_rows, schema=schema, on_bad=bad))
    return pa.Table.from_batches(batches, schema=schema or SCHEMA), bad


@pytest.mark.parametrize("batch_rows", [1, 3, 7, 65536])
def test_on_bad_reports_every_bad_row_with_line_and_reason(tmp_path: Path, batch_rows: int) -> None:
    lines = [GOOD.format(i=i) for i in range(1, 31)]
    expected = []
    for k, (row, reason) in enumerate(BAD_ROWS):
        at = 2 + 2 * k  # 0-based position: good and bad rows alternate from the 3rd line
        lines.insert(at, row)
        expected.append((at + 1, row, reason))
    path = tmp_path / "dirty.csv"
    path.write_text("\n".join(lines) + "\n")
    table, bad = lenient(path, batch_rows=batch_rows)
    assert bad.seen == expected  # in line order, lines 1-based
    assert table.column("id").to_pylist() == list(range(1, 31))
    assert table.schema == SCHEMA
    with pytest.raises(DataError):  # without on_bad the same file fails
        list(read_batches(path, batch_rows=batch_rows))


def test_on_bad_results_equal_the_clean_file(tmp_path: Path, original: pa.Table) -> None:
    clean = tmp_path / "clean.csv"
    generate_to_file(clean, seconds=4, rate=700.5, houses=3, seed=5)
    lines = clean.read_text().splitlines()
    for k, (row, _) in enumerate(BAD_ROWS):  # spread over the file, several per batch
        lines.insert(150 * k + 17, row)
    dirty = tmp_path / "dirty.csv"
    dirty.write_text("\n".join(lines) + "\n")
    for batch_rows in (100, 4096):
        table, bad = lenient(dirty, batch_rows=batch_rows)
        assert len(bad.seen) == len(BAD_ROWS)
        assert table.equals(original)
        assert [n for n, _, _ in bad.seen] == sorted(150 * k + 18 for k in range(len(BAD_ROWS)))
        batches = list(read_batches(dirty, batch_rows=batch_rows, on_bad=Collect()))
        assert all(0 < b.num_rows <= batch_rows for b in batches)


def test_on_bad_clean_file_reads_as_before(tmp_path: Path, original: pa.Table) -> None:
    path = tmp_path / "readings.csv"
    generate_to_file(path, seconds=4, rate=700.5, houses=3, seed=5)
    table, bad = lenient(path, batch_rows=500)
    assert bad.seen == []
    assert table.equals(original)


def test_on_bad_csv_with_header_counts_the_header_line(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text(
        "house_id,note,timestamp,value,id,plug_id,property,household_id\n"
        "0,a,1377986401,1.5,1,3,1,0\n"
        "0,b,1377986401,oops,2,3,1,0\n"  # line 3
        "0,c,1377986401\n"  # line 4
        '0,"d,e",1377986402,2.5,3,3,1,\n'  # line 5: empty household_id
        "0,f,1377986402, 3.5 ,4,3,+1,0\n"  # whitespace and a '+' sign are accepted
    )
    table, bad = lenient(path)
    assert table.column("id").to_pylist() == [1, 4]
    assert table.column("value").to_pylist() == [1.5, 3.5]
    assert table.column("property").to_pylist() == [1, 1]
    assert bad.seen == [
        (3, "0,1377986401,oops,2,3,1,0",
         "unparsable value 'oops' in column 'value' (expected DOUBLE)"),
        (4, "0,c,1377986401", "expected 8 fields, found 3"),
        (5, "0,1377986402,2.5,3,3,1,", "missing value in column 'household_id'"),
    ]  # fmt: skip


def test_on_bad_invalid_utf8_costs_one_row(tmp_path: Path) -> None:
    path = tmp_path / "bytes.csv"
    good = "".join(GOOD.format(i=i) + "\n" for i in range(1, 4)).encode()
    path.write_bytes(good + b"4,1377986401,\xff\xfe,1,0,0,0\n" + good)
    table, bad = lenient(path, batch_rows=2)
    assert table.num_rows == 6
    assert [(n, reason) for n, _, reason in bad.seen] == [(4, "not UTF-8 text")]


def test_a_bad_row_only_spoils_itself_whatever_the_batch(tmp_path: Path) -> None:
    # The fast path (one cast per column) and the slow path (locating bad cells) must accept
    # the same values: a value valid in a clean batch stays valid next to a bad one.
    odd = ["0x1F", " 7", "7 ", "+7", "-7", "007"]
    floats = ["1.", ".5", "+.5", "-1.5E-3", "1e+5", " 2.5"]
    rows = [f"{i},{10 + i},{f},{o},0,0,0" for i, (o, f) in enumerate(zip(odd, floats, strict=True))]
    alone = tmp_path / "alone.csv"
    alone.write_text("\n".join(rows) + "\n")
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("\n".join([*rows, "99,1,bad,1,0,0,0"]) + "\n")
    a, bad_a = lenient(alone)
    assert bad_a.seen == []
    m, bad_m = lenient(mixed)
    assert bad_m.seen and len(bad_m.seen) == 1
    assert a.num_rows == len(rows) and a.equals(m)
    assert a.column("property").to_pylist() == [31, 7, 7, 7, -7, 7]


def test_generic_schema_headerless_and_with_header(tmp_path: Path) -> None:
    schema = pa.schema(
        [("ts", pa.int64()), ("name", pa.string()), ("ok", pa.bool_()),
         ("amount", pa.float64()), ("n", pa.int32())]
    )  # fmt: skip
    rows = [
        "1,alpha,true,1.25,3",
        '2,"with, comma",FALSE,2,4',
        "3,,1,3,5",  # line 3: an empty VARCHAR is a missing value
        '4,"",0,4,6',  # a quoted empty string is an empty string
        "5,eps,maybe,5,7",  # line 5: not a boolean
        "6,zeta,false,NaN,8",  # line 6
        "7,eta,true,7.5,9",
    ]
    headerless = tmp_path / "events.csv"
    headerless.write_text("\n".join(rows) + "\n")
    table, bad = lenient(headerless, "debs", schema=schema)
    assert table.schema == schema
    assert table.to_pydict() == {
        "ts": [1, 2, 4, 7], "name": ["alpha", "with, comma", "", "eta"],
        "ok": [True, False, False, True], "amount": [1.25, 2.0, 4.0, 7.5], "n": [3, 4, 6, 9],
    }  # fmt: skip
    assert [(n, r) for n, _, r in bad.seen] == [
        (3, "missing value in column 'name'"),
        (5, "unparsable value 'maybe' in column 'ok' (expected BOOLEAN)"),
        (6, "non-finite value 'NaN' in column 'amount'"),
    ]
    with_header = tmp_path / "events_h.csv"
    with_header.write_text("N,Amount,extra,ok,name,ts\n" + "\n".join(
        ",".join([r.split(",")[-1], "0.5", "x", "true", "nm", str(i)]) for i, r in enumerate(rows)
    ) + "\n")  # fmt: skip
    table, bad = lenient(with_header, "csv", schema=schema)
    assert bad.seen == []
    assert table.column("ts").to_pylist() == list(range(len(rows)))
    assert table.column("n").to_pylist() == [3, 4, 5, 6, 7, 8, 9]
    # "timestamp" is an alias only for the smart-plug schema
    aliased = tmp_path / "alias.csv"
    aliased.write_text("timestamp,name,ok,amount,n\n1,a,true,1,1\n")
    with pytest.raises(DataError, match="missing column 'ts'"):
        read_batches(aliased, schema=schema, on_bad=Collect())


def test_generic_schema_parquet(tmp_path: Path) -> None:
    schema = pa.schema([("ts", pa.int64()), ("label", pa.string()), ("v", pa.float64()),
                        ("n", pa.int32()), ("flag", pa.bool_())])  # fmt: skip
    path = tmp_path / "g.parquet"
    pq.write_table(
        pa.table(
            {
                "flag": [True, False, None, True, False],
                "n": pa.array([1, 2**40, 3, 4, 5], pa.int64()),  # row 2 does not fit INTEGER
                "v": [1.0, 2.0, 3.0, float("nan"), 5],  # row 4 is NaN
                "label": pa.array(["a", "b", "c", "d", "e"], pa.large_string()),
                "ts": pa.array([10, 20, 30, 40, 50], pa.uint16()),
            }
        ),
        path,
    )
    table, bad = lenient(path, schema=schema)
    assert table.schema == schema
    assert table.column("ts").to_pylist() == [10, 50]
    assert [(n, r) for n, _, r in bad.seen] == [
        (2, "value 1099511627776 out of range for INTEGER in column 'n'"),
        (3, "missing value in column 'flag'"),
        (4, "non-finite value nan in column 'v'"),
    ]
    assert '"label": "b"' in bad.seen[0][1]  # the row as JSON
    with pytest.raises(DataError, match="row 2: value 1099511627776 out of range"):
        list(read_batches(path, schema=schema))
    pq.write_table(pa.table({**table.to_pydict(), "flag": [1, 2]}), path)
    with pytest.raises(DataError, match="column 'flag' has type int64, expected a boolean"):
        read_batches(path, schema=schema, on_bad=Collect())


def test_file_level_problems_still_raise_with_on_bad(tmp_path: Path) -> None:
    bad = Collect()
    missing = tmp_path / "m.csv"
    missing.write_text("id,timestamp,valu,property,plug_id,household_id,house_id\n1,2,3,1,0,0,0\n")
    with pytest.raises(DataError, match="missing column 'value'"):
        read_batches(missing, on_bad=bad)
    with pytest.raises(DataError, match="not found"):
        read_batches(tmp_path / "nope.csv", on_bad=bad)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    for fmt in (None, "debs", "csv"):
        with pytest.raises(DataError, match="not a text"):
            read_batches(binary, fmt, on_bad=bad)
    parquet = tmp_path / "p.parquet"
    pq.write_table(pa.table({n: [1] for n in SCHEMA.names}), parquet)
    with pytest.raises(DataError, match="Parquet"):
        read_batches(parquet, "debs", on_bad=bad)
    assert bad.seen == []


def test_strict_messages_name_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text(GOOD.format(i=1) + "\n" + "2,1377986401,1.5,1,0,0,99999999999\n")
    with pytest.raises(DataError) as err:
        list(read_batches(path))
    assert str(err.value) == (
        f"{path}: row 2: value '99999999999' out of range for INTEGER in column 'house_id'"
    )
    assert err.value.hint


# -- quotes and long lines: a bad line costs that line, whatever follows it ----------------------


def _quoted_file(path: Path, n: int, bad: dict[int, str], header: bool = False) -> list[int]:
    """``n`` good rows numbered 0.., the lines in ``bad`` (1-based line: text) put in their
    place; returns the ids of the good rows left."""
    lines = [GOOD.format(i=i) for i in range(n)]
    first = 2 if header else 1
    for line, text in bad.items():
        lines[line - first] = text
    path.write_text((HEADER + "\n" if header else "") + "\n".join(lines) + "\n")
    return [i for i in range(n) if i + first not in bad]


QUOTE = "unterminated quote"


@pytest.mark.parametrize("header", [False, True], ids=["debs", "csv"])
@pytest.mark.parametrize(
    "bad",
    [
        {51: ('50,1377986401,"7.5,1,0,0,0', QUOTE)},  # the issue's: opened mid-file, not closed
        {20000: ('19999,1377986401,1.5,1,0,0,"0', QUOTE)},  # on the last line
        {10: ('"9,1377986401,1.5,1,0,0,0', QUOTE),  # closed on the next line, which is bad
         11: ('10,1377986401,1.5",1,0,0,0', "unparsable value '1.5\"'")},  # by itself
        {5: ('4,1377986401,"1.5,1,0,0,0', QUOTE), 700: ('699,"1377986401,1.5,1,0,0,0', QUOTE),
         19990: ('19989,1377986401,1.5,1,0,0,"""0', QUOTE)},
        {30: ('29,1377986401,1.5,1,0,0,"0""', QUOTE)},  # an escaped quote: still open
    ],
    ids=["mid-file", "last line", "closed by the next line", "several", "escaped"],
)  # fmt: skip
@pytest.mark.parametrize("batch_rows", [65536, 997])
def test_an_unterminated_quote_costs_only_its_line(
    tmp_path: Path, header: bool, bad: dict[int, tuple[str, str]], batch_rows: int
) -> None:
    path = tmp_path / "q.csv"
    kept = _quoted_file(path, 20000, {n: text for n, (text, _) in bad.items()}, header)
    table, seen = lenient(path, "csv" if header else "debs", batch_rows)
    assert [n for n, _, _ in seen.seen] == sorted(bad)
    for number, raw, reason in seen.seen:
        text, why = bad[number]
        assert reason.startswith(why), (number, reason)
        assert raw == text or why != QUOTE  # an open-quote line is shown as it is
    assert table.column("id").to_pylist() == kept
    with pytest.raises(DataError, match=rf"row {min(bad)}: unterminated quote"):
        list(read_batches(path, batch_rows=batch_rows))


def test_a_quote_without_a_line_end_on_the_last_line(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("\n".join(GOOD.format(i=i) for i in range(5)) + '\n5,1377986401,"1.5')
    table, seen = lenient(path)
    assert table.num_rows == 5
    assert [(n, raw) for n, raw, _ in seen.seen] == [(6, '5,1377986401,"1.5')]


def test_well_quoted_values_are_read(tmp_path: Path) -> None:
    schema = pa.schema([("ts", pa.int64()), ("name", pa.string())])
    path = tmp_path / "s.csv"
    path.write_text('1,"a, b"\n2,"say ""hi"""\n3,x"y\n4,"q"r\n5,""\n')
    table, seen = lenient(path, "debs", schema=schema)
    assert seen.seen == []
    assert table.column("name").to_pylist() == ["a, b", 'say "hi"', 'x"y', "qr", ""]


def test_a_line_break_inside_quotes_is_an_unterminated_quote(tmp_path: Path) -> None:
    """A row is one line: a quoted value cannot hold a line break (the line numbers of
    every later row stay right)."""
    schema = pa.schema([("ts", pa.int64()), ("name", pa.string())])
    path = tmp_path / "s.csv"
    path.write_text('1,a\n2,"two\nlines",x\n3,c\n4,d,e\n')
    table, seen = lenient(path, "debs", schema=schema)
    assert table.column("ts").to_pylist() == [1, 3]
    assert [(n, r.split(":")[0]) for n, _, r in seen.seen] == [
        (2, "unterminated quote"),
        (3, "unparsable value 'lines\"' in column 'ts' (expected BIGINT)"),  # by itself
        (5, "expected 2 fields, found 3"),
    ]


def _arrow_leaves_open(line: str) -> bool:
    """Whether Arrow's CSV parser, reading ``line`` and then a plain line, runs a quoted value
    of ``line`` past its line end (the next line ends up inside a value)."""
    texts: list[str] = []

    def skip(row: Any) -> str:
        texts.append(row.text)
        return "skip"

    read = pacsv.read_csv(
        pa.BufferReader(f"{line}\nend\n".encode()),
        read_options=pacsv.ReadOptions(column_names=["c"]),
        parse_options=pacsv.ParseOptions(invalid_row_handler=skip),
        convert_options=pacsv.ConvertOptions(column_types={"c": pa.string()}),
    )
    return any("\n" in str(v) for v in read.column("c").to_pylist() + texts)


def test_the_quote_check_agrees_with_the_csv_parser() -> None:
    """Whether a line leaves a quoted value open is decided as Arrow's parser decides it
    (random lines of quotes, commas, spaces and text)."""
    from engines.sources.files.quotes import open_quote_lines

    rng = np.random.default_rng(47)
    alphabet = np.array(list('",a "'))
    lines = ["".join(rng.choice(alphabet, size=rng.integers(0, 9))) for _ in range(3000)]
    flagged = set(open_quote_lines(pa.array(lines)).to_pylist())
    wrong = [line for i, line in enumerate(lines) if (i in flagged) != _arrow_leaves_open(line)]
    assert wrong == []


@pytest.mark.parametrize("batch_rows", [65536, 10])
@pytest.mark.parametrize("size", [3 << 20, 20 << 20])
def test_a_line_over_the_limit_is_a_dead_letter_found_in_linear_time(
    tmp_path: Path, size: int, batch_rows: int
) -> None:
    from engines.sources.files import MAX_LINE_BYTES

    path = tmp_path / "long.csv"
    lines = [GOOD.format(i=i) for i in range(200)]
    lines[99] = "99,1377986401," + "7" * size
    path.write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    table, seen = lenient(path, batch_rows=batch_rows)
    assert time.perf_counter() - start < 10  # was 7-10 s for 3 MB, an error for 20 MB
    assert table.num_rows == 199
    assert [(n, r.split(" (")[0]) for n, _, r in seen.seen] == [
        (100, f"line longer than the limit of {MAX_LINE_BYTES:,} bytes")
    ]
    _, raw, reason = seen.seen[0]
    assert raw.startswith("99,1377986401,777") and len(raw) < 2000  # truncated
    assert f"{size + 14:,} bytes" in reason
    with pytest.raises(DataError, match="row 100: line longer than the limit"):
        list(read_batches(path, batch_rows=batch_rows))


@pytest.mark.parametrize("header", [False, True])
def test_a_line_at_the_limit_is_read(tmp_path: Path, header: bool) -> None:
    from engines.sources.files import MAX_LINE_BYTES

    schema = pa.schema([("ts", pa.int64()), ("name", pa.string())])
    path = tmp_path / "edge.csv"
    at = "2," + "x" * (MAX_LINE_BYTES - 2)
    over = "3," + "y" * (MAX_LINE_BYTES - 1)
    top = "ts,name\n" if header else ""
    path.write_text(f"{top}1,a\n{at}\n{over}\n4,b\n{over}")  # the last without a line end
    table, seen = lenient(path, "csv" if header else "debs", schema=schema)
    assert table.column("ts").to_pylist() == [1, 2, 4]
    assert len(table.column("name")[1].as_py()) == MAX_LINE_BYTES - 2
    first = 2 if header else 1
    assert [n for n, _, _ in seen.seen] == [first + 2, first + 4]
