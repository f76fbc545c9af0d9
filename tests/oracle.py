"""The test oracle: a deliberately naive reference implementation of docs/semantics.md.

It shares nothing with hycq's binder, plan IR or engines. It parses the query with our CQL
dialect (for the sqlglot AST only), and then, for every slide instant ``T``, rewrites the AST
so that each windowed stream reference becomes a DuckDB subquery over the stream's valid
input restricted to the window's contents at ``T``, and runs the whole query from scratch on
DuckDB. The R2S operator (RSTREAM / ISTREAM / DSTREAM) is applied afterwards in Python as a bag
difference between consecutive instants, with the row-equality rule of docs/semantics.md
(floats within the comparison tolerance, NaN equal to itself): :func:`r2s_difference`. This
is slow by design: use it on small data.

The truth comes from event time alone: every stream's timestamps are converted to the query's
time base (the finest time unit among the streams it reads), each stream is sorted by event
time (stable: ties keep their arrival order, which ROWS windows use), and every plan instant
is evaluated over all the well-formed tuples. Nothing is dropped as late: an engine may drop
a tuple that arrives out of order in its own stream (docs/semantics.md); tests compute those
with ``tests.lateness`` and give the oracle the input without them. A count-sliding window
(``[ROWS n SLIDE m]``) is defined on the arrival sequence, so its stream keeps arrival order.

Example:
    >>> import pyarrow as pa
    >>> from optimizer.sql.catalog import parse_catalog_text
    >>> cat = parse_catalog_text('''
    ... [streams.readings]
    ... timestamp = "ts"
    ... [streams.readings.columns]
    ... id = "BIGINT"
    ... ts = "BIGINT"
    ... value = "DOUBLE"
    ... ''')
    >>> data = pa.table({"id": [1, 2], "ts": [10, 11], "value": [1.0, 2.0]})
    >>> out = oracle("SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS]", cat,
    ...              {"readings": data})
    >>> list(zip(out["n"].to_pylist(), out["_ts"].to_pylist()))
    [(1, 10), (2, 11)]
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from duckdb import func as duckdb_func
from sqlglot import exp

from optimizer.ir.catalog import TIME_UNITS_MS, Catalog, StreamDef
from optimizer.ir.errors import Source
from optimizer.sql.dialect import TIME_UNITS
from optimizer.sql.parse import parse_select

#: Name of the slide-instant column of every result stream.
TS = "_ts"
#: Arrival-sequence column added to the registered input tables (1-based, valid tuples only).
SEQ = "__oracle_seq"

__all__ = [
    "TS",
    "WindowSpec",
    "assert_same_stream",
    "oracle",
    "parse_windows",
    "plan_instants",
    "r2s_difference",
    "result_rows",
    "row_is_well_formed",
    "sort_stream",
    "stream_differences",
    "time_base",
    "well_formed_inputs",
]


# ---------------------------------------------------------------------------------------------
# Windows of a query
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowSpec:
    """One windowed stream reference, in ticks of the query's time base.

    ``kind`` is range | rows | now | unbounded; ``size`` is the range in ticks (RANGE, NOW: 1)
    or the row count (ROWS); ``slide`` is in ticks, or in tuples when ``count_slide``.
    ``key`` identifies the reference in the AST (the offset of its ``[``).
    """

    key: int
    stream: str
    kind: str
    size: int | None
    slide: int
    count_slide: bool


def _ticks(amount: int, unit: str, base: str, stream: StreamDef) -> int:
    ms = amount * TIME_UNITS[unit.upper()]
    tick = TIME_UNITS_MS[base]
    if ms % tick:
        raise ValueError(f"{amount} {unit} is not a whole number of ticks of {stream.name}")
    return ms // tick


def _windowed_tables(tree: exp.Expression) -> list[exp.Table]:
    return [t for t in tree.find_all(exp.Table) if t.args.get("cql_window") is not None]


def time_base(tree: exp.Expression, catalog: Catalog) -> str:
    """The query's time unit: the finest among the streams it reads (docs/semantics.md)."""
    units = set()
    for table in _windowed_tables(tree):
        stream = catalog.get(table.name)
        if stream is not None:
            units.add(stream.time_unit)
    return min(units, key=lambda u: TIME_UNITS_MS[u]) if units else "s"


def parse_windows(tree: exp.Expression, catalog: Catalog) -> list[WindowSpec]:
    """The window of every stream reference of a parsed query (any nesting level), in ticks
    of the query's time base. The default slide is one tick of the stream's own unit."""
    base = time_base(tree, catalog)
    specs = []
    for table in _windowed_tables(tree):
        stream = catalog.get(table.name)
        if stream is None:
            raise ValueError(f"unknown stream {table.name!r}")
        w = table.args["cql_window"]
        kind = str(w.args["kind"])
        size: int | None = None
        if kind == "range":
            size = _ticks(int(w.args["size"]), str(w.args["unit"]), base, stream)
        elif kind == "rows":
            size = int(w.args["size"])
        elif kind == "now":
            size = 1
        slide = TIME_UNITS_MS[stream.time_unit] // TIME_UNITS_MS[base]
        count_slide = False
        if w.args.get("slide") is not None:
            if w.args.get("slide_unit") is None:
                slide, count_slide = int(w.args["slide"]), True
            else:
                slide = _ticks(int(w.args["slide"]), str(w.args["slide_unit"]), base, stream)
        specs.append(
            WindowSpec(int(w.args["start"]), stream.name.lower(), kind, size, slide, count_slide)
        )
    return specs


def _ceil_to(x: int, s: int) -> int:
    return -(-x // s) * s


def plan_instants(slides: Iterable[int], min_ts: int, max_ts: int) -> list[int]:
    """The plan's slide instants: union over slides ``s`` of the multiples of ``s`` in
    ``[ceil(min_ts / s) * s, ceil(max_ts / s) * s]``."""
    out: set[int] = set()
    for s in set(slides):
        out.update(range(_ceil_to(min_ts, s), _ceil_to(max_ts, s) + 1, s))
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# Valid input: well-formed tuples, in the query's time base, in event-time order
# ---------------------------------------------------------------------------------------------


def row_is_well_formed(values: Sequence[Any]) -> bool:
    """semantics.md: a tuple with a NULL, NaN or infinite field is rejected."""
    for v in values:
        if v is None:
            return False
        if isinstance(v, float) and not math.isfinite(v):
            return False
    return True


def _well_formed(
    windows: list[WindowSpec], catalog: Catalog, inputs: dict[str, pa.Table]
) -> dict[str, pa.Table]:
    """Per stream the query reads: its well-formed tuples (catalog columns), arrival order."""
    by_name = {k.lower(): v for k, v in inputs.items()}
    out: dict[str, pa.Table] = {}
    for name in sorted({w.stream for w in windows}):
        stream = catalog.get(name)
        assert stream is not None
        cols = [c.name for c in stream.columns]
        table = by_name.get(name)
        if table is None:
            table = _empty_stream_table(stream)
        table = table.select(cols)
        rows = zip(*(table.column(c).to_pylist() for c in cols), strict=True)
        ok = [row_is_well_formed(r) for r in rows]
        out[name] = table.filter(pa.array(ok, pa.bool_())) if table.num_rows else table
    return out


def well_formed_inputs(
    query_text: str, catalog: Catalog, inputs: dict[str, pa.Table]
) -> dict[str, pa.Table]:
    """The well-formed tuples of every stream the query reads, in arrival (row) order: rows
    with a NULL, NaN or infinite field are dropped (every engine dead-letters them)."""
    tree = parse_select(Source(query_text))
    return _well_formed(parse_windows(tree, catalog), catalog, inputs)


def _event_time_inputs(
    tree: exp.Expression, windows: list[WindowSpec], catalog: Catalog, inputs: dict[str, pa.Table]
) -> dict[str, pa.Table]:
    """The oracle's input: well-formed tuples, timestamps in the query's time base, each
    stream sorted by event time (stable). A count-sliding query keeps arrival order: its
    windows are defined on the arrival sequence (semantics.md)."""
    base = time_base(tree, catalog)
    count_based = any(w.count_slide for w in windows)
    out = {}
    for name, table in _well_formed(windows, catalog, inputs).items():
        stream = catalog.get(name)
        assert stream is not None
        factor = TIME_UNITS_MS[stream.time_unit] // TIME_UNITS_MS[base]
        if factor != 1:
            i = table.column_names.index(stream.timestamp)
            ts = pa.array([t * factor for t in table.column(i).to_pylist()], pa.int64())
            table = table.set_column(i, stream.timestamp, ts.cast(table.schema.field(i).type))
        if not count_based and table.num_rows:
            order = sorted(
                range(table.num_rows), key=table.column(stream.timestamp).to_pylist().__getitem__
            )
            table = table.take(pa.array(order, pa.int64()))
        out[name] = table
    return out


def _empty_stream_table(stream: StreamDef) -> pa.Table:
    arrow = {
        "BIGINT": pa.int64(),
        "INTEGER": pa.int32(),
        "DOUBLE": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "VARCHAR": pa.string(),
    }
    return pa.schema([(c.name, arrow[c.dtype.value]) for c in stream.columns]).empty_table()


# ---------------------------------------------------------------------------------------------
# Query rewriting
# ---------------------------------------------------------------------------------------------


def _input_name(stream: str) -> str:
    return f"__oracle_in_{stream}"


def _marker(key: int, which: str) -> str:
    return f"__ORACLE_{which}_{key}__"


def _window_subquery(table: exp.Table, spec: WindowSpec, stream: StreamDef) -> exp.Subquery:
    """``(SELECT cols FROM __oracle_in_<stream> WHERE <window>) AS alias``.

    The window's bounds are markers (``__ORACLE_LO_<key>__``, ``__ORACLE_HI_<key>__``) that
    :func:`_instant_sql` replaces by the bounds at each instant: the AST is rewritten once.
    """
    cols: list[exp.Expression] = []
    for c in stream.columns:
        col: exp.Expression = exp.column(c.name, quoted=True)
        if c.dtype.value == "INTEGER":
            # hycq widens integer arithmetic to BIGINT: so does the oracle.
            col = exp.Cast(this=col, to=exp.DataType.build("BIGINT"))
        cols.append(exp.alias_(col, c.name, quoted=True))
    ts = exp.column(stream.timestamp, quoted=True)
    seq = exp.column(SEQ, quoted=True)
    lo = exp.Var(this=_marker(spec.key, "LO"))
    hi = exp.Var(this=_marker(spec.key, "HI"))
    inner = exp.select(*cols).from_(exp.to_table(_input_name(spec.stream)))
    if spec.count_slide:  # lo < seq <= hi
        inner = inner.where(
            exp.and_(exp.GT(this=seq, expression=lo), exp.LTE(this=seq.copy(), expression=hi))
        )
    else:  # lo < ts <= hi; lo is unused for ROWS and UNBOUNDED
        cond: exp.Expression = exp.LTE(this=ts, expression=hi)
        if spec.kind in ("range", "now"):
            cond = exp.and_(exp.GT(this=ts.copy(), expression=lo), cond)
        inner = inner.where(cond)
        if spec.kind == "rows":
            assert spec.size is not None
            # The n most recent tuples: by timestamp, ties by arrival (docs/semantics.md).
            inner = inner.order_by(
                exp.Ordered(this=ts.copy(), desc=True), exp.Ordered(this=seq, desc=True)
            ).limit(spec.size)
    alias = table.args.get("alias")
    alias = exp.TableAlias(this=table.this.copy()) if alias is None else alias.copy()
    return exp.Subquery(this=inner, alias=alias)


def _duckdb_to_hycq(tree: exp.Expression) -> exp.Expression:
    """Adjust the few places where DuckDB's defaults differ from semantics.md.

    * Decimal literals are DOUBLE in hycq (DECIMAL in DuckDB): wrap them in CAST(.. AS DOUBLE).
    """

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Literal) and not node.is_string and not str(node.this).isdigit():
            return exp.Cast(this=node.copy(), to=exp.DataType.build("DOUBLE"))
        return node

    return tree.transform(fix, copy=False)


#: The oracle's correctly rounded sum of a list of doubles (a DuckDB UDF, :func:`_fsum`).
ORACLE_SUM = "__oracle_fsum"


def _fsum(values: list[float | None] | None) -> float | None:
    """semantics.md, "Floating-point sums": the exact sum of the non-NULL values rounded
    once (``math.fsum``, exact rationals where fsum's partials overflow), IEEE's answer for
    NaN and the infinities, NULL for no value. Written without hycq's kernel on purpose."""
    xs = [v for v in values or () if v is not None]
    if not xs:
        return None
    if any(math.isnan(v) for v in xs) or (math.inf in xs and -math.inf in xs):
        return math.nan
    if math.inf in xs or -math.inf in xs:
        return math.inf if math.inf in xs else -math.inf
    try:
        return math.fsum(xs) + 0.0  # an exact zero is +0.0
    except OverflowError:
        exact = sum((Fraction(v) for v in xs), Fraction(0))
        try:
            return float(exact)
        except OverflowError:
            return math.inf if exact > 0 else -math.inf


def _typed(tree: exp.Select, catalog: Catalog) -> exp.Select:
    """A copy of ``tree`` with sqlglot's inferred types (``.type``) over the catalog's
    column types: which values are DOUBLE is decided here, not by hycq's binder. Its nodes
    of one kind appear in the same order as in ``tree`` (``find_all``)."""
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    typed = tree.copy()
    schema = {
        _input_name(s.name.lower()): {c.name: c.dtype.value for c in s.columns}
        for s in catalog.streams.values()
    }
    try:
        return annotate_types(
            qualify(typed, schema=schema, dialect="duckdb", validate_qualify_columns=False),
            schema=schema,
            dialect="duckdb",
        )
    except Exception as err:  # the oracle cannot decide: say so
        raise ValueError(f"the oracle cannot type the query: {err}") from err


def _is_double(node: exp.Expression) -> bool:
    return node.type is not None and node.type.this in _FLOAT_TYPES


def _pairs(typed: exp.Expression, tree: exp.Expression, *kinds: type) -> list[tuple[Any, Any]]:
    """The nodes of ``kinds`` in the typed copy and in ``tree``, paired in order."""
    t: list[Any] = list(typed.find_all(*kinds))
    o: list[Any] = list(tree.find_all(*kinds))
    if len(t) != len(o):
        raise ValueError("the oracle lost track of the query's nodes while typing them")
    return list(zip(t, o, strict=True))


def _fsum_lists(lists: pa.Array | pa.ChunkedArray) -> pa.Array:
    """:func:`_fsum` of every list (DuckDB's Arrow UDF form: it keeps a NaN result)."""
    return pa.array([_fsum(xs) for xs in lists.to_pylist()], pa.float64())


def _exact_sums(tree: exp.Select, typed: exp.Select) -> exp.Select:
    """SUM of a DOUBLE becomes ``__oracle_fsum(list(x))``, AVG of any number
    ``__oracle_fsum(list(CAST(x AS DOUBLE))) / COUNT(x)`` (semantics.md: the correctly
    rounded sum, divided by the count)."""
    for t, node in _pairs(typed, tree, exp.Sum, exp.Avg):
        if not (isinstance(t, exp.Avg) or _is_double(t.this)):
            continue
        arg = node.this
        values = exp.Cast(this=arg.copy(), to=exp.DataType.build("DOUBLE"))
        total = exp.Anonymous(
            this=ORACLE_SUM, expressions=[exp.Anonymous(this="list", expressions=[values])]
        )
        if isinstance(node, exp.Avg):
            count = exp.Cast(this=exp.Count(this=arg.copy()), to=exp.DataType.build("DOUBLE"))
            node.replace(exp.Paren(this=exp.Div(this=total, expression=count)))
        else:
            node.replace(total)
    return tree


def _plus_zero(e: exp.Expression) -> exp.Expression:
    """``(e + 0.0)``: IEEE addition makes ``-0.0`` ``+0.0`` and keeps every other value."""
    zero = exp.Cast(this=exp.Literal.number("0.0"), to=exp.DataType.build("DOUBLE"))
    return exp.Paren(this=exp.Add(this=exp.Paren(this=e.copy()), expression=zero))


def _signed_zeros(tree: exp.Select, typed: exp.Select) -> exp.Select:
    """semantics.md, "Signed zeros": a DOUBLE ``-0.0`` is ``+0.0`` wherever one of equal
    values is kept (DuckDB keeps the first to arrive): MIN, MAX, MEDIAN, COUNT(DISTINCT),
    LEAST / GREATEST and IN operands, GROUP BY keys (and the select items naming them),
    and the values of SELECT DISTINCT."""
    for t, node in _pairs(
        typed, tree, exp.Max, exp.Min, exp.Median, exp.Least, exp.Greatest, exp.In
    ):
        args = [("this", node.this, t.this)] + [
            ("expressions", o, ti) for o, ti in zip(node.expressions, t.expressions, strict=True)
        ]
        for _, o, ti in args:
            if o is not None and _is_double(ti):
                o.replace(_plus_zero(o))
    for t, node in _pairs(typed, tree, exp.Distinct):
        if isinstance(node.parent, exp.Count):
            for o, ti in zip(node.expressions, t.expressions, strict=True):
                if _is_double(ti):
                    o.replace(_plus_zero(o))
    for t, select in _pairs(typed, tree, exp.Select):
        group = select.args.get("group")
        if group is not None:
            t_group = t.args["group"]
            for o, ti in zip(list(group.expressions), t_group.expressions, strict=True):
                if _is_double(ti):
                    _canonical_key(select, o)
        if select.args.get("distinct") is not None:
            if any(o.is_star for o in select.expressions):  # the typed copy's, expanded
                select.set("expressions", [e.copy() for e in t.expressions])
            for o, ti in zip(list(select.expressions), t.expressions, strict=True):
                if _is_double(ti.this if isinstance(ti, exp.Alias) else ti):
                    _canonical_item(o)
    return tree


def _canonical_item(item: exp.Expression) -> None:
    """Select item ``item`` as ``(item + 0.0)``, under its own name (a column keeps it)."""
    if isinstance(item, exp.Alias):
        item.this.replace(_plus_zero(item.this))
    elif item.alias_or_name:
        item.replace(exp.alias_(_plus_zero(item), item.alias_or_name, quoted=True))
    else:  # an unnamed expression: the result is compared by position
        item.replace(_plus_zero(item))


def _canonical_key(select: exp.Select, key: exp.Expression) -> None:
    """Group ``select`` by ``(key + 0.0)``: the key in GROUP BY, and every occurrence of it
    outside an aggregate in the select items and HAVING (a bare select item keeps its
    name)."""
    canon = _plus_zero(key)
    pattern = key.copy()

    def swap(node: exp.Expression) -> exp.Expression:
        if node == pattern and node.find_ancestor(exp.AggFunc) is None:
            return canon.copy()
        return node

    for item in list(select.expressions):
        if item == pattern:
            _canonical_item(item)
        else:
            item.transform(swap, copy=False)
    having = select.args.get("having")
    if having is not None:
        having.transform(swap, copy=False)
    key.replace(canon)


_FLOAT_TYPES = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}


