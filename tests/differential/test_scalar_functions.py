"""The scalar functions DuckDB, DataFusion and Spark share, on every engine against the oracle.

docs/semantics.md ("Scalar functions") defines each by DuckDB's result. Every function runs
here on each engine of tests/engines.py (the whole plan there) over edge inputs: NULL, NaN,
+-inf, -0.0 and huge values made by expressions (input rows with them are dead letters),
zero, negative and fractional numbers, empty, space-padded and non-ASCII strings, and
positions before, at and past both ends of a string. UPPER and LOWER are not Spark's or
DataFusion's (they map some characters' case differently): an operator using them cannot be
placed there (a PlanError naming the function). Window units DAY(S) and WEEK(S) run too.
"""

from __future__ import annotations

import functools

import pyarrow as pa
import pytest

from hycq.api import execute
from optimizer.ir.errors import DataError, PlanError
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.engines import placement_of
from tests.oracle import assert_same_stream, oracle

CATALOG = parse_catalog_text(
    '[streams.e]\ntimestamp = "ts"\ntime_unit = "s"\nrate = 14\n'
    '[streams.e.columns]\nts = "BIGINT"\nk = "INTEGER"\nx = "DOUBLE"\ny = "DOUBLE"\n'
    's = "VARCHAR"\nt = "VARCHAR"\na = "BIGINT"\nb = "BIGINT"\n'
)
ORIGIN = 1_400_000_000

XS = [2.0, 9.0, 3.0, 4.0, 1.0, 7.0, -2.5, 0.25, 1e308, 8.0, 0.0, 1.0, -1.0, -8.0]
YS = [-1.0, 0.5, 2.0, 3.0, -2.0, 0.0, 1e308, 1 / 3, 10.0, -3.0, 2.5, 1.0, -0.5]
STRINGS = [
    "",
    "hello",
    "  a b  ",
    "héllo wörld",
    "🦆x",
    "ÀÉ ß ǆ",
    "\ta\n ",
    "abcab",
    "ab",
    "x",
    "Straße",
    "ΑΣ",
    "e\u0301",
    "hello world",
]
INTS = [-7, -2, -1, 0, 1, 2, 5, 6, 3, 100, -100, 4, 2**32 - 1, -(2**32), 9]

#: The edge values, made by expressions over the input: per k, x is NULL, +inf, -inf, NaN
#: or -0.0; y NULL or +-inf / NaN; s, t, a and b NULL.
DERIVED = """(SELECT k,
    CASE WHEN k = 1 THEN NULL WHEN k = 2 THEN x / 0.0 WHEN k = 3 THEN -x / 0.0
         WHEN k = 4 THEN 0.0 / 0.0 WHEN k = 5 THEN -0.0 ELSE x END AS x,
    CASE WHEN k = 6 THEN NULL WHEN k = 11 THEN y / 0.0 ELSE y END AS y,
    CASE WHEN k = 7 THEN NULL ELSE s END AS s,
    CASE WHEN k = 8 THEN NULL ELSE t END AS t,
    CASE WHEN k = 9 THEN NULL ELSE a END AS a,
    CASE WHEN k = 10 THEN NULL ELSE b END AS b
  FROM e [NOW]) AS d"""

