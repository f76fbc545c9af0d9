"""Random queries, random target plans, 0-5 scripted migrations at random instants, every
strategy that is sound for the change: the result stream equals the oracle's (the query from
scratch on the same input, no migration; tests/oracle.py) as bags per ``_ts``.

Hypothesis draws

* a query over 2-4 of the keyed streams r, s, t, u (harness catalog: ``ts, k, v``): raw-window
  joins with equi and theta predicates (a spanning tree of join edges, sometimes an extra
  edge closing a cycle), filters, a projection of the joined columns or aggregates over the
  join result (grouped or global), RSTREAM / ISTREAM / DSTREAM, windows RANGE / ROWS / NOW
  with and without a time SLIDE, UNBOUNDED, and DISTINCT (a tuple-count SLIDE cannot be
  combined with other windows: no joins);
* the data: per stream a rate, a key domain (1-12 keys, sometimes skewed), a start offset and
  a silent period (a few hundred tuples per stream at most; the key domains are widened when
  the joins would make more than a few thousand results per instant);
* a starting plan and 0-5 targets: a random left-deep join order over the FROM aliases (the
  only shape ``--join-order`` and TARGET.json express) or, one time in three, any join tree
  (right-deep, zigzag, bushy: built by the harness's ``reshape``, as the CLI cannot ask for
  one), and a random placement (all row, all DuckDB, or a random subset of the operator ids
  as explain prints them on DuckDB);
* migration instants in event-seconds, some drawn within a second of the previous one so
  that migrations overlap (a -> b -> c while b's JISC states are still incomplete, or while
  a PT / HybMig / GPT still runs both plans: the driver defers the next one);
* per migration a strategy among those sound for the change (``strategies.check`` against
  the plan migrated from: columnar moves only by gms/gpt/ghm; the row-level ones between
  all-row plans; the registry's check refuses e.g. PT over an UNBOUNDED window or HybMig
  towards a bushy tree), or ``auto``.

Beyond the bag comparison (which the message splits into lost, duplicated and spurious
rows), an ISTREAM or DSTREAM query runs as its twin too (the other mode, same schedule):
the run's own insertions and deletions, replayed instant by instant, must never delete a row
that is not in the relation (a retraction of something never emitted).

The default profile (``MAX_EXAMPLES``) keeps the CI cost bounded; ``-m long`` runs the big
profile. Both are derandomized (the same examples every run; hypothesis prints the failing
example's draws).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engines.migration import strategies
from engines.migration.request import MigrationRequest, ScheduledMigration
from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import LoadedQuery, execute, resolve_placement
from hycq.migrations import plan_with_order
from optimizer.ir.errors import PlanError, UserError
from optimizer.sql import plan_query
from tests.migration.harness import CATALOG, Tree, is_bushy, reshape, trees
from tests.oracle import TS, assert_same_stream, oracle, stream_differences

STREAMS = "rstu"
SECONDS = 24
#: Estimated join results per instant above which the key domains are widened.
RESULT_BUDGET = 1500
MAX_EXAMPLES = 40
BIG_EXAMPLES = 300
MODES = ("", "RSTREAM", "ISTREAM", "DSTREAM")


# -- queries -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """A drawn query: its text per output mode, the aliases (FROM order) and per alias the
    tuples a window holds at most per key-less estimate (for the data budget)."""

    template: str  # '{mode}' where the output mode goes
    mode: str
    aliases: tuple[str, ...]
    window_rows: tuple[tuple[str, float | None], ...]  # (alias, rows or None = per second)

    def text(self, mode: str | None = None) -> str:
        m = self.mode if mode is None else mode
        return self.template.format(mode=f"{m} " if m else "")


@st.composite
def _window(draw: st.DrawFn) -> tuple[str, float | None, float]:
    """(clause, fixed row count or None, seconds of input it spans)."""
    kind = draw(
        st.sampled_from(("range", "range", "range_slide", "rows", "rows_slide", "now", "unbounded"))
    )
    if kind == "unbounded":  # only the state-moving strategies can migrate it (no replay)
        return "[UNBOUNDED]", None, SECONDS
    if kind == "range":
        w = draw(st.integers(1, 5))
        return f"[RANGE {w} SECONDS]", None, w
    if kind == "range_slide":
        w = draw(st.integers(2, 6))
        m = draw(st.integers(1, w))
        return f"[RANGE {w} SECONDS SLIDE {m} SECONDS]", None, w
    if kind == "rows":
        n = draw(st.integers(1, 8))
        return f"[ROWS {n}]", n, 0
    if kind == "rows_slide":
        n = draw(st.integers(2, 8))
        return f"[ROWS {n} SLIDE {draw(st.integers(1, 3))} SECONDS]", n, 0
    return "[NOW]", None, 1


@st.composite
def _edge(draw: st.DrawFn, a: str, b: str, theta_ok: bool) -> str:
    kinds = ["equi", "equi", "equi", "equi_theta"] + (["theta"] if theta_ok else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "equi":
        return f"{a}.k = {b}.k"
    op = draw(st.sampled_from(("<", "<=", ">")))
    shift = draw(st.sampled_from(("", " + 10", " - 25")))
    theta = f"{a}.v {op} {b}.v{shift}"
    return theta if kind == "theta" else f"{a}.k = {b}.k AND {theta}"


@st.composite
def queries(draw: st.DrawFn) -> tuple[Query, dict[str, float]]:
    """A query and per alias the seconds its window spans (NOW: 1; ROWS: 0)."""
    n = draw(st.sampled_from((3, 4, 2)))  # (hypothesis favours the first values)
    aliases = tuple(draw(st.permutations(STREAMS))[:n])
    windows = {a: draw(_window()) for a in aliases}
    # A spanning tree of join edges over the FROM order; a theta-only edge between two
    # leaves only in a 2-way join of bounded windows (elsewhere it would make a cross
    # product of windows).
    conds = []
    for i in range(1, n):
        j = draw(st.integers(0, i - 1))
        theta_ok = n == 2 and all(w[0] != "[UNBOUNDED]" for w in windows.values())
        conds.append(draw(_edge(aliases[j], aliases[i], theta_ok)))
    if n >= 3 and draw(st.integers(0, 3)) == 0:  # an extra edge: a cycle in the join graph
        a, b = draw(st.sampled_from(list(itertools.combinations(aliases, 2))))
        conds.append(f"{a}.k = {b}.k")
    if draw(st.booleans()):
        a = draw(st.sampled_from(aliases))
        conds.append(
            draw(
                st.sampled_from(
                    (
                        f"{a}.v > {draw(st.integers(5, 60))}",
                        f"{a}.k <> {draw(st.integers(0, 3))}",
                        f"{a}.k IN (0, 1, 3)",
                        f"({a}.v < 40 OR {a}.k = 2)",
                    )
                )
            )
        )
    mode = draw(st.sampled_from(MODES))
    exact = mode in ("ISTREAM", "DSTREAM")  # no SUM/AVG of DOUBLEs compared exactly
    distinct = "DISTINCT " if draw(st.integers(0, 6)) == 0 else ""
    shape = draw(st.sampled_from(("raw", "raw", "grouped", "global")))
    if shape == "raw":
        cols = [f"{a}.{c}" for a in aliases for c in ("k", "v", "ts")]
        chosen = draw(st.lists(st.sampled_from(cols), min_size=1, max_size=4, unique=True))
        items = [f"{c} AS c{i}" for i, c in enumerate(chosen)]
        tail = ""
    else:
        funcs = ["COUNT(*)", "MIN({a}.v)", "MAX({a}.v)", "SUM({a}.k)", "COUNT({a}.v)"]
        if not exact:
            funcs += ["SUM({a}.v)", "AVG({a}.v)", "SUM({a}.v - {b}.v)"]
        aggs = []
        for _ in range(draw(st.integers(1, 3))):
            f = draw(st.sampled_from(funcs))
            aggs.append(
                f.format(a=draw(st.sampled_from(aliases)), b=draw(st.sampled_from(aliases)))
            )
        if shape == "grouped":
            key = f"{draw(st.sampled_from(aliases))}.k"
            items = [f"{key} AS g", *(f"{e} AS c{i}" for i, e in enumerate(aggs))]
            tail = f" GROUP BY {key}"
        else:
            items = [f"{e} AS c{i}" for i, e in enumerate(aggs)]
            tail = ""
    src = ", ".join(f"{a} {windows[a][0]} AS {a}" for a in aliases)
    template = (
        f"SELECT {distinct}{{mode}}{', '.join(items)} FROM {src} WHERE {' AND '.join(conds)}{tail}"
    )
    q = Query(
        template,
        mode,
        aliases,
        tuple((a, windows[a][1]) for a in aliases),
    )
    return q, {a: windows[a][2] for a in aliases}


# -- data --------------------------------------------------------------------------------------


@st.composite
def inputs(draw: st.DrawFn, q: Query, spans: dict[str, float]) -> dict[str, pa.Table]:
    """Per stream of ``q``: rate, keys, skew, start and a silent period, the key domains
    widened until the estimated join results per instant fit ``RESULT_BUDGET``."""
    shapes = {}
    for a in q.aliases:
        rate = draw(st.sampled_from((2, 4, 6, 10)))
        keys = draw(st.integers(1, 12))
        silent = ()
        if draw(st.integers(0, 3)) == 0:
            lo = draw(st.integers(2, SECONDS - 6))
            silent = ((lo, lo + draw(st.integers(1, 5))),)
        shapes[a] = {
            "rate": rate,
            "keys": keys,
            "skew": draw(st.sampled_from((0.0, 0.0, 1.2))),
            "start": draw(st.sampled_from((0, 0, 0, 2, 5))),
            "silent": silent,
        }
    rows = dict(q.window_rows)

    def estimate() -> float:
        per = []
        for a in q.aliases:
            s = shapes[a]
            held = rows[a] if rows[a] is not None else s["rate"] * spans[a]
            per.append((held, s["keys"]))
        keys = max(k for _, k in per)
        return keys * float(_prod(max(h / keys, 1.0) for h, _ in per))

    while estimate() > RESULT_BUDGET:
        for a in q.aliases:
            shapes[a]["keys"] = min(shapes[a]["keys"] * 2, 400)
    seed = draw(st.integers(0, 10**6))
    return {
        a: KeyedGenerator(KeyedStream(a, **shapes[a]), seed=seed).table(SECONDS)  # type: ignore[arg-type]
        for a in q.aliases
    }


def _prod(xs: Any) -> float:
    out = 1.0
    for x in xs:
        out *= x
    return out


# -- plans and strategies ----------------------------------------------------------------------


def _loaded(text: str) -> LoadedQuery:
    return LoadedQuery(text, "random.sql", CATALOG, plan_query(text, CATALOG), 0.0)


Shape = str | Tree
"""A join order (``--join-order`` syntax: left-deep) or a join tree over the FROM leaves."""


def build(q: LoadedQuery, aliases: tuple[str, ...], shape: Shape) -> Any:
    """The plan of ``q`` with its joins in ``shape``."""
    if isinstance(shape, str):
        return plan_with_order(q, shape)
    return reshape(plan_with_order(q, ",".join(aliases)), shape)


@st.composite
def targets(
    draw: st.DrawFn, q: LoadedQuery, aliases: tuple[str, ...]
) -> tuple[Any, dict[str, str], Shape, str]:
    """(plan, complete placement, shape, placement kind): a random join order (a left-deep
    one as ``--join-order`` names it, or one time in three any tree: right-deep, zigzag,
    bushy) and a random placement."""
    if len(aliases) > 2 and draw(st.integers(0, 2)) == 0:
        shape: Shape = draw(trees(draw(st.permutations(range(len(aliases))))))
    else:
        shape = ",".join(draw(st.permutations(aliases)))
    plan = build(q, aliases, shape)
    where = draw(st.sampled_from(("row", "row", "row", "column", "mixed")))
    if where == "mixed":
        ids = plan.r2r_ids()
        chosen = draw(st.lists(st.sampled_from(ids), min_size=1, unique=True)) if ids else []
        try:
            placement = resolve_placement(plan, dict.fromkeys(chosen, "duckdb"), "duckdb")
        except UserError:
            placement = resolve_placement(plan, dict.fromkeys(plan.ids_of("join"), "duckdb"))
    else:
        placement = resolve_placement(plan, where, "duckdb")
    return plan, placement, shape, where


def sound_strategies(old: tuple[Any, dict[str, str]], new: tuple[Any, dict[str, str]]) -> list[str]:
    """Every available strategy that can migrate ``old`` -> ``new``, and ``auto`` when one
    can."""
    out = []
    row_level = ["jisc", "ms", "pt", "hybmig", "hybmig-lazy"]
    names = row_level + [n for n in strategies.names() if n not in row_level]
    for name in names:
        if name == "auto" or not strategies.available(name):
            continue
        try:
            strategies.check(name, old, new)
        except PlanError:
            continue
        out.append(name)
    return [*out, "auto"] if out else []


@st.composite
def schedules(
    draw: st.DrawFn, q: LoadedQuery, aliases: tuple[str, ...], first: tuple[Any, dict[str, str]]
) -> list[tuple[float, Any, dict[str, str], str, Shape, str]]:
    """0-5 (AT seconds, plan, placement, strategy, shape, placement kind), some within a
    second of the
    previous one; the strategy is sound for the plan migrated from (the previous target)."""
    instants: list[float] = []
    for _ in range(draw(st.sampled_from((3, 5, 2, 1, 4, 0)))):
        if instants and draw(st.integers(0, 2)) == 0:  # overlapping: close to the last one
            instants.append(instants[-1] + draw(st.sampled_from((0.0, 0.25, 0.5, 1.0))))
        else:
            instants.append(draw(st.floats(0, SECONDS + 1, allow_nan=False)))
    out = []
    current = first
    for at in sorted(instants):
        plan, placement, shape, where = draw(targets(q, aliases))
        names = sound_strategies(current, (plan, placement))
        if not names:  # nothing can move this pair (e.g. an UNBOUNDED leaf): skip it
            continue
        # the row-level ones (between all-row plans) in 3 of 5 cases where they apply, else
        # uniform over the sound ones (a small sampled_from is far from uniform)
        rng = random.Random(draw(st.integers(0, 2**32)))
        row_level = [n for n in names if n != "auto" and strategies.get(n).row_only]
        pick = rng.choice(row_level if row_level and rng.random() < 0.6 else names)
        out.append((at, plan, placement, pick, shape, where))
        current = (plan, placement)
    return out


# -- checks ------------------------------------------------------------------------------------


def check_stream(actual: pa.Table, expected: pa.Table) -> None:
    """Bags per ``_ts`` (``assert_same_stream``), with the difference named: results lost,
    results emitted twice, rows the query never produces at that instant."""
    assert actual.num_columns == expected.num_columns, (actual.schema, expected.schema)
    lost, dup, spurious = [], [], []
    emitted = Counter(_plain(r) for r in _rows(actual))
    for t, extra, missing in stream_differences(actual, expected):
        lost += [(t, r) for r in missing]
        for r in extra:
            (dup if emitted[_plain((*r, t))] > 1 else spurious).append((t, r))
    assert not lost, f"results lost (expected at _ts, never emitted): {lost[:5]}"
    assert not dup, f"results emitted twice at one _ts: {dup[:5]}"
    assert not spurious, f"rows the query does not produce at that _ts: {spurious[:5]}"
    assert_same_stream(actual, expected)  # (the same comparison, the helpers' message)


def check_ledger(ins: pa.Table, dels: pa.Table) -> None:
    """The ISTREAM and DSTREAM outputs of one query replayed instant by instant: a deletion
    (DSTREAM row) must remove a row inserted earlier and not yet deleted."""
    by_ts: dict[int, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {}
    for table, k in ((ins, 0), (dels, 1)):
        for r in _rows(table):
            by_ts.setdefault(r[-1], ([], []))[k].append(_plain(r[:-1]))
    live: Counter[tuple[Any, ...]] = Counter()
    for t in sorted(by_ts):
        added, removed = by_ts[t]
        for r in removed:
            assert live[r] > 0, (
                f"_ts={t}: retraction of {r!r}, never emitted (or already retracted)"
            )
            live[r] -= 1
        live.update(added)


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = [c for c in table.column_names if c != TS] + [TS]
    t = table.select(cols)
    return list(zip(*(c.to_pylist() for c in t.columns), strict=True)) if t.num_rows else []


def _plain(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A hashable row: floats rounded to 9 significant digits (the float rule's tolerance)."""
    return tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row)