def _template_sql(tree: exp.Select, specs: dict[int, WindowSpec], catalog: Catalog) -> str:
    """The query as DuckDB SQL with every windowed reference replaced by its subquery."""
    tree = tree.copy()

    def repl(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and node.args.get("cql_window") is not None:
            spec = specs[int(node.args["cql_window"].args["start"])]
            stream = catalog.get(spec.stream)
            assert stream is not None
            return _window_subquery(node, spec, stream)
        return node

    tree = tree.transform(repl, copy=False)
    typed = _typed(tree, catalog)
    return _exact_sums(_signed_zeros(tree, typed), typed).sql(dialect="duckdb")


def _instant_sql(template: str, bounds: dict[int, tuple[int, int]]) -> str:
    """The template with the window bounds of one instant (or count evaluation)."""
    sql = template
    for key, (lo, hi) in bounds.items():
        sql = sql.replace(_marker(key, "LO"), f"({lo})").replace(_marker(key, "HI"), f"({hi})")
    return sql


def _prepare(tree: exp.Select) -> tuple[exp.Select, list[str]]:
    """Strip the R2S modifier; return the template and the output modes written."""
    tree = tree.copy()
    mods = [m.name.upper() for m in tree.args.get("operation_modifiers") or []]
    tree.set("operation_modifiers", None)
    tree = _duckdb_to_hycq(tree)
    return tree, mods


# ---------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------


def _with_seq(table: pa.Table) -> pa.Table:
    return table.append_column(SEQ, pa.array(range(1, table.num_rows + 1), pa.int64()))


def _dedupe(names: list[str]) -> list[str]:
    used: set[str] = set()
    out = []
    for base in names:
        name, n = base, 0
        while name.lower() in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name.lower())
        out.append(name)
    return out