QUERIES = {
    "math": f"""SELECT k, SQRT(x) AS sq, SQRT(k) AS sqk, LN(x) AS ln, LOG(x) AS lg,
        LOG10(x) AS l10, LOG2(x) AS l2, LOG(y, x) AS lb, LOG(2, 8) AS l28, EXP(x) AS ex,
        EXP(x / 100) AS ex100, POWER(x, y) AS pw, POW(y, 2) AS p2, y ** 3 AS p3,
        POWER(a, 2) AS pa, SIGN(x) AS sg, SIGN(a) AS sa, SIGN(y) AS sy, MOD(a, b) AS md
        FROM {DERIVED}""",
    "strings": f"""SELECT k, LENGTH(s) AS n, CHAR_LENGTH(t) AS nt, SUBSTRING(s, a, b) AS sub,
        SUBSTR(s, a) AS sub2, SUBSTRING(s FROM 2 FOR 3) AS sub3, SUBSTRING(s, -3) AS sub4,
        TRIM(s) AS tr, LTRIM(s) AS lt, RTRIM(s) AS rt, TRIM(s, 'a ') AS tc, LTRIM(s, t) AS ltc,
        RTRIM(s, 'o') AS rtc, REPLACE(s, t, 'Z') AS rep, REPLACE('abcab', s, t) AS rep2,
        CONCAT(s, t, 'z') AS cat, CONCAT(s) AS cat1, s || t AS pipe, s || '!' AS bang,
        STARTS_WITH(s, t) AS sw, ENDS_WITH(s, t) AS ew, CONTAINS(s, t) AS ct,
        STARTS_WITH(s, 'h') AS swh, LPAD(s, CAST(a % 12 AS INTEGER), 'xy') AS lp,
        RPAD(s, CAST(b % 12 AS INTEGER), 'é') AS rp,
        NULLIF(s, t) AS ni, NULLIF(a, 2) AS na, NULLIF(k, 3.0) AS nk
        FROM {DERIVED}""",
    "filter_aggregate": f"""SELECT LENGTH(s) % 3 AS g, COUNT(*) AS n,
        SUM(LENGTH(s || t)) AS total, MAX(SQRT(ABS(x))) AS m, SUM(SIGN(x)) AS signs,
        MAX(LENGTH(LPAD(s, 7, '-'))) AS padded, COUNT(NULLIF(a, 0)) AS nonzero
        FROM {DERIVED}
        WHERE STARTS_WITH(s, 'h') OR CONTAINS(s, 'a') OR LENGTH(TRIM(s)) < 2
        GROUP BY LENGTH(s) % 3 HAVING SUM(LENGTH(s)) >= 0""",
}
#: UPPER and LOWER: DuckDB's per-character mapping; not Spark's or DataFusion's.
CASE_QUERY = f"""SELECT k, UPPER(s) AS u, LOWER(s) AS l, UPPER(t) AS ut, LOWER(t) AS lt,
    LENGTH(UPPER(s)) AS n FROM {DERIVED}"""


