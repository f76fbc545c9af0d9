"""The evaluation of a placement's cost (Eq. 6.4-6.6) under a cost model.

A cost model (the :class:`~optimizer.ir.costing.CostModel` protocol of the IR) prices work
in seconds: per input tuple of a row operator (``unit_cost``) and per invocation of a
columnar group (``group_cost``); it never estimates cardinalities (those come from
``optimizer.estimate`` and are shared by all models, so swapping models keeps experiments
comparable).

:class:`PlanCoster` turns those seconds into utilizations and a
:class:`~optimizer.ir.cost.Cost`: a row operator's ``u = sum_i lambda_i^in * c`` (Eq. 6.4),
:meth:`PlanCoster.row_cost`; a group's ``u = invocations per second * seconds per
invocation``, :meth:`PlanCoster.columnar_cost`. With ``shared_row_core=True`` every
row-engine operator's u is charged to one shared core (the row engine runs in one Python
thread), so their sum is one term of the bottleneck; otherwise each operator is its own unit
as in the dissertation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from optimizer.ir.arrow_filter import arrow_selected
from optimizer.ir.cost import INFEASIBLE, ZERO, Cost, merge
from optimizer.ir.costing import GATEWAY, CostModel, Estimates, OpEstimate, cost_class, factor_key
from optimizer.ir.placement import ROW, Group, external_inputs
from optimizer.ir.plan import R2S, Category, Operator, Source, Window

#: Seconds of row-engine (gateway) work per source tuple through a K-slack buffer: one
#: running maximum, one ``searchsorted``, one ``lexsort`` and one Arrow ``take`` per batch,
#: about 0.24 us per tuple for 65,536-row batches and 0.36 us for 1,000-row ones (1 M
#: tuples, K = 2 s at 1,000 tuples/s; one rough timing on a shared machine).
BUFFER_TUPLE_S = 0.3e-6


def with_buffering(model: CostModel, on: bool = True) -> CostModel:
    """``model`` as a run with (``on``) or without K-slack buffers sees it: its per-tuple
    ``buffering`` cost (a cost-model file may set it; else :data:`BUFFER_TUPLE_S`) charged
    only when the run buffers (``--disorder`` other than none). A model without a
    ``buffering`` field is wrapped."""
    if dataclasses.is_dataclass(model) and "buffering" in {
        f.name for f in dataclasses.fields(model)
    }:
        current = float(getattr(model, "buffering", 0.0))
        wanted = (current or BUFFER_TUPLE_S) if on else 0.0
        return model if wanted == current else dataclasses.replace(model, buffering=wanted)
    return _Buffered(model, BUFFER_TUPLE_S) if on else model


class _Buffered:
    """A cost model plugin seen with a ``buffering`` cost (everything else delegated)."""

    def __init__(self, model: CostModel, per_tuple: float) -> None:
        self._model = model
        self.buffering = per_tuple

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def operator_utilization(model: CostModel, op: Operator, est: OpEstimate) -> float:
    """Eq. 6.4: ``u = sum_i lambda_i^in * c`` for a row operator."""
    lam = est.total_in
    if lam.is_absent:
        return float("inf")
    return lam.value * model.unit_cost(op, ROW, est)


def group_utilization(model: CostModel, group: Group, estimates: Estimates) -> float:
    """A group's u: invocations per second (one per slide of its top) times seconds each."""
    per_call = model.group_cost(group, estimates)
    return estimates[group.top].invocations_per_second * per_call


