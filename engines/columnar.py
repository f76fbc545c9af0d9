"""The interface every columnar engine implements for MIG operators.

A MIG keeps its inputs as Arrow chunks on the Python side (the source of truth, so an engine
can always be rebuilt) and mirrors them into the engine with ``set_input``; then it runs the
group's SQL with ``query``. Engines raise :class:`EngineFault` for anything that went wrong
inside them (a query error, a dead JVM), which the MIG answers by ``restart`` and replay.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from optimizer.ir.errors import DataError, HycqError


class EngineFault(HycqError):
    """A columnar engine failed while running a MIG's work (recoverable by a restart)."""


class QueryDataError(DataError):
    """The data made a query fail: an integer overflow, a value that cannot be cast. The
    same input fails the same way again, so it is a user error (exit 2), never retried as
    an engine fault; the row engine raises the same for the same values."""


def query_data_error(engine: str, err: BaseException) -> QueryDataError:
    """One line from an engine's error (their messages run to many lines of SQL)."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
    lowered = first.lower()
    what = (
        "integer overflow"
        if "overflow" in lowered or "out of range" in lowered
        else ("the data cannot be computed")
    )
    return QueryDataError(
        f"{what} in the {engine} query: {first}",
        hint="integer results must fit their type, as in DuckDB (docs/semantics.md); CAST "
        "the values to DOUBLE to compute with larger magnitudes",
    )


class ColumnarEngine(ABC):
    """One embedded or remote columnar engine, shared by every MIG of a run."""

    name: str = "columnar"
    dialect: str = "duckdb"

    @abstractmethod
    def set_input(
        self, table: str, chunks: Sequence[tuple[int, pa.Table]], schema: pa.Schema
    ) -> None:
        """Make ``table`` hold exactly the rows of ``chunks`` (id, Arrow table), in order.

        Chunk ids are unique per table and stable, so an engine may keep what it already has
        and ship only new chunks.
        """

    def drop_input(self, table: str) -> None:
        """Forget ``table`` (its MIG was dropped, e.g. by a plan migration). Engines that
        keep registered inputs override this; the default keeps nothing to release."""
        return None

    @abstractmethod
    def query(self, sql: str) -> pa.Table:
        """Run one SELECT and return its result as Arrow."""

    @abstractmethod
    def restart(self) -> None:
        """Throw away the engine's state (connection, session) and start a fresh one."""

    def close(self) -> None:
        """Release the engine's resources."""
        return None

    def info(self) -> dict[str, Any]:
        """Settings worth reporting in metrics."""
        return {"engine": self.name}
