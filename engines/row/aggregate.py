"""Grouped aggregation over deltas.

One concept in one module (~750 lines): the state layout of every aggregate mode, the code
generated for its insert/delete/final steps and the operator that runs that code share the
table below; splitting them would spread one slot layout over several files.

Per group the operator keeps a state list ``st``: ``st[0]`` counts the group's tuples, then
one or more slots per aggregate:

========================  ===========================================  ====================
aggregate                 state                                        per insert/delete
========================  ===========================================  ====================
COUNT(*)                  st[0]                                        O(1)
COUNT(x)                  non-NULL count                               O(1)
SUM, AVG of integers      non-NULL count (if x can be NULL) and the    O(1)
                          exact integer sum
SUM, AVG of DOUBLE        non-NULL count (if x can be NULL) and the    O(1)
                          exact sum: integers of 2**-80 and 2**-1074
                          units, a count of +-inf and NaN
MIN / MAX, FIFO input     monotonic deque                              amortised O(1)
MIN / MAX, other input    multiset (value -> count), rescan on output  O(1) + O(d) rescan
MEDIAN                    multiset, sorted on output (rescan)          O(1) + O(d log d)
COUNT(DISTINCT x)         multiset; its size                           O(1)
========================  ===========================================  ====================

"FIFO input" means the deletes reach the aggregate in the order their tuples were inserted,
which holds when the input is a sliding window seen through selects and projects only; the
executor decides this statically. The update loops are generated Python (see
``engines.row.compile``), specialised to the aggregate list, so the per-tuple path is a
handful of list, dict and arithmetic operations.

Exact sums (docs/semantics.md, "Floating-point sums"): the SUM of DOUBLE values is the exact
sum of the values in the window rounded once to the nearest double, and AVG that SUM divided
by the count, so the result depends on the multiset of values only, never on the order they
arrived or left in (every engine gives the same bits). A finite double ``v`` with ``|v| >
2**-28`` is a whole number of ``2**-80`` units (its last mantissa bit weighs at least
``2**-80``) and ``int(v * 2.0**80)`` is that number exactly (scaling by a power of two is
exact, and the float ``v * 2.0**80`` is an integer): it is added to (or, for a delete,
subtracted from) the group's *coarse* Python integer, about 100 ns per value. Smaller
values, finite values too large to scale and the non-finite ones take a rarer path
(``_rare``): a *fine* integer of ``2**-1074`` units (every finite double is a whole number of
them), or a count of +-inf and NaN. Subtraction is exact, so a value that left the window
leaves no trace (no running-sum drift, no two stacks). Pane partials are the same three
integers, merged by integer addition and subtraction. The result (``_xsum``): the coarse
integer converted to a float (CPython rounds an int to the nearest double, ties to even) and
scaled by ``2**-80`` (exact); when a fine part exists, the whole integer divided by
``2**1074`` (CPython's int division is correctly rounded, subnormals included).

Signed zeros: MIN, MAX and MEDIAN arguments and DOUBLE group keys see ``-0.0`` as ``+0.0``
(``v or 0.0``), as every engine does (docs/semantics.md): which zero arrived first must not
decide a result's sign bit. MEDIAN of an even count is DuckDB's interpolation of the two
middle values, ``fma(lo, 0.5, hi * 0.5)`` (``engines.kernels.median.midpoint``).

After each instant only the groups touched by the delta are re-finalised, and only rows that
changed are emitted (delete old row, insert new row). An aggregate without GROUP BY always
has its single row (COUNT 0 and NULLs over an empty input), as in SQL.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from engines.kernels.median import midpoint
from engines.row.base import NO_CHANGE, Delta, Row, RowOperator, Rows
from engines.row.compile import expr_source, may_be_infinite, may_be_nan, nullable
from engines.row.scalars import RUNTIME, _canon, _nan_key, checked_bigint
from optimizer.ir.expr import AggCall, ColumnRef, Expr
from optimizer.ir.types import DataType


class _Slot:
    """How one aggregate is stored and finalised.

    ``fifo`` says whether tuples leave the aggregate's input in the order they came (MIN /
    MAX then keep a monotonic deque). Sums are exact whatever the input, so their state does
    not depend on how deletes arrive (see the module docstring, "Exact sums").
    """

    def __init__(
        self,
        call: AggCall,
        index: int,
        arg_code: str | None,
        arg_null: bool,
        fifo: bool,
        paned: bool = False,
        nan_arg: bool = False,
    ) -> None:
        self.call = call
        self.paned = paned
        self.index = index  # first state slot
        self.arg = arg_code
        self.arg_null = arg_null
        self.nan_arg = nan_arg  # the argument may be NaN: order values with NaN largest
        f = call.func
        self.double = call.arg is not None and call.arg.dtype is DataType.DOUBLE
        if f == "COUNT" and call.arg is None:
            self.mode = "count_star"
        elif f == "COUNT" and call.distinct:
            self.mode = "multiset_distinct"
        elif f == "COUNT":
            self.mode = "count" if arg_null else "count_star"
        elif f in ("SUM", "AVG") and self.double:
            self.mode = "sum_exact"
        elif f in ("SUM", "AVG"):
            self.mode = "sum"
        elif f in ("MIN", "MAX") and paned:
            self.mode = "pane_deque"
        elif f in ("MIN", "MAX") and fifo:
            self.mode = "deque"
        else:
            self.mode = "multiset"
        # MIN, MAX and MEDIAN compare values: -0.0 is +0.0 there (docs/semantics.md).
        self.zero = self.double and f in ("MIN", "MAX", "MEDIAN")

    @property
    def width(self) -> int:
        extra = 1 if self.arg_null else 0  # a non-NULL count before the sum's own slots
        return {
            "count_star": 0,
            "count": 1,
            "sum": 1 + extra,
            "sum_exact": 3 + extra,
        }.get(self.mode, 1)

    @property
    def _sum_at(self) -> int:
        """The first slot of a sum's own state (after the non-NULL count, if any)."""
        return self.index + 1 if self.arg_null else self.index

    @property
    def _count(self) -> str:
        """Code for the number of values the sum is over."""
        return f"st[{self.index}]" if self.arg_null else "st[0]"

    def init_code(self) -> list[str]:
        count = ["0"] if self.arg_null else []
        if self.mode in ("count_star",):
            return []
        if self.mode == "count":
            return ["0"]
        if self.mode == "sum":
            return [*count, "0"]  # an exact integer (an AVG divides it as a float)
        if self.mode == "sum_exact":
            return [*count, "0", "0", "0"]  # 2**-80 units, 2**-1074 units, non-finite counts
        if self.mode in ("deque", "pane_deque"):
            return ["_deque()"]
        return ["{}"]

    # -- paned mode: partial aggregates per pane, merged into the group totals --------------

    def partial_init(self) -> list[str]:
        if self.mode == "pane_deque":
            return ["None"]
        return self.init_code()

    def partial_code(self) -> list[str]:
        """Statements folding tuple ``r`` into the pane partial ``st``."""
        if self.mode != "pane_deque":
            return self.update_code(+1)
        i = self.index
        better = ">" if self.call.func == "MAX" else "<"
        test = f"st[{i}] is None or {self._cmp('v', better, f'st[{i}]')}"
        return self._guard([f"if {test}: st[{i}] = v"])

    def merge_code(self, sign: int) -> list[str]:
        """Statements adding (sign +1) or removing (-1) partial ``p`` of pane ``pane``."""
        i = self.index
        op = "+=" if sign > 0 else "-="
        if self.mode == "count_star":
            return []
        if self.mode in ("count", "sum", "sum_exact"):  # integers: exact either way
            return [f"st[{k}] {op} p[{k}]" for k in range(i, i + self.width)]
        assert self.mode == "pane_deque"
        if sign < 0:
            return [f"d = st[{i}]", "if d and d[0][0] == pane: d.popleft()"]
        cmp = "<" if self.call.func == "MAX" else ">"
        return [
            f"v = p[{i}]",
            "if v is not None:",
            f"    d = st[{i}]",
            f"    while d and {self._cmp('d[-1][1]', cmp, 'v')}: d.pop()",
            "    d.append((pane, v))",
        ]

    def _guard(self, body: list[str]) -> list[str]:
        """``v = <arg>`` then ``body``, skipped for a NULL argument; a compared DOUBLE's
        ``-0.0`` becomes ``+0.0`` (``v or 0.0``: NaN is truthy and stays the one NaN)."""
        zero = ["v = v or 0.0"] if self.zero else []
        if self.arg_null:
            return [f"v = {self.arg}", "if v is not None:", *["    " + b for b in zero + body]]
        return [f"v = {self.arg}", *zero, *body]

    def update_code(self, sign: int) -> list[str]:
        """Statements applying one tuple ``r`` with sign +1 (insert) or -1 (delete)."""
        i = self.index
        op = "+=" if sign > 0 else "-="
        body: list[str]
        if self.mode == "count_star":
            return []
        count = [f"st[{i}] {op} 1"] if self.arg_null else []
        if self.mode == "count":
            body = [f"st[{i}] {op} 1"]
        elif self.mode == "sum":
            body = [*count, f"st[{self._sum_at}] {op} v"]
        elif self.mode == "sum_exact":
            body = [*count, *_exact_add(self._sum_at, sign)]
        elif self.mode == "deque":
            cmp = "<" if self.call.func == "MAX" else ">"
            if sign > 0:
                body = [
                    f"d = st[{i}]",
                    f"while d and {self._cmp('d[-1]', cmp, 'v')}: d.pop()",
                    "d.append(v)",
                ]
            else:  # `is` first: NaN (one object) is equal to itself
                body = [f"d = st[{i}]", "if d and (d[0] is v or d[0] == v): d.popleft()"]
        else:  # multisets
            if sign > 0:
                body = [f"c = st[{i}]", "c[v] = c.get(v, 0) + 1"]
            else:
                body = [f"c = st[{i}]", "n = c[v] - 1", "if n: c[v] = n", "else: del c[v]"]
        return self._guard(body)

    def final_code(self, global_agg: bool) -> str:
        """Python expression computing this aggregate's value from the group state ``st``."""
        i, mode, func = self.index, self.mode, self.call.func
        if mode == "count_star":
            return "st[0]"
        if mode == "count":
            return f"st[{i}]"
        if mode.startswith("sum"):
            n, j = self._count, self._sum_at
            if mode == "sum_exact":
                # the one NaN object already; an AVG's division cannot make a new NaN
                total = f"_xsum(st[{j}], st[{j + 1}], st[{j + 2}])"
                value = _canon_inline(f"{total} / {n}") if func == "AVG" else total
            elif func == "AVG":  # the exact integer sum rounded to a DOUBLE, then divided
                value = f"float(st[{j}]) / {n}"
            elif self.call.dtype.is_integer:
                value = f"_ick(st[{j}])"  # a SUM outside BIGINT is an error (DuckDB's too)
            else:
                value = f"st[{j}]"
            if self.arg_null or global_agg:
                value = f"({value} if {n} else None)"
            return f"({value})"
        if mode == "deque":
            return f"(st[{i}][0] if st[{i}] else None)"
        if mode == "pane_deque":
            return f"(st[{i}][0][1] if st[{i}] else None)"
        if mode == "multiset_distinct":
            return f"len(st[{i}])"
        if func in ("MAX", "MIN"):
            key = ", key=_nan_key" if self.nan_arg else ""
            return f"({func.lower()}(st[{i}]{key}) if st[{i}] else None)"
        median = "_median_nan" if self.nan_arg else "_median"
        return _canon_inline(f"({median}(st[{i}]) if st[{i}] else None)")

    def _cmp(self, a: str, op: str, b: str) -> str:
        """Code for ``a op b`` on aggregate values, NaN ordered above every number."""
        if self.nan_arg:
            return f"_nan_key({a}) {op} _nan_key({b})"
        return f"{a} {op} {b}"

    def final(self, st: list[Any]) -> Any:
        """This aggregate's value from the group state ``st`` (the generated ``final_code``
        in plain Python, for a replaced relation's rows)."""
        i = self.index
        mode = self.mode
        if mode == "count_star":
            return st[0]
        if mode == "count":
            return st[i]
        if mode.startswith("sum"):
            n = st[i] if self.arg_null else st[0]
            j = self._sum_at
            if n == 0:
                return None
            if mode == "sum_exact":
                total = _xsum(st[j], st[j + 1], st[j + 2])
                return _canon(total / n) if self.call.func == "AVG" else total
            if self.call.func == "AVG":
                return float(st[j]) / n
            return checked_bigint(st[j]) if self.call.dtype.is_integer else st[j]
        if mode == "deque":
            d = st[i]
            return d[0] if d else None
        if mode == "pane_deque":
            return st[i][0][1] if st[i] else None
        c = st[i]
        if mode == "multiset_distinct":
            return len(c)
        if not c:
            return None
        key = _nan_key if self.nan_arg else None
        if self.call.func == "MAX":
            return max(c, key=key)
        if self.call.func == "MIN":
            return min(c, key=key)
        return _canon(_median(c, key))


