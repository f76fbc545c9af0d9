"""Random small SPJA CQL queries over `readings`, as Hypothesis strategies.

:func:`cql_queries` draws one query text: 1-3 windowed references (RANGE with a slide that
divides the range or not, NOW, UNBOUNDED, time-sliding ROWS, count-sliding ROWS), selections
(AND / OR / NOT, comparisons, arithmetic, BETWEEN, IN, CASE, functions), projections,
equi and theta joins (comma joins and JOIN ... ON), GROUP BY with COUNT / SUM / AVG / MIN /
MAX / MEDIAN / COUNT(DISTINCT), HAVING, derived tables (an aggregate joined back to a window,
like Q1; an aggregate over an aggregate, like Q5), SELECT DISTINCT and every output mode.

Queries are kept small so that the oracle (one DuckDB query per slide instant) stays fast on
10-40 seconds of data: windows span a few seconds and joins of three references use only
short windows. Every query drawn binds (:func:`binds` filters the rare one that does not).

A SUM or AVG of DOUBLE values is equal across engines only up to rounding (an incremental sum
drifts in the last bits), which the result comparison tolerates but a predicate does not: such
aggregates are never compared in WHERE / HAVING / join conditions, and ISTREAM / DSTREAM
queries (which compare the rows of consecutive instants exactly) avoid them altogether.

Example:
    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None)
    ... @given(cql_queries())
    ... def check(q):
    ...     assert q.upper().startswith("SELECT")
    >>> check()
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hypothesis import strategies as st

from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import QueryError
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

CATALOG_PATH = Path(__file__).resolve().parent.parent / "queries" / "smartplug" / "catalog.toml"
INT_COLS = ("property", "plug_id", "household_id", "house_id")
NUM_COLS = ("value", *INT_COLS)
FLOAT_LITS = ("0.5", "1.5", "2.5", "10.0", "0.9", "99.5")
__all__ = ["binds", "catalog", "cql_queries", "window_clauses"]


@cache
def catalog() -> Catalog:
    """The smart-plug catalog the generated queries are written for."""
    return load_catalog(CATALOG_PATH)


def binds(text: str) -> bool:
    """Whether the query binds against the smart-plug catalog."""
    try:
        plan_query(text, catalog())
    except QueryError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------------


@st.composite
def window_clauses(draw: st.DrawFn, size: str = "any", allow_count: bool = False) -> str:
    """A window clause. ``size``: ``any``, ``short`` (no UNBOUNDED) or ``tiny`` (joins of 3)."""
    kinds = ["range", "range", "now", "rows", "rows_time"]
    if size == "any":
        kinds += ["unbounded", "unbounded_slide"]
    if allow_count:
        kinds += ["rows_count", "rows_count"]
    kind = draw(st.sampled_from(kinds))
    top = {"any": 6, "short": 4, "tiny": 2}[size]
    if kind == "range":
        n = draw(st.integers(1, top))
        unit = "SECOND" if n == 1 else "SECONDS"
        if draw(st.booleans()) and n <= 3 and draw(st.booleans()):
            text = f"RANGE {n * 1000} MILLISECONDS"  # a time unit finer than the stream's
        else:
            text = f"RANGE {n} {unit}"
        if draw(st.booleans()):
            m = draw(st.integers(1, n))  # divides n or not
            text += f" SLIDE {m} {'SECOND' if m == 1 else 'SECONDS'}"
        return f"[{text}]"
    if kind == "now":
        return "[NOW]"
    if kind == "unbounded":
        return "[UNBOUNDED]"
    if kind == "unbounded_slide":
        return f"[UNBOUNDED SLIDE {draw(st.integers(2, 3))} SECONDS]"
    if kind == "rows":
        return f"[ROWS {draw(st.integers(1, top + 2))}]"
    if kind == "rows_time":
        return f"[ROWS {draw(st.integers(1, top + 2))} SLIDE {draw(st.integers(1, 3))} SECONDS]"
    n = draw(st.integers(1, 8))
    return f"[ROWS {n} SLIDE {draw(st.integers(1, n))}]"


# ---------------------------------------------------------------------------------------------
# Scalar expressions and predicates
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    """Qualifiers of the FROM items whose stream columns are visible ('' = unqualified)."""

    quals: tuple[str, ...]

    def col(self, q: str, name: str) -> str:
        return f"{q}.{name}" if q else name


@st.composite
def _column(draw: st.DrawFn, scope: _Scope, names: tuple[str, ...] = NUM_COLS) -> str:
    return scope.col(draw(st.sampled_from(scope.quals)), draw(st.sampled_from(names)))


@st.composite
def _literal(draw: st.DrawFn, kind: str = "num") -> str:
    if kind == "int" or draw(st.booleans()):
        return str(draw(st.integers(0, 5)))
    return draw(st.sampled_from(FLOAT_LITS))


@st.composite
def num_exprs(draw: st.DrawFn, scope: _Scope, depth: int = 2) -> str:
    """A numeric scalar expression over the scope's stream columns."""
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return draw(_column(scope)) if draw(st.integers(0, 3)) else draw(_literal())
    sub = num_exprs(scope, depth - 1)
    form = draw(st.integers(0, 11))
    if form <= 2:
        op = draw(st.sampled_from(("+", "-", "*")))
        return f"({draw(sub)} {op} {draw(sub)})"
    if form == 3:
        return f"({draw(sub)} / {draw(st.sampled_from(('2', '4', '0.5', '3.0')))})"
    if form == 4:
        int_col = draw(_column(scope, INT_COLS))
        return f"({draw(sub)} / ({int_col} + 1))"
    if form == 5:
        return f"({draw(_column(scope, INT_COLS))} % {draw(st.integers(2, 3))})"
    if form == 6:
        fn = draw(st.sampled_from(("ABS", "FLOOR", "CEIL")))
        return f"{fn}({draw(sub)})"
    if form == 7:
        return f"ROUND({draw(sub)}, {draw(st.integers(0, 2))})"
    if form == 8:
        fn = draw(st.sampled_from(("LEAST", "GREATEST", "COALESCE")))
        return f"{fn}({draw(sub)}, {draw(sub)})"
    if form == 9:
        return f"CASE WHEN {draw(predicates(scope, 0))} THEN {draw(sub)} ELSE {draw(sub)} END"
    if form == 10:
        if draw(st.booleans()):  # a plain column fits an INTEGER; an expression may not
            return f"CAST({draw(_column(scope))} AS INTEGER)"
        return f"CAST({draw(sub)} AS {draw(st.sampled_from(('BIGINT', 'DOUBLE')))})"
    return f"(-({draw(sub)}))"  # parenthesized: '--' would start a comment


