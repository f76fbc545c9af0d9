"""Per-operator-kind tables: how each concern finds its code for an operator.

Every concern that does something different per operator kind (lowering to the row engine,
estimating the output, costing, SQL generation, statistics) keeps one :class:`KindTable`
from the IR node class to its function, filled by a decorator next to each function::

    ESTIMATORS: KindTable[EstimateFn] = KindTable("estimate")

    @ESTIMATORS.register(Select)
    def _select(...): ...

so a new operator kind is one IR node plus one registration per concern, and a kind a
concern has no entry for fails with a clear error instead of falling through an ``isinstance``
chain. Lookup is by the node's class, then its base classes (cached): one dict access on the
hot path.

Example:
    >>> from optimizer.ir.plan import Select, Sink
    >>> names: KindTable[str] = KindTable("name")
    >>> _ = names.register(Select)("a filter")
    >>> names.get(Select)
    'a filter'
    >>> names.get(Sink) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from optimizer.ir.errors import InternalError

if TYPE_CHECKING:  # pragma: no cover
    from optimizer.ir.plan import Operator

F = TypeVar("F")


class KindTable(Generic[F]):
    """A table from IR operator classes to the entry (usually a function) of one concern."""

    def __init__(self, concern: str, default: F | None = None) -> None:
        self.concern = concern
        self.default = default
        self._entries: dict[type, F] = {}
        self._resolved: dict[type, F | None] = {}

    def register(self, *kinds: type[Operator]) -> Callable[[F], F]:
        """Decorator: ``entry`` implements this concern for the operator classes ``kinds``."""

        def add(entry: F) -> F:
            for kind in kinds:
                if kind in self._entries:
                    raise InternalError(f"{self.concern}: {kind.__name__} is registered twice")
                self._entries[kind] = entry
            self._resolved.clear()
            return entry

        return add

    def get(self, kind: type) -> F | None:
        """The entry of ``kind`` (or of its nearest registered base class), else the default."""
        try:
            return self._resolved[kind]
        except KeyError:
            pass
        entry = next((self._entries[k] for k in kind.__mro__ if k in self._entries), None)
        self._resolved[kind] = entry if entry is not None else self.default
        return self._resolved[kind]

    def of(self, op: Operator) -> F:
        """The entry for ``op``; InternalError if its kind has none (a missing registration)."""
        entry = self.get(type(op))
        if entry is None:
            raise InternalError(f"no {self.concern} is registered for {op.kind} operators")
        return entry

    def kinds(self) -> list[type]:
        """The registered operator classes."""
        return list(self._entries)