#: Values ``v`` with ``|v| > _COARSE_MIN`` are whole numbers of ``2**-_COARSE_BITS``
#: (their last mantissa bit weighs ``2**-80`` or more): ``int(v * 2.0**80)`` is exact.
_COARSE_BITS = 80
_COARSE_MIN = 2.0**-28  # |v| > 2**-28: exponent >= -28, last bit 2**(-28 - 52) or more
_COARSE_SCALE = 2.0**_COARSE_BITS
_FINE_SHIFT = 1074 - _COARSE_BITS  # a coarse unit in fine (2**-1074) units
_FINE_UNIT = 1 << 1074


def _exact_add(j: int, sign: int) -> list[str]:
    """Statements adding (sign +1) or subtracting (-1) ``v`` to the exact sum at ``st[j]``
    (coarse units), ``st[j + 1]`` (fine units), ``st[j + 2]`` (non-finite counts): the
    common case inline, every other value through ``_rare``. A zero adds nothing."""
    op = "+=" if sign > 0 else "-="
    lo, scale = repr(_COARSE_MIN), repr(_COARSE_SCALE)
    return [
        f"if v > {lo} or v < -{lo}:",
        "    try:",
        f"        st[{j}] {op} _int(v * {scale})",
        "    except OverflowError:",
        f"        _rare(st, {j}, v, {sign})",
        "elif v:",  # small, subnormal or NaN (NaN compares false and is truthy)
        f"    _rare(st, {j}, v, {sign})",
    ]


