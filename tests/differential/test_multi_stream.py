"""Multi-stream queries against the oracle: every placement, streams of different shapes.

The keyed queries (queries/keyed: 2- and 3-way window joins on keys, a theta join, a join of
aggregates of two streams, ISTREAM, RSTREAM, two time units) run over keyed workloads whose
streams are each in event-time order but differ in density, start and end, and silences:
the engines' result stream must equal the oracle's (tests/oracle.py, which goes by event
time alone) with no tuple dead-lettered, on every engine (tests/engines.py) and on mixed
placements. Then: results do not depend on batch sizes (Hypothesis), and a stream far denser
than the others is read at most one batch ahead.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.row.executor import RowExecutor
from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import execute
from optimizer.ir.plan import LogicalPlan, Source
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.differential.test_engines import MIXES, random_placements
from tests.engines import marks_of
from tests.lateness import dead_letter_count, without_late
from tests.oracle import assert_same_stream, oracle
from tests.shipped import KEYED

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")
QUERIES = {p.stem: p.read_text() for p in KEYED}
SECONDS = 60

#: Workload shapes: per stream, its generator settings (all streams in event-time order).
SHAPES: dict[str, dict[str, KeyedStream]] = {
    "equal": {n: KeyedStream(n, rate=10, keys=40) for n in "rst"},
    "densities": {
        "r": KeyedStream("r", rate=3, keys=40),
        "s": KeyedStream("s", rate=40, keys=40),
        "t": KeyedStream("t", rate=0.5, keys=40),
    },
    "start_end": {
        "r": KeyedStream("r", rate=8, keys=40, end=35),
        "s": KeyedStream("s", rate=8, keys=40, start=12),
        "t": KeyedStream("t", rate=8, keys=40, start=4, end=50),
    },
    "silent": {
        "r": KeyedStream("r", rate=8, keys=40),
        "s": KeyedStream("s", rate=12, keys=40, silent=((20, 38),)),
        "t": KeyedStream("t", rate=8, keys=40, silent=((5, 9), (30, 45))),
    },
}


def _workload(shape: str, seconds: int = SECONDS, seed: int = 7) -> dict[str, pa.Table]:
    streams = dict(SHAPES[shape])
    streams["m"] = KeyedStream("m", rate=9, keys=40, time_unit="ms", start=3)
    return {n: KeyedGenerator(s, seed=seed).table(seconds) for n, s in streams.items()}


@functools.cache
def _expected(query: str, shape: str, seconds: int = SECONDS) -> pa.Table:
    return oracle(QUERIES[query], CATALOG, _workload(shape, seconds))


def _run(
    query: str,
    shape: str,
    placement: str | dict[str, str] = "row",
    engine: str = "duckdb",
    batch_rows: int | None = None,
    seconds: int = SECONDS,
) -> Any:
    plan = plan_query(QUERIES[query], CATALOG, f"{query}.sql")
    data = _workload(shape, seconds)
    inputs: dict[str, Any] = {
        n: t.to_batches(max_chunksize=batch_rows) if batch_rows else t for n, t in data.items()
    }
    result = execute(plan, CATALOG, inputs, placement=placement, column_engine=engine)
    assert_same_stream(result.table, _expected(query, shape, seconds))
    assert result.dead_letter == 0
    assert result.metrics["tuples_in"] == sum(
        t.num_rows for n, t in data.items() if n in _streams_of(query)
    )
    return result


def _streams_of(query: str) -> set[str]:
    plan = plan_query(QUERIES[query], CATALOG)
    return {op.stream for op in plan.operators() if isinstance(op, Source)}


def test_shapes_are_what_they_claim() -> None:
    d = _workload("densities")
    assert d["s"].num_rows >= 10 * d["r"].num_rows >= 50 * d["t"].num_rows
    se = {n: t.column("ts").to_pylist() for n, t in _workload("start_end").items()}
    origin = 1_400_000_000
    assert (se["r"][0], se["r"][-1]) == (origin, origin + 34)
    assert (se["s"][0], se["s"][-1]) == (origin + 12, origin + SECONDS - 1)
    silent = [t - origin for t in _workload("silent")["s"].column("ts").to_pylist()]
    assert not [t for t in silent if 20 <= t < 38] and max(silent) == SECONDS - 1
    for table in _workload("silent").values():  # every stream in event-time order
        ts = table.column("ts").to_pylist()
        assert ts == sorted(ts)


#: Spark answers a query in 0.3-1 s: its cases run 16 event-seconds of one shape (t is silent
#: for 4 of them).
SPARK_SECONDS = 16


@pytest.mark.slow
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_query_on_engine(engine: str, query: str) -> None:
    """The whole plan on one engine (tests/engines.py), over every workload shape."""
    placement = "row" if engine == "row" else "column"
    if engine == "spark":
        _run(query, "silent", placement, engine=engine, seconds=SPARK_SECONDS)
        return
    for shape in sorted(SHAPES):
        _run(query, shape, placement, engine=engine if engine != "row" else "duckdb")


@pytest.mark.slow
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_mixed_placements(query: str) -> None:
    plan = plan_query(QUERIES[query], CATALOG)
    for k, placement in enumerate(random_placements(plan, 2, ("row", "duckdb"), seed=len(query))):
        _run(query, ("start_end", "silent")[k % 2], placement)


@pytest.mark.slow
@pytest.mark.parametrize(
    "mix", [pytest.param(MIXES[-1], marks=marks_of(MIXES[-1]), id="+".join(MIXES[-1]))]
)
def test_every_engine_in_one_plan(mix: tuple[str, ...]) -> None:
    # The query with the most relational operators (joins of aggregates of three streams:
    # five), so that every engine of the list hosts one.
    query = max(sorted(QUERIES), key=lambda q: _r2r_count(plan_query(QUERIES[q], CATALOG)))
    plan = plan_query(QUERIES[query], CATALOG)
    r2r = [i for i in plan.topological() if plan.op(i).category.name == "R2R"]
    assert len(r2r) >= len(mix), f"no query here has {len(mix)} relational operators"
    placement = {op: mix[k % len(mix)] for k, op in enumerate(r2r)}
    assert set(placement.values()) == set(mix)
    _run(query, "densities", placement, seconds=SPARK_SECONDS)


def _r2r_count(plan: LogicalPlan) -> int:
    return len([i for i in plan.topological() if plan.op(i).category.name == "R2R"])


def test_mixed_time_units() -> None:
    # r in seconds, m in milliseconds: the query runs in ms; instants are whole seconds in ms.
    result = _run("mixed_units", "equal", "row")
    ts = result.table.column("_ts").to_pylist()
    assert ts and all(t % 1000 == 0 and t >= 1_400_000_000_000 for t in ts)
    _run("mixed_units", "silent", "column")


# -- batch sizes ----------------------------------------------------------------------------

#: Queries for the batch-size property (windows of a few seconds over tiny streams).
SMALL_QUERIES = {
    "j2": "SELECT r.k, COUNT(*) AS n, SUM(r.v - s.v) AS d FROM r [RANGE 3 SECONDS] AS r, "
    "s [RANGE 2 SECONDS] AS s WHERE r.k = s.k GROUP BY r.k",
    "j3_istream": "SELECT ISTREAM r.k, COUNT(*) AS n FROM r [RANGE 4 SECONDS SLIDE 2 SECONDS] "
    "AS r, s [RANGE 3 SECONDS] AS s, t [NOW] AS t WHERE r.k = s.k AND s.k = t.k GROUP BY r.k",
    "theta": "SELECT COUNT(*) AS n FROM r [RANGE 2 SECONDS] AS r, s [ROWS 3] AS s WHERE r.v < s.v",
    "aggs": "SELECT a.k, a.n, b.m FROM (SELECT k, COUNT(*) AS n FROM r [RANGE 5 SECONDS] "
    "GROUP BY k) AS a, (SELECT k, MAX(v) AS m FROM t [RANGE 2 SECONDS] GROUP BY k) AS b "
    "WHERE a.k = b.k",
}
ORIGIN = 1_400_000_000


@st.composite
def keyed_streams(draw: st.DrawFn, in_order: bool = True) -> dict[str, pa.Table]:
    """Three small streams with random timestamps (several per second, gaps, different
    starts and ends), keys and values; each in event-time order unless ``in_order`` is
    False (then a few tuples of a stream are moved back)."""
    out = {}
    for name in "rst":
        ts = sorted(draw(st.lists(st.integers(0, 30), max_size=40)))
        if not in_order and len(ts) > 1:
            for _ in range(draw(st.integers(1, 3))):
                i = draw(st.integers(0, len(ts) - 1))
                ts.insert(draw(st.integers(i, len(ts) - 1)), ts.pop(i))
        n = len(ts)
        keys = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        values = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
        out[name] = pa.table(
            {
                "ts": pa.array([ORIGIN + t for t in ts], pa.int64()),
                "k": pa.array(keys, pa.int32()),
                "v": pa.array([v / 4 for v in values], pa.float64()),
            }
        )
    return out


BATCH_SIZES = st.one_of(st.integers(1, 5), st.integers(1, 65536))


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    query=st.sampled_from(sorted(SMALL_QUERIES)),
    streams=keyed_streams(),
    sizes=st.fixed_dictionaries(dict.fromkeys("rst", BATCH_SIZES)),
)
def test_result_does_not_depend_on_batch_sizes(
    query: str, streams: dict[str, pa.Table], sizes: dict[str, int]
) -> None:
    text = SMALL_QUERIES[query]
    plan = plan_query(text, CATALOG)
    expected = oracle(text, CATALOG, streams)
    whole = execute(plan, CATALOG, streams, placement="row")
    sliced = execute(
        plan,
        CATALOG,
        {n: t.to_batches(max_chunksize=sizes[n]) for n, t in streams.items()},
        placement="row",
    )
    for result in (whole, sliced):
        assert_same_stream(result.table, expected)
        assert result.dead_letter == 0


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    query=st.sampled_from(sorted(SMALL_QUERIES)),
    streams=keyed_streams(in_order=False),
    sizes=st.fixed_dictionaries(dict.fromkeys("rst", BATCH_SIZES)),
)
def test_out_of_order_streams_drop_only_their_own_late_tuples(
    query: str, streams: dict[str, pa.Table], sizes: dict[str, int]
) -> None:
    """With tuples out of order in their own streams, the engine drops exactly the tuples
    tests/lateness.py names (late in their own stream), whatever the batch sizes, and its
    result over the rest is the oracle's."""
    text = SMALL_QUERIES[query]
    expected = oracle(text, CATALOG, without_late(text, CATALOG, streams))
    result = execute(
        plan_query(text, CATALOG),
        CATALOG,
        {n: t.to_batches(max_chunksize=sizes[n]) for n, t in streams.items()},
        placement="row",
    )
    assert_same_stream(result.table, expected)
    assert result.dead_letter == dead_letter_count(text, CATALOG, streams)