def _normalize_result(table: pa.Table) -> pa.Table:
    cols = []
    for col in table.columns:
        t = col.type
        if pa.types.is_decimal(t):
            col = col.cast(pa.int64()) if t.scale == 0 else col.cast(pa.float64())
        cols.append(col)
    return pa.table(cols, names=_dedupe(table.column_names))


def oracle(query_text: str, catalog: Catalog, inputs: dict[str, pa.Table]) -> pa.Table:
    """The query's full result stream: its output columns (by position) plus int64 ``_ts``.

    ``inputs`` maps stream names to tables in arrival order; rows with a NULL, NaN or
    infinite field are dropped, and every other tuple counts, by its event time (see the
    module docstring: lateness is not the oracle's business).
    """
    parsed = parse_select(Source(query_text))
    windows = parse_windows(parsed, catalog)
    tree, mods = _prepare(parsed)
    mode = next((m for m in mods if m in ("ISTREAM", "DSTREAM", "RSTREAM")), "RSTREAM")
    template = _template_sql(tree, {w.key: w for w in windows}, catalog)
    valid = _event_time_inputs(parsed, windows, catalog, inputs)
    evaluations = _evaluations(windows, catalog, valid)

    con = duckdb.connect()
    try:
        con.execute("SET error_on_division_by_zero=false")
        con.execute("SET threads=1")
        con.create_function(
            ORACLE_SUM,
            _fsum_lists,
            [duckdb.list_type("DOUBLE")],
            "DOUBLE",
            type=duckdb_func.PythonUDFType.ARROW,  # a native UDF's NaN result would be NULL
            null_handling=duckdb_func.FunctionNullHandling.SPECIAL,
            side_effects=False,
        )
        for name, table in valid.items():
            con.register("__oracle_arrow", _with_seq(table))
            con.execute(f"CREATE TABLE {_input_name(name)} AS SELECT * FROM __oracle_arrow")
            con.unregister("__oracle_arrow")
        results = [
            (t, _normalize_result(con.sql(_instant_sql(template, bounds)).to_arrow_table()))
            for t, bounds in evaluations
        ]
        # The output schema, also when there is no instant at all.
        probe = _normalize_result(
            con.sql(_instant_sql(template, {w.key: (0, 0) for w in windows})).to_arrow_table()
        )
    finally:
        con.close()

    schema = _unify_schemas([r for _, r in results] + [probe])
    out_schema = schema.append(pa.field(TS, pa.int64()))
    if mode == "RSTREAM":
        parts = [
            r.cast(schema).append_column(TS, pa.array([t] * r.num_rows, pa.int64()))
            for t, r in results
            if r.num_rows
        ]
        return pa.concat_tables(parts) if parts else out_schema.empty_table()

    rows_out: list[tuple[Any, ...]] = []
    prev: list[tuple[Any, ...]] = []
    for t, r in results:
        rows = _rows(r)
        entered, left = r2s_difference(rows, prev)
        rows_out.extend((*row, t) for row in (entered if mode == "ISTREAM" else left))
        prev = rows
    columns = list(zip(*rows_out, strict=True)) if rows_out else [[] for _ in out_schema]
    return pa.table(
        [pa.array(list(c), f.type) for c, f in zip(columns, out_schema, strict=True)],
        schema=out_schema,
    )