# -- the test ----------------------------------------------------------------------------------


def _for_mode(placement: dict[str, str], plan: Any) -> dict[str, str]:
    """``placement`` for the same plan with the other output mode (the R2S operator's id
    names its kind: istream1 <-> dstream1; every other id is the same)."""
    ids = set(plan.topological())
    swap = {"istream": "dstream", "dstream": "istream"}
    out = {}
    for op_id, engine in placement.items():
        if op_id not in ids:
            op_id = swap[op_id[:7]] + op_id[7:]
        out[op_id] = engine
    return out


def run_case(data: st.DataObject) -> None:
    q, spans = data.draw(queries(), label="query")
    streams = data.draw(inputs(q, spans), label="data")
    loaded = _loaded(q.text())
    start = data.draw(targets(loaded, q.aliases), label="start")
    steps = data.draw(schedules(loaded, q.aliases, start[:2]), label="steps")
    data.draw(st.just((start[2:], [(m[0], *m[3:]) for m in steps])), label="shapes")
    event(f"{len(q.aliases)}-way, {len(steps)} migration(s)")
    for _, _, _, strategy, shape, where in steps:
        kind = "order" if isinstance(shape, str) else "bushy" if is_bushy(shape) else "chain"
        event(f"strategy {strategy} to {kind}/{where}")
    if any(b[0] - a[0] <= 1.0 for a, b in itertools.pairwise(steps)):
        event("overlapping migrations (within 1 s)")
    modes = [q.mode] if q.mode not in ("ISTREAM", "DSTREAM") else ["ISTREAM", "DSTREAM"]
    outputs = {}
    for mode in modes:
        text = q.text(mode)
        if mode == q.mode:
            first, first_placement = start[0], start[1]
            schedule = [
                ScheduledMigration(at, MigrationRequest(p, pl, strategy))
                for at, p, pl, strategy, _, _ in steps
            ]
        else:  # the twin: the same shapes and placements, the other output mode
            loaded_m = _loaded(text)
            first = build(loaded_m, q.aliases, start[2])
            first_placement = _for_mode(start[1], first)
            schedule = []
            for at, _, pl, strategy, shape, _ in steps:
                p = build(loaded_m, q.aliases, shape)
                schedule.append(
                    ScheduledMigration(at, MigrationRequest(p, _for_mode(pl, p), strategy))
                )
        result = execute(
            first,
            CATALOG,
            streams,
            placement=first_placement,
            column_engine="duckdb",
            schedule=schedule,
        )
        assert result.dead_letter == 0
        check_stream(result.table, oracle(text, CATALOG, streams))
        assert len(result.metrics.get("migrations", [])) == len(steps)
        outputs[mode] = result.table
    if len(modes) == 2:
        check_ledger(outputs["ISTREAM"], outputs["DSTREAM"])


#: Shared by both profiles: derandomized (the same examples in every run), no example
#: database, no deadline (a run with migrations takes seconds).
_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(_SETTINGS, max_examples=MAX_EXAMPLES)
@given(data=st.data())
def test_random_queries_plans_and_migrations(data: st.DataObject) -> None:
    run_case(data)


@pytest.mark.slow
@pytest.mark.long
@settings(_SETTINGS, max_examples=BIG_EXAMPLES)
@given(data=st.data())
def test_random_queries_plans_and_migrations_big(data: st.DataObject) -> None:
    run_case(data)
