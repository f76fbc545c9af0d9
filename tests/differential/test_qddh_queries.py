"""The out-of-order join workloads' queries (queries/qddh: x3, x4) against the oracle.

The data is the workloads' own (engines/sources/qddh_joins.py: arrival order, Zipf-delayed
millisecond timestamps), at a lower rate and a short span so the ISTREAM joins stay small;
every query runs on the row engine and with every operator it can on DuckDB, and must equal
the oracle's result stream over the input without the tuples the engine may drop as late
(tests/lateness.py, docs/semantics.md), which it must count as dead letters.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from engines.sources.qddh_joins import workload_tables
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.lateness import dead_letter_count, without_late
from tests.oracle import assert_same_stream, oracle
from tests.shipped import QDDH

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "qddh" / "catalog.toml")
QUERIES = {p.stem: p.read_text() for p in QDDH}
#: (rate per stream, event-seconds) per query: ISTREAM joins at 10 ms slides stay short.
SIZE = {"x3": (10.0, 8.0), "x4": (10.0, 8.0), "x3_count": (30.0, 25.0), "x4_count": (30.0, 20.0)}


@functools.cache
def _inputs(query: str) -> dict[str, pa.Table]:
    rate, seconds = SIZE[query]
    return workload_tables(query.split("_")[0], seconds, seed=3, rate=rate)


def test_the_folder_has_the_queries_it_documents() -> None:
    assert set(QUERIES) == set(SIZE)
    readme = (ROOT / "queries" / "qddh" / "README.md").read_text()
    assert all(f"`{name}.sql`" in readme for name in QUERIES)


def test_the_data_is_out_of_order() -> None:
    """Delay skew 2 (x3's s1) puts about 6 % of a 100/s stream behind its predecessor."""
    ts = workload_tables("x3", 30.0, seed=3)["s1"].column("ts").to_numpy()
    assert 0.03 < np.mean(np.diff(ts) < 0) < 0.1


@pytest.mark.parametrize("placement", ["row", "column"])
@pytest.mark.parametrize("query", sorted(SIZE))
def test_qddh_query_equals_the_oracle(query: str, placement: str) -> None:
    plan = plan_query(QUERIES[query], CATALOG, f"{query}.sql")
    result = execute(plan, CATALOG, _inputs(query), placement=placement)
    text = QUERIES[query]
    expected = oracle(text, CATALOG, without_late(text, CATALOG, _inputs(query)))
    assert expected.num_rows > 0
    assert result.dead_letter == dead_letter_count(text, CATALOG, _inputs(query))
    assert_same_stream(result.table, expected)


def test_the_catalog_generators_make_the_workloads_streams() -> None:
    """The shipped catalog's x3/x4 generator sources (used when a run gets no --data) give
    each stream exactly as ``workload_tables`` and ``hycq data generate`` make it, and the
    catalog's declared layouts are the generator's."""
    from engines.runtime.inputs import open_inputs
    from engines.runtime.options import RunOptions
    from engines.sources.qddh_joins import WORKLOADS
    from optimizer.sql.catalog import QDDH_STREAMS

    assert {w: {n: a for n, (a, _) in s.items()} for w, (s, _) in WORKLOADS.items()} == (
        QDDH_STREAMS
    )
    for query in ("x3_count", "x4_count"):
        plan = plan_query(QUERIES[query], CATALOG, f"{query}.sql")
        inputs = open_inputs(plan, CATALOG, RunOptions(duration=6.0, rate=30.0))
        expected = workload_tables(query[:2], 6.0, seed=42, rate=30.0)
        assert {i.stream.name for i in inputs} == set(expected)
        for i in inputs:
            got = pa.Table.from_batches(list(i.batches))
            assert got.equals(expected[i.stream.name]), i.stream.name
