"""Every join implementation (binary tree, MJoin, A-Caching, JIT) gives the oracle's result
stream: the keyed multi-stream join queries over workload shapes of different densities,
starts, ends and silences, on the row engine and with DuckDB placements mixed in; random
n-way window join queries (n = 2..5, equi chains, stars, cliques on two key columns, theta
predicates) over streams with bursts; A-Caching re-selecting every few hundred tuples with
a small and a zero memory budget.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from engines.row.lowering import JoinSettings
from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.differential.test_engines import random_placements
from tests.differential.test_multi_stream import CATALOG, QUERIES, SHAPES, _expected, _workload
from tests.oracle import assert_same_stream, oracle

JOIN_QUERIES = sorted(q for q in QUERIES if q in ("j2", "j3", "theta", "join_aggs", "istream"))
#: A-Caching adapting fast (re-selection every 300 tuples, a tenth profiled).
FAST = {"interval": 300, "sample": 0.1, "window": 3}
SETTINGS = {
    "mjoin": JoinSettings(default="mjoin"),
    "acaching": JoinSettings(default="acaching", acaching=FAST),
    "acaching_0mb": JoinSettings(default="acaching", memory_bytes=0, acaching=FAST),
    "acaching_small": JoinSettings(default="acaching", memory_bytes=4000, acaching=FAST),
    "jit": JoinSettings(default="jit"),
}


def _run(query: str, shape: str, join: JoinSettings, placement: Any = "row") -> Any:
    plan = plan_query(QUERIES[query], CATALOG, f"{query}.sql")
    result = execute(plan, CATALOG, _workload(shape), placement=placement, join=join)
    assert_same_stream(result.table, _expected(query, shape))
    assert result.dead_letter == 0
    return result


@pytest.mark.parametrize("impl", sorted(SETTINGS))
@pytest.mark.parametrize("query", JOIN_QUERIES)
def test_keyed_joins(query: str, impl: str) -> None:
    for shape in sorted(SHAPES):
        _run(query, shape, SETTINGS[impl])


@pytest.mark.parametrize("impl", ["mjoin", "acaching", "jit"])
def test_mixed_placements(impl: str) -> None:
    """Joins on the row engine under DuckDB groups (and DuckDB running some joins as SQL)."""
    for query in ("j3", "join_aggs"):
        plan = plan_query(QUERIES[query], CATALOG)
        for k, placement in enumerate(random_placements(plan, 2, ("row", "duckdb"), seed=7)):
            _run(query, ("start_end", "silent")[k % 2], SETTINGS[impl], placement)


def test_implementations_report_their_work() -> None:
    res = {impl: _run("j3", "equal", SETTINGS[impl]) for impl in ("mjoin", "acaching", "jit")}
    ops = {impl: r.metrics["operators"] for impl, r in res.items()}
    mj = [v["join"] for v in ops["mjoin"].values() if "join" in v]
    assert len(mj) == 1 and mj[0]["impl"] == "mjoin" and mj[0]["probes"] > 0
    ac = [v["join"] for v in ops["acaching"].values() if "join" in v]
    assert ac[0]["impl"] == "acaching" and ac[0]["reselections"] >= 1
    jit = [v["join"] for v in ops["jit"].values() if "join" in v]
    assert {j["role"].strip() for j in jit} == {"producer", "consumer"}


# -- random n-way joins -------------------------------------------------------------------------

NAMES = "abcdef"


def _catalog_text(n: int, rate: float) -> str:
    return "\n".join(
        f'[streams.{name}]\ntimestamp = "ts"\ntime_unit = "s"\nrate = {rate}\n'
        f'[streams.{name}.columns]\nts = "BIGINT"\nk = "INTEGER"\nv = "DOUBLE"\n'
        for name in NAMES[:n]
    )


def _random_query(rng: random.Random, n: int) -> str:
    """An n-way window join: equalities on k (chain, star or clique), sometimes on
    ``v`` rounded to a small domain, sometimes a theta predicate, aggregated or not."""
    names = NAMES[:n]
    shape = rng.choice(["chain", "star", "clique"])
    if shape == "chain":
        pairs = [(names[p], names[p + 1]) for p in range(n - 1)]
    elif shape == "star":
        pairs = [(names[0], names[p]) for p in range(1, n)]
    else:
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    conds = [f"{a}.k = {b}.k" for a, b in pairs]
    if rng.random() < 0.4:
        a, b = rng.sample(list(names), 2)
        conds.append(f"{a}.v < {b}.v + {rng.randint(0, 60)}")
    ranges = [rng.choice([2, 3, 5]) for _ in names]
    src = ", ".join(
        f"{x} [RANGE {r} SECONDS SLIDE 1 SECOND] AS {x}" for x, r in zip(names, ranges, strict=True)
    )
    if n > 3 or rng.random() < 0.5:
        return (
            f"SELECT {names[0]}.k, COUNT(*) AS c, SUM({names[-1]}.v) AS s FROM {src} "
            f"WHERE {' AND '.join(conds)} GROUP BY {names[0]}.k"
        )
    cols = ", ".join(f"{x}.v AS v_{x}" for x in names)
    return f"SELECT ISTREAM {names[0]}.k, {cols} FROM {src} WHERE {' AND '.join(conds)}"


@pytest.mark.parametrize("seed", range(16))
def test_random_nway_joins(seed: int, tmp_path: Any) -> None:
    rng = random.Random(seed)
    n = 2 + seed % 5
    path = tmp_path / "catalog.toml"
    path.write_text(_catalog_text(n, 4))
    catalog = load_catalog(path)
    keys = rng.choice([4, 8, 16])
    data = {}
    for name in NAMES[:n]:
        rate = rng.choice([1, 2, 4])
        silent = ((10, 14),) if rng.random() < 0.3 else ()
        profile = None
        stream = KeyedStream(name, rate=rate, keys=keys, silent=silent, rate_profile=profile)
        data[name] = KeyedGenerator(stream, seed=seed).table(30)
        if rng.random() < 0.3:  # a burst: one second of 10x the tuples
            burst = KeyedGenerator(
                KeyedStream(name, rate=rate * 6, keys=keys, start=20, end=21), seed=seed + 1
            ).table(21)
            data[name] = pa.concat_tables([data[name], burst]).sort_by("ts")
    query = _random_query(rng, n)
    plan = plan_query(query, catalog)
    expected = oracle(query, catalog, data)
    assert expected.num_rows > 0 or n > 4, query  # the workload produces joins
    for impl in ("tree", "mjoin", "acaching", "jit"):
        join = JoinSettings(default=impl, acaching={"interval": 50, "sample": 0.2, "window": 2})
        result = execute(plan, catalog, data, placement="row", join=join)
        assert_same_stream(result.table, expected)