@st.composite
def predicates(draw: st.DrawFn, scope: _Scope, depth: int = 2) -> str:
    """A boolean condition over the scope's stream columns."""
    form = draw(st.integers(0, 9 if depth > 0 else 5))
    if form <= 2:
        op = draw(st.sampled_from(("=", "<>", "<", "<=", ">", ">=")))
        right = draw(_literal()) if draw(st.booleans()) else draw(num_exprs(scope, 1))
        return f"{draw(num_exprs(scope, 1))} {op} {right}"
    if form == 3:
        lo = draw(st.integers(0, 50))
        hi = lo + draw(st.integers(0, 300))
        neg = "NOT " if draw(st.integers(0, 3)) == 0 else ""
        return f"{draw(_column(scope))} {neg}BETWEEN {lo} AND {hi}"
    if form == 4:
        items = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
        return f"{draw(_column(scope, INT_COLS))} IN ({', '.join(map(str, items))})"
    if form == 5:
        return f"{draw(_column(scope))} {draw(st.sampled_from(('>', '<=')))} {draw(_literal())}"
    sub = predicates(scope, depth - 1)
    if form == 6:
        return f"NOT ({draw(sub)})"
    op = draw(st.sampled_from(("AND", "OR")))
    return f"({draw(sub)} {op} {draw(sub)})"


# ---------------------------------------------------------------------------------------------
# Aggregates
# ---------------------------------------------------------------------------------------------


@st.composite
def aggregates(draw: st.DrawFn, scope: _Scope, exact: bool) -> str:
    """An aggregate call; ``exact``: no SUM / AVG over DOUBLE values."""
    func = draw(st.sampled_from(("COUNT", "COUNT*", "SUM", "AVG", "MIN", "MAX", "MEDIAN", "CD")))
    if func == "COUNT*":
        return "COUNT(*)"
    if func == "CD":
        return f"COUNT(DISTINCT {draw(_column(scope))})"
    if func in ("SUM", "AVG") and exact:
        arg = draw(_column(scope, INT_COLS))
    elif draw(st.integers(0, 2)) == 0:
        arg = draw(num_exprs(scope, 1))
    else:
        arg = draw(_column(scope))
    return f"{func}({arg})"