@pytest.mark.slow
@pytest.mark.parametrize("batch_rows", [1, 7, 65536])
def test_batch_sizes_on_duckdb(batch_rows: int) -> None:
    _run("j3", "densities", "column", batch_rows=batch_rows)


# -- bounded memory -------------------------------------------------------------------------


def test_a_dense_stream_is_read_one_batch_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """r is 100x denser than s and t: the run reads it no further than one batch ahead of
    what the engine has taken, so it never holds r whole."""
    seconds, batch = 60, 1000
    data = {
        "r": KeyedGenerator(KeyedStream("r", rate=500, keys=40)).table(seconds),
        "s": KeyedGenerator(KeyedStream("s", rate=5, keys=40)).table(seconds),
        "t": KeyedGenerator(KeyedStream("t", rate=5, keys=40)).table(seconds),
    }
    read = dict.fromkeys(data, 0)
    taken = dict.fromkeys(data, 0)
    ahead: list[int] = []
    first_instant_read: list[int] = []

    def counted(name: str) -> Iterator[pa.RecordBatch]:
        for b in data[name].to_batches(max_chunksize=batch):
            read[name] += b.num_rows
            yield b

    real_ingest = RowExecutor.ingest
    real_step = RowExecutor._step

    def ingest(self: RowExecutor, stream: str, b: Any, time_column: int) -> int:
        taken[stream] += b.num_rows
        ahead.append(read["r"] - taken["r"])
        return real_ingest(self, stream, b, time_column)

    def step(self: RowExecutor, instant: int) -> None:
        if not first_instant_read:
            first_instant_read.append(read["r"])
        real_step(self, instant)

    monkeypatch.setattr(RowExecutor, "ingest", ingest)
    monkeypatch.setattr(RowExecutor, "_step", step)
    text = QUERIES["j3"]
    result = execute(plan_query(text, CATALOG), CATALOG, {n: counted(n) for n in data})
    assert_same_stream(result.table, oracle(text, CATALOG, data))
    assert data["r"].num_rows == 30_000 and read["r"] == 30_000
    assert max(ahead) <= batch  # at most one pending batch of r
    assert first_instant_read[0] <= 2 * batch  # r was not loaded before the clock moved
