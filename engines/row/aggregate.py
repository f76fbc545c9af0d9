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
SUM, AVG of integers;     non-NULL count (if x can be NULL) and        O(1)
of DOUBLE without deletes running sum
SUM, AVG of DOUBLE,       two stacks (front suffix sums, back values   amortised O(1)
FIFO input or panes       and their running sum)
SUM, AVG of DOUBLE,       exact sum: an integer count of 2**-1074      O(1), ~0.5 us
other input               units, plus counts of +-inf and NaN
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

Accurate sums (docs/semantics.md, "Floating-point sums"): a DOUBLE sum is never maintained
by subtracting what leaves the window, because a running sum remembers the rounding of
everything that ever passed through it (1e15 followed by 0.001s loses the 0.001s for good).
Over FIFO input (and over panes) it is a sliding aggregation without subtraction, the
two-stacks scheme (Tangwongsan, Hirzel, Schneider, "Low-latency sliding-window aggregation
in worst-case constant time", DEBS 2017): new
values are pushed on a back stack with a running sum; when the oldest value must go and the
front stack is empty, the back stack's values are turned into suffix sums (newest first) on
the front, so the front's top always sums the whole front; the window's sum is front top +
back sum. Every result is then a sum of exactly the values in the window, in some order,
within ``(n-1) * 2**-53 * sum(|x|)`` of the exact sum (n values), the bound DuckDB's and
Spark's own sums meet. Over other input (after a join or an aggregate, deletes in any order)
the sum is exact: each value is added to or subtracted from a Python integer counting units
of 2**-1074 (every finite double is a whole number of them), and the result is that integer
divided by 2**1074 (and by the count for AVG), correctly rounded.

After each instant only the groups touched by the delta are re-finalised, and only rows that
changed are emitted (delete old row, insert new row). An aggregate without GROUP BY always
has its single row (COUNT 0 and NULLs over an empty input), as in SQL.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

from engines.row.base import NO_CHANGE, Delta, Row, RowOperator, Rows
from engines.row.compile import (
    RUNTIME,
    _canon,
    _nan_key,
    checked_bigint,
    expr_source,
    may_be_infinite,
    may_be_nan,
    nullable,
)
from optimizer.ir.expr import AggCall, ColumnRef, Expr
from optimizer.ir.types import DataType


class _Slot:
    """How one aggregate is stored and finalised.

    ``deletes`` says whether tuples can ever leave the aggregate's input (False for a
    replacing input and for a window that never expires): a running DOUBLE sum is only
    accurate when nothing is subtracted from it, so SUM/AVG of DOUBLE pick their state by
    how deletes arrive (see the module docstring, "Accurate sums").
    """

    def __init__(
        self,
        call: AggCall,
        index: int,
        arg_code: str | None,
        arg_null: bool,
        fifo: bool,
        paned: bool = False,
        deletes: bool = True,
        nan_arg: bool = False,
    ) -> None:
        self.call = call
        self.paned = paned
        self.index = index  # first state slot
        self.arg = arg_code
        self.arg_null = arg_null
        self.nan_arg = nan_arg  # the argument may be NaN: order values with NaN largest
        f = call.func
        double = call.arg is not None and call.arg.dtype is DataType.DOUBLE
        if f == "COUNT" and call.arg is None:
            self.mode = "count_star"
        elif f == "COUNT" and call.distinct:
            self.mode = "multiset_distinct"
        elif f == "COUNT":
            self.mode = "count" if arg_null else "count_star"
        elif f in ("SUM", "AVG") and double and paned:
            self.mode = "sum_panes"
        elif f in ("SUM", "AVG") and double and deletes:
            self.mode = "sum_stacks" if fifo else "sum_exact"
        elif f in ("SUM", "AVG"):
            self.mode = "sum"
        elif f in ("MIN", "MAX") and paned:
            self.mode = "pane_deque"
        elif f in ("MIN", "MAX") and fifo:
            self.mode = "deque"
        else:
            self.mode = "multiset"

    @property
    def width(self) -> int:
        extra = 1 if self.arg_null else 0  # a non-NULL count before the sum's own slots
        return {
            "count_star": 0,
            "count": 1,
            "sum": 1 + extra,
            "sum_stacks": 3 + extra,
            "sum_panes": 3 + extra,
            "sum_exact": 2 + extra,
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
            zero = "0.0" if self.call.dtype.value == "DOUBLE" or self.call.func == "AVG" else "0"
            return [*count, zero]
        if self.mode in ("sum_stacks", "sum_panes"):
            return [*count, "[]", "[]", "0.0"]  # front suffix sums, back values, back sum
        if self.mode == "sum_exact":
            return [*count, "0", "0"]  # exact sum in units of 2**-1074, non-finite counts
        if self.mode in ("deque", "pane_deque"):
            return ["_deque()"]
        return ["{}"]

    # -- paned mode: partial aggregates per pane, merged into the group totals --------------

    def partial_init(self) -> list[str]:
        if self.mode == "pane_deque":
            return ["None"]
        if self.mode == "sum_panes":
            # Same width as the group state; the pane's plain sum sits in the first sum slot.
            return [*(["0"] if self.arg_null else []), "0.0", "None", "None"]
        return self.init_code()

    def partial_code(self) -> list[str]:
        """Statements folding tuple ``r`` into the pane partial ``st``."""
        if self.mode == "sum_panes":
            return self._running_sum(+1)
        if self.mode != "pane_deque":
            return self.update_code(+1)
        i = self.index
        better = ">" if self.call.func == "MAX" else "<"
        test = f"st[{i}] is None or {self._cmp('v', better, f'st[{i}]')}"
        if self.arg_null:
            test = f"v is not None and ({test})"
        return [f"v = {self.arg}", f"if {test}: st[{i}] = v"]

    def merge_code(self, sign: int) -> list[str]:
        """Statements adding (sign +1) or removing (-1) partial ``p`` of pane ``pane``."""
        i = self.index
        op = "+=" if sign > 0 else "-="
        if self.mode == "count_star":
            return []
        if self.mode == "count" or (self.mode == "sum" and not self.arg_null):
            return [f"st[{i}] {op} p[{i}]"]
        if self.mode == "sum":
            return [f"st[{i}] {op} p[{i}]", f"st[{i + 1}] {op} p[{i + 1}]"]
        if self.mode == "sum_panes":
            # The group's sum over its live panes: two stacks of pane sums, never subtracted.
            count = [f"st[{i}] {op} p[{i}]"] if self.arg_null else []
            j = self._sum_at
            if sign > 0:
                return [*count, f"v = p[{j}]", *_stacks_push(j)]
            return [*count, *_stacks_pop(j)]
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

    def _running_sum(self, sign: int) -> list[str]:
        """A plain running sum (and non-NULL count) of the argument."""
        i, op = self.index, "+=" if sign > 0 else "-="
        body = [f"st[{i}] {op} 1", f"st[{i + 1}] {op} v"] if self.arg_null else [f"st[{i}] {op} v"]
        return self._guard(body)

    def _guard(self, body: list[str], needs_value: bool = True) -> list[str]:
        """``v = <arg>`` then ``body``, skipped for a NULL argument."""
        if self.arg_null:
            return [f"v = {self.arg}", "if v is not None:", *["    " + b for b in body]]
        return ([f"v = {self.arg}"] if needs_value else []) + body

    def update_code(self, sign: int) -> list[str]:
        """Statements applying one tuple ``r`` with sign +1 (insert) or -1 (delete)."""
        i = self.index
        op = "+=" if sign > 0 else "-="
        body: list[str]
        if self.mode == "count_star":
            return []
        if self.mode == "count":
            body = [f"st[{i}] {op} 1"]
        elif self.mode == "sum":
            return self._running_sum(sign)
        elif self.mode in ("sum_stacks", "sum_panes"):  # panes: a tuple-level change
            count = [f"st[{i}] {op} 1"] if self.arg_null else []
            j = self._sum_at
            if sign > 0:
                return self._guard([*count, *_stacks_push(j)])
            # FIFO: the deleted value is the oldest one still counted: pop it, whatever it is.
            return self._guard([*count, *_stacks_pop(j)], needs_value=False)
        elif self.mode == "sum_exact":
            count = [f"st[{i}] {op} 1"] if self.arg_null else []
            j = self._sum_at
            body = [
                *count,
                "try:",
                "    n_, d_ = v.as_integer_ratio()",
                f"    st[{j}] {op} n_ << (1075 - d_.bit_length())",
                "except (OverflowError, ValueError):",
                f"    st[{j + 1}] {op} _nonfinite(v)",
            ]
            return self._guard(body)
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
            if mode == "sum":
                total = f"st[{j}]"
                value = f"{total} / {n}" if func == "AVG" else total
                if func == "SUM" and self.call.dtype.is_integer:
                    value = f"_ick({total})"  # a SUM outside BIGINT is an error (DuckDB's too)
            elif mode == "sum_exact":  # its NaN is already the one NaN object
                value = f"_exact_sum(st[{j}], st[{j + 1}], {n if func == 'AVG' else 1})"
            else:  # front top + back sum, inline (this runs per group and instant)
                total = f"((f[-1] + st[{j + 2}]) if (f := st[{j}]) else st[{j + 2}])"
                value = f"{total} / {n}" if func == "AVG" else total
            if self.arg_null or global_agg:
                value = f"({value} if {n} else None)"
            if mode != "sum_exact" and self.call.dtype is DataType.DOUBLE:
                return _canon_inline(value)  # inf - inf or a NaN input: a new NaN object
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

    def reset_code(self) -> list[str]:
        """Statements zeroing a running sum once its group is empty (no float drift)."""
        if self.mode != "sum":
            return []  # stacks empty themselves; an exact sum is exactly zero
        zero = "0.0" if self.call.dtype.value == "DOUBLE" or self.call.func == "AVG" else "0"
        return [f"if {self._count} == 0: st[{self._sum_at}] = {zero}"]

    def final(self, st: list[Any]) -> Any:
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
                if mode == "sum":
                    # Reset the running sum so float error cannot accumulate across empty phases.
                    st[j] = 0.0 if isinstance(st[j], float) else 0
                return None
            if mode == "sum_exact":
                return _exact_sum(st[j], st[j + 1], n if self.call.func == "AVG" else 1)
            total = st[j] if mode == "sum" else _stacks_sum(st[j], st[j + 2])
            if self.call.func == "AVG":
                return _canon(total / n)
            return checked_bigint(int(total)) if self.call.dtype.is_integer else _canon(total)
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


def _stacks_push(j: int) -> list[str]:
    """Push ``v`` on the back stack (values st[j+1], their running sum st[j+2])."""
    return [f"st[{j + 1}].append(v)", f"st[{j + 2}] += v"]


def _stacks_pop(j: int) -> list[str]:
    """Drop the oldest value. When the front stack (suffix sums, st[j]) is empty, the back
    stack's values become its suffix sums, newest first, so ``front[-1]`` always sums the
    whole front; the back restarts empty."""
    return [
        f"f = st[{j}]",
        "if not f:",
        f"    b = st[{j + 1}]",
        "    f.extend(_accumulate(reversed(b)))",
        "    b.clear()",
        f"    st[{j + 2}] = 0.0",
        "f.pop()",
    ]


def _stacks_sum(front: list[float], back_sum: float) -> float:
    """The window's sum from the two stacks: front suffix sum plus back running sum."""
    return front[-1] + back_sum if front else back_sum


#: What a non-finite value adds to an exact sum's non-finite counter.
_PINF, _NINF, _NAN_COUNT = 1, 1 << 64, 1 << 128
_EXACT_UNIT = 1 << 1074  # every finite double is an integer multiple of 2**-1074


def _nonfinite(v: float) -> int:
    if v != v:
        return _NAN_COUNT
    return _PINF if v > 0 else _NINF


def _exact_sum(units: int, nonfinite: int, n: int) -> float:
    """``units * 2**-1074 / n`` correctly rounded (Python's int / int is), or the IEEE result
    of the non-finite values counted in ``nonfinite`` (NaN if any NaN or both infinities)."""
    if nonfinite:
        pinf = nonfinite & (_NINF - 1)
        ninf = (nonfinite >> 64) & (_NINF - 1)
        if nonfinite >= _NAN_COUNT or (pinf and ninf):
            return math.nan
        return math.inf if pinf else -math.inf
    try:
        return units / (_EXACT_UNIT * n)
    except OverflowError:  # beyond the largest double, as IEEE addition overflows
        return math.copysign(math.inf, units)


def _indent_block(lines: list[str]) -> list[str]:
    """Lines as written (compound one-liners like ``if x: y`` are already valid)."""
    return lines


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
    return (lo + hi) / 2.0


#: Names the generated update, merge and finish code may use.
_NAMESPACE: dict[str, Any] = dict(
    RUNTIME,
    _deque=deque,
    _median=_median,
    _median_nan=_median_nan,
    _accumulate=accumulate,
    _nonfinite=_nonfinite,
    _exact_sum=_exact_sum,
    _stacks_sum=_stacks_sum,
)


def finite_aggregate(call: AggCall, finite: Sequence[bool]) -> bool:
    """Whether an aggregate's result is never +-inf or NaN (its input columns' ``finite``)."""
    if call.func == "COUNT" or call.dtype is not DataType.DOUBLE:
        return True
    if call.func in ("MIN", "MAX") and call.arg is not None:
        return not (may_be_infinite(call.arg, finite) or may_be_nan(call.arg, finite))
    return False  # SUM / AVG / MEDIAN of DOUBLE may overflow


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
        deletes: bool = True,
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
        # Group key code: a scalar for one key, a tuple for several (NaN: the one object).
        if not group_by:
            key_code = "()"
        elif len(group_by) == 1:
            key_code = expr_source(group_by[0], cols, finite=fin, env=env)
        else:
            keys = ", ".join(expr_source(g, cols, finite=fin, env=env) for g in group_by)
            key_code = f"({keys},)"
        self._single_key = len(group_by) == 1
        self.slots: list[_Slot] = []
        width = 1
        for call in aggs:
            arg_code = (
                expr_source(call.arg, cols, finite=fin, env=env) if call.arg is not None else None
            )
            arg_null = call.arg is not None and nullable(call.arg, cols)
            nan_arg = call.arg is not None and may_be_nan(call.arg, fin)
            slot = _Slot(
                call,
                width,
                arg_code,
                arg_null,
                fifo,
                paned,
                deletes=deletes and not replace_in,
                nan_arg=nan_arg,
            )
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
        if self.global_agg:
            lines += ["        if st[0] == 0:"]
            lines += ["            " + c for s in self.slots for c in s.reset_code()] or []
            if not any(s.reset_code() for s in self.slots):
                lines += ["            pass"]
        else:
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
