"""R2S operators: ISTREAM, DSTREAM and RSTREAM turn the result relation into the output stream.

With incremental deltas ``ISTREAM = ins - dels`` and ``DSTREAM = dels - ins`` (bag
differences: a tuple deleted and re-inserted in the same instant is not new), and RSTREAM
keeps the whole relation as a multiset to emit it at every instant. With replacing deltas
the relation at T is the delta itself and ISTREAM/DSTREAM compare it with the previous one.
The differences follow the row-equality rule of ``engines.row.bags`` (floats within the
comparison tolerance, NaN equal to itself), so a float aggregate that moved only in its
last bits is not a new row. Taking it over the delta is the same as over the whole
relations: rows in both R(T) and R(T') cancel exactly in step 1 either way.

When a MIG feeds the R2S operator its result arrives as an Arrow table (``Delta.table``):
RSTREAM passes it to the sink untouched (no tuples are built) and ISTREAM/DSTREAM take the
bag difference with the previous result.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from engines.row.arrow_ops import arrow_bag_difference
from engines.row.bags import bag_difference
from engines.row.base import Delta, Row, RowOperator, Rows


class _DifferenceOp(RowOperator):
    """ISTREAM and DSTREAM: a bag difference between the relation now and before.

    ``entered`` selects the direction: rows that entered (ISTREAM) or left (DSTREAM).
    """

    entered: bool = True

    def __init__(self, op_id: str, replace_in: bool) -> None:
        super().__init__(op_id)
        self.replace_in = replace_in
        self.prev: Rows = []
        self.prev_table: Any = None  # the previous Arrow result (MIG input)

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        d = inputs[0]
        if d.table is not None:
            prev = self.prev_table if self.prev_table is not None else d.table.slice(0, 0)
            self.prev_table = d.table
            entered, left = arrow_bag_difference(d.table, prev)
            return Delta(table=entered if self.entered else left)
        if d.empty:
            return Delta()
        if d.replace:
            before, self.prev = self.prev, d.ins
            ins, dels = bag_difference(d.ins, before)
        else:
            ins, dels = bag_difference(d.ins, d.dels)
        return Delta(ins if self.entered else dels)

    def state(self) -> dict[str, Any]:
        return {"previous_relation": len(self.prev)}

    def snapshot(self) -> dict[str, Any]:
        return {"prev": list(self.prev), "prev_table": self.prev_table}

    def restore(self, snap: dict[str, Any]) -> None:
        self.prev = list(snap["prev"])
        self.prev_table = snap.get("prev_table")


class IStreamOp(_DifferenceOp):
    """Tuples that entered the relation at this instant."""

    kind = "istream"
    entered = True


class DStreamOp(_DifferenceOp):
    """Tuples that left the relation at this instant."""

    kind = "dstream"
    entered = False


class RStreamOp(RowOperator):
    """The whole relation at every instant.

    The output of an instant where the relation did not change is the previous output: it
    is kept (``unchanged()``), so the event-driven clock emits it at instants that pass
    without a step, and a step without input change does not rebuild it.
    """

    kind = "rstream"

    def __init__(self, op_id: str, replace_in: bool) -> None:
        super().__init__(op_id)
        self.replace_in = replace_in
        self.current: Rows = []  # replace mode: the relation as a list
        self.current_table: Any = None  # replace mode with a MIG input: the Arrow relation
        self.bag: dict[Row, int] = {}  # delta mode: the relation as a multiset
        self._multi = 0  # rows of the bag occurring more than once
        self._out: Delta | None = None  # the output while the relation stands still

    def unchanged(self) -> Delta:
        """The output at an instant where the relation did not change."""
        if self._out is None:
            self._out = self._relation(Delta())
        return self._out

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        d = inputs[0]
        if d.empty and self._out is not None:
            return self._out
        self._out = self._relation(d)
        return self._out

    def _relation(self, d: Delta) -> Delta:
        if d.table is not None or (self.replace_in and self.current_table is not None):
            if d.table is not None:
                self.current_table = d.table
            return Delta(table=self.current_table)
        if self.replace_in:
            if d.replace:
                self.current = d.ins
            return Delta(list(self.current))
        bag = self.bag
        # Inserts first: a delta may delete a tuple it also inserts (after a join).
        if d.ins:
            get = bag.get
            for r in d.ins:
                n = get(r, 0)
                bag[r] = n + 1
                if n == 1:
                    self._multi += 1
        if d.dels:
            for r in d.dels:
                n = bag[r]
                if n == 1:
                    del bag[r]
                else:
                    bag[r] = n - 1
                    if n == 2:
                        self._multi -= 1
        if not self._multi:  # every row occurs once: the keys are the relation
            return Delta(list(bag))
        out: Rows = []
        for r, n in bag.items():
            if n == 1:
                out.append(r)
            else:
                out.extend(repeat(r, n))
        return Delta(out)

    def state(self) -> dict[str, Any]:
        return {"relation": len(self.current) if self.replace_in else sum(self.bag.values())}

    def snapshot(self) -> dict[str, Any]:
        return {
            "current": list(self.current),
            "bag": dict(self.bag),
            "current_table": self.current_table,
        }

    def restore(self, snap: dict[str, Any]) -> None:
        self.current = list(snap["current"])
        self.current_table = snap.get("current_table")
        self.bag = dict(snap["bag"])
        self._multi = sum(1 for n in self.bag.values() if n > 1)
        self._out = None
