"""Grouped aggregation over deltas.

Per group the operator keeps a state list ``st``: ``st[0]`` counts the group's tuples, then
one or two slots per aggregate:

========================  ===========================================  ====================
aggregate                 state                                        per insert/delete
========================  ===========================================  ====================
COUNT(*)                  st[0]                                        O(1)
COUNT(x), SUM, AVG        non-NULL count (st[0] if x cannot be NULL)   O(1), incremental
                          and running sum
MIN / MAX, FIFO input     monotonic deque                              amortised O(1)
MIN / MAX, other input    multiset (value -> count), rescan on output  O(1) + O(d) rescan
MEDIAN                    multiset, sorted on output (rescan)          O(1) + O(d log d)
COUNT(DISTINCT x)         multiset; its size                           O(1)
========================  ===========================================  ====================

"FIFO input" means the deletes reach the aggregate in the order their tuples were inserted,
which holds when the input is a sliding window seen through selects and projects only; the
executor decides this statically. The update loops are generated Python (see
``engines.row.compile``), specialised to the aggregate list, so the per-tuple path is a
handful of dict and arithmetic operations.

After each instant only the groups touched by the delta are re-finalised, and only rows that
changed are emitted (delete old row, insert new row). An aggregate without GROUP BY always
has its single row (COUNT 0 and NULLs over an empty input), as in SQL.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from engines.row.base import NO_CHANGE, Delta, Row, RowOperator, Rows
from engines.row.compile import RUNTIME, checked_bigint, expr_source, nullable
from optimizer.ir.expr import AggCall, ColumnRef, Expr


class _Slot:
    """How one aggregate is stored and finalised."""

    def __init__(
        self,
        call: AggCall,
        index: int,
        arg_code: str | None,
        arg_null: bool,
        fifo: bool,
        paned: bool = False,
    ) -> None:
        self.call = call
        self.paned = paned
        self.index = index  # first state slot
        self.arg = arg_code
        self.arg_null = arg_null
        f = call.func
        if f == "COUNT" and call.arg is None:
            self.mode = "count_star"
        elif f == "COUNT" and call.distinct:
            self.mode = "multiset_distinct"
        elif f == "COUNT":
            self.mode = "count" if arg_null else "count_star"
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
        return {"count_star": 0, "count": 1, "sum": 2 if self.arg_null else 1}.get(self.mode, 1)

    def init_code(self) -> list[str]:
        if self.mode in ("count_star",):
            return []
        if self.mode == "count":
            return ["0"]
        if self.mode == "sum":
            zero = "0.0" if self.call.dtype.value == "DOUBLE" or self.call.func == "AVG" else "0"
            return ["0", zero] if self.arg_null else [zero]
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
        test = f"st[{i}] is None or v {better} st[{i}]"
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
        assert self.mode == "pane_deque"
        if sign < 0:
            return [f"d = st[{i}]", "if d and d[0][0] == pane: d.popleft()"]
        cmp = "<" if self.call.func == "MAX" else ">"
        return [
            f"v = p[{i}]",
            "if v is not None:",
            f"    d = st[{i}]",
            f"    while d and d[-1][1] {cmp} v: d.pop()",
            "    d.append((pane, v))",
        ]

    def update_code(self, sign: int) -> list[str]:
        """Statements applying one tuple ``r`` with sign +1 (insert) or -1 (delete)."""
        i, a = self.index, self.arg
        op = "+=" if sign > 0 else "-="
        body: list[str]
        if self.mode == "count_star":
            return []
        if self.mode == "count":
            body = [f"st[{i}] {op} 1"]
        elif self.mode == "sum":
            if self.arg_null:
                body = [f"st[{i}] {op} 1", f"st[{i + 1}] {op} v"]
            else:
                body = [f"st[{i}] {op} v"]
        elif self.mode == "deque":
            cmp = "<" if self.call.func == "MAX" else ">"
            if sign > 0:
                body = [f"d = st[{i}]", f"while d and d[-1] {cmp} v: d.pop()", "d.append(v)"]
            else:
                body = [f"d = st[{i}]", "if d and d[0] == v: d.popleft()"]
        else:  # multisets
            if sign > 0:
                body = [f"c = st[{i}]", "c[v] = c.get(v, 0) + 1"]
            else:
                body = [f"c = st[{i}]", "n = c[v] - 1", "if n: c[v] = n", "else: del c[v]"]
        head = [f"v = {a}"]
        if self.arg_null:
            return [*head, "if v is not None:", *["    " + b for b in _indent_block(body)]]
        return head + _indent_block(body)

    def final_code(self, global_agg: bool) -> str:
        """Python expression computing this aggregate's value from the group state ``st``."""
        i, mode, func = self.index, self.mode, self.call.func
        if mode == "count_star":
            return "st[0]"
        if mode == "count":
            return f"st[{i}]"
        if mode == "sum":
            n, total = (f"st[{i}]", f"st[{i + 1}]") if self.arg_null else ("st[0]", f"st[{i}]")
            value = f"{total} / {n}" if func == "AVG" else total
            if func == "SUM" and self.call.dtype.is_integer:
                value = f"_ick({total})"  # a SUM outside BIGINT is an error (DuckDB's too)
            if self.arg_null or global_agg:
                return f"({value} if {n} else None)"
            return f"({value})"
        if mode == "deque":
            return f"(st[{i}][0] if st[{i}] else None)"
        if mode == "pane_deque":
            return f"(st[{i}][0][1] if st[{i}] else None)"
        if mode == "multiset_distinct":
            return f"len(st[{i}])"
        fn = {"MAX": "max", "MIN": "min"}.get(func, "_median")
        return f"({fn}(st[{i}]) if st[{i}] else None)"

    def reset_code(self) -> list[str]:
        """Statements zeroing a running sum once its group is empty (no float drift)."""
        if self.mode != "sum":
            return []
        i = self.index
        slot = i + 1 if self.arg_null else i
        n = f"st[{i}]" if self.arg_null else "st[0]"
        zero = "0.0" if self.call.dtype.value == "DOUBLE" or self.call.func == "AVG" else "0"
        return [f"if {n} == 0: st[{slot}] = {zero}"]

    def final(self, st: list[Any]) -> Any:
        i = self.index
        mode = self.mode
        if mode == "count_star":
            return st[0]
        if mode == "count":
            return st[i]
        if mode == "sum":
            n = st[i] if self.arg_null else st[0]
            total = st[i + 1] if self.arg_null else st[i]
            if n == 0:
                # Reset the running sum so float error cannot accumulate across empty phases.
                st[i + 1 if self.arg_null else i] = 0.0 if isinstance(total, float) else 0
                return None
            if self.call.func == "AVG":
                return total / n
            return checked_bigint(total) if self.call.dtype.is_integer else total
        if mode == "deque":
            d = st[i]
            return d[0] if d else None
        c = st[i]
        if mode == "multiset_distinct":
            return len(c)
        if not c:
            return None
        if self.call.func == "MAX":
            return max(c)
        if self.call.func == "MIN":
            return min(c)
        return _median(c)


