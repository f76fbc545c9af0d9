"""Key ids of the correlated scan (``engines.mig.count_scan``): packing and lookup."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engines.mig.count_scan import KeyIds, ScanUnavailable, pack


def test_packing_keeps_keys_apart_and_marks_nulls() -> None:
    a = pa.array([0, -1, 5, None, -(2**20), 2**20 - 1], pa.int32())
    b = pa.array([1, 1, 1, 1, 0, 0], pa.int64())
    packed, valid = pack([a, b, pa.array([7] * 6, pa.int32())])
    assert valid.tolist() == [True, True, True, False, True, True]
    assert len(set(packed[valid].tolist())) == 5
    one = [pa.array([5], pa.int32()), pa.array([1], pa.int64()), pa.array([7], pa.int32())]
    same, _ = pack(one)
    assert same[0] == packed[2]


@pytest.mark.parametrize("value", [2**20, -(2**20) - 1])
def test_a_key_outside_its_bits_is_refused(value: int) -> None:
    cols = [pa.array([value], pa.int64()), pa.array([0], pa.int32()), pa.array([0], pa.int32())]
    with pytest.raises(ScanUnavailable, match="2\\^20"):
        pack(cols)


def test_one_key_gets_63_bits_and_floats_are_refused() -> None:
    packed, _ = pack([pa.array([-(2**62), 2**62 - 1], pa.int64())])
    assert packed[0] != packed[1]
    with pytest.raises(ScanUnavailable):
        pack([pa.array([2**62], pa.int64())])
    with pytest.raises(ScanUnavailable, match="double"):
        pack([pa.array([1.0])])


def test_ids_are_stable_dense_and_unknown_keys_get_zero() -> None:
    ids = KeyIds()
    first = ids.lookup(np.array([50, 10, 50, 30], np.int64), add=True)
    assert first.tolist() == [ids.lookup(np.array([k]), add=False)[0] for k in (50, 10, 50, 30)]
    assert sorted(set(first.tolist())) == [1, 2, 3] and len(ids) == 4
    again = ids.lookup(np.array([20, 50, 10, 40], np.int64), add=True)
    assert again[1:3].tolist() == [first[0], first[1]]
    assert sorted({*first.tolist(), *again.tolist()}) == [1, 2, 3, 4, 5]
    assert ids.lookup(np.array([99, 30], np.int64), add=False).tolist() == [0, first[3]]


def _q2_scan() -> object:
    """The ScanCount of the shipped Q2 wholly in one group."""
    from hycq.api import QUERIES, load_query
    from optimizer.ir.correlated import correlated_count, scan_count

    plan = load_query(QUERIES / "smartplug" / "q2.sql").plan
    kinds = ("select", "project", "join", "aggregate")
    ops = [i for i in plan.topological() if plan.op(i).kind in kinds]
    aggs = {i for i in ops[:-1] if plan.op(i).kind == "aggregate"}
    windows = {i for i in plan.topological() if plan.op(i).kind == "window"}
    shape = correlated_count(plan, ops, ops[-1], aggs, windows)
    assert shape is not None
    spec = scan_count(plan, shape)
    assert spec is not None
    return spec


def test_blocks_of_encoded_chunks_count_what_the_chunks_do() -> None:
    """A window sliding over 100 small chunks, 40 live: every ``BLOCK`` encoded chunks are
    merged once and sliced as their first chunks leave; a front chunk replaced by a slice
    (a FIFO input's expiry) or re-labelled with a new id (a window's straddling chunk) is
    encoded again. At every step the counts equal DuckDB's join over the live rows, and
    the slide reads far fewer arrays than chunks."""
    import duckdb

    from engines.mig.count_scan import BLOCK, ScanCounter

    rng = np.random.default_rng(7)
    spec = _q2_scan()
    schema = pa.schema(
        [("house_id", pa.int32()), ("household_id", pa.int32()), ("plug_id", pa.int32()),
         ("above_avg", pa.int64())]
    )  # fmt: skip

    def chunk(k: int) -> pa.Table:
        n = 30
        return pa.table(
            {
                "id": pa.array(np.arange(n) + 100 * k, pa.int64()),
                "ts": pa.array(np.full(n, k), pa.int64()),
                "value": pa.array(rng.normal(50, 20, n)),
                "property": pa.array(rng.integers(0, 2, n), pa.int32()),
                "plug_id": pa.array(rng.integers(0, 3, n), pa.int32()),
                "household_id": pa.array(rng.integers(0, 2, n), pa.int32()),
                "house_id": pa.array(rng.integers(0, 4, n), pa.int32()),
            }
        )

    chunks = [(k, chunk(k)) for k in range(100)]
    counter = ScanCounter(spec)
    con = duckdb.connect()
    pieces = []
    for step in range(40, 100):
        live = list(chunks[step - 40 : step])
        if step % 7 == 0:  # the front chunk loses rows: the same id, a slice
            cid, table = live[0]
            live[0] = (cid, table.slice(5))
        if step % 11 == 0:  # the front chunk re-labelled with a new id
            live[0] = (10_000 + step, live[0][1].slice(3))
        con.register("w", pa.concat_tables([t for _, t in live]))
        state = con.sql(
            "SELECT house_id k0, household_id k1, plug_id k2, AVG(value) v0 FROM w "
            "WHERE property = 1 GROUP BY ALL"
        ).to_arrow_table()
        con.register("state", state)
        got = counter.count(state, live, schema)
        want = con.sql(
            "SELECT r.house_id, r.household_id, r.plug_id, COUNT(*) FROM w r JOIN state s"
            " ON r.house_id = s.k0 AND r.household_id = s.k1 AND r.plug_id = s.k2"
            " WHERE r.property = 1 AND r.value > s.v0 GROUP BY ALL"
        ).fetchall()
        assert sorted(tuple(r.values()) for r in got.to_pylist()) == sorted(want), step
        pieces.append(len(counter._encoded(live)))
    assert max(pieces) < 40 // BLOCK + 2 * BLOCK
    assert min(pieces) <= 40 // BLOCK + BLOCK
    assert counter.blocks
