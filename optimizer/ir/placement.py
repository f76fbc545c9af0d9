"""Placements: which engine runs each operator, what each engine can run, and the groups.

A *placement* maps every operator id to an engine name. Sources, windows (S2R), R2S
operators and the sink always run on the row engine: it is the gateway that hosts the
streams (dissertation, section 6.2). R2R operators may run on a columnar engine; a maximal
connected set of R2R operators on the same columnar engine is a *migration candidate*
(group), executed as one SQL query wrapped by a MIG operator.

What an engine can run is data (:class:`EngineCapabilities`), declared by each engine's
registration (``engines/registry.py``) and passed in by the API layer, so the optimizer and
the plan builder reject an operator an engine cannot run before anything executes, without
knowing any engine but the row engine (the gateway, :data:`ROW_CAPABILITIES`).

Example:
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import load_catalog
    >>> from pathlib import Path
    >>> cat = load_catalog(Path(__file__).parents[2] / "queries/smartplug/catalog.toml")
    >>> plan = plan_query("SELECT plug_id, AVG(value) AS a FROM readings [RANGE 1 MINUTE] "
    ...                   "WHERE property = 1 GROUP BY plug_id", cat)
    >>> p = uniform_placement(plan, "duckdb")
    >>> check_placement(plan, p, {"duckdb": SQL_CAPABILITIES})
    >>> [(g.engine, g.operators) for g in groups(plan, p)]
    [('duckdb', ('select1', 'aggregate1'))]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import networkx as nx

from optimizer.ir.errors import PlanError, did_you_mean
from optimizer.ir.expr import AggCall, Cast, Func, Unary
from optimizer.ir.functions import FUNCTIONS
from optimizer.ir.plan import Aggregate, Category, LogicalPlan

ROW = "row"


@dataclass(frozen=True)
class EngineCapabilities:
    """What one engine can run: operator kinds, aggregate functions, scalar functions, and
    the casts it cannot give the IR's result for (``(source type, target type)`` names as in
    :class:`optimizer.ir.types.DataType`, e.g. ``("VARCHAR", "INTEGER")``)."""

    operators: frozenset[str]
    aggregates: frozenset[str]
    functions: frozenset[str]
    distinct_aggregates: frozenset[str] = frozenset({"COUNT"})
    unsupported_casts: frozenset[tuple[str, str]] = frozenset()

    def without_casts(self, casts: frozenset[tuple[str, str]]) -> EngineCapabilities:
        """These capabilities minus the given casts."""
        return replace(self, unsupported_casts=self.unsupported_casts | casts)

    def without_functions(self, names: frozenset[str]) -> EngineCapabilities:
        """These capabilities minus the given scalar functions."""
        return replace(self, functions=self.functions - names)


#: Every scalar function and aggregate of the IR (optimizer/ir/functions.py).
ALL_FUNCTIONS = frozenset(FUNCTIONS)
ALL_AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN"})
R2R_OPERATORS = frozenset({"select", "project", "join", "aggregate"})

#: The row engine: every operator (it hosts the streams, windows, R2S operators and the sink).
ROW_CAPABILITIES = EngineCapabilities(
    R2R_OPERATORS | {"source", "window", "istream", "dstream", "rstream", "sink"},
    ALL_AGGREGATES,
    ALL_FUNCTIONS,
)

#: A columnar engine that runs the IR's whole SQL subset (every R2R operator and function).
SQL_CAPABILITIES = EngineCapabilities(R2R_OPERATORS, ALL_AGGREGATES, ALL_FUNCTIONS)


def capability_table(
    capabilities: Mapping[str, EngineCapabilities] | None, engines: Iterable[str] = ()
) -> dict[str, EngineCapabilities]:
    """The capabilities of every engine: the row engine's, then ``capabilities``.

    ``None`` (a library caller that names engines without declaring them, e.g. a unit test)
    gives every engine in ``engines`` :data:`SQL_CAPABILITIES`; hycq's API always passes the
    engine registry's table, where an unregistered name is an error.
    """
    table = dict.fromkeys(engines, SQL_CAPABILITIES) if capabilities is None else dict(capabilities)
    table[ROW] = ROW_CAPABILITIES
    return table


@dataclass(frozen=True)
class Group:
    """A migration candidate: connected R2R operators on one columnar engine.

    ``operators`` are in topological order; ``top`` is the one whose output leaves the group.
    """

    engine: str
    operators: tuple[str, ...]
    top: str


def external_inputs(group: Group, plan: LogicalPlan) -> list[str]:
    """The operators outside ``group`` that feed it, each once: in the topological order of
    the group's operators, port order within each (the order ``engines.sqlgen.group_sql``
    names them in0, in1, ...; one operator read on two ports is one input)."""
    members = set(group.operators)
    ins = (i for o in group.operators for i in plan.inputs(o) if i not in members)
    return list(dict.fromkeys(ins))


def uniform_placement(plan: LogicalPlan, engine: str) -> dict[str, str]:
    """Every R2R operator on ``engine``, everything else on the row engine."""
    return {
        op_id: engine if plan.op(op_id).category is Category.R2R else ROW
        for op_id in plan.topological()
    }


def complete_placement(
    plan: LogicalPlan,
    partial: Mapping[str, str],
    capabilities: Mapping[str, EngineCapabilities] | None = None,
) -> dict[str, str]:
    """A full placement from a partial one (unnamed operators run on the row engine),
    validated: known ids and engines (those of ``capabilities``, see :func:`capability_table`),
    gateway operators on the row engine, capabilities."""
    ids = plan.topological()
    table = capability_table(capabilities, partial.values())
    names = sorted(table)
    for op_id, engine in partial.items():
        if op_id not in plan:
            raise PlanError(
                f"placement names unknown operator '{op_id}'",
                hint=did_you_mean(op_id, ids) or "use the ids printed by 'hycq explain'",
            )
        if engine not in table:
            raise PlanError(
                f"placement puts '{op_id}' on unknown engine '{engine}'",
                hint=did_you_mean(engine, names) or f"engines: {', '.join(names)}",
            )
    placement = {op_id: partial.get(op_id, ROW) for op_id in ids}
    check_placement(plan, placement, table)
    return placement


def check_placement(
    plan: LogicalPlan,
    placement: Mapping[str, str],
    capabilities: Mapping[str, EngineCapabilities] | None = None,
) -> None:
    """Raise PlanError if an operator is placed on an engine that cannot run it
    (``capabilities``: see :func:`capability_table`)."""
    table = capability_table(capabilities, placement.values())
    for op_id in plan.topological():
        op = plan.op(op_id)
        engine = placement[op_id]
        caps = table.get(engine)
        if caps is None:
            names = sorted(table)
            raise PlanError(
                f"placement puts '{op_id}' on unknown engine '{engine}'",
                hint=did_you_mean(engine, names) or f"engines: {', '.join(names)}",
            )
        if op.kind not in caps.operators:
            where = (
                "the row engine (the gateway hosting streams, windows and output)"
                if op.category is not Category.R2R
                else "an engine that supports it"
            )
            raise PlanError(
                f"{engine} cannot run {op_id} ({op.kind})",
                hint=f"place {op_id} on {where}",
            )
        if isinstance(op, Aggregate):
            for call in op.aggs:
                _check_agg(op_id, engine, caps, call)
        for expr in op.expressions():
            for node in expr.walk():
                if isinstance(node, Func) and node.name not in caps.functions:
                    raise PlanError(
                        f"{engine} cannot evaluate {node.name} in {op_id}",
                        hint=f"place {op_id} on an engine that computes {node.name} as "
                        "docs/semantics.md defines it (DuckDB or the row engine)",
                    )
                if (
                    isinstance(node, Cast)
                    and (node.operand.dtype.value, node.dtype.value) in caps.unsupported_casts
                ):
                    raise PlanError(
                        f"{engine} cannot evaluate CAST from {node.operand.dtype.value} to "
                        f"{node.dtype.value} in {op_id}",
                        hint=f"place {op_id} on an engine that computes this cast as "
                        "docs/semantics.md defines it",
                    )
                if isinstance(node, Unary) and node.op not in (
                    "NOT",
                    "NEG",
                    "IS NULL",
                    "IS NOT NULL",
                ):
                    raise PlanError(f"{engine} cannot evaluate {node.op} in {op_id}")


def _check_agg(op_id: str, engine: str, caps: EngineCapabilities, call: AggCall) -> None:
    if call.func not in caps.aggregates:
        raise PlanError(f"{engine} cannot compute {call.func} in {op_id}")
    if call.distinct and call.func not in caps.distinct_aggregates:
        raise PlanError(f"{engine} cannot compute {call.func}(DISTINCT ...) in {op_id}")


def groups(plan: LogicalPlan, placement: Mapping[str, str]) -> list[Group]:
    """The migration candidates of a placement, in topological order of their tops."""
    columnar = [
        i
        for i in plan.topological()
        if placement.get(i, ROW) != ROW and plan.op(i).category is Category.R2R
    ]
    g = nx.Graph()
    g.add_nodes_from(columnar)
    for i in columnar:
        for j in plan.inputs(i):
            if j in g and placement[j] == placement[i]:
                g.add_edge(i, j)
    order = {op_id: k for k, op_id in enumerate(plan.topological())}
    out = []
    for comp in nx.connected_components(g):
        ops = tuple(sorted(comp, key=order.__getitem__))
        tops = [o for o in ops if not any(c in comp for c in plan.consumers(o))]
        if len(tops) != 1:  # pragma: no cover - every R2R operator has one consumer
            raise PlanError(f"group {ops} has {len(tops)} outputs")
        out.append(Group(placement[ops[0]], ops, tops[0]))
    out.sort(key=lambda grp: order[grp.top])
    return out


@dataclass(frozen=True)
class ResolvedPlan:
    """A plan with its placement resolved: the engine of every operator, and the groups of
    consecutive columnar operators that become one MIG each (``optimizer.ir.placement``)."""

    plan: LogicalPlan
    engines: dict[str, str]
    groups: tuple[Group, ...]

    @classmethod
    def of(cls, plan: LogicalPlan, engines: Mapping[str, str]) -> ResolvedPlan:
        """The resolved form of a complete engine-per-operator mapping."""
        return cls(plan, dict(engines), tuple(groups(plan, dict(engines))))
