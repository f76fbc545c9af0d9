"""DataFusion engine: one in-process ``SessionContext`` per run; window inputs are Arrow
record batches registered as in-memory tables, without copies.

Window upkeep: a MIG input is a ring of Arrow chunks (one per slide). Each change
re-registers the input as a memory table over the chunks' record batches
(``SessionContext.register_record_batches``): DataFusion imports the Arrow buffers through
the C data interface and scans them in place, so appending a slide and expiring the oldest
copies no tuple. The batches are dealt round-robin into one partition per worker thread so
that scans run in parallel. Every slide re-plans the group's SQL (a DataFusion logical plan
holds the table it was planned against; planning a small MIG query takes about a
millisecond).

Settings (``SessionConfig``), each overridable through ``conf`` (``--datafusion-conf``):

* ``datafusion.execution.target_partitions``: worker threads (default: all cores);
* ``datafusion.sql_parser.map_string_types_to_utf8view = false`` and
  ``datafusion.optimizer.expand_views_at_output = true``: VARCHAR is Arrow ``string``, as
  every other engine returns it (DataFusion defaults to ``string_view``);
* ``datafusion.sql_parser.recursion_limit = 5000``: generated predicates nest deeply
  (the default 50 rejects a CASE over a few dozen conjuncts);
* ``datafusion.optimizer.skip_failed_rules = true``: a constant that cannot be computed in a
  CASE branch no row takes is not an error (as in DuckDB).

Semantic differences from DuckDB (hycq's reference) and how they are handled are listed in
``engines.sqlgen.datafusion_dialect.DataFusionDialect`` and docs/engines.md.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from engines import interrupts
from engines.columnar import ColumnarEngine, EngineFault, query_data_error
from engines.kernels.exact_sum import list_sums
from engines.kernels.median import list_medians
from engines.sqlgen.dialects import EXACT_SUM_UDF, MEDIAN_UDF
from optimizer.ir.errors import ConfigError

#: Session settings that make DataFusion's results typed as hycq's (see the module docstring).
DEFAULT_CONF: dict[str, str] = {
    "datafusion.sql_parser.map_string_types_to_utf8view": "false",
    "datafusion.optimizer.expand_views_at_output": "true",
    "datafusion.sql_parser.recursion_limit": "5000",
    # Constant folding raises on a constant that cannot be computed (CAST(1e300 AS INT)) even
    # in a CASE branch no row takes, where DuckDB computes nothing and raises nothing: the
    # query then runs unfolded, and raises only if a row reaches the value. (DataFusion
    # prints "Skipping optimizer rule 'simplify_expressions' ..." on stderr when it does.)
    "datafusion.optimizer.skip_failed_rules": "true",
}

#: Words of a DataFusion error that mean "the data made the query fail" (an overflow, a value
#: that cannot be cast): a user error, not an engine fault to restart.
_DATA_ERRORS = ("overflow", "cast error", "can't cast", "cannot cast", "divide by zero")


def _module() -> Any:
    try:
        import datafusion
    except ImportError:
        raise ConfigError(
            "the DataFusion engine needs the datafusion package",
            hint="pip install 'hycq[datafusion]' (or pip install datafusion)",
        ) from None
    return datafusion


class DataFusionEngine(ColumnarEngine):
    """The embedded DataFusion engine (``threads`` partitions; None = one per core)."""

    name = "datafusion"
    dialect = "datafusion"

    def __init__(self, threads: int | None = None, conf: Mapping[str, str] | None = None) -> None:
        self.threads = threads or os.cpu_count() or 1
        self.conf = {**DEFAULT_CONF, **(conf or {})}
        self._df = _module()
        self._tables: dict[str, list[list[pa.RecordBatch]]] = {}
        self.restarts = 0
        try:
            self.ctx = self._context()
        except EngineFault as err:  # at start-up it is the settings' fault
            raise ConfigError(str(err), hint="check --datafusion-conf KEY=VALUE") from None

    def _context(self) -> Any:
        config = self._df.SessionConfig().with_target_partitions(self.threads)
        try:
            for key, value in self.conf.items():
                config = config.set(key, value)
            ctx = self._df.SessionContext(config)
            # the correctly rounded SUM and DuckDB's MEDIAN (engines.sqlgen.dialects)
            for fn, name in ((list_sums, EXACT_SUM_UDF), (list_medians, MEDIAN_UDF)):
                ctx.register_udf(
                    self._df.udf(fn, [pa.list_(pa.float64())], pa.float64(), "immutable", name=name)
                )
            return ctx
        except Exception as err:  # noqa: BLE001 - DataFusion raises plain Exception
            raise EngineFault(f"cannot start DataFusion: {_first_line(err)}") from None

    def _partitions(
        self, chunks: Sequence[tuple[int, pa.Table]], schema: pa.Schema
    ) -> list[list[pa.RecordBatch]]:
        batches = [b for _, t in chunks for b in t.to_batches() if b.num_rows]
        if not batches:
            return [[pa.RecordBatch.from_pylist([], schema=schema)]]
        n = min(self.threads, len(batches))
        return [batches[k::n] for k in range(n)]

    def _register(self, table: str, partitions: list[list[pa.RecordBatch]]) -> None:
        with contextlib.suppress(Exception):
            self.ctx.deregister_table(table)
        self.ctx.register_record_batches(table, partitions)

    def set_input(
        self, table: str, chunks: Sequence[tuple[int, pa.Table]], schema: pa.Schema
    ) -> None:
        partitions = self._partitions(chunks, schema)
        self._tables[table] = partitions
        try:
            self._register(table, partitions)
        except Exception as err:
            raise EngineFault(f"datafusion could not register {table}: {err}") from err

    def drop_input(self, table: str) -> None:
        self._tables.pop(table, None)
        with contextlib.suppress(Exception):
            self.ctx.deregister_table(table)

    def query(self, sql: str) -> pa.Table:
        if interrupts.in_zone():  # DataFusion cannot be cancelled: a stop abandons the query
            return interrupts.run_stoppable(lambda: self._query(sql))
        return self._query(sql)

    def _query(self, sql: str) -> pa.Table:
        try:
            return self.ctx.sql(sql).to_arrow_table()
        except Exception as err:
            message = str(err).lower()
            if any(word in message for word in _DATA_ERRORS):
                raise query_data_error(self.name, err) from None
            raise EngineFault(f"datafusion query failed: {_first_line(err)}") from err

    def restart(self) -> None:
        self.ctx = self._context()
        self.restarts += 1
        for name, partitions in self._tables.items():
            self._register(name, partitions)

    def close(self) -> None:
        for name in self._tables:
            with contextlib.suppress(Exception):
                self.ctx.deregister_table(name)
        self._tables = {}

    def info(self) -> dict[str, Any]:
        return {"engine": self.name, "threads": self.threads, "restarts": self.restarts}


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
