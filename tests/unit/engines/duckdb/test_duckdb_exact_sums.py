"""DuckDB's one-pass exact SUM (engines/duckdb/exact_sums.py): the macro at a searched scale
gives the correctly rounded sum, bit for bit, whatever the magnitudes; where no scale holds
the values it falls back to the gathered form, which is exact too."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.duckdb import exact_sums
from engines.duckdb.engine import DuckDBEngine

SQL = "SELECT c0, hycq_scaled_sum(c1) AS s, COUNT(c1) AS n FROM t GROUP BY c0 ORDER BY c0"


def exact(values: list[float]) -> float | None:
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    if any(math.isnan(v) for v in xs) or (math.inf in xs and -math.inf in xs):
        return math.nan
    if math.inf in xs or -math.inf in xs:
        return math.inf if math.inf in xs else -math.inf
    total = sum(map(Fraction, xs), Fraction(0))
    try:
        return float(total) + 0.0
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def bits(v: float | None) -> object:
    if v is None:
        return None
    return "nan" if math.isnan(v) else np.float64(v).tobytes()


def run(engine: DuckDBEngine, groups: list[int], values: list[float | None]) -> dict[int, object]:
    table = pa.table({"c0": pa.array(groups, pa.int32()), "c1": pa.array(values, pa.float64())})
    engine.set_input("t", [(0, table)], table.schema)
    out = engine.query(SQL)
    return dict(zip(out["c0"].to_pylist(), map(bits, out["s"].to_pylist()), strict=True))


magnitudes = st.sampled_from([1e-300, 1e-30, 1e-9, 1e-3, 1.0, 1e3, 1e16, 1e30, 1e300])
values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.builds(lambda m, k: round(m * k, 3), magnitudes, st.integers(-9999, 9999)),
    st.sampled_from([0.1, 0.2, 0.3, -0.0, 12.345, 5e-324]),
    st.none(),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), values), min_size=1, max_size=40))
def test_the_macro_sums_exactly_at_any_magnitude(rows: list[tuple[int, float | None]]) -> None:
    engine = DuckDBEngine(threads=1)
    groups, vals = (list(x) for x in zip(*rows, strict=True))
    got = run(engine, groups, vals)
    for g in set(groups):
        assert got[g] == bits(exact([v for k, v in rows if k == g])), (g, rows)


def test_one_scale_per_statement_is_searched_once_and_kept() -> None:
    """Readings with three decimals run at the default scale; tiny values make it search a
    larger one, which later slides keep (no search at all)."""
    engine = DuckDBEngine(threads=1)
    run(engine, [0, 0, 1], [12.345, 0.001, 3000.0])
    assert engine.info()["exact_sums"]["searches"] == 0
    run(engine, [0, 0], [1e-12, 1.0])
    searched = engine.info()["exact_sums"]["searches"]
    assert searched > 0
    run(engine, [0, 0], [2e-12, 3.0])
    assert engine.info()["exact_sums"]["searches"] == searched
    assert engine.info()["exact_sums"]["array_agg"] == 0


def test_values_no_scale_holds_fall_back_to_the_gathered_sum() -> None:
    engine = DuckDBEngine(threads=1)
    got = run(engine, [0, 0, 0, 1], [1e-200, 1e200, -1e200, float("inf")])
    assert got[0] == bits(1e-200) and got[1] == bits(math.inf)
    assert engine.info()["exact_sums"]["array_agg"] == 1


def test_a_total_beyond_128_bits_gets_more_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 2 bits of room, 64 values just under the limit overflow the 128-bit total: the
    room grows and the sum is exact."""
    monkeypatch.setattr(exact_sums, "DEFAULT_ROOM", 2)
    engine = DuckDBEngine(threads=1)
    big = 2.0 ** (126 - 2 - 64) * 0.999
    got = run(engine, [0] * 64, [big] * 64)
    assert got[0] == bits(exact([big] * 64))
    (scale,) = engine._sums.scales.values()
    assert scale.room > 2 and not scale.udf
