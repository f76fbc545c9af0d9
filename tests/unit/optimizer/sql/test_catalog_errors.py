"""Malformed catalogs raise CatalogError naming the key path, with a hint where one helps."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import CatalogError
from optimizer.ir.types import DataType
from optimizer.sql.catalog import load_catalog, parse_catalog_text

ROOT = Path(__file__).resolve().parents[4]
REAL = (ROOT / "queries" / "smartplug" / "catalog.toml").read_text(encoding="utf-8")

COLUMNS = """
[streams.readings.columns]
id = "BIGINT"
ts = "BIGINT"
value = "DOUBLE"
property = "INTEGER"
plug_id = "INTEGER"
household_id = "INTEGER"
house_id = "INTEGER"
"""


def edit(old: str, new: str) -> str:
    """The shipped catalog with one edit (which must apply)."""
    assert old in REAL, old
    return REAL.replace(old, new, 1)


def small(body: str) -> str:
    """A minimal one-stream catalog with extra lines in the stream's table."""
    return f'[streams.r]\ntimestamp = "ts"\ncolumns = {{ ts = "BIGINT", v = "DOUBLE" }}\n{body}\n'


#: A one-stream catalog whose source is the keyed generator.
KEYED = (
    '[streams.r]\ntimestamp = "ts"\ncolumns = { ts = "BIGINT", k = "INTEGER", v = "DOUBLE" }\n'
    '[streams.r.source]\nkind = "generator"\ngenerator = "keyed"\nkeys = 10\n'
)


