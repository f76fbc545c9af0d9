"""The per-operator-kind tables: every kind is registered for every concern, lookups follow
subclasses, a missing or doubled registration is an error, and the IR allows n-ary nodes."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from typing import ClassVar, Literal

import pytest

from cost_models.analytical import ROW_COSTS, SQL_ROWS
from engines.row.base import NO_CHANGE, Delta
from engines.row.lowering import LOWERINGS
from engines.sqlgen.generate import TRANSLATIONS
from optimizer.estimate import ESTIMATORS
from optimizer.ir import plan as ir_plan
from optimizer.ir.dispatch import KindTable
from optimizer.ir.errors import InternalError
from optimizer.ir.plan import (
    N_ARY,
    R2S,
    Category,
    Join,
    Operator,
    PlanBuilder,
    Select,
    Sink,
    Source,
    StreamMode,
    Window,
    WindowKind,
)
from optimizer.ir.schema import Field, Schema
from optimizer.ir.types import DataType
from optimizer.statistics import KEYS


def _ir_kinds() -> list[type[Operator]]:
    return [
        c
        for c in vars(ir_plan).values()
        if isinstance(c, type) and issubclass(c, Operator) and c is not Operator
    ]


@pytest.mark.parametrize("kind", _ir_kinds(), ids=lambda c: c.__name__)
def test_every_ir_kind_is_registered_for_every_concern_it_needs(kind: type[Operator]) -> None:
    """A new IR node fails here until it is lowered, estimated, costed and translated."""
    if kind.category is Category.R2R:
        assert LOWERINGS.get(kind) is not None, "row-engine lowering (engines/row/lowering.py)"
        assert ESTIMATORS.get(kind) is not ESTIMATORS.default, "estimator (optimizer/estimate)"
        assert ROW_COSTS.get(kind) is not None, "row cost (cost_models/analytical.py)"
        assert SQL_ROWS.get(kind) is not None, "SQL cost terms (cost_models/analytical.py)"
        assert TRANSLATIONS.get(kind) is not None, "SQL translation (engines/sqlgen)"
    elif kind.category in (Category.S2R, Category.R2S):
        assert LOWERINGS.get(kind) is not None
        assert ROW_COSTS.get(kind) is not None
    else:  # sources and the sink: the gateway itself, nothing to lower or cost
        assert LOWERINGS.get(kind) is None and ROW_COSTS.get(kind) is None
    assert ESTIMATORS.get(kind) is not None  # the pass-through default at least


def test_keys_are_registered_for_the_kinds_that_group_or_join() -> None:
    assert {k.__name__ for k in KEYS.kinds()} == {"Aggregate", "Join"}


def test_kind_table_follows_subclasses_and_rejects_doubles() -> None:
    table: KindTable[str] = KindTable("probe")
    table.register(Join)("join")

    @dataclass(frozen=True, slots=True)
    class BandJoin(Join):
        kind: ClassVar[str] = "bandjoin"

    assert table.get(BandJoin) == "join"
    with pytest.raises(InternalError, match="registered twice"):
        table.register(Join)("again")
    op = Select("select1", Schema(()), None)  # type: ignore[arg-type]
    with pytest.raises(InternalError, match="no probe is registered for select operators"):
        table.of(op)
    assert table.get(Select) is None  # a miss is remembered, and still a miss
    table.register(Select)("select")
    assert table.of(op) == "select"  # a registration after a lookup is seen


_S = Schema((Field("ts", DataType.BIGINT), Field("v", DataType.DOUBLE)))


@dataclass(frozen=True, slots=True)
class _Union(Operator):
    """A test-only n-ary node: the IR's arity check must accept any number of inputs."""

    kind: ClassVar[str] = "union"
    arity: ClassVar[int | Literal["n"]] = N_ARY


def _windows(b: PlanBuilder, n: int) -> list[str]:
    src = b.add(lambda i: Source(i, _S, "s", 0, "s"))
    return [
        b.add(lambda i: Window(i, _S, WindowKind.RANGE, 2, 1, False, 0, "s", "RANGE 2"), src)
        for _ in range(n)
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_plan_accepts_n_ary_nodes(n: int) -> None:
    b = PlanBuilder()
    union = b.add(lambda i: _Union(i, _S), *_windows(b, n))
    out = b.add(lambda i: R2S(i, _S, StreamMode.RSTREAM), union)
    plan = b.build(b.add(lambda i: Sink(i, _S), out))
    assert plan.inputs(union) == [f"window{k}" for k in range(1, n + 1)]


def test_plan_rejects_an_n_ary_node_without_inputs_and_a_wrong_fixed_arity() -> None:
    b = PlanBuilder()
    union = b.add(lambda i: _Union(i, _S))
    out = b.add(lambda i: R2S(i, _S, StreamMode.RSTREAM), union)
    with pytest.raises(InternalError, match="has no input"):
        b.build(b.add(lambda i: Sink(i, _S), out))
    b = PlanBuilder()
    join = b.add(lambda i: Join(i, _S, None, 2), *_windows(b, 3))
    out = b.add(lambda i: R2S(i, _S, StreamMode.RSTREAM), join)
    with pytest.raises(InternalError, match="has 3 inputs, needs 2"):
        b.build(b.add(lambda i: Sink(i, _S), out))


def test_no_change_cannot_be_altered() -> None:
    assert NO_CHANGE.empty and len(NO_CHANGE) == 0
    with pytest.raises(AttributeError, match="shared"):
        NO_CHANGE.ins = [(1,)]
    with pytest.raises(AttributeError):
        NO_CHANGE.ins.append((1,))  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        del NO_CHANGE.table
    assert copy.deepcopy(NO_CHANGE) is NO_CHANGE
    assert pickle.loads(pickle.dumps(NO_CHANGE)) is NO_CHANGE
    fresh = Delta()
    fresh.ins.append((1,))  # ordinary deltas stay plain objects
    assert len(fresh) == 1 and NO_CHANGE.empty
