"""DuckDB engine: one in-process connection per run; window inputs are registered Arrow rings.

Window upkeep: a MIG input is a ring of Arrow chunks (one per slide). Each change registers
the ring as one zero-copy ``pyarrow.Table`` view (``con.register``), so appending a slide and
expiring the oldest costs no data copy at all; DuckDB scans the Arrow buffers directly. The
alternative, a native table maintained with INSERT and DELETE, copies every tuple into
DuckDB and pays for deletes; experiments/bench_mig.py measures both (see docs/performance.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from engines import interrupts
from engines.columnar import ColumnarEngine, EngineFault, query_data_error
from engines.duckdb import exact_sums


class DuckDBEngine(ColumnarEngine):
    """The embedded DuckDB engine (``threads`` worker threads; None = DuckDB's default)."""

    name = "duckdb"
    dialect = "duckdb"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self._tables: dict[str, pa.Table] = {}
        # A relation object re-executed sees re-registered inputs and skips parsing and
        # binding: about 2 ms instead of 3.4 ms for a small MIG query (docs/performance.md).
        self._relations: dict[str, duckdb.DuckDBPyRelation] = {}
        self._sums = exact_sums.ScaledSums()
        self.con = self._connect()
        self.restarts = 0

    def _connect(self) -> duckdb.DuckDBPyConnection:
        config: dict[str, Any] = {}
        if self.threads is not None:
            config["threads"] = self.threads
        con = duckdb.connect(database=":memory:", config=config)
        # Integer modulo by zero yields NULL (docs/semantics.md) instead of an error.
        con.execute("SET error_on_division_by_zero = false")
        exact_sums.prepare(con)
        self._sums.forget_connection()
        return con

    def set_input(
        self, table: str, chunks: Sequence[tuple[int, pa.Table]], schema: pa.Schema
    ) -> None:
        if chunks:
            tables = [t for _, t in chunks]
            view = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        else:
            view = schema.empty_table()
        self._tables[table] = view
        try:
            self.con.register(table, view)
        except duckdb.Error as err:
            raise EngineFault(f"duckdb could not register {table}: {err}") from err

    def drop_input(self, table: str) -> None:
        self._tables.pop(table, None)
        self._relations = {sql: r for sql, r in self._relations.items() if table not in sql}
        with contextlib.suppress(duckdb.Error):
            self.con.unregister(table)

    def _execute(self, sql: str) -> pa.Table:
        rel = self._relations.get(sql)
        if rel is None:
            rel = self._relations[sql] = self.con.sql(sql)
        return rel.to_arrow_table()

    def query(self, sql: str) -> pa.Table:
        # a stop request interrupts the query (engines.interrupts)
        with interrupts.native(self.con.interrupt):
            return self._query(sql)

    def _query(self, sql: str) -> pa.Table:
        try:
            if exact_sums.calls_macro(sql):  # exact sums at the statement's scale
                return self._sums.run(self.con, sql, lambda: self._execute(sql))
            return self._execute(sql)
        except duckdb.DataError as err:  # overflow, conversion: the data's, not the engine's
            self._relations.pop(sql, None)
            raise query_data_error(self.name, err) from None
        except duckdb.Error as err:
            self._relations.pop(sql, None)
            raise EngineFault(f"duckdb query failed: {err}") from err

    def restart(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self.con.close()
        self.con = self._connect()
        self._relations = {}
        self.restarts += 1
        for name, view in self._tables.items():
            self.con.register(name, view)

    def close(self) -> None:
        self.con.close()

    def info(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "threads": self.threads,
            "restarts": self.restarts,
            "exact_sums": self._sums.info(),
        }