@functools.cache
def _data(seconds: int = 4) -> pa.Table:
    rows = [
        {
            "ts": ORIGIN + sec,
            "k": k,
            "x": XS[k],
            "y": YS[(k + sec) % len(YS)],
            "s": STRINGS[k],
            "t": STRINGS[(3 * k + sec) % len(STRINGS)],
            "a": INTS[(k + sec) % len(INTS)],
            "b": INTS[(2 * k + sec + 1) % len(INTS)],
        }
        for sec in range(seconds)
        for k in range(len(XS))
    ]
    schema = pa.schema(
        [
            ("ts", pa.int64()),
            ("k", pa.int32()),
            ("x", pa.float64()),
            ("y", pa.float64()),
            ("s", pa.string()),
            ("t", pa.string()),
            ("a", pa.int64()),
            ("b", pa.int64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


@functools.cache
def _expected(text: str) -> pa.Table:
    out = oracle(text, CATALOG, {"e": _data()})
    assert out.num_rows > 0
    return out


#: The cases calling the libm functions (EXP, LN, LOG*, POWER), which Spark computes with the
#: JVM's and may round differently in the last bit (docs/semantics.md): compared within the
#: tolerance there, bit for bit everywhere else.
LIBM = frozenset({"math", "doubles"})


def _check(text: str, engine: str, libm: bool = False) -> None:
    placement, column_engine = placement_of(engine)
    plan = plan_query(text, CATALOG, "functions.sql")
    got = execute(plan, CATALOG, {"e": _data()}, placement, column_engine=column_engine)
    assert got.dead_letter == 0
    assert_same_stream(got.table, _expected(text), exact=not (libm and engine == "spark"))


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_functions_equal_the_oracle(engine: str, name: str) -> None:
    _check(QUERIES[name], engine, libm=name in LIBM)


@pytest.mark.notimpl(["spark", "datafusion"], raises=PlanError)
def test_upper_and_lower_equal_the_oracle(engine: str) -> None:
    _check(CASE_QUERY, engine)


def test_upper_and_lower_are_placed_where_they_are_exact() -> None:
    """Placing UPPER / LOWER on Spark or DataFusion is refused naming the function; the
    optimizer keeps them off (their capabilities leave them out) and the result equals the
    oracle's."""
    from hycq.api import resolve_placement
    from hycq.planning import OptimizerOptions

    plan = plan_query(CASE_QUERY, CATALOG)
    for column_engine in ("datafusion", "spark"):
        with pytest.raises(PlanError, match=r"cannot evaluate (UPPER|LOWER)") as err:
            resolve_placement(plan, "column", column_engine)
        assert "DuckDB or the row engine" in (err.value.hint or "")
        got = execute(
            plan,
            CATALOG,
            {"e": _data()},
            "auto",
            column_engine=column_engine,
            optimizer=OptimizerOptions(engines=("row", column_engine)),
        )
        assert_same_stream(got.table, _expected(CASE_QUERY))


# -- window units ---------------------------------------------------------------------------

HOUR = 3600
#: One tuple every 5 hours over 3 weeks.
SPARSE = pa.table(
    {
        "ts": pa.array([ORIGIN + 5 * HOUR * i for i in range(100)], pa.int64()),
        "k": pa.array([i % 3 for i in range(100)], pa.int32()),
        "x": pa.array([float(i % 7) for i in range(100)], pa.float64()),
        "y": pa.array([1.0] * 100, pa.float64()),
        "s": pa.array(["a"] * 100, pa.string()),
        "t": pa.array(["b"] * 100, pa.string()),
        "a": pa.array([1] * 100, pa.int64()),
        "b": pa.array([2] * 100, pa.int64()),
    }
)
UNIT_QUERIES = [
    "SELECT k, COUNT(*) AS n, SUM(x) AS total FROM e [RANGE 2 DAYS SLIDE 12 HOURS] GROUP BY k",
    "SELECT COUNT(*) AS n, MAX(x) AS m FROM e [RANGE 1 WEEK SLIDE 1 DAY]",
    "SELECT ISTREAM k, COUNT(*) AS n FROM e [RANGE 1 DAY SLIDE 10 HOURS] GROUP BY k",
]


@pytest.mark.parametrize("text", UNIT_QUERIES, ids=["days", "week", "istream"])
def test_day_and_week_windows_equal_the_oracle(engine: str, text: str) -> None:
    expected = oracle(text, CATALOG, {"e": SPARSE})
    assert expected.num_rows > 0
    placement, column_engine = placement_of(engine)
    got = execute(
        plan_query(text, CATALOG), CATALOG, {"e": SPARSE}, placement, column_engine=column_engine
    )
    assert_same_stream(got.table, expected)


@pytest.mark.parametrize("value", [2**32, -(2**32) - 1, 2**62])
@pytest.mark.parametrize("where", ["position", "length"])
def test_substring_outside_its_range_is_an_error(engine: str, value: int, where: str) -> None:
    """DuckDB refuses a SUBSTRING position or length outside [-2^32, 2^32 - 1]: every engine
    stops with a data error (exit 2), none returns a result."""
    args = f"a + {value}, 2" if where == "position" else f"1, a + {value}"
    text = f"SELECT SUBSTRING(s, {args}) AS x FROM e [NOW] WHERE a = 0"
    placement, column_engine = placement_of(engine)
    plan = plan_query(text, CATALOG)
    with pytest.raises(DataError):
        execute(plan, CATALOG, {"e": _data()}, placement, column_engine=column_engine)


# -- grids: every combination of edge arguments ---------------------------------------------

#: Doubles the grids combine: the specials are made from the input by expressions.
SPECIALS = {
    0: "0.0 / 0.0",
    1: "1.0 / 0.0",
    2: "-1.0 / 0.0",
    3: "-0.0",
    4: "CAST(NULL AS DOUBLE)",
}
PLAIN = [0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, 1e300, -1e300, 1e-300, 8.0]


def _double_of(code: str) -> str:
    """The DOUBLE a code column stands for: a special, else PLAIN[code - len(SPECIALS)]."""
    whens = [f"WHEN {code} = {c} THEN {text}" for c, text in SPECIALS.items()]
    whens += [f"WHEN {code} = {len(SPECIALS) + i} THEN {v!r}" for i, v in enumerate(PLAIN)]
    return f"CASE {' '.join(whens)} END"


def _grid(columns: dict[str, list[object]], types: dict[str, pa.DataType]) -> pa.Table:
    """One instant's rows holding every combination of the columns' values."""
    import itertools

    combos = list(itertools.product(*columns.values()))
    data = {
        "ts": pa.array([ORIGIN] * len(combos), pa.int64()),
        "k": pa.array(range(len(combos)), pa.int32()),
        "x": pa.array([0.0] * len(combos), pa.float64()),
        "y": pa.array([0.0] * len(combos), pa.float64()),
        "s": pa.array([""] * len(combos), pa.string()),
        "t": pa.array([""] * len(combos), pa.string()),
        "a": pa.array([0] * len(combos), pa.int64()),
        "b": pa.array([0] * len(combos), pa.int64()),
    }
    for i, name in enumerate(columns):
        data[name] = pa.array([c[i] for c in combos], types[name])
    return pa.table(data)


CODES = list(range(len(SPECIALS) + len(PLAIN)))
POSITIONS = [*range(-8, 9), 2**32 - 1, -(2**32), 2**31, -(2**31) - 5]
GRIDS = {
    # POWER and LOG(b, x) of every pair of doubles, the one-argument functions of each
    "doubles": (
        f"SELECT k, POWER(dx, dy) AS p, LOG(dy, dx) AS lb, SQRT(dx) AS sq, LN(dx) AS ln, "
        f"LOG10(dx) AS l10, LOG2(dx) AS l2, EXP(dx) AS ex, SIGN(dx) AS sg FROM "
        f"(SELECT k, {_double_of('a')} AS dx, {_double_of('b')} AS dy FROM e [NOW]) AS g",
        {"a": CODES, "b": CODES},
        {"a": pa.int64(), "b": pa.int64()},
    ),
    # SUBSTRING of strings of 0-6 characters at every position and length near the ends
    "substring": (
        "SELECT k, SUBSTRING(s, a, b) AS sub, SUBSTRING(s, a) AS rest FROM e [NOW]",
        {"s": ["", "é", "ab", "abc", "ab🦆d", "abcde", "abcdef"], "a": POSITIONS, "b": POSITIONS},
        {"s": pa.string(), "a": pa.int64(), "b": pa.int64()},
    ),
    # LPAD / RPAD to every length with paddings of one and several characters
    "pad": (
        "SELECT k, LPAD(s, CAST(a AS INTEGER), 'xy') AS l, RPAD(s, CAST(a AS INTEGER), 'é') AS r,"
        " LPAD(s, CAST(a AS INTEGER), '-') AS l1 FROM e [NOW]",
        {"s": ["", "a", "abc", "ab🦆"], "a": list(range(-3, 9))},
        {"s": pa.string(), "a": pa.int64()},
    ),
}


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_function_grids_equal_the_oracle(engine: str, name: str) -> None:
    text, columns, types = GRIDS[name]
    data = {"e": _grid(columns, types)}
    expected = oracle(text, CATALOG, data)
    assert expected.num_rows == data["e"].num_rows
    placement, column_engine = placement_of(engine)
    got = execute(plan_query(text, CATALOG), CATALOG, data, placement, column_engine=column_engine)
    assert_same_stream(got.table, expected, exact=not (name in LIBM and engine == "spark"))