# ---------------------------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------------------------


def _output_mode(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(("", "", "", "RSTREAM ", "ISTREAM ", "DSTREAM ")))


@st.composite
def _select_list(
    draw: st.DrawFn, scope: _Scope, exact: bool, grouped_keys: list[str] | None
) -> tuple[list[str], str]:
    """(SELECT items with aliases, GROUP BY / HAVING tail) for one query level."""
    if grouped_keys is None:  # a plain projection
        if draw(st.integers(0, 7)) == 0:
            return ["*"], ""
        n = draw(st.integers(1, 3))
        items = [
            (draw(_column(scope)) if draw(st.booleans()) else draw(num_exprs(scope)))
            for _ in range(n)
        ]
        return [f"{e} AS c{i}" for i, e in enumerate(items)], ""
    items = list(grouped_keys)
    for _ in range(draw(st.integers(1, 3))):
        agg = draw(aggregates(scope, exact))
        if draw(st.integers(0, 4)) == 0:
            other = draw(aggregates(scope, exact))
            agg = f"({agg} {draw(st.sampled_from(('+', '-', '*')))} {other})"
        items.append(agg)
    tail = f" GROUP BY {', '.join(grouped_keys)}" if grouped_keys else ""
    if draw(st.integers(0, 3)) == 0:
        cond = draw(
            st.sampled_from(
                (
                    f"COUNT(*) > {draw(st.integers(0, 3))}",
                    f"MAX({draw(_column(scope))}) >= {draw(_literal())}",
                    f"MIN({draw(_column(scope))}) < {draw(_literal())}",
                )
            )
        )
        tail += f" HAVING {cond}"
    return [f"{e} AS c{i}" for i, e in enumerate(items)], tail


@st.composite
def _keys(draw: st.DrawFn, scope: _Scope) -> list[str] | None:
    """None (no aggregation), [] (a global aggregate) or 1-2 grouping columns."""
    shape = draw(st.integers(0, 2))
    if shape == 0:
        return None
    if shape == 1 and draw(st.booleans()):
        return []
    cols = draw(st.lists(st.sampled_from(INT_COLS), min_size=1, max_size=2, unique=True))
    q = draw(st.sampled_from(scope.quals))
    return [scope.col(q, c) for c in cols]


@st.composite
def _single(draw: st.DrawFn, mode: str, exact: bool) -> str:
    window = draw(window_clauses("any", allow_count=True))
    qual = draw(st.sampled_from(("a", "a", "")))
    scope = _Scope((qual,))
    src = f"readings {window}" + (f" AS {qual}" if qual else "")
    keys = draw(_keys(scope))
    items, tail = draw(_select_list(scope, exact, keys))
    distinct = "DISTINCT " if draw(st.integers(0, 4)) == 0 else ""
    where = f" WHERE {draw(predicates(scope))}" if draw(st.booleans()) else ""
    return f"SELECT {distinct}{mode}{', '.join(items)} FROM {src}{where}{tail}"


@st.composite
def _join(draw: st.DrawFn, mode: str, exact: bool) -> str:
    n = draw(st.integers(2, 3))
    quals = ("a", "b", "c")[:n]
    scope = _Scope(quals)
    size = "tiny" if n == 3 else "short"
    windows = [draw(window_clauses(size)) for _ in range(n)]
    if n == 2 and draw(st.integers(0, 3)) == 0:
        windows[draw(st.integers(0, 1))] = "[UNBOUNDED]"
    conds = []
    for q in quals[1:]:
        kind = draw(st.sampled_from(("equi", "equi2", "theta", "theta_equi")))
        if kind == "equi":
            conds.append(f"a.plug_id = {q}.plug_id")
        elif kind == "equi2":
            conds.append(f"a.plug_id = {q}.plug_id AND a.house_id = {q}.house_id")
        elif kind == "theta":
            op = draw(st.sampled_from(("<", "<=", ">")))
            conds.append(f"a.value {op} {q}.value")
        else:
            conds.append(f"a.house_id = {q}.house_id AND a.value < {q}.value + 1")
    if "[UNBOUNDED]" in windows and not any("=" in c for c in conds):
        conds[0] = f"a.plug_id = {quals[1]}.plug_id AND {conds[0]}"
    extra = [draw(predicates(scope, 1))] if draw(st.booleans()) else []
    keys = draw(_keys(scope))
    items, tail = draw(_select_list(scope, exact, keys))
    distinct = "DISTINCT " if draw(st.integers(0, 5)) == 0 else ""
    if draw(st.booleans()):  # comma join, everything in WHERE
        src = ", ".join(f"readings {w} AS {q}" for w, q in zip(windows, quals, strict=True))
        where = " AND ".join(conds + extra)
        return f"SELECT {distinct}{mode}{', '.join(items)} FROM {src} WHERE {where}{tail}"
    src = f"readings {windows[0]} AS a"
    for w, q, c in zip(windows[1:], quals[1:], conds, strict=True):
        src += f" JOIN readings {w} AS {q} ON {c}"
    where = f" WHERE {extra[0]}" if extra else ""
    return f"SELECT {distinct}{mode}{', '.join(items)} FROM {src}{where}{tail}"