#: What a non-finite value adds to an exact sum's non-finite counter.
_PINF, _NINF, _NAN_COUNT = 1, 1 << 64, 1 << 128


def _rare(st: list[Any], j: int, v: float, sign: int) -> None:
    """Add ``sign * v`` to the exact sum at ``st[j:j + 3]`` for a value the inline code does
    not scale: NaN and +-inf are counted, a finite value too large to scale as a float is
    an integer (coarse units), a small one is added in fine units of 2**-1074."""
    if v != v:
        st[j + 2] += sign * _NAN_COUNT
    elif v in (math.inf, -math.inf):
        st[j + 2] += sign * (_PINF if v > 0 else _NINF)
    else:
        num, den = v.as_integer_ratio()  # den is a power of two
        if den == 1:
            st[j] += sign * (num << _COARSE_BITS)
        else:
            st[j + 1] += sign * (num << (1075 - den.bit_length()))


def _xsum(coarse: int, fine: int, nonfinite: int) -> float:
    """The exact sum ``coarse * 2**-80 + fine * 2**-1074`` rounded once to the nearest
    double (an exact zero is +0.0), or the IEEE result of the non-finite values counted in
    ``nonfinite`` (NaN if any NaN or both infinities, else the infinity)."""
    if nonfinite:
        pinf = nonfinite & (_NINF - 1)
        ninf = (nonfinite >> 64) & (_NINF - 1)
        if nonfinite >= _NAN_COUNT or (pinf and ninf):
            return math.nan
        return math.inf if pinf else -math.inf
    if not fine:
        try:
            # int -> float rounds to nearest, ties to even; the scaling is exact (the
            # result is 0 or at least 2**-80 in magnitude, never subnormal)
            return float(coarse) * _COARSE_UNIT
        except OverflowError:  # beyond floats as an integer of 2**-80 units: divide
            pass
    total = (coarse << _FINE_SHIFT) + fine
    try:
        return total / _FINE_UNIT  # int / int is correctly rounded, subnormals included
    except OverflowError:  # beyond the largest double, as IEEE rounding overflows
        return math.inf if total > 0 else -math.inf


