"""Join implementations on the row engine: binary trees, MJoin, A-Caching and JIT (issue 18).

Parts (``python experiments/join_impls.py PART [--repeat N]``; results in
experiments/results/join_impls_<part>.json, summarized in experiments/README.md):

* ``fig6``: A-Caching Fig. 6's shape. Q3 ``r(a) join s(a, b) join t(b)``, every column over
  one domain of 1,000 values, multiplicity 1 in r and s (200 tuples/s, 5 s windows) and m in
  t (rate 200 m): m from 1 to 20 moves the cache's hit probability. Plans: the two
  left-deep trees (r,s,t and s,t,r), MJoin, A-Caching (adaptive). Throughput over in-memory
  tables through the whole row engine, runs interleaved (ABCD ABCD ...), median of N; and
  the joins' busy time alone.
* ``burst``: Fig. 12's shape. Q3 with a 20x burst in r from the middle of the run; per
  re-selection interval, A-Caching's caches, against the static plans before and after.
* ``cands7``: the candidates of a 7-way join (the seed's 7-way join had 15, 6 chosen).
* ``jit``: JIT Figs. 14-15's shape, 4 streams, left-deep clique (stream 4 over 100x the
  domain): CPU seconds (the joins' busy time) and peak stored tuples against the plain tree
  (REF), over window sizes and rates.
* ``units``: A-Caching's Update and Lookup costs on Q3's operator alone (UPDATE_S).
* ``choice``: optimizer/join_impl.py's choice against the measured best of tree / MJoin /
  A-Caching / JIT at 10 workload points.

Run with nothing else on the machine (the numbers are wall-clock medians).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engines.row.joins.acaching.candidates import candidates  # noqa: E402
from engines.row.joins.acaching.join_op import ACachingJoinOp  # noqa: E402
from engines.row.joins.mjoin import NarySpec  # noqa: E402
from engines.row.lowering import JoinSettings  # noqa: E402
from engines.sources.multiway import MultiwayStream, catalog_text, stream_table  # noqa: E402
from hycq.api import execute  # noqa: E402
from optimizer.ir.expr import Binary, ColumnRef  # noqa: E402
from optimizer.ir.types import DataType  # noqa: E402
from optimizer.sql import plan_query  # noqa: E402
from optimizer.sql.catalog import parse_catalog_text  # noqa: E402

OUT = ROOT / "experiments" / "results"


def _catalog(streams: list[MultiwayStream]) -> Any:
    return parse_catalog_text(catalog_text(streams, 1, {s.name: f"{s.name}.csv" for s in streams}))


def _tables(streams: list[MultiwayStream], seconds: float, seed: int = 1) -> dict[str, Any]:
    return {s.name: stream_table(s, seconds, seed) for s in streams}


def _q3_sql(order: tuple[str, ...], window: float) -> str:
    src = ", ".join(f"{n} [RANGE {window:g} SECONDS SLIDE 1 SECOND] AS {n}" for n in order)
    return f"SELECT COUNT(*) AS n FROM {src} WHERE r.a = s.a AND s.b = t.b"


def _measure(sql: str, catalog: Any, tables: dict[str, Any], join: JoinSettings) -> dict[str, Any]:
    plan = plan_query(sql, catalog)
    t0 = time.perf_counter()
    res = execute(plan, catalog, tables, placement="row", join=join)
    wall = time.perf_counter() - t0
    joins = {k: v for k, v in res.metrics["operators"].items() if "join" in v}
    return {
        "wall_s": wall,
        "tuples": res.metrics["tuples_in"],
        "throughput": res.metrics["tuples_in"] / wall,
        "join_busy_s": sum(v["busy_s"] for v in joins.values()),
        "peak_stored": sum(v["join"].get("peak_tuples_stored", 0) for v in joins.values()),
        "joins": {k: v["join"] for k, v in joins.items()},
        "rows": res.table.num_rows if res.table is not None else None,
    }


def _interleaved(
    plans: dict[str, tuple[str, JoinSettings]], catalog: Any, tables: dict[str, Any], repeat: int
) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in plans}
    for _ in range(repeat):
        for name, (sql, join) in plans.items():
            runs[name].append(_measure(sql, catalog, tables, join))
    out = {}
    for name, rs in runs.items():
        med = statistics.median(r["throughput"] for r in rs)
        last = rs[-1]
        out[name] = {
            "throughput_median": med,
            "throughputs": [r["throughput"] for r in rs],
            "join_busy_s_median": statistics.median(r["join_busy_s"] for r in rs),
            "peak_stored": last["peak_stored"],
            "joins": last["joins"],
        }
    return out


def _q3_streams(
    rate: float, mult: float, window: float, a_keys: int, b_keys: int
) -> list[MultiwayStream]:
    dom = (("a", a_keys), ("b", b_keys))
    return [
        MultiwayStream("r", (("a", "INTEGER"),), rate, b_keys, domains=dom),
        MultiwayStream("s", (("a", "INTEGER"), ("b", "INTEGER")), rate, b_keys, domains=dom),
        MultiwayStream("t", (("b", "INTEGER"),), rate * mult, b_keys, domains=dom),
    ]


def fig6(repeat: int) -> dict[str, Any]:
    """The seed's Fig. 6: the multiplicity ``m`` of ``T.B`` (rate(t) = m x rate(r)) moves the
    hit probability of the one candidate cache (``R join S`` in t's pipeline, keyed by b);
    every join column over one domain, multiplicity 1 in r and s."""
    rate, window, seconds = 200.0, 5.0, 240.0
    keys = int(rate * window)
    points = []
    for mult in (1, 2, 5, 10, 20):
        streams = _q3_streams(rate, float(mult), window, keys, keys)
        catalog = _catalog(streams)
        tables = _tables(streams, seconds)
        ac = {"interval": 10_000}
        sql = _q3_sql(("r", "s", "t"), window)
        plans = {
            "tree_rst": (sql, JoinSettings("tree")),
            "tree_str": (_q3_sql(("s", "t", "r"), window), JoinSettings("tree")),
            "mjoin": (sql, JoinSettings("mjoin")),
            "acaching": (sql, JoinSettings("acaching", acaching=ac)),
        }
        res = _interleaved(plans, catalog, tables, repeat)
        caches = next(iter(res["acaching"]["joins"].values())).get("caches", [])
        hit = [c["hit_rate"] for c in caches if c["hit_rate"] is not None]
        statics = ("tree_rst", "tree_str", "mjoin")
        best_static = max(res[k]["throughput_median"] for k in statics)
        point = {
            "multiplicity": mult,
            "hit_rate": hit[0] if hit else None,
            "caches": [c["segment"] for c in caches],
            "throughput": {k: round(v["throughput_median"]) for k, v in res.items()},
            "join_busy_s": {k: round(v["join_busy_s_median"], 4) for k, v in res.items()},
            "acaching_over_best_static": res["acaching"]["throughput_median"] / best_static,
            "acaching_over_best_static_join_busy": min(
                res[k]["join_busy_s_median"] for k in statics
            )
            / res["acaching"]["join_busy_s_median"],
        }
        print(json.dumps(point), flush=True)
        points.append(point)
    return {"rate": rate, "window_s": window, "seconds": seconds, "keys": keys, "points": points}


class _JoinClock:
    """Seconds the join operators spend per instant (Fig. 12's processing rate over time):
    wraps the ``step`` of every join class; nested calls (A-Caching's ``super().step``)
    count once."""

    def __init__(self) -> None:
        from engines.row.joins.acaching.join_op import ACachingJoinOp
        from engines.row.joins.mjoin import MJoinOp
        from engines.row.joins.tree import HashJoinOp

        self.per_instant: dict[int, float] = {}
        self.depth = 0
        self.saved = []
        for cls in (HashJoinOp, MJoinOp, ACachingJoinOp):
            orig = cls.__dict__["step"]
            self.saved.append((cls, orig))
            cls.step = self._wrap(orig)  # type: ignore[method-assign]

    def _wrap(self, orig: Any) -> Any:
        clock = self

        def step(op: Any, instant: int, inputs: Any) -> Any:
            clock.depth += 1
            t0 = time.perf_counter()
            try:
                return orig(op, instant, inputs)
            finally:
                clock.depth -= 1
                if clock.depth == 0:
                    d = clock.per_instant
                    d[instant] = d.get(instant, 0.0) + time.perf_counter() - t0

        return step

    def close(self) -> None:
        for cls, orig in self.saved:
            cls.step = orig  # type: ignore[method-assign]


def burst(repeat: int) -> dict[str, Any]:
    """Fig. 12's shape: Q3 (r, s at 100 tuples/s, t at 500, a over 200 values), r at 20x its
    rate from 20 s to the end (60 s); A-Caching re-selects every 5,000 tuples. Besides whole-run
    throughput, the joins' seconds per 2-second bucket of event time for every plan: how fast
    A-Caching converges to the best static plan for the new rates."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rate, mult, window, seconds = 100.0, 5.0, 5.0, 60.0
    burst_at = 20.0
    interval = 5000
    streams = _q3_streams(rate, mult, window, 200, int(rate * window))
    catalog = _catalog(streams)
    tables = _tables(streams, seconds)
    burst_r = MultiwayStream(
        "r",
        (("a", "INTEGER"),),
        rate * 20,
        200,
        start=burst_at,
        end=seconds,
        domains=(("a", 200),),
    )
    first = tables["r"]["ts"][0].as_py()
    before = tables["r"].filter(pc.less(tables["r"]["ts"], first + int(burst_at)))
    tables["r"] = pa.concat_tables([before, stream_table(burst_r, seconds, 7)]).sort_by("ts")
    ac = {"interval": interval}
    sql = _q3_sql(("r", "s", "t"), window)
    plans = {
        "tree_rst": (sql, JoinSettings("tree")),
        "tree_str": (_q3_sql(("s", "t", "r"), window), JoinSettings("tree")),
        "mjoin": (sql, JoinSettings("mjoin")),
        "acaching": (sql, JoinSettings("acaching", acaching=ac)),
    }
    buckets: dict[str, list[list[float]]] = {k: [] for k in plans}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in plans}
    for _ in range(repeat):
        for name, (q, join) in plans.items():
            clock = _JoinClock()
            try:
                runs[name].append(_measure(q, catalog, tables, join))
            finally:
                clock.close()
            instants = sorted(clock.per_instant)
            b: list[float] = []
            for k, inst in enumerate(instants):
                if k // 2 >= len(b):
                    b.append(0.0)
                b[k // 2] += clock.per_instant[inst]
            buckets[name].append(b)
    med = {k: [statistics.median(x) for x in zip(*v, strict=False)] for k, v in buckets.items()}
    # tuples per 2-second bucket (the same data for every plan)
    ts = pa.concat_tables([t.select(["ts"]) for t in tables.values()])["ts"]
    start = pc.min(ts).as_py()
    per_sec = [0] * (int(seconds) + 1)
    for v in ts.to_pylist():
        per_sec[min(int(seconds), v - start)] += 1
    tuples_in = [per_sec[2 * k] + per_sec[2 * k + 1] for k in range(int(seconds) // 2)]
    cum = list(itertools.accumulate(tuples_in))
    statics = ("tree_rst", "tree_str", "mjoin")
    steady = range(int(burst_at + window) // 2, len(med["acaching"]))  # windows full
    best_after = min(statics, key=lambda k: sum(med[k][i] for i in steady))
    best_before = min(statics, key=lambda k: sum(med[k][i] for i in range(3, int(burst_at) // 2)))
    burst_bucket = int(burst_at) // 2
    ratio = [
        (med[best_after][i] / med["acaching"][i]) if med["acaching"][i] else None
        for i in range(len(med["acaching"]))
    ]
    converged = next(
        (
            i
            for i in range(burst_bucket, len(ratio))
            if all(r is not None and r >= 0.9 for r in ratio[i:])
        ),
        None,
    )
    runs_ac = runs["acaching"][-1]["joins"]
    j = next(iter(runs_ac.values()))
    out = {
        "throughput": {
            k: round(statistics.median(r["throughput"] for r in v)) for k, v in runs.items()
        },
        "join_s_per_2s_bucket": {k: [round(x, 4) for x in v] for k, v in med.items()},
        "tuples_per_bucket": tuples_in,
        "best_static_before_burst": best_before,
        "best_static_after_burst": best_after,
        "acaching_speed_over_best_after": [None if r is None else round(r, 3) for r in ratio],
        "burst_at_tuples": cum[burst_bucket - 1],
        "converged_bucket": converged,
        "converged_after_intervals": None
        if converged is None
        else round((cum[converged - 1] - cum[burst_bucket - 1]) / interval, 1),
        "acaching_timeline": j.get("timeline"),
        "selections": [{k: s[k] for k in ("at_tuples", "chosen")} for s in j.get("selections", [])],
    }
    print(json.dumps(out, indent=1), flush=True)
    return out


def units(repeat: int) -> dict[str, Any]:
    """A-Caching's unit costs on Q3's operator (no engine around it): seconds per delta tuple
    of each pipeline with the t-pipeline cache (R join S keyed by b) and without, over stores
    of 1,000 keys (multiplicity 1 in r and s, ``m`` in t). The r and s pipelines carry the
    cache's Update point (their extra cost is UPDATE_S times the update partials); t's
    Lookup saves its two probes."""
    import random

    col = lambda i: ColumnRef(i, f"c{i}", DataType.INTEGER)  # noqa: E731
    eq = lambda a, b: Binary("=", col(a), col(b), DataType.BOOLEAN)  # noqa: E731
    # r(ts, a) s(ts, a, b) t(ts, b): r.a = 1, s.a = 3, s.b = 4, t.b = 6
    spec = NarySpec((2, 3, 2), (eq(1, 3), eq(4, 6)), (False,) * 7)
    keys = 1000
    out: dict[str, Any] = {"keys": keys, "points": []}
    for mult in (1, 5):
        rng = random.Random(mult)
        base = [
            [(i, rng.randrange(keys)) for i in range(keys)],
            [(i, rng.randrange(keys), rng.randrange(keys)) for i in range(keys)],
            [(i, rng.randrange(keys)) for i in range(keys * mult)],
        ]

        def make(cached: bool, base: list[Any] = base) -> ACachingJoinOp:
            op = ACachingJoinOp(
                "j", spec, [False] * 3, orders=[(0, 1, 2), (1, 0, 2), (2, 1, 0)], sample=0.0
            )
            for i, rows in enumerate(base):
                op.stores[i].add_all(list(rows))
            if cached:
                (c,) = [c for c in op.cands if c.pipeline == 2]
                op.force([c], 8192)
                op._cached(2, [(0, b) for b in range(keys)], False)  # every key cached
            return op

        batches: list[list[tuple[int, ...]]] = [
            [(0, rng.randrange(keys)) for _ in range(200)],
            [(0, rng.randrange(keys), rng.randrange(keys)) for _ in range(200)],
            [(0, rng.randrange(keys)) for _ in range(1000)],
        ]
        point: dict[str, Any] = {"multiplicity": mult}
        for i, name in enumerate("rst"):
            per = {}
            for cached in (True, False):
                times = []
                for _ in range(max(5, 5 * repeat)):
                    op = make(cached)
                    op._cached(i, batches[i][:1], False)  # compile the runners
                    if i == 0 or i == 1:  # updates grow the cache: a fresh operator each
                        op = make(cached)
                        op._cached(i, batches[i][:1], False)
                    t0 = time.perf_counter()
                    op._cached(i, batches[i], False)
                    times.append((time.perf_counter() - t0) / len(batches[i]))
                per["cached" if cached else "plain"] = 1e6 * min(times)
            point[f"{name}_us_per_tuple"] = per
        print(json.dumps(point), flush=True)
        out["points"].append(point)
    return out


def cands7() -> dict[str, Any]:
    """Candidates of a 7-way chain join whose pipelines all walk right first (segments
    ``{j..6}`` then satisfy the prefix invariant in every pipeline left of ``j``)."""
    n = 7
    w = 2
    col = lambda i: ColumnRef(i, f"c{i}", DataType.INTEGER)  # noqa: E731
    conj = tuple(
        Binary("=", col(p * w + 1), col((p + 1) * w), DataType.BOOLEAN) for p in range(n - 1)
    )
    spec = NarySpec((w,) * n, conj, (False,) * (n * w))
    # every pipeline walks the chain to the right end first, then to the left
    orders = [(i, *range(i + 1, n), *range(i - 1, -1, -1)) for i in range(n)]
    op = ACachingJoinOp("j", spec, [False] * n, orders)
    cs = candidates(spec, op.pipelines)
    groups = {c.group for c in cs}
    out: dict[str, Any] = {
        "inputs": n,
        "candidates": len(cs),
        "shared_groups": len(groups),
        "labels": [c.label() for c in cs],
        "selection": _select7(),
    }
    print(json.dumps(out, indent=1))
    return out


def _select7() -> dict[str, Any]:
    """Fig. 9's 7-way join run adaptively: ``r1(a) join .. join r7(a)`` on one attribute,
    multiplicity 1 in the first 3 streams and 5 in the other 4 (rates 20 and 100 tuples/s,
    a over 100 values, 5 s windows, 30 s of data); the candidates A-Caching saw and the
    caches it chose, and the run's throughput against MJoin's and the tree's."""
    n, rate, keys, window, seconds = 7, 20.0, 100, 5.0, 30.0
    streams = [
        MultiwayStream(f"r{i}", (("a", "INTEGER"),), rate * (1 if i <= 3 else 5), keys)
        for i in range(1, n + 1)
    ]
    catalog = _catalog(streams)
    tables = _tables(streams, seconds)
    src = ", ".join(
        f"r{i} [RANGE {window:g} SECONDS SLIDE 1 SECOND] AS r{i}" for i in range(1, n + 1)
    )
    cond = " AND ".join(f"r{i}.a = r{i + 1}.a" for i in range(1, n))
    sql = f"SELECT COUNT(*) AS n FROM {src} WHERE {cond}"
    res = {
        impl: _measure(sql, catalog, tables, JoinSettings(impl, acaching={"interval": 10_000}))
        for impl in ("acaching", "mjoin", "tree")
    }
    j = next(iter(res["acaching"]["joins"].values()))
    last: dict[str, Any] = next(
        (s for s in reversed(j.get("selections", [])) if "estimates" in s), {}
    )
    return {
        "candidates_seen": last.get("candidates"),
        "chosen": [c["segment"] for c in j.get("caches", [])],
        "hit_rates": [c["hit_rate"] for c in j.get("caches", [])],
        "timeline": j.get("timeline"),
        "probe_orders": j.get("probe_orders"),
        "throughput": {k: round(v["throughput"]) for k, v in res.items()},
    }


def _clique_streams(n: int, rate: float, dmax: int, last_factor: int = 100) -> list[MultiwayStream]:
    out = []
    for i in range(1, n + 1):
        cols = tuple((f"x{j}", "INTEGER") for j in range(1, n + 1) if j != i)
        keys = dmax * (last_factor if i == n else 1)
        doms = tuple(
            (f"x{j}", dmax * last_factor if n in (i, j) else dmax)
            for j in range(1, n + 1)
            if j != i
        )
        out.append(MultiwayStream(f"c{i}", cols, rate, keys, domains=doms))
    return out


def _clique_sql(n: int, window: float) -> str:
    names = [f"c{i}" for i in range(1, n + 1)]
    src = ", ".join(f"{x} [RANGE {window:g} SECONDS SLIDE 10 SECONDS] AS {x}" for x in names)
    cond = " AND ".join(f"{a}.x{b[1:]} = {b}.x{a[1:]}" for a, b in itertools.combinations(names, 2))
    return f"SELECT COUNT(*) AS n FROM {src} WHERE {cond}"


def jit(repeat: int) -> dict[str, Any]:
    n, dmax, hours = 4, 50, 1.0
    points = []
    grid = [(w, 1.0) for w in (300, 450, 600, 750, 900)] + [
        (600, lam) for lam in (0.4, 0.7, 1.3, 1.6)
    ]
    for window, lam in grid:
        streams = _clique_streams(n, lam, dmax)
        catalog = _catalog(streams)
        tables = _tables(streams, hours * 3600)
        sql = _clique_sql(n, window)
        res = _interleaved(
            {"ref": (sql, JoinSettings("tree")), "jit": (sql, JoinSettings("jit"))},
            catalog,
            tables,
            repeat,
        )
        point = {
            "window_s": window,
            "rate": lam,
            "cpu_s": {k: round(v["join_busy_s_median"], 3) for k, v in res.items()},
            "peak_stored": {k: v["peak_stored"] for k, v in res.items()},
            "cpu_ratio_ref_over_jit": res["ref"]["join_busy_s_median"]
            / max(1e-9, res["jit"]["join_busy_s_median"]),
            "memory_saved": 1 - res["jit"]["peak_stored"] / max(1, res["ref"]["peak_stored"]),
            "throughput": {k: round(v["throughput_median"]) for k, v in res.items()},
        }
        print(json.dumps(point), flush=True)
        points.append(point)
    return {"streams": n, "dmax": dmax, "hours": hours, "points": points}


def _optimized(name: str, streams: list[MultiwayStream], sql: str, tables: dict[str, Any]) -> Any:
    """The optimizer's plan of ``sql`` (statistics from the first 20,000 rows of each
    stream) and, for its one join chain, the join-implementation model's work counts and
    choice."""
    from engines.runtime import RunOptions
    from hycq.api import LoadedQuery, join_settings
    from hycq.planning import OptimizerOptions, optimize
    from optimizer.ir.join_chains import join_chains
    from optimizer.join_impl import chain_work
    from optimizer.phase_one import _ChainModel

    catalog = _catalog(streams)
    q = LoadedQuery(sql, name, catalog, plan_query(sql, catalog), 0.0)
    samples = {n: t.slice(0, 20000) for n, t in tables.items()}
    opt = optimize(q, OptimizerOptions(engines=("row", "duckdb")), samples=samples)
    js = join_settings(opt, RunOptions(join_impl="auto"))
    assert js is not None
    (pred,) = js[1]
    (chain,) = join_chains(opt.plan)
    cw = chain_work(_ChainModel(opt.plan, chain, opt.estimates, opt.model, False))
    return opt.plan, catalog, cw, pred


def _sized(streams: list[MultiwayStream], sql: str, window: float, target_s: float) -> Any:
    """Tables long enough that the plain tree runs about ``target_s`` seconds (at least
    four windows): this VM's drift swamps runs of a tenth of a second."""
    catalog = _catalog(streams)
    plan = plan_query(sql, catalog)
    secs = max(4 * window, 20000 / sum(s.rate for s in streams))
    for _ in range(2):
        tables = _tables(streams, secs)
        t0 = time.perf_counter()
        execute(plan, catalog, tables, placement="row", join=JoinSettings("tree"))
        took = time.perf_counter() - t0
        if 0.7 * target_s <= took <= 1.5 * target_s:
            break
        secs = max(4 * window, secs * target_s / max(took, 1e-3))
    return _tables(streams, secs), secs


def _measure_impls(
    plan: Any, catalog: Any, tables: dict[str, Any], secs: float, repeat: int
) -> Any:
    """Per implementation, interleaved runs: throughputs and the joins' busy seconds per
    second of input."""
    thr: dict[str, list[float]] = {k: [] for k in ("tree", "mjoin", "acaching", "jit")}
    busy: dict[str, list[float]] = {k: [] for k in thr}
    for _ in range(repeat):
        for impl in thr:
            t0 = time.perf_counter()
            res = execute(plan, catalog, tables, placement="row", join=JoinSettings(impl))
            thr[impl].append(res.metrics["tuples_in"] / (time.perf_counter() - t0))
            ops = res.metrics["operators"].values()
            busy[impl].append(sum(v["busy_s"] for v in ops if "join" in v) / secs)
    return thr, busy


def _choice_points() -> list[tuple[str, list[MultiwayStream], str, float]]:
    """Ten workload points: Q3 over three domains of a, the clique at two rates, the star
    with slow and fast spokes, a 4-way chain, a 3-way clique and a 5-way star."""
    from engines.sources.multiway import query_text, workload

    pts = []
    for a_keys in (50, 1000, 20000):
        st = _q3_streams(200.0, 5.0, 5.0, a_keys, 1000)
        pts.append((f"q3_a{a_keys}", st, _q3_sql(("r", "s", "t"), 5.0), 5.0))
    for lam in (1.0, 3.0):
        st = _clique_streams(4, lam, 50)
        pts.append((f"clique4_rate{lam:g}", st, _clique_sql(4, 300), 300.0))
    for spoke in (5.0, 100.0):
        st = workload("star", n=4, rate=100, keys=500, spoke_rate=spoke)
        pts.append((f"star4_spoke{spoke:g}", st, query_text("star", st, 5), 5.0))
    st = workload("star", n=5, rate=50, keys=200)
    pts.append(("star5", st, query_text("star", st, 5), 5.0))
    st = workload("clique", n=3, rate=20, keys=30)
    pts.append(("clique3", st, query_text("clique", st, 5), 5.0))
    pts.append(("chain4", *_chain(4, 50.0, 300), 5.0))
    return pts


def _chain(n: int, rate: float, keys: int) -> tuple[list[MultiwayStream], str]:
    chain = [
        MultiwayStream(f"k{i}", (("a", "INTEGER"), ("b", "INTEGER")), rate, keys) for i in range(n)
    ]
    cond = " AND ".join(f"k{i}.b = k{i + 1}.a" for i in range(n - 1))
    src = ", ".join(f"k{i} [RANGE 5 SECONDS SLIDE 1 SECOND] AS k{i}" for i in range(n))
    return chain, f"SELECT COUNT(*) AS n FROM {src} WHERE {cond}"


def _fit_points() -> list[tuple[str, list[MultiwayStream], str, float]]:
    """Calibration workloads for ``fit``: none of them is a choice point (other sizes,
    domains, rates and stream counts)."""
    from engines.sources.multiway import query_text, workload

    pts = []
    for a_keys, mult in ((200, 1.0), (5000, 3.0), (400, 8.0)):
        st = _q3_streams(300.0, mult, 4.0, a_keys, 600)
        pts.append((f"q3_a{a_keys}_m{mult:g}", st, _q3_sql(("r", "s", "t"), 4.0), 4.0))
    st = workload("clique", n=3, rate=60, keys=200)
    pts.append(("clique3_k200", st, query_text("clique", st, 4), 4.0))
    st = workload("clique", n=4, rate=15, keys=12)
    pts.append(("clique4_k12", st, query_text("clique", st, 4), 4.0))
    st = workload("star", n=3, rate=150, keys=300)
    pts.append(("star3", st, query_text("star", st, 4), 4.0))
    st = workload("star", n=6, rate=40, keys=120, spoke_rate=20)
    pts.append(("star6", st, query_text("star", st, 4), 4.0))
    st = workload("star", n=4, rate=30, keys=1000, spoke_rate=300)
    pts.append(("star4_fast_spokes", st, query_text("star", st, 4), 4.0))
    st = workload("star", n=5, rate=200, keys=800, spoke_rate=8)
    pts.append(("star5_slow_spokes", st, query_text("star", st, 4), 4.0))
    st = workload("star", n=3, rate=60, keys=2000, spoke_rate=3)
    pts.append(("star3_slow_spokes", st, query_text("star", st, 10, 2), 10.0))
    st = _clique_streams(3, 2.0, 40, last_factor=20)
    pts.append(("clique3_long", st, _clique_sql(3, 200), 200.0))
    pts.append(("chain3", *_chain(3, 100.0, 200), 5.0))
    pts.append(("chain5", *_chain(5, 40.0, 150), 5.0))
    return pts


def fit(repeat: int) -> dict[str, Any]:
    """Fit optimizer/join_impl.py's ``UNIT_S`` to the joins' measured busy time.

    This VM's speed drifts by up to 50% between minutes, so only the implementations of one
    point (run interleaved) are compared with each other: the fit minimizes, over (point,
    implementation), ``log(sum_u units[u] * work[u]) + c_point - log(measured)`` with one free
    speed ``c_point`` per point (mean 0) and non-negative units (scipy least_squares).
    Units no workload uses (A-Caching's Update: ``units``) keep their values."""
    import numpy as np
    from scipy.optimize import least_squares

    from optimizer.join_impl import UNIT_S, UNITS, seconds

    impls = ("tree", "mjoin", "jit", "acaching")
    points = []
    for name, streams, sql, window in _fit_points():
        tables, secs = _sized(streams, sql, window, 1.0)
        plan, catalog, cw, _ = _optimized(name, streams, sql, tables)
        thr, busy = _measure_impls(plan, catalog, tables, secs, repeat)
        points.append(
            {
                "point": name,
                "data_seconds": round(secs),
                "work": cw.work,
                "measured_join_s_per_s": {k: statistics.median(v) for k, v in busy.items()},
                "throughput": {k: round(statistics.median(v)) for k, v in thr.items()},
            }
        )
        print(json.dumps(points[-1]), flush=True)
    w = np.array([[[p["work"][i][u] for u in UNITS] for i in impls] for p in points])
    y = np.log([[p["measured_join_s_per_s"][i] for i in impls] for p in points])
    mask = np.asarray(w.reshape(-1, len(UNITS)).any(axis=0), dtype=bool)
    used = [bool(on) for on in mask.tolist()]
    k = sum(used)
    x0 = np.array([UNIT_S[u] for u, on in zip(UNITS, used, strict=True) if on]) * 1e6

    def residuals(x: Any) -> Any:
        units, c = x[:k] * 1e-6, x[k:]
        pred = np.log(np.maximum((w[:, :, mask] * units).sum(axis=2), 1e-12))
        return np.concatenate([(pred + c[:, None] - y).ravel(), [c.sum()]])

    x0 = np.concatenate([np.maximum(x0, 0.01), np.zeros(len(points))])
    lo = np.concatenate([np.zeros(k), np.full(len(points), -np.inf)])
    sol = least_squares(residuals, x0, bounds=(lo, np.inf))
    fitted = dict(UNIT_S)
    for u, v in zip([u for u, on in zip(UNITS, used, strict=True) if on], sol.x[:k], strict=True):
        fitted[u] = float(v) * 1e-6
    speeds = [float(np.exp(c)) for c in sol.x[k:]]

    def rank_error(units: dict[str, float]) -> float:
        """Median over points and implementations of |predicted / measured ratio to the
        point's tree - 1|: what the choice depends on."""
        errs = [
            abs(
                seconds(p["work"][i], units)
                / seconds(p["work"]["tree"], units)
                / (p["measured_join_s_per_s"][i] / p["measured_join_s_per_s"]["tree"])
                - 1
            )
            for p in points
            for i in impls[1:]
        ]
        return statistics.median(errs)

    return {
        "points": points,
        "units_before": UNIT_S,
        "units_fitted": fitted,
        "point_speeds": dict(zip([p["point"] for p in points], speeds, strict=True)),
        "median_ratio_error_before": rank_error(UNIT_S),
        "median_ratio_error_after": rank_error(fitted),
    }


def choice(repeat: int) -> dict[str, Any]:
    """The optimizer's choice per point against the measured best: by median throughput of
    interleaved runs of about a second each, and by the joins' median busy time (what the
    choice changes; the rest of a run is the same work, and its noise)."""
    points = []
    hits = join_hits = 0
    for name, streams, sql, window in _choice_points():
        tables, secs = _sized(streams, sql, window, 1.0)
        plan, catalog, _, pred = _optimized(name, streams, sql, tables)
        thr, busy = _measure_impls(plan, catalog, tables, secs, repeat)
        med = {k: statistics.median(v) for k, v in thr.items()}
        best = max(med, key=lambda k: med[k])
        chosen = pred["chosen"]
        within = med[chosen] >= 0.95 * med[best]
        # separable: every run of the best beat every run of the chosen plan
        separable = min(thr[best]) > max(thr[chosen])
        hits += within
        join_s = {k: statistics.median(v) for k, v in busy.items()}
        join_within = join_s[chosen] <= min(join_s.values()) / 0.95
        join_hits += join_within
        point = {
            "point": name,
            "data_seconds": round(secs),
            "chosen": chosen,
            "predicted_s_per_s": pred["predicted_seconds_per_second"],
            "measured_join_s_per_s": join_s,
            "measured_tuples_per_s": {k: round(v) for k, v in med.items()},
            "throughputs": {k: [round(x) for x in v] for k, v in thr.items()},
            "measured_best": best,
            "chosen_over_best": med[chosen] / med[best],
            "within_5pct": within,
            "separable_from_best": separable,
            "join_time_within_5pct": join_within,
        }
        print(json.dumps(point), flush=True)
        points.append(point)
    return {
        "points": points,
        "within_5pct": hits,
        "join_time_within_5pct": join_hits,
        "of": len(points),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=("fig6", "burst", "cands7", "jit", "choice", "units", "fit"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    started = time.time()
    if args.part == "fig6":
        result = fig6(args.repeat)
    elif args.part == "burst":
        result = burst(args.repeat)
    elif args.part == "cands7":
        result = cands7()
    elif args.part == "jit":
        result = jit(args.repeat)
    elif args.part == "units":
        result = units(args.repeat)
    elif args.part == "fit":
        result = fit(args.repeat)
    else:
        result = choice(args.repeat)
    result["command"] = f"python experiments/join_impls.py {args.part} --repeat {args.repeat}"
    result["seconds"] = round(time.time() - started, 1)
    OUT.mkdir(exist_ok=True)
    (OUT / f"join_impls_{args.part}.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