@st.composite
def _derived(draw: st.DrawFn, mode: str, exact: bool) -> str:
    inner_scope = _Scope(("",))
    keys = draw(st.lists(st.sampled_from(INT_COLS[1:]), min_size=1, max_size=2, unique=True))
    if "plug_id" not in keys and draw(st.booleans()):
        keys = ["plug_id", *keys]
    variant = draw(st.sampled_from(("join_back", "aggregate", "filter")))
    func = draw(st.sampled_from(("MAX", "MIN", "COUNT", "MEDIAN", "AVG", "SUM")))
    if func in ("AVG", "SUM") and (exact or variant != "aggregate"):
        # A SUM / AVG of DOUBLEs is only equal up to rounding across engines (incremental
        # sums drift in the last bits): never compare it in a predicate.
        func = "MAX"
    arg = "*" if func == "COUNT" else "value"
    inner_where = f" WHERE {draw(predicates(inner_scope, 1))}" if draw(st.booleans()) else ""
    inner = (
        f"(SELECT {', '.join(keys)}, {func}({arg}) AS m "
        f"FROM readings {draw(window_clauses('short'))}{inner_where} "
        f"GROUP BY {', '.join(keys)}) AS d"
    )
    if variant == "join_back":
        # Q1-like: the window joined back with its own per-key aggregate.
        on = " AND ".join(f"r.{k} = d.{k}" for k in keys)
        ratio = draw(st.sampled_from(("0.9", "0.5", "1")))
        cond = f"{on} AND r.value >= {ratio} * d.m"
        scope = _Scope(("r",))
        if draw(st.booleans()):
            gkeys = [f"r.{k}" for k in keys]
            items = [*gkeys, "COUNT(*) AS n"]
            if draw(st.booleans()):
                items.append("MAX(d.m) AS top")
            tail = f" GROUP BY {', '.join(gkeys)}"
        else:
            items = ["r.id", "r.value", "d.m"]
            tail = ""
        window = draw(window_clauses("short"))
        where = f" AND {draw(predicates(scope, 1))}" if draw(st.booleans()) else ""
        return (
            f"SELECT {mode}{', '.join(items)} FROM readings {window} AS r, {inner} "
            f"WHERE {cond}{where}{tail}"
        )
    # Q5-like: an aggregate over an aggregate (or a filter over it).
    outer_key = keys[-1]
    if variant == "aggregate":
        ofunc = draw(st.sampled_from(("MAX", "MIN", "COUNT", "SUM")))
        if exact and ofunc == "SUM" and func not in ("COUNT",):
            ofunc = "MAX"
        return (
            f"SELECT {mode}d.{outer_key}, {ofunc}(d.m) AS agg FROM {inner} GROUP BY d.{outer_key}"
        )
    distinct = "DISTINCT " if draw(st.booleans()) else ""
    return f"SELECT {distinct}{mode}d.{outer_key}, d.m FROM {inner} WHERE d.m >= {draw(_literal())}"


@st.composite
def _query(draw: st.DrawFn) -> str:
    mode = _output_mode(draw)
    exact = mode.strip() in ("ISTREAM", "DSTREAM")
    shape = draw(st.sampled_from(("single", "single", "join", "derived")))
    if shape == "single":
        return draw(_single(mode, exact))
    if shape == "join":
        return draw(_join(mode, exact))
    return draw(_derived(mode, exact))


def cql_queries() -> st.SearchStrategy[str]:
    """Random small CQL queries over `readings` that bind against the smart-plug catalog."""
    return _query().filter(binds)