#: docs/semantics.md, ISTREAM/DSTREAM: floats within this distance are the same value.
R2S_REL_TOL = 1e-9
R2S_ABS_TOL = 1e-9


def r2s_difference(
    now: list[tuple[Any, ...]], before: list[tuple[Any, ...]]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(rows of R(T) that are new, rows of R(T') that are gone), by docs/semantics.md.

    Rows are the same when they agree exactly on every non-float value and their floats are
    close (NaN to NaN, infinity to the same infinity, finite within 1e-9 relative or 1e-9
    absolute). Identical rows pair off first; the rest pair within each group of rows that
    agree on every non-float value, both sides sorted by their floats (NaN last), each row
    of R(T) taking the first unpaired close row of R(T').
    """
    # 1. identical rows (NaN identical to NaN) pair off.
    budget = Counter(_key(r) for r in now) & Counter(_key(r) for r in before)
    rest_now, rest_before = [], []
    for rows, rest in ((now, rest_now), (before, rest_before)):
        left = Counter(budget)
        for r in rows:
            k = _key(r)
            if left[k] > 0:
                left[k] -= 1
            else:
                rest.append(r)

    # 2. close rows pair off, group by group, in sorted order.
    def group(r: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple("<float>" if isinstance(v, float) else _key_value(v) for v in r)

    def floats(r: tuple[Any, ...]) -> list[tuple[bool, float]]:
        return [(math.isnan(v), 0.0 if math.isnan(v) else v) for v in r if isinstance(v, float)]

    def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
        for x, y in zip(a, b, strict=True):
            if not isinstance(x, float):
                continue
            if math.isnan(x) or math.isnan(y):
                if not (math.isnan(x) and math.isnan(y)):
                    return False
            elif math.isinf(x) or math.isinf(y):
                if x != y:
                    return False
            elif abs(x - y) > max(R2S_REL_TOL * max(abs(x), abs(y)), R2S_ABS_TOL):
                return False
        return True

    unpaired_before = sorted(rest_before, key=floats)
    entered = []
    for r in sorted(rest_now, key=floats):
        g = group(r)
        for i, b in enumerate(unpaired_before):
            if group(b) == g and same(r, b):
                del unpaired_before[i]
                break
        else:
            entered.append(r)
    return _in_order(entered, rest_now), _in_order(unpaired_before, rest_before)


def _in_order(chosen: list[tuple[Any, ...]], rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The ``chosen`` rows (a sub-bag of ``rows``, same objects) in the order of ``rows``."""
    ids = Counter(id(r) for r in chosen)
    out = []
    for r in rows:
        if ids[id(r)] > 0:
            ids[id(r)] -= 1
            out.append(r)
    return out


def _evaluations(
    windows: list[WindowSpec], catalog: Catalog, valid: dict[str, pa.Table]
) -> list[tuple[int, dict[int, tuple[int, int]]]]:
    """(``_ts``, {window key: (lo, hi)}) of every evaluation, in order.

    Time-sliding windows: one evaluation per plan instant T, window ``w`` bounded by
    ``T_w = floor(T / s_w) * s_w`` (``lo`` = ``T_w - range`` for RANGE and NOW). A count-sliding
    window: evaluation k holds valid tuples ``k*m - n + 1 .. k*m`` (``lo < seq <= hi``).
    """
    count_windows = [w for w in windows if w.count_slide]
    out: list[tuple[int, dict[int, tuple[int, int]]]] = []
    if count_windows:
        if len(windows) != 1:
            raise ValueError("a query with a count-sliding window may have no other window")
        (w,) = count_windows
        assert w.size is not None
        ts = valid[w.stream].column(_ts_col(catalog, w.stream)).to_pylist()
        for k in range(1, len(ts) // w.slide + 1):
            end = k * w.slide
            out.append((ts[end - 1], {w.key: (end - w.size, end)}))
        return out
    all_ts = [
        t for name, table in valid.items() for t in table.column(_ts_col(catalog, name)).to_pylist()
    ]
    if not all_ts:
        return out
    for t in plan_instants([w.slide for w in windows], min(all_ts), max(all_ts)):
        bounds = {}
        for w in windows:
            tw = (t // w.slide) * w.slide
            lo = tw - (w.size or 0) if w.kind in ("range", "now") else 0
            bounds[w.key] = (lo, tw)
        out.append((t, bounds))
    return out


def _ts_col(catalog: Catalog, name: str) -> str:
    stream = catalog.get(name)
    assert stream is not None
    return stream.timestamp


def _unify_schemas(tables: list[pa.Table]) -> pa.Schema:
    """One schema for all instants (a column that is all NULL at one instant is typed NULL)."""
    fields = list(tables[0].schema)
    for t in tables[1:]:
        for i, f in enumerate(t.schema):
            if pa.types.is_null(fields[i].type) and not pa.types.is_null(f.type):
                fields[i] = pa.field(fields[i].name, f.type)
    return pa.schema(fields)


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = [c.to_pylist() for c in table.columns]
    return list(zip(*cols, strict=True)) if cols else [() for _ in range(table.num_rows)]


class _NaN:
    """Hashable stand-in for NaN so that NaN == NaN in bag keys."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return 0x7FF8

    def __repr__(self) -> str:
        return "nan"


_NAN = _NaN()


def _key_value(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return _NAN
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def _key(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(_key_value(v) for v in row)


# ---------------------------------------------------------------------------------------------
# Comparing result streams
# ---------------------------------------------------------------------------------------------


def _value_eq(a: Any, b: Any, rel: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Decimal):
        a = _key_value(a)
    if isinstance(b, Decimal):
        b = _key_value(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        if math.isinf(fa) or math.isinf(fb):
            return fa == fb
        return math.isclose(fa, fb, rel_tol=rel, abs_tol=1e-9)
    return bool(a == b)


def _row_eq(a: Sequence[Any], b: Sequence[Any], rel: float) -> bool:
    return len(a) == len(b) and all(_value_eq(x, y, rel) for x, y in zip(a, b, strict=True))


def _split(table: pa.Table, what: str) -> dict[int, list[tuple[Any, ...]]]:
    if TS not in table.column_names:
        raise AssertionError(f"{what} has no {TS} column: {table.column_names}")
    data = table.drop_columns([TS])
    ts = table.column(TS).to_pylist()
    by_ts: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for t, row in zip(ts, _rows(data), strict=True):
        by_ts[int(t)].append(row)
    return by_ts


def _match(
    actual: list[tuple[Any, ...]], expected: list[tuple[Any, ...]], rel: float
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(extra rows in actual, missing rows of expected) of a bag comparison with tolerance."""
    # Exact matches first (cheap), then a greedy tolerant matching of the rest.
    a_count = Counter(_key(r) for r in actual)
    e_count = Counter(_key(r) for r in expected)
    common = a_count & e_count
    rest_a, rest_e = [], []
    used = Counter(common)
    for r in actual:
        k = _key(r)
        if used[k] > 0:
            used[k] -= 1
        else:
            rest_a.append(r)
    used = Counter(common)
    for r in expected:
        k = _key(r)
        if used[k] > 0:
            used[k] -= 1
        else:
            rest_e.append(r)
    missing = []
    for e in rest_e:
        for i, a in enumerate(rest_a):
            if _row_eq(a, e, rel):
                del rest_a[i]
                break
        else:
            missing.append(e)
    return rest_a, missing


def _fmt_rows(rows: list[tuple[Any, ...]], limit: int = 10) -> str:
    shown = "\n".join(f"      {r!r}" for r in sorted(rows, key=repr)[:limit])
    more = f"\n      ... {len(rows) - limit} more" if len(rows) > limit else ""
    return shown + more


def stream_differences(
    actual: pa.Table, expected: pa.Table, rel: float = 1e-9
) -> list[tuple[int, list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """``(_ts, extra rows in actual, missing rows of expected)`` for every instant where the
    two streams differ as bags (columns by position, the tolerance of
    :func:`assert_same_stream`); empty when they are equal."""
    a_by, e_by = _split(actual, "actual"), _split(expected, "expected")
    problems = []
    for t in sorted(set(a_by) | set(e_by)):
        extra, missing = _match(a_by.get(t, []), e_by.get(t, []), rel)
        if extra or missing:
            problems.append((t, extra, missing))
    return problems


def assert_same_stream(
    actual: pa.Table, expected: pa.Table, rel: float = 1e-9, exact: bool = True
) -> None:
    """Assert two result streams are equal as bags per ``_ts``, comparing columns by position.

    By default floats match bit for bit (``-0.0`` is not ``0.0``; every NaN is one): every
    result docs/semantics.md makes exact (SUM, AVG, MEDIAN, MIN, MAX, IEEE arithmetic, casts,
    ROUND) is the same bits on every engine, placement, batch size, migration and resume. A
    float column matched with an integer one (DuckDB's ROUND/FLOOR/CEIL of an integer is an
    integer, hycq's a DOUBLE) compares the integer as a double. ``exact=False`` is for what
    is not exact (the libm functions on Spark, tests of the comparison itself): floats then
    match within ``rel`` relative or 1e-9 absolute; NaN == NaN; None == None.
    """
    if exact:
        actual, expected = _bits(actual, expected), _bits(expected, actual)
    n_a, n_e = actual.num_columns, expected.num_columns
    if n_a != n_e:
        raise AssertionError(
            f"column count differs: actual {actual.column_names} vs expected "
            f"{expected.column_names}"
        )
    a_by, e_by = _split(actual, "actual"), _split(expected, "expected")
    problems = stream_differences(actual, expected, rel)
    if not problems:
        return
    t, extra, missing = problems[0]
    cols = [c for c in expected.column_names if c != TS]
    msg = [
        f"result streams differ at {len(problems)} instant(s); first at _ts={t} "
        f"(actual {len(a_by.get(t, []))} rows, expected {len(e_by.get(t, []))} rows)",
        f"  columns (by position): {cols}",
    ]
    if missing:
        msg.append(f"  missing (expected, not in actual): {len(missing)}\n{_fmt_rows(missing)}")
    if extra:
        msg.append(f"  extra (in actual, not expected): {len(extra)}\n{_fmt_rows(extra)}")
    other = [p[0] for p in problems[1:6]]
    if other:
        msg.append(f"  other differing _ts: {other}{' ...' if len(problems) > 6 else ''}")
    raise AssertionError("\n".join(msg))


def _bits(table: pa.Table, other: pa.Table | None = None) -> pa.Table:
    """``table`` with every DOUBLE column replaced by the int64 of its bits (one NaN), and
    every integer column whose counterpart (by position) in ``other`` is a float too."""
    names = table.column_names
    mine = [i for i, n in enumerate(names) if n != TS]
    theirs = [] if other is None else [i for i, n in enumerate(other.column_names) if n != TS]
    counterpart = dict(zip(mine, theirs, strict=False)) if len(mine) == len(theirs) else {}
    cols = []
    for i, col in enumerate(table.columns):
        floating = names[i] != TS and pa.types.is_floating(col.type)
        if names[i] != TS and i in counterpart and pa.types.is_integer(col.type):
            assert other is not None
            floating = pa.types.is_floating(other.column(counterpart[i]).type)
        if floating:
            arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            arr = arr.cast(pa.float64(), safe=False)
            valid = arr.is_valid().to_numpy(zero_copy_only=False)
            values = arr.fill_null(0.0).to_numpy(zero_copy_only=False).copy()
            values[values != values] = math.nan  # one NaN
            col = pa.array(values.view("int64"), pa.int64(), mask=~valid)
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def result_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows of a result stream sorted by ``_ts`` then by value (for readable assertions)."""
    names = table.column_names  # by position: a table may name two columns alike
    rows = _rows(table.select([i for i, c in enumerate(names) if c != TS] + [names.index(TS)]))
    return sorted(rows, key=lambda r: (r[-1], repr(r[:-1])))


def sort_stream(table: pa.Table) -> pa.Table:
    """The stream sorted by ``_ts`` (stable), for display."""
    return table.take(pc.sort_indices(table, sort_keys=[(TS, "ascending")]))