# (id, catalog text, substrings of the message, substring of the hint or None)
CASES = [
    # unknown keys, with the closest valid key
    (
        "unknown-stream-key",
        edit("rate = 2000", "rat = 2000"),
        ["unknown key 'streams.readings.rat'"],
        "did you mean 'rate'?",
    ),
    ("unknown-top-key", "stream = 1\n" + REAL, ["unknown key 'stream'"], "did you mean 'streams'?"),
    (
        "unknown-table",
        edit("[streams.readings.columns]", "[streams.readings.cols]"),
        ["unknown key 'streams.readings.cols'"],
        "did you mean 'columns'?",
    ),
    (
        "unknown-generator-option",
        edit("houses = 40", "houses = 40\nspeed = 2"),
        ["unknown key 'streams.readings.source.speed'"],
        "did you mean 'seed'?",
    ),
    (
        "misspelt-generator-option",
        edit("houses = 40", "house = 40"),
        ["unknown key 'streams.readings.source.house'"],
        "did you mean 'houses'?",
    ),
    (
        "unknown-statistics-key",
        small("statistics = { distinc = {} }"),
        ["unknown key 'streams.r.statistics.distinc'"],
        "did you mean 'distinct'?",
    ),
    (
        "file-source-with-generator-key",
        small('source = { kind = "file", path = "x.csv", houses = 3 }'),
        ["unknown key 'streams.r.source.houses'"],
        "valid keys: format, kind, path",
    ),
    # wrong types
    (
        "rate-string",
        edit("rate = 2000", 'rate = "fast"'),
        ["streams.readings.rate must be a number, got str"],
        None,
    ),
    (
        "rate-bool",
        edit("rate = 2000", "rate = true"),
        ["streams.readings.rate must be a number, got bool"],
        None,
    ),
    (
        "column-type-not-string",
        edit('value = "DOUBLE"', "value = 3"),
        ["streams.readings.columns.value must be a string, got int"],
        None,
    ),
    (
        "columns-array",
        small("").replace('columns = { ts = "BIGINT", v = "DOUBLE" }', 'columns = ["ts"]'),
        ["streams.r.columns must be a table, got list"],
        None,
    ),
    (
        "timestamp-not-string",
        edit('timestamp = "ts"', "timestamp = 1"),
        ["streams.readings.timestamp must be a string, got int"],
        None,
    ),
    ("streams-not-table", "streams = 1\n", ["streams must be a table, got int"], None),
    (
        "source-not-table",
        small('source = "generator"'),
        ["streams.r.source must be a table, got str"],
        None,
    ),
    ("doc-not-string", small("doc = 1"), ["streams.r.doc must be a string, got int"], None),
    (
        "option-not-integer",
        edit("houses = 40", "houses = 1.5"),
        ["streams.readings.source.houses must be an integer"],
        None,
    ),
    # unknown column types
    (
        "column-type-typo",
        edit('value = "DOUBLE"', 'value = "DUOBLE"'),
        ["streams.readings.columns.value: unknown type 'DUOBLE'"],
        "did you mean 'DOUBLE'?",
    ),
    (
        "column-type-unsupported",
        edit('value = "DOUBLE"', 'value = "TIMESTAMP"'),
        ["unknown type 'TIMESTAMP'"],
        "BIGINT, INTEGER, DOUBLE, BOOLEAN or VARCHAR",
    ),
    # the timestamp column
    (
        "timestamp-unknown-column",
        edit('timestamp = "ts"', 'timestamp = "tss"'),
        ["streams.readings.timestamp names unknown column 'tss'"],
        "did you mean 'ts'?",
    ),
    (
        "timestamp-unknown-column-list",
        edit('timestamp = "ts"', 'timestamp = "time"'),
        ["names unknown column 'time'"],
        "columns: id, ts, value",
    ),
    (
        "timestamp-not-integer",
        edit('timestamp = "ts"', 'timestamp = "value"'),
        ["timestamp column 'value' must be BIGINT or INTEGER"],
        None,
    ),
    (
        "timestamp-missing",
        edit('timestamp = "ts"\n', ""),
        ["streams.readings is missing 'timestamp'"],
        'timestamp = "ts"',
    ),
    # time unit, rate, options
    (
        "bad-time-unit",
        edit('time_unit = "s"', 'time_unit = "minutes"'),
        ["streams.readings.time_unit must be 's' or 'ms', got 'minutes'"],
        "epoch seconds",
    ),
    (
        "negative-rate",
        edit("rate = 2000", "rate = -5"),
        ["streams.readings.rate must be a positive number, got -5"],
        "tuples per event-second",
    ),
    ("zero-rate", edit("rate = 2000", "rate = 0"), ["rate must be a positive number, got 0"], None),
    (
        "nan-rate",
        edit("rate = 2000", "rate = nan"),
        ["rate must be a positive number, got nan"],
        None,
    ),
    ("infinite-rate", edit("rate = 2000", "rate = inf"), ["rate must be a positive number"], None),
    (
        "negative-option",
        edit("houses = 40", "houses = -1"),
        ["streams.readings.source.houses must be positive, got -1"],
        None,
    ),
    (
        "huge-option",
        edit("houses = 40", "houses = 99999999999999999999"),
        ["streams.readings.source.houses is too large"],
        None,
    ),
    # names
    (
        "duplicate-stream-case",
        small("") + small("").replace("streams.r]", "streams.R]"),
        ["stream 'R' defined twice (names ignore case)"],
        None,
    ),
    (
        "duplicate-column-case",
        edit('id = "BIGINT"', 'id = "BIGINT"\nID = "INTEGER"'),
        ["streams.readings.columns has 'id' and 'ID'"],
        None,
    ),
    (
        "stream-name-not-identifier",
        small("").replace("streams.r]", 'streams."my stream"]'),
        ["stream name 'my stream' is not a valid identifier"],
        None,
    ),
    (
        "column-name-not-identifier",
        small("").replace('v = "DOUBLE"', '"a b" = "INTEGER"'),
        ["column name 'a b' is not a valid identifier"],
        None,
    ),
    # missing parts
    (
        "missing-columns",
        edit(COLUMNS.strip() + "\n", ""),
        ["streams.readings is missing 'columns'"],
        "[streams.readings.columns]",
    ),
    (
        "empty-columns",
        small("").replace('{ ts = "BIGINT", v = "DOUBLE" }', "{}"),
        ["streams.r.columns is empty"],
        None,
    ),
    (
        "no-streams-table",
        'doc = "nothing here"\n',
        ["no [streams.NAME] table"],
        "at least one stream",
    ),
    ("no-streams", "[streams]\n", ["no streams defined"], "[streams.NAME]"),
    # sources
    (
        "bad-source-kind",
        edit('kind = "generator"', 'kind = "kafka"'),
        ["streams.readings.source.kind must be 'generator' or 'file', got 'kafka'"],
        None,
    ),
    (
        "source-kind-typo",
        edit('kind = "generator"', 'kind = "generater"'),
        ["source.kind must be 'generator' or 'file'"],
        "did you mean 'generator'?",
    ),
    (
        "source-kind-missing",
        small("source = {}"),
        ["streams.r.source is missing 'kind'"],
        'kind = "generator"',
    ),
    (
        "unknown-generator",
        edit('generator = "smartplug"', 'generator = "smartplugs"'),
        ["unknown generator 'smartplugs'"],
        "did you mean 'smartplug'?",
    ),
    (
        "unknown-generator-far",
        edit('generator = "smartplug"', 'generator = "kafka"'),
        ["unknown generator 'kafka'"],
        "the built-in generators are 'smartplug', 'keyed', 'multiway', 'x3' and 'x4'",
    ),
    (
        "x3-generator-stream-name",
        edit('generator = "smartplug"', 'generator = "x3"').replace("houses = 40\n", ""),
        ["the x3 generator has no stream 'readings'"],
        "its streams are s1, s2, s3",
    ),
    (
        "keyed-generator-columns",
        edit('generator = "smartplug"', 'generator = "keyed"').replace("houses = 40\n", ""),
        ["the keyed generator writes columns ts BIGINT, k INTEGER, v DOUBLE"],
        None,
    ),
    (
        "keyed-silent-pair",
        KEYED.replace("keys = 10", "keys = 10\nsilent = [[60, 30]]"),
        ["streams.r.source.silent: [60, 30] is not a [from, to] pair with 0 <= from < to"],
        "silent = [[30, 60]]",
    ),
    (
        "keyed-end-before-start",
        KEYED.replace("keys = 10", "keys = 10\nstart = 20\nend = 10"),
        ["streams.r.source.end must be after start"],
        None,
    ),
    (
        "keyed-negative-skew",
        KEYED.replace("keys = 10", "keys = 10\nskew = -1"),
        ["streams.r.source.skew must be a number >= 0"],
        None,
    ),
    (
        "keyed-smartplug-setting",
        KEYED.replace("keys = 10", "keys = 10\nhouses = 3"),
        ["unknown key 'streams.r.source.houses'"],
        None,
    ),
    (
        "file-source-without-path",
        small('source = { kind = "file" }'),
        ["streams.r.source.path must be a file path string"],
        None,
    ),
    (
        "file-source-bad-format",
        small('source = { kind = "file", path = "x.csv", format = "xml" }'),
        ["streams.r.source.format must be one of debs, csv, parquet, got 'xml'"],
        None,
    ),
    # statistics
    (
        "statistics-unknown-column",
        small("statistics = { distinct = { nope = 3 } }"),
        ["statistics.distinct names unknown column 'nope'"],
        "columns: ts, v",
    ),
    (
        "statistics-negative-distinct",
        small("statistics = { distinct = { ts = -3 } }"),
        ["streams.r.statistics.distinct.ts must be a positive integer"],
        None,
    ),
    (
        "statistics-selectivity-range",
        small("statistics = { selectivity = { 'v > 1' = 1.5 } }"),
        ["statistics.selectivity.'v > 1' must be in [0, 1]"],
        None,
    ),
    # not TOML at all
    ("invalid-toml", "[streams.readings\ntimestamp = ts\n", ["invalid TOML", "line 1"], None),
]


