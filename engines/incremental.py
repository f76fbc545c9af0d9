"""The runtime half of incrementally kept aggregates in a DuckDB MIG (issue 20).

``engines.sqlgen.incremental`` says which aggregates of a group qualify and writes their SQL;
this module keeps each one's state table up to date from the chunks that entered and left
its input at a slide. The state is an Arrow table on the Python side (registered with the
engine, so an engine restart loses nothing), replaced only when a merge succeeded.

Exactness (docs/semantics.md, "Floating-point sums") is checked, never assumed: every new
chunk's DOUBLE arguments must be finite multiples of 2^-S below the headroom limit. When one
is not, the state is rebuilt from the whole window at a scale chosen for it; when no scale
fits (a NaN or an infinity in the window, or magnitudes 2^95 apart), the aggregate is given
back to plain re-evaluation for the rest of the run (``IncrementalUnavailable``), which the
MIG answers by regenerating its SQL without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from engines.columnar import ColumnarEngine, QueryDataError
from engines.sqlgen.incremental import IncrementalAggregate, headroom, scale_for


class IncrementalUnavailable(Exception):
    """This aggregate cannot be kept exactly on this data: re-evaluate it over the window."""


@dataclass
class IncrementalStats:
    """What keeping one aggregate cost (the MIG's ``incremental`` metrics): states built from
    the whole window, slides merged, the rows those merges read, and their seconds."""

    builds: int = 0
    merges: int = 0
    rows_merged: int = 0
    seconds: float = 0.0


class IncrementalState:
    """One incrementally kept aggregate of a MIG."""

    def __init__(self, spec: IncrementalAggregate) -> None:
        self.spec = spec
        self.scale: int | None = None
        self.room = 0  # bits of headroom the scale keeps (engines.sqlgen.incremental)
        self.table: pa.Table | None = None
        self.stats = IncrementalStats()

    @property
    def ready(self) -> bool:
        return self.table is not None

    def invalidate(self) -> None:
        """Forget the state: the next slide rebuilds it from the whole window."""
        self.table = None

    def _register(self, engine: ColumnarEngine, name: str, table: pa.Table) -> None:
        engine.set_input(name, [(0, table)], table.schema)

    def _scalar(self, engine: ColumnarEngine, sql: str) -> object:
        return engine.query(sql).column(0)[0].as_py()

    def rebuild(self, engine: ColumnarEngine) -> None:
        """The state over the input table as the engine holds it now (the MIG shipped it)."""
        spec = self.spec
        try:
            rows = self._scalar(engine, f"SELECT COUNT(*) FROM {spec.input_table}")
            room = headroom(int(rows))  # type: ignore[call-overload]
            magnitude = spec.magnitude_sql(spec.input_table)
            m = self._scalar(engine, magnitude) if magnitude else None
            scale = scale_for(float(m) if m is not None else None, int(rows))  # type: ignore[arg-type, call-overload]
            check = spec.check_sql(spec.input_table, scale, room)
            if check is not None and self._scalar(engine, check):
                raise IncrementalUnavailable(
                    f"{spec.op_id}: the window's values cannot all be summed exactly in 128 "
                    "bits (a non-finite value, or magnitudes too far apart)"
                )
            table = engine.query(spec.build_sql(scale))
        except QueryDataError as err:  # a 128-bit total overflowed
            raise IncrementalUnavailable(f"{spec.op_id}: {err}") from err
        self._register(engine, spec.state_table, table)
        self.scale, self.room, self.table = scale, room, table
        self.stats.builds += 1

    def merge(self, engine: ColumnarEngine, new: list[pa.Table], old: list[pa.Table]) -> None:
        """Apply one slide: ``new`` rows entered the input, ``old`` rows left it."""
        if self.table is None or self.scale is None:
            self.rebuild(engine)
            return
        if not new and not old:
            return
        spec = self.spec
        schema = (new or old)[0].schema
        new_t = pa.concat_tables(new) if new else schema.empty_table()
        old_t = pa.concat_tables(old) if old else schema.empty_table()
        self._register(engine, spec.new_table, new_t)
        self._register(engine, spec.old_table, old_t)
        try:
            check = spec.check_sql(spec.new_table, self.scale, self.room)
            if check is not None and new and self._scalar(engine, check):
                self.rebuild(engine)  # a new value needs another scale
                return
            table = engine.query(spec.merge_sql(self.scale))
        except QueryDataError:  # a total overflowed its 128 bits: start over
            self.rebuild(engine)
            return
        self._register(engine, spec.state_table, table)
        self.table = table
        self.stats.merges += 1
        self.stats.rows_merged += new_t.num_rows + old_t.num_rows

    def reregister(self, engine: ColumnarEngine) -> None:
        """Register the kept state again (a fresh engine after a restart or fallback)."""
        if self.table is not None:
            self._register(engine, self.spec.state_table, self.table)