_COARSE_UNIT = 2.0**-_COARSE_BITS


def _canon_inline(code: str) -> str:
    """``code``'s value, with NaN made the one NaN object (inline: no call per group)."""
    return f"(_c if (_c := {code}) == _c else _NAN)"


def _median_nan(counts: dict[Any, int]) -> float:
    """MEDIAN of values that may include NaN, which sorts above every number (DuckDB)."""
    return _median(counts, _nan_key)


def _median(counts: dict[Any, int], key: Callable[[Any], Any] | None = None) -> float:
    total = sum(counts.values())
    lo_rank, hi_rank = (total - 1) // 2, total // 2
    seen = 0
    lo = hi = None
    for v in sorted(counts, key=key):
        nxt = seen + counts[v]
        if lo is None and lo_rank < nxt:
            lo = v
        if hi_rank < nxt:
            hi = v
            break
        seen = nxt
    assert lo is not None and hi is not None
    return float(lo) if lo_rank == hi_rank else midpoint(lo, hi)


#: Names the generated update, merge and finish code may use.
_NAMESPACE: dict[str, Any] = dict(
    RUNTIME,
    _deque=deque,
    _median=_median,
    _median_nan=_median_nan,
    _int=int,
    _rare=_rare,
    _xsum=_xsum,
)


