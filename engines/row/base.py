"""Row-engine building blocks: deltas, the operator base class and its metrics and state API.

A relation changes between slide instants by a :class:`Delta`: tuples inserted and tuples
deleted (bags: a tuple may occur several times). An operator whose output is *replaced*
wholesale at every change (a tumbling or NOW window and the stateless operators above it)
emits ``Delta(ins=new_contents, replace=True)`` instead, so nobody pays for deleting the
previous contents tuple by tuple.

Every operator keeps explicit, inspectable state (``state()``), can ``snapshot()`` it as plain
Python data and be rebuilt from it with ``restore()``: later work migrates running plans
between engines and plans (JISC, HybMig) with exactly this API.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

Row = tuple[Any, ...]
Rows = list[Row]


@dataclass(slots=True)
class Delta:
    """Change of a relation at one instant.

    ``replace=True`` means the relation is now exactly ``ins`` (``dels`` is empty and the old
    contents are implied). ``replace=False`` with both lists empty means "no change".

    ``expire`` lists *panes* that left the window (paned windows only, see
    ``engines.row.windows.PanedRangeWindow``): instead of re-sending every expired tuple, the
    window names the slide-sized pane that expired and the aggregate above it subtracts that
    pane's partial aggregates.

    ``chunks`` and ``table`` carry columnar data between the gateway and MIG operators:
    an Arrow window reports the Arrow chunks it added and removed (``ChunkChange``), and a MIG
    hands its result relation over as one Arrow ``table`` (replace semantics).

    A delta is read-only once an operator has returned it: every consumer of the operator
    receives the same object, and may keep its lists as state (an R2S keeps the relation it
    was handed), so nobody appends to, sorts or reassigns a received delta's fields.
    """

    ins: Rows = field(default_factory=list)
    dels: Rows = field(default_factory=list)
    replace: bool = False
    expire: tuple[int, ...] = ()
    chunks: ChunkChange | None = None
    table: Any = None  # pyarrow.Table: the whole relation (replace semantics)

    def __len__(self) -> int:
        if self.table is not None:
            return int(self.table.num_rows)
        if self.chunks is not None:
            return sum(int(t.num_rows) for _, t in self.chunks.added)
        return len(self.ins) + len(self.dels)

    @property
    def empty(self) -> bool:
        return (
            not self.replace
            and not self.ins
            and not self.dels
            and not self.expire
            and self.chunks is None
            and self.table is None
        )


@dataclass(slots=True)
class ChunkChange:
    """Arrow chunks an Arrow window added (id, table) and removed (ids) at one instant."""

    added: list[tuple[int, Any]] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # ids of all current chunks, oldest first


class _NoChange(Delta):
    """The type of :data:`NO_CHANGE`: a delta nobody can alter (assignment raises, and its
    lists are empty tuples, which have no ``append``)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"NO_CHANGE is shared by every operator: build a new Delta ({name})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"NO_CHANGE is shared by every operator ({name})")

    def __reduce__(self) -> str:
        return "NO_CHANGE"  # copied or unpickled, it stays the one instance


def _no_change() -> Delta:
    d = object.__new__(_NoChange)
    for name, value in (
        ("ins", ()),
        ("dels", ()),
        ("replace", False),
        ("expire", ()),
        ("chunks", None),
        ("table", None),
    ):
        object.__setattr__(d, name, value)
    return d


#: "Nothing changed" without building a delta: one shared, immutable instance. (Deltas are
#: read-only once emitted, since consumers share them; ordinary ones stay plain mutable
#: objects because freezing costs about 1 us per construction on the hot path.)
NO_CHANGE: Delta = _no_change()


@dataclass(slots=True)
class OperatorMetrics:
    """Per-operator counters: tuples in/out and busy time (seconds) spent in ``step``."""

    tuples_in: int = 0
    tuples_out: int = 0
    busy_s: float = 0.0
    steps: int = 0


class RowOperator(ABC):
    """Base of row-engine operators.

    Subclasses implement ``step(T, inputs) -> Delta`` (inputs in port order) and, if stateful,
    ``state`` / ``snapshot`` / ``restore``. ``replace_out`` says statically whether this
    operator emits replacing deltas.
    """

    kind: ClassVar[str] = "operator"

    def __init__(self, op_id: str, replace_out: bool = False) -> None:
        self.op_id = op_id
        self.replace_out = replace_out
        self.metrics = OperatorMetrics()

    @abstractmethod
    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        """Consume the input deltas of one instant and return the output delta."""

    def state(self) -> dict[str, Any]:
        """A JSON-friendly description of the operator's state (sizes, entries, timestamps)."""
        return {}

    def snapshot(self) -> dict[str, Any]:
        """All state as plain Python data; ``restore(snapshot())`` rebuilds the operator."""
        return {}

    def restore(self, snap: dict[str, Any]) -> None:
        """Rebuild state from ``snapshot()`` output."""
        return None