def test_case_ids_are_unique() -> None:
    assert len({c[0] for c in CASES}) == len(CASES) >= 15


@pytest.mark.parametrize(
    ("text", "messages", "hint"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_catalog(text: str, messages: list[str], hint: str | None) -> None:
    with pytest.raises(CatalogError) as info:
        parse_catalog_text(text, "cat.toml")
    err = info.value
    assert err.message.startswith("cat.toml: ")
    for part in messages:
        assert part in err.message
    if hint is not None:
        assert err.hint is not None and hint in err.hint, err.hint
    rendered = err.render()
    assert rendered.startswith("error: cat.toml: ")
    assert err.exit_code == 2


def test_shipped_catalog_is_valid() -> None:
    cat = parse_catalog_text(REAL, "catalog.toml")
    stream = cat.get("READINGS")
    assert stream is not None and stream.timestamp == "ts" and stream.time_unit == "s"
    assert stream.column_type("value") is DataType.DOUBLE
    assert stream.rate == 2000


def test_keyed_generator_settings() -> None:
    text = KEYED.replace("keys = 10", "keys = 10\nskew = 1.2\nstart = 5\nsilent = [[30, 60]]")
    r = parse_catalog_text(text, "cat.toml").get("r")
    assert r is not None and r.source.generator == "keyed"
    assert dict(r.source.options) == {
        "keys": 10,
        "skew": 1.2,
        "start": 5.0,
        "silent": ((30.0, 60.0),),
    }


def test_minimal_catalog_takes_defaults() -> None:
    cat = parse_catalog_text(small(""), "cat.toml")
    assert isinstance(cat, Catalog)
    r = cat.get("r")
    assert r is not None and r.time_unit == "s" and r.source.kind == "none"


def test_load_catalog_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as info:
        load_catalog(tmp_path / "nope" / "catalog.toml")
    assert "catalog file not found" in info.value.message
    assert "nope" in info.value.message
    assert info.value.hint is not None and "--catalog PATH" in info.value.hint


def test_load_catalog_directory(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read catalog"):
        load_catalog(tmp_path)


def test_load_catalog_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "catalog.toml"
    path.write_bytes(b'doc = "\xff\xfe"\n')
    with pytest.raises(CatalogError, match="cannot read catalog"):
        load_catalog(path)


def test_load_catalog_reports_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "catalog.toml"
    path.write_text(edit("rate = 2000", "rat = 2000"), encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert info.value.message.startswith(f"{path}: unknown key 'streams.readings.rat'")


def test_file_source_path_is_relative_to_the_catalog(tmp_path: Path) -> None:
    path = tmp_path / "catalog.toml"
    path.write_text(
        small('source = { kind = "file", path = "data/r.csv", format = "csv" }'), encoding="utf-8"
    )
    r = load_catalog(path).get("r")
    assert r is not None and r.source.path == tmp_path / "data" / "r.csv"
