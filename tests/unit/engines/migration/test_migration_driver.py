"""The migration driver's hooks and bookkeeping: the controller is asked every
``check_every`` ticks and its request migrates the run (reason copied to the record), the
monitor is fed what the live plan accepted and the instants it fired, a dropped plan's MIG
inputs leave the shared engine, and MIG table names stay unique across plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from engines.assembly import Assembly, EnginePool, EngineSettings
from engines.migration.driver import MigratingExecutor
from engines.migration.replay import ReplayBuffer, replay_horizons
from engines.migration.request import MigrationRequest
from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import LoadedQuery, resolve_placement
from hycq.migrations import plan_with_order
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[4]
CATALOG = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")
J2 = (ROOT / "queries" / "keyed" / "j2.sql").read_text()


def _q() -> LoadedQuery:
    return LoadedQuery(J2, "j2.sql", CATALOG, plan_query(J2, CATALOG), 0.0)


def _data(seconds: int = 30) -> dict[str, pa.Table]:
    return {n: KeyedGenerator(KeyedStream(n, rate=6, keys=8), seed=2).table(seconds) for n in "rs"}


class _Controller:
    """Asks for one migration the first time it is consulted at or after ``due``."""

    def __init__(self, request: MigrationRequest, due: int) -> None:
        self.request, self.due = request, due
        self.calls: list[int] = []

    def check(self, now_tick: int, monitor: Any) -> MigrationRequest | None:
        self.calls.append(now_tick)
        if now_tick >= self.due and len([c for c in self.calls if c >= self.due]) == 1:
            return self.request
        return None


class _Monitor:
    def __init__(self) -> None:
        self.rows = 0
        self.instants: list[int] = []
        self.engine_busy_s = 0.0

    def on_input(self, stream: str, n_rows: int, lo: int, hi: int) -> None:
        assert lo <= hi
        self.rows += n_rows

    def on_instant(self, instant: int, executor: Any) -> None:
        assert "rstream1" in executor.operator_metrics()
        self.instants.append(instant)


def _drive(controller: Any, monitor: Any, check_every: int) -> tuple[Any, list[Any]]:
    q = _q()
    plan = plan_with_order(q, "r,s")
    placement = resolve_placement(plan, "row")
    pool = EnginePool(EngineSettings())
    out: list[Any] = []

    def build(p: Any, pl: Any, emit: Any, on_late: Any) -> Assembly:
        asm = Assembly(p, pl, pool=pool)
        asm.make_engine(emit, on_late)
        return asm

    driver = MigratingExecutor(
        build, plan, placement, lambda t, rows: out.append((t, rows)), lambda *a: None,
        ticks_per_second=1, controller=controller, check_every=check_every, monitor=monitor,
    )  # fmt: skip
    data = _data()
    chunks = {n: data[n].to_batches(max_chunksize=5) for n in "rs"}
    for pair in zip(chunks["r"], chunks["s"], strict=False):  # the streams interleaved
        for stream, batch in zip("rs", pair, strict=True):
            driver.ingest(stream, batch, 0)
    driver.end_stream("r")
    driver.end_stream("s")
    driver.finish()
    pool.close()
    return driver, out


def test_controller_request_migrates_and_monitor_is_fed() -> None:
    q = _q()
    target = plan_with_order(q, "s,r")
    request = MigrationRequest(
        target, resolve_placement(target, "column"), "gpt", {"kind": "drift", "rate": 3.5}
    )
    origin = int(_data()["r"].column("ts")[0].as_py())
    controller = _Controller(request, origin + 10)
    monitor = _Monitor()
    driver, out = _drive(controller, monitor, check_every=3)
    (rec,) = driver.records()
    assert rec["reason"] == {"kind": "drift", "rate": 3.5} and rec["completed"]
    assert rec["strategy"] == "gpt" and rec["at"] >= origin + 10
    # consulted every 3 ticks, never during the migration
    gaps = [b - a for a, b in zip(controller.calls, controller.calls[1:], strict=False)]
    assert all(g >= 3 for g in gaps)
    assert monitor.rows == sum(t.num_rows for t in _data().values())
    assert monitor.engine_busy_s > 0  # the driver timed its calls
    assert monitor.instants == sorted(monitor.instants) and len(monitor.instants) == len(out)
    rows = [(t, *r) for t, rs in out for r in _tuples(rs)]
    assert rows  # the emitted stream equals the oracle's
    table = pa.table(
        {
            "k": [r[1] for r in rows],
            "pairs": [r[2] for r in rows],
            "spread": [r[3] for r in rows],
            "_ts": [r[0] for r in rows],
        }
    )
    assert_same_stream(table, oracle(J2, CATALOG, _data()))


def _tuples(rows: Any) -> list[tuple[Any, ...]]:
    if isinstance(rows, pa.Table):
        return list(zip(*(c.to_pylist() for c in rows.columns), strict=True))
    return list(rows)


def test_no_controller_no_monitor_no_migration() -> None:
    driver, out = _drive(None, None, check_every=1)
    assert driver.records() == [] and out


def test_dropped_plan_releases_its_mig_inputs_and_names_stay_unique() -> None:
    q = _q()
    plan = plan_with_order(q, "r,s")
    pool = EnginePool(EngineSettings())
    a = Assembly(plan, resolve_placement(plan, "column"), pool=pool)
    a.make_engine(lambda t, r: None)
    b = Assembly(plan, resolve_placement(plan, "column"), pool=pool)
    b.make_engine(lambda t, r: None)
    names_a = {i.table_name for m in a.migs for i in m.inputs}
    names_b = {i.table_name for m in b.migs for i in m.inputs}
    assert names_a and names_b and not names_a & names_b
    for name, batch in _data(5).items():
        a.executor.ingest(name, batch.to_batches()[0], 0)
        b.executor.ingest(name, batch.to_batches()[0], 0)
    for ex in (a.executor, b.executor):
        ex.finish()
    duck = pool.get("duckdb")
    assert names_a | names_b <= set(duck._tables)
    a.close()
    assert not names_a & set(duck._tables) and names_b <= set(duck._tables)
    b.close()
    assert not set(duck._tables)
    pool.close()


def test_replay_buffer_keeps_the_horizon_and_the_last_rows() -> None:
    text = (
        "SELECT r.k, COUNT(*) AS n FROM r [ROWS 4] AS r, s [RANGE 3 SECONDS] AS s "
        "WHERE r.k = s.k GROUP BY r.k"
    )
    plan = plan_query(text, CATALOG)
    h = replay_horizons(plan)
    assert (h["r"].rows, h["s"].ticks) == (4, 3)
    buf = ReplayBuffer(h)
    buf.MIN_SLACK = 0
    ts = pa.array([1, 2, 3, 5, 5, 8, 9, 12], pa.int64())
    batch = pa.record_batch(
        [ts, pa.array([0] * 8, pa.int32()), pa.array([0.0] * 8)], ["ts", "k", "v"]
    )
    buf.add("r", batch)
    buf.add("s", batch)
    buf.fired(9)
    assert buf.table("r").column("ts").to_pylist() == [5, 5, 8, 9, 12]  # 4 newest <= 9, + pending
    assert buf.table("s").column("ts").to_pylist() == [8, 9, 12]  # ts > 9 - 3


def test_replay_buffer_keeps_a_time_sliding_rows_window_as_of_its_own_last_instant() -> None:
    """A ROWS window sliding by time shows, at plan instant L, the n newest tuples up to its
    own last slide instant T_w <= L (here SLIDE 3 with instants 6, 9: T_w = 6 at L = 8);
    the buffer keeps those and everything after L - (slide - 1), not the n newest up to L
    (the tuples at 7 and 8 are not in the window; found by the random migration test: GMS
    at L = 8 lost the results of instant 9)."""
    text = (
        "SELECT r.k, COUNT(*) AS n FROM r [ROWS 2 SLIDE 3 SECONDS] AS r, s [NOW] AS s "
        "WHERE r.k = s.k GROUP BY r.k"
    )
    h = replay_horizons(plan_query(text, CATALOG))
    assert (h["r"].rows, h["r"].rows_lag, h["r"].ticks) == (2, 2, 2)
    buf = ReplayBuffer(h)
    buf.MIN_SLACK = 0
    ts = pa.array([3, 4, 5, 6, 6, 7, 8, 9], pa.int64())
    batch = pa.record_batch(
        [ts, pa.array([0] * 8, pa.int32()), pa.array(list(range(8)), pa.float64())],
        ["ts", "k", "v"],
    )
    buf.add("r", batch)
    buf.fired(8)
    # the 2 newest up to 8 - 2 = 6 (both at 6), everything after 6, the pending 9
    assert buf.table("r").column("ts").to_pylist() == [6, 6, 7, 8, 9]


def test_replay_buffer_drops_whole_batches_and_filters_only_the_straddling_ones() -> None:
    """A RANGE-only stream is compacted batch-wise: batches wholly before the horizon are
    dropped without a copy, one straddling its edge (out of order inside) is filtered, the
    rest kept as they are; what remains equals a filter over every tuple, in arrival
    order, and the buffer stays bounded while the input streams on."""
    plan = plan_query("SELECT COUNT(*) AS n FROM s [RANGE 10 SECONDS] AS s", CATALOG)
    h = replay_horizons(plan)
    buf = ReplayBuffer(h)
    buf.MIN_SLACK = 0

    def batch(values: list[int]) -> pa.RecordBatch:
        n = len(values)
        return pa.record_batch(
            [pa.array(values, pa.int64()), pa.array([0] * n, pa.int32()), pa.array([0.0] * n)],
            ["ts", "k", "v"],
        )

    everything: list[int] = []
    for start in range(0, 200, 5):
        values = [start + 4, start, start + 2, start + 1, start + 3]  # disordered within
        buf.fired(start)
        buf.add("s", batch(values))
        everything += values
        assert buf.rows("s") <= 3 * 15  # bounded: about the horizon, not the history
    buf.fired(197)
    kept = buf.table("s").column("ts").to_pylist()
    assert kept == [t for t in everything if t > 197 - 10]
    # the batch 185..189 (arrived as 189, 185, 187, 186, 188) straddles 187: filtered
    first = buf.table("s").to_batches()[0]
    assert first.column(0).to_pylist() == [189, 188]