class PlanCoster:
    """Costs placements of one plan under one model and one set of estimates (cached)."""

    def __init__(
        self, estimates: Estimates, model: CostModel, shared_row_core: bool = False
    ) -> None:
        self.estimates = estimates
        self.plan = estimates.plan
        self.model = model
        self.shared_row_core = shared_row_core
        self._row: dict[str, Cost] = {}
        self._groups: dict[tuple[str, tuple[str, ...]], Cost] = {}
        self._order = {op_id: k for k, op_id in enumerate(self.plan.topological())}
        self.fixed = merge(
            self.row_cost(i)
            for i in self.plan.topological()
            if self.plan.op(i).category is not Category.R2R
        )
        """Cost of the gateway operators (sources, windows, R2S, sink): always row."""
        creditable = sum(
            self.row_cost(i).utilization
            for i in self.plan.topological()
            if isinstance(self.plan.op(i), (Window, R2S))
        )
        self.fixed_floor = (
            self.fixed + Cost.on_core(-creditable) if self.shared_row_core else self.fixed
        )
        """A lower bound of the gateway's cost in any placement, for pruning partial plans:
        :attr:`fixed` less what Arrow credits may take back (the windows' and R2S
        operators' row u, conversion included; :meth:`arrow_credits`)."""

    def row_cost(self, op_id: str) -> Cost:
        """Cost of ``op_id`` run by the row engine."""
        if op_id not in self._row:
            u = operator_utilization(self.model, self.plan.op(op_id), self.estimates[op_id])
            u += self._ingest(op_id) + self._buffering(op_id)
            self._row[op_id] = Cost.on_core(u) if self.shared_row_core else Cost.unit(u)
        return self._row[op_id]

    def _buffering(self, op_id: str) -> float:
        """A source's K-slack buffer (``--disorder``): the model's ``buffering`` seconds per
        arriving tuple, on the row engine whatever the placement (the buffers sit in front
        of every engine), so it counts in every plan's gateway cost alike."""
        per_tuple = float(getattr(self.model, "buffering", 0.0))
        if not per_tuple or not isinstance(self.plan.op(op_id), Source):
            return 0.0
        lam = self.estimates[op_id].lambda_out
        return per_tuple * lam.value if not lam.is_absent else 0.0

    def _ingest(self, op_id: str) -> float:
        """A row window's share of the gateway's work on its stream's tuples: converting
        each Arrow batch to tuples and driving them through the row engine's instants.

        Streams arrive as Arrow batches; the gateway converts a batch once for all the row
        windows of its stream (``engines.row.executor``), at the model's ``ingest`` seconds
        per tuple (0 if it has none). Each of the stream's windows is charged its share
        (gateway work, so every plan pays it), and the share is taken back only when no
        window of the stream reads tuples: :meth:`arrow_credits` for a group that takes
        every window of the stream, :meth:`split_conversion` for windows that feed several
        groups. A window that feeds a columnar group while a sibling window stays on the
        row engine saves nothing: the batch is converted all the same (measured: Q3 with one
        of its two windows feeding DuckDB spent as long in its row window, conversion
        included, as the all-row plan in both, 0.38 against 0.34 us per tuple on 800
        plugs at 10k; issue 20, ninth stop)."""
        per_tuple = float(getattr(self.model, "ingest", 0.0))
        if not per_tuple or not isinstance(self.plan.op(op_id), Window):
            return 0.0
        (src,) = self.plan.inputs(op_id)
        n = len(self._stream_windows(src))
        return per_tuple * self.estimates[op_id].lambda_out.value / max(n, 1)

    def _stream_windows(self, source: str) -> list[str]:
        return [c for c in self.plan.consumers(source) if isinstance(self.plan.op(c), Window)]

    def _arrow_inputs(self, group: Group) -> list[tuple[str | None, str | None]]:
        """What of the row engine works on Arrow for ``group``'s inputs, per distinct input
        (a group reading one operator on two ports holds one copy of it): (the input if it
        is a row select run as an Arrow filter, else None; the window whose Arrow chunks
        the group reads, directly or through that select, if the window feeds nothing else,
        else None)."""
        out: list[tuple[str | None, str | None]] = []
        for i in external_inputs(group, self.plan):
            select, window = None, i
            if arrow_selected(self.plan, i):
                select = i
                (window,) = self.plan.inputs(i)
            keeps = isinstance(self.plan.op(window), Window)
            keeps = keeps and len(self.plan.consumers(window)) == 1
            out.append((select, window if keeps else None))
        return out

    def _arrow_windows(self, group: Group) -> list[str]:
        """The windows whose Arrow chunks ``group`` reads: directly, or through a row select
        that runs as an Arrow filter; each the only consumer of its window."""
        return [w for _, w in self._arrow_inputs(group) if w is not None]

    def _arrow_outputs(self, group: Group) -> list[tuple[str, float]]:
        """The R2S operators ``group``'s result goes to, each with its u on that Arrow
        result instead of tuples: RSTREAM passes the table to the sink (0), ISTREAM and
        DSTREAM take its bag difference with the previous result (the model's
        ``arrow_r2s_diff`` per result row per slide). Empty for a model without it."""
        per_row = getattr(self.model, "arrow_r2s_diff", None)
        if per_row is None:
            return []
        top = self.estimates[group.top]
        rows = top.cardinality.value * top.invocations_per_second
        out = []
        for c in self.plan.consumers(group.top):
            op = self.plan.op(c)
            if isinstance(op, R2S):
                out.append((c, 0.0 if op.kind == "rstream" else float(per_row) * rows))
        return out

    def _conversion_credit(self, windows: Iterable[str]) -> float:
        """The conversion shares of the streams all of whose windows are in ``windows``."""
        have = set(windows)
        credit = 0.0
        for src in dict.fromkeys(self.plan.inputs(w)[0] for w in have):
            stream = self._stream_windows(src)
            if stream and all(w in have for w in stream):
                credit += sum(self._ingest(w) for w in stream)
        return credit

    def split_conversion(self, placement: Mapping[str, str]) -> float:
        """The conversion a placement is over-charged by additive costing: streams whose
        windows all feed columnar groups, but not all the same group (each group's
        :meth:`arrow_credits` takes the conversion back only for streams it reads whole).
        0 without a shared row core (no Arrow credits at all)."""
        if not self.shared_row_core or not getattr(self.model, "ingest", 0.0):
            return 0.0
        groups = [Group(e, tuple(ops), ops[-1]) for e, ops in self.groups(placement)]
        per_group = [set(self._arrow_windows(g)) for g in groups]
        arrow = set().union(*per_group) if per_group else set()
        whole = sum(self._conversion_credit(ws) for ws in per_group)
        return self._conversion_credit(arrow) - whole

    def columnar_cost(self, engine: str, operators: Iterable[str], top: str | None = None) -> Cost:
        """Cost of running ``operators`` (a connected set with one top) on the columnar
        ``engine`` as one group: the model's ``group_cost`` (seconds per invocation) times
        invocations per second.

        With a shared row core the group's u is charged to that core too: a MIG is a row
        operator that waits for its engine's query (``engines.mig.operator``), so the row thread is
        busy for the query's wall time, and a plan's throughput is bounded by the sum of
        its row work and its groups' queries, not the larger of the two. Costing groups as
        independent units (the dissertation's pipelined engines) over-predicted every mixed
        plan measured in the placement study (up to 2.5x on 800 plugs at 10k, issue 20).
        Otherwise (``per-operator``) a group is its own unit, as in the dissertation.

        With a shared row core, what runs as Arrow because it feeds this group is charged
        here at the model's Arrow prices, in place of the row costs :meth:`row_cost`
        charged without knowing its consumer's engine: a window feeding the group keeps
        Arrow chunks (``arrow_window`` per tuple, not ``window``), and a row select the
        row engine runs as an Arrow filter (``optimizer.ir.arrow_filter.arrow_selected``)
        costs ``arrow_select`` per row it passes, not its row u and its share of the gateway's
        conversion.

        ``top`` may be given when the caller knows it (the search does: its root)."""
        ops = tuple(sorted(operators, key=self._order.__getitem__))
        key = (engine, ops)
        hit = self._groups.get(key)
        if hit is not None:
            return hit
        if top is None:
            members = set(ops)
            tops = [o for o in ops if not any(c in members for c in self.plan.consumers(o))]
            top = tops[-1]
        group = Group(engine, ops, top)
        u = group_utilization(self.model, group, self.estimates)
        if u == float("inf"):
            cost = INFEASIBLE
        elif self.shared_row_core:
            cost = Cost.on_core(u - sum(self.arrow_credits(group).values()))
        else:
            cost = Cost.unit(u)
        self._groups[key] = cost
        return cost

    def arrow_credits(self, group: Group) -> dict[str, float]:
        """What the row costs overcharge for the group's inputs that run as Arrow, per class
        of work (``optimizer.ir.costing.factor_key``): a window feeding the group, or an
        Arrow select's window, keeps Arrow chunks (the model's ``arrow_window`` per tuple,
        not its ``window``), and an Arrow select filters them (``arrow_select`` per row
        it passes, not its row u and its share of the conversion); an R2S operator the group
        feeds takes the result as Arrow (:meth:`_arrow_outputs`), not as tuples.
        Subtracted from the group's u with a shared row core (:meth:`columnar_cost`), and
        from these classes where a plan's work is reported per class or engine. Empty for
        a model without these constants."""
        per_select = getattr(self.model, "arrow_select", None)
        per_window = getattr(self.model, "arrow_window", None)
        credits: dict[str, float] = {}
        if per_select is None or per_window is None:
            return credits

        def add(op_id: str, amount: float) -> None:
            key = factor_key(ROW, cost_class(self.plan.op(op_id)))
            credits[key] = credits.get(key, 0.0) + amount

        gateway = factor_key(ROW, GATEWAY)
        for select, window in self._arrow_inputs(group):
            if select is not None:
                passed = self.estimates[select].lambda_out.value
                add(
                    select,
                    operator_utilization(self.model, self.plan.op(select), self.estimates[select]),
                )
                credits[gateway] = credits.get(gateway, 0.0) - float(per_select) * passed
            if window is not None:
                lam = self.estimates[window].total_in.value
                op = self.plan.op(window)
                add(window, operator_utilization(self.model, op, self.estimates[window]))
                credits[gateway] = credits.get(gateway, 0.0) - float(per_window) * lam
        for r2s, arrow_u in self._arrow_outputs(group):
            add(r2s, operator_utilization(self.model, self.plan.op(r2s), self.estimates[r2s]))
            credits[gateway] = credits.get(gateway, 0.0) - arrow_u
        conversion = self._conversion_credit(self._arrow_windows(group))
        if conversion:
            credits[gateway] = credits.get(gateway, 0.0) + conversion
        return credits

    def group_own_u(self, engine: str, ops: Iterable[str]) -> float:
        """A group's own u: :meth:`columnar_cost` with the Arrow credits it holds added back
        (what its MIG does; the credits lower the gateway's cost, shown on the operators
        :meth:`arrow_row_u` prices)."""
        ops = tuple(sorted(ops, key=self._order.__getitem__))
        u = self.columnar_cost(engine, ops).utilization
        if not self.shared_row_core:
            return u
        members = set(ops)
        tops = [o for o in ops if not any(c in members for c in self.plan.consumers(o))]
        return u + sum(self.arrow_credits(Group(engine, ops, tops[-1])).values())

    def arrow_row_u(self, placement: Mapping[str, str]) -> dict[str, float]:
        """The u of the row-run operators that work on Arrow under ``placement``: a window
        feeding a columnar group keeps chunks (``arrow_window``), an Arrow select filters
        them (``arrow_select``); a window keeps its share of the stream's conversion while
        another window of the stream reads tuples. With :meth:`group_own_u` and the other
        operators' :meth:`row_cost`, these sum to :meth:`placement_cost`. Empty without a
        shared row core or the model's Arrow prices."""
        per_select = getattr(self.model, "arrow_select", None)
        per_window = getattr(self.model, "arrow_window", None)
        if not self.shared_row_core or per_select is None or per_window is None:
            return {}
        out: dict[str, float] = {}
        windows: list[str] = []
        for engine, ops in self.groups(placement):
            group = Group(engine, tuple(ops), ops[-1])
            for select, window in self._arrow_inputs(group):
                if select is not None:
                    out[select] = float(per_select) * self.estimates[select].lambda_out.value
                if window is not None:
                    lam = self.estimates[window].total_in.value
                    out[window] = float(per_window) * lam + self._ingest(window)
                    windows.append(window)
            out.update(self._arrow_outputs(group))
        whole = set(windows)
        for src in dict.fromkeys(self.plan.inputs(w)[0] for w in whole):
            stream = self._stream_windows(src)
            if all(w in whole for w in stream):
                for w in stream:
                    out[w] -= self._ingest(w)
        return out

    def placement_cost(self, placement: Mapping[str, str]) -> Cost:
        """Cost of a complete placement (Eq. 6.5/6.6), gateway operators included, and the
        conversion of streams no group reads whole but no row window reads either
        (:meth:`split_conversion`) taken back."""
        cost = self.fixed + self.r2r_cost(placement)
        split = self.split_conversion(placement)
        return cost + Cost.on_core(-split) if split else cost

    def r2r_cost(self, placement: Mapping[str, str]) -> Cost:
        """Cost of the R2R operators of a placement (row operators plus groups)."""
        total = ZERO
        for op_id in self.plan.r2r_ids():
            if placement.get(op_id, ROW) == ROW:
                total = total + self.row_cost(op_id)
        for engine, ops in self.groups(placement):
            total = total + self.columnar_cost(engine, ops)
        return total

    def groups(self, placement: Mapping[str, str]) -> list[tuple[str, list[str]]]:
        """The columnar groups of a placement: (engine, operators) per maximal connected
        set of R2R operators placed on the same columnar engine."""
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for op_id in self.plan.r2r_ids():
            engine = placement.get(op_id, ROW)
            if engine == ROW:
                continue
            parent[op_id] = op_id
            for i in self.plan.inputs(op_id):
                if i in parent and placement.get(i, ROW) == engine:
                    parent[find(i)] = find(op_id)
        members: dict[str, list[str]] = {}
        for op_id in parent:
            members.setdefault(find(op_id), []).append(op_id)
        return [(placement[ops[0]], ops) for ops in members.values()]

    def utilization_by_class(self, placement: Mapping[str, str]) -> dict[str, float]:
        """Predicted busy core-seconds per second of a placement per class of work (the keys
        of ``cost_models.corrected``): ``row:<kind>`` for each kind of row-placed R2R
        operator, ``row:gateway`` for the gateway operators plus the conversion and
        buffering charged to row operators, and each columnar engine (its groups)."""

        out: dict[str, float] = {}
        for op_id in self.plan.topological():
            op = self.plan.op(op_id)
            if op.category is Category.R2R and placement.get(op_id, ROW) != ROW:
                continue
            key = factor_key(ROW, cost_class(op))
            u = operator_utilization(self.model, op, self.estimates[op_id])
            out[key] = out.get(key, 0.0) + u
            gateway = factor_key(ROW, GATEWAY)
            out[gateway] = out.get(gateway, 0.0) + self._ingest(op_id) + self._buffering(op_id)
        for engine, ops in self.groups(placement):
            cost, credits = self._group_and_credits(engine, ops)
            out[engine] = out.get(engine, 0.0) + cost + sum(credits.values())
            for key, amount in credits.items():
                out[key] = out.get(key, 0.0) - amount
        split = self.split_conversion(placement)
        if split:
            gateway = factor_key(ROW, GATEWAY)
            out[gateway] = out.get(gateway, 0.0) - split
        return out

    def _group_and_credits(self, engine: str, ops: list[str]) -> tuple[float, dict[str, float]]:
        """A group's u as :meth:`columnar_cost` gives it, and the Arrow credits it holds
        (none unless the row core is shared): reports put the group's own cost under its
        engine and take the credits off the row classes they were charged to."""
        u = self.columnar_cost(engine, ops).utilization
        if not self.shared_row_core:
            return u, {}
        members = set(ops)
        tops = [o for o in ops if not any(c in members for c in self.plan.consumers(o))]
        group = Group(engine, tuple(sorted(ops, key=self._order.__getitem__)), tops[-1])
        return u, self.arrow_credits(group)

    def utilization_by_engine(self, placement: Mapping[str, str]) -> dict[str, float]:
        """Predicted busy core-seconds per second of a placement, per engine: ``row`` (the
        gateway operators and the row-placed R2R operators) and each columnar engine (its
        groups). What ``hycq run --adapt`` compares with the measured busy time."""
        out = {ROW: self.fixed.utilization}
        for op_id in self.plan.r2r_ids():
            if placement.get(op_id, ROW) == ROW:
                out[ROW] += self.row_cost(op_id).utilization
        for engine, ops in self.groups(placement):
            cost, credits = self._group_and_credits(engine, ops)
            out[engine] = out.get(engine, 0.0) + cost + sum(credits.values())
            out[ROW] -= sum(credits.values())
        return out