def finite_aggregate(call: AggCall, finite: Sequence[bool]) -> bool:
    """Whether an aggregate's result is never +-inf or NaN (its input columns' ``finite``)."""
    if call.func == "COUNT" or call.dtype is not DataType.DOUBLE:
        return True
    if call.func in ("MIN", "MAX") and call.arg is not None:
        return not (may_be_infinite(call.arg, finite) or may_be_nan(call.arg, finite))
    return False  # SUM / AVG / MEDIAN of DOUBLE may overflow


def _key_source(
    key: Expr, cols: Sequence[bool], finite: Sequence[bool], env: dict[str, Any]
) -> str:
    """Code for one group key: a DOUBLE's ``-0.0`` is ``+0.0`` (docs/semantics.md: which
    zero arrived first must not decide the key's sign bit); NaN is the one NaN object.
    ``env`` takes the helpers a long expression is compiled into."""
    code = expr_source(key, cols, finite=finite, env=env)
    if key.dtype is not DataType.DOUBLE:
        return code
    if nullable(key, cols):
        return f"(0.0 if (_z := {code}) == 0 else _z)"
    return f"({code} or 0.0)"


class AggregateOp(RowOperator):
    """Grouped (or global) aggregation; see the module docstring for the state layout."""

    kind = "aggregate"

    def __init__(
        self,
        op_id: str,
        group_by: Sequence[Expr],
        aggs: Sequence[AggCall],
        input_nullable: Sequence[bool],
        fifo: bool,
        replace_in: bool,
        paned: bool = False,
        input_finite: Sequence[bool] | None = None,
    ) -> None:
        super().__init__(op_id, replace_out=replace_in)
        self.paned = paned
        self.pane_parts: dict[int, dict[Any, list[Any]]] = {}
        self.global_agg = not group_by
        self.replace_in = replace_in
        self.fifo = fifo
        cols = list(input_nullable)
        fin = list(input_finite) if input_finite is not None else [True] * len(cols)
        # Helpers the key and argument code calls (a long CASE, a deep expression).
        self._env: dict[str, Any] = {}
        env = self._env
        # Group key code: a scalar for one key, a tuple for several (NaN: the one object,
        # -0.0 is +0.0).
        keys = [_key_source(g, cols, fin, env) for g in group_by]
        if not group_by:
            key_code = "()"
        elif len(group_by) == 1:
            key_code = keys[0]
        else:
            key_code = "(" + ", ".join(keys) + ",)"
        self._single_key = len(group_by) == 1
        self.slots: list[_Slot] = []
        width = 1
        for call in aggs:
            arg_code = (
                expr_source(call.arg, cols, finite=fin, env=env) if call.arg is not None else None
            )
            arg_null = call.arg is not None and nullable(call.arg, cols)
            nan_arg = call.arg is not None and may_be_nan(call.arg, fin)
            slot = _Slot(call, width, arg_code, arg_null, fifo, paned, nan_arg=nan_arg)
            self.slots.append(slot)
            width += slot.width
        init = ["0"] + [c for s in self.slots for c in s.init_code()]
        self._new_state_src = f"def _new():\n    return [{', '.join(init)}]\n"
        self._ins = self._gen_update(+1, key_code)
        self._del = self._gen_update(-1, key_code)
        self._finish = self._gen_finish()
        partial = ["0"] + [c for s in self.slots for c in s.partial_init()]
        self._new_state_src += f"def _new_partial():\n    return [{', '.join(partial)}]\n"
        ns = dict(_NAMESPACE, **self._env)
        exec(compile(self._new_state_src, f"<hycq:{op_id}:new>", "exec"), ns)
        self._new: Callable[[], list[Any]] = ns["_new"]
        self._new_partial: Callable[[], list[Any]] = ns["_new_partial"]
        if paned:
            self._pane = self._gen_pane(key_code)
            self._merge = self._gen_merge(+1)
            self._unmerge = self._gen_merge(-1)
        self.groups: dict[Any, list[Any]] = {}
        self.out: dict[Any, Row] = {}
        self._started = False
        self.group_by = tuple(group_by)
        self._key_is_columns = all(isinstance(g, ColumnRef) for g in group_by)

    def _gen_update(self, sign: int, key_code: str) -> Callable[..., None]:
        lines = [
            "def _upd(rows, groups, touched, new):",
            "    get = groups.get",
            "    add = touched.add",
        ]
        lines += ["    for r in rows:", f"        k = {key_code}"]
        if sign > 0:
            lines += [
                "        st = get(k)",
                "        if st is None:",
                "            st = groups[k] = new()",
            ]
            lines += ["        st[0] += 1"]
        else:
            lines += ["        st = groups[k]", "        st[0] -= 1"]
        lines += ["        add(k)"]
        for slot in self.slots:
            lines += ["        " + stmt for stmt in slot.update_code(sign)]
        src = "\n".join(lines) + "\n"
        ns = dict(_NAMESPACE, **self._env)
        name = "ins" if sign > 0 else "del"
        exec(compile(src, f"<hycq:{self.op_id}:{name}>", "exec"), ns)
        fn = ns["_upd"]
        fn.__hycq_source__ = src
        return fn

    def _compile(self, lines: list[str], name: str, fn_name: str) -> Callable[..., Any]:
        src = "\n".join(lines) + "\n"
        ns = dict(_NAMESPACE, **self._env)
        exec(compile(src, f"<hycq:{self.op_id}:{name}>", "exec"), ns)
        fn = ns[fn_name]
        fn.__hycq_source__ = src
        return fn

    def _gen_pane(self, key_code: str) -> Callable[[Rows, Callable[[], list[Any]]], dict[Any, Any]]:
        """Generated: the partial aggregates of one pane's tuples, per group."""
        lines = [
            "def _pane(rows, new):",
            "    parts = {}",
            "    get = parts.get",
            "    for r in rows:",
            f"        k = {key_code}",
            "        st = get(k)",
            "        if st is None:",
            "            st = parts[k] = new()",
            "        st[0] += 1",
        ]
        for slot in self.slots:
            lines += ["        " + stmt for stmt in slot.partial_code()]
        lines += ["    return parts"]
        return self._compile(lines, "pane", "_pane")

    def _gen_merge(self, sign: int) -> Callable[..., None]:
        """Generated: add (sign +1) or remove (-1) one pane's partials from the group totals."""
        lines = ["def _merge(parts, groups, touched, pane, new):", "    add = touched.add"]
        lines += ["    for k, p in parts.items():"]
        if sign > 0:
            lines += [
                "        st = groups.get(k)",
                "        if st is None:",
                "            st = groups[k] = new()",
                "        st[0] += p[0]",
            ]
        else:
            lines += ["        st = groups[k]", "        st[0] -= p[0]"]
        lines += ["        add(k)"]
        for slot in self.slots:
            lines += ["        " + stmt for stmt in slot.merge_code(sign)]
        return self._compile(lines, "merge" if sign > 0 else "unmerge", "_merge")

    def _gen_finish(
        self,
    ) -> Callable[[set[Any], dict[Any, Any], dict[Any, Row]], tuple[Rows, Rows]]:
        """Generated: re-finalise the touched groups; return (inserted rows, deleted rows)."""
        finals = [s.final_code(self.global_agg) for s in self.slots]
        if self.global_agg:
            row = "(" + "".join(f + ", " for f in finals) + ")"
        elif self._single_key:
            row = "(k, " + "".join(f + ", " for f in finals) + ")"
        else:
            row = "(*k, " + "".join(f + ", " for f in finals) + ")"
        lines = [
            "def _finish(touched, groups, out):",
            "    ins = []",
            "    dels = []",
            "    for k in touched:",
            "        st = groups[k]",
            "        old = out.get(k)",
        ]
        if not self.global_agg:  # a global aggregate keeps its one row, even when empty
            lines += [
                "        if st[0] == 0:",
                "            del groups[k]",
                "            if old is not None:",
                "                dels.append(old)",
                "                del out[k]",
                "            continue",
            ]
        lines += [
            f"        new = {row}",
            "        if new != old:",
            "            if old is not None:",
            "                dels.append(old)",
            "            ins.append(new)",
            "            out[k] = new",
            "    return ins, dels",
        ]
        src = "\n".join(lines) + "\n"
        ns = dict(_NAMESPACE, **self._env)
        exec(compile(src, f"<hycq:{self.op_id}:finish>", "exec"), ns)
        fn = ns["_finish"]
        fn.__hycq_source__ = src
        return fn

    def _row(self, k: Any, st: list[Any]) -> Row:
        finals = tuple(s.final(st) for s in self.slots)
        if self.global_agg:
            return finals
        return ((k,) if self._single_key else k) + finals

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        d = inputs[0]
        first = not self._started
        self._started = True
        if d.empty and not (first and self.global_agg):
            return NO_CHANGE
        touched: set[Any] = set()
        if d.replace or (self.replace_in and d.empty):
            self.groups.clear()
            self._ins(d.ins, self.groups, touched, self._new)
            return self._emit_replace()
        if self.paned:
            for pane in d.expire:
                parts = self.pane_parts.pop(pane, None)
                if parts:
                    self._unmerge(parts, self.groups, touched, pane, self._new)
            if d.ins:
                parts = self._pane(d.ins, self._new_partial)
                self._merge(parts, self.groups, touched, instant, self._new)
                self.pane_parts[instant] = parts
        if self.fifo:
            # Window-ordered input: deletes are older tuples; apply them first so monotonic
            # deques pop the right entry.
            if d.dels:
                self._del(d.dels, self.groups, touched, self._new)
            if d.ins and not self.paned:
                self._ins(d.ins, self.groups, touched, self._new)
        else:
            # Derived input (after a join or aggregate) may delete, in the same delta, a tuple
            # it also inserts: apply inserts first so no group is deleted before it exists.
            if d.ins:
                self._ins(d.ins, self.groups, touched, self._new)
            if d.dels:
                self._del(d.dels, self.groups, touched, self._new)
        if self.global_agg:
            touched.add(())
            if () not in self.groups:
                self.groups[()] = self._new()
        ins, dels = self._finish(touched, self.groups, self.out)
        if not ins and not dels:
            return NO_CHANGE
        return Delta(ins, dels)

    def _emit_replace(self) -> Delta:
        if self.global_agg and () not in self.groups:
            self.groups[()] = self._new()
        rows = [self._row(k, st) for k, st in self.groups.items()]
        self.out = {}
        return Delta(rows, [], replace=True)

    def state(self) -> dict[str, Any]:
        return {
            "groups": len(self.groups),
            "fifo_minmax": self.fifo,
            "paned": self.paned,
            "panes": sorted(self.pane_parts)[:1] + sorted(self.pane_parts)[-1:],
        }

    def snapshot(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            if isinstance(v, deque):
                return ("deque", list(v))
            if isinstance(v, list):
                return ("stack", list(v))
            if isinstance(v, dict):
                return ("multiset", dict(v))
            return v

        return {
            "groups": {k: [plain(v) for v in st] for k, st in self.groups.items()},
            "out": dict(self.out),
            "started": self._started,
            "panes": {
                p: {k: list(v) for k, v in parts.items()} for p, parts in self.pane_parts.items()
            },
        }

    def restore(self, snap: dict[str, Any]) -> None:
        def live(v: Any) -> Any:
            if isinstance(v, tuple) and len(v) == 2 and v[0] == "deque":
                return deque(v[1])
            if isinstance(v, tuple) and len(v) == 2 and v[0] == "multiset":
                return dict(v[1])
            if isinstance(v, tuple) and len(v) == 2 and v[0] == "stack":
                return list(v[1])
            return v

        self.groups = {k: [live(v) for v in st] for k, st in snap["groups"].items()}
        self.out = dict(snap["out"])
        self._started = snap["started"]
        self.pane_parts = {
            p: {k: list(v) for k, v in parts.items()} for p, parts in snap["panes"].items()
        }
