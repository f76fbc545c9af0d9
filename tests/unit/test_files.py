"""Data-file readers: DEBS CSV, CSV with a header, Parquet; format detection; errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from engines.sources.files import detect_format, read_batches
from engines.sources.smartplug import SCHEMA, SmartPlugGenerator, generate_to_file
from optimizer.ir.errors import DataError

REAL_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

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