def _indent_block(lines: list[str]) -> list[str]:
    """Lines as written (compound one-liners like ``if x: y`` are already valid)."""
    return lines


def _median(counts: dict[Any, int]) -> float:
    total = sum(counts.values())
    lo_rank, hi_rank = (total - 1) // 2, total // 2
    seen = 0
    lo = hi = None
    for v in sorted(counts):
        nxt = seen + counts[v]
        if lo is None and lo_rank < nxt:
            lo = v
        if hi_rank < nxt:
            hi = v
            break
        seen = nxt
    assert lo is not None and hi is not None
    return (lo + hi) / 2.0


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
    ) -> None:
        super().__init__(op_id, replace_out=replace_in)
        self.paned = paned
        self.pane_parts: dict[int, dict[Any, list[Any]]] = {}
        self.global_agg = not group_by
        self.replace_in = replace_in
        self.fifo = fifo
        cols = list(input_nullable)
        # Group key code: a scalar for one key, a tuple for several.
        if not group_by:
            key_code = "()"
        elif len(group_by) == 1:
            key_code = expr_source(group_by[0], cols)
        else:
            key_code = "(" + ", ".join(expr_source(g, cols) for g in group_by) + ",)"
        self._single_key = len(group_by) == 1
        self.slots: list[_Slot] = []
        width = 1
        for call in aggs:
            arg_code = expr_source(call.arg, cols) if call.arg is not None else None
            arg_null = call.arg is not None and nullable(call.arg, cols)
            slot = _Slot(call, width, arg_code, arg_null, fifo, paned)
            self.slots.append(slot)
            width += slot.width
        init = ["0"] + [c for s in self.slots for c in s.init_code()]
        self._new_state_src = f"def _new():\n    return [{', '.join(init)}]\n"
        self._ins = self._gen_update(+1, key_code)
        self._del = self._gen_update(-1, key_code)
        self._finish = self._gen_finish()
        partial = ["0"] + [c for s in self.slots for c in s.partial_init()]
        self._new_state_src += f"def _new_partial():\n    return [{', '.join(partial)}]\n"
        ns = dict(RUNTIME, _deque=deque)
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
        ns = dict(RUNTIME, _deque=deque)
        name = "ins" if sign > 0 else "del"
        exec(compile(src, f"<hycq:{self.op_id}:{name}>", "exec"), ns)
        fn = ns["_upd"]
        fn.__hycq_source__ = src
        return fn

    def _compile(self, lines: list[str], name: str, fn_name: str) -> Callable[..., Any]:
        src = "\n".join(lines) + "\n"
        ns = dict(RUNTIME, _deque=deque, _median=_median)
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
        ns = dict(RUNTIME, _median=_median)
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
            return v

        self.groups = {k: [live(v) for v in st] for k, st in snap["groups"].items()}
        self.out = dict(snap["out"])
        self._started = snap["started"]
        self.pane_parts = {
            p: {k: list(v) for k, v in parts.items()} for p, parts in snap["panes"].items()
        }
