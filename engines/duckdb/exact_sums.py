"""Correctly rounded SUM of DOUBLE in DuckDB at native speed (docs/semantics.md).

DuckDB's own SUM of DOUBLE adds in the order its threads and chunks see the values, so its
last bits depend on how the data arrived. Every engine has the exact fallback of
``engines.sqlgen.dialects.SqlDialect.exact_sum`` (the group's values gathered by ARRAY_AGG
and summed by hycq's kernel, 5-8x a SUM); DuckDB's statements instead call the macro
``hycq_scaled_sum(x)``, which is exact in one pass at about 2.5x a SUM:

* each value is scaled by ``2^S`` and summed as a HUGEINT: exact, since every double that
  is a multiple of ``2^-S`` becomes an integer and 128-bit integer addition loses nothing;
  the total is cast to DOUBLE (DuckDB rounds a HUGEINT correctly) and divided by ``2^S``
  (exact: no such sum is subnormal, as ``S <= 1000``). That is the correctly rounded sum.
* a value the scale cannot hold raises at once, with ``error()``: one with bits below
  ``2^-S`` (``hycq-sum-low``: a larger S), one at or above the headroom limit
  ``2^(126 - room - S)`` (``hycq-sum-high``: a smaller S), a NaN or an infinity
  (``hycq-sum-nonfinite``); a total that still overflows 128 bits raises DuckDB's own
  HUGEINT overflow (more room).

The scale lives in connection variables (``hycq_sum_pow``, ``hycq_sum_limit``,
``hycq_sum_udf``) that DuckDB reads when it binds a statement, so one SQL text serves every
scale. :class:`ScaledSums` keeps a scale per statement and runs it: on one of the errors
above it moves the scale and runs the statement again, narrowing the range of scales that
were too small and too large; when that range is empty (magnitudes more than ~90 bits
apart, or a non-finite value) the statement runs with ``hycq_sum_udf`` set, which makes the
macro the exact ARRAY_AGG form (DuckDB folds the CASE on the variable away, so the other
branch costs nothing). A statement stays where it last succeeded: a window of the same data
needs no search, and a search costs a few extra runs of one slide's statement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
from duckdb import func as duckdb_func
from duckdb import sqltypes

from engines.kernels.exact_sum import list_sums
from engines.sqlgen.dialects import EXACT_SUM_UDF, SCALED_SUM_MACRO

#: The first scale tried: a multiple of 2^-64 holds every reading with up to ~19 bits below
#: the binary point of its magnitude (smart-plug loads of 0.001 W to 3 kW with 3 decimals).
DEFAULT_SCALE = 64
#: Headroom bits of a total: sums of fewer than 2^(ROOM + 1) values of the limit's size fit
#: (a 12 M-row window); a total that overflows gets more.
DEFAULT_ROOM = 24
MAX_SCALE = 1000
MAX_ROOM = 110
#: Runs of one statement while its scale is searched, before it falls back to ARRAY_AGG.
MAX_TRIES = 12
#: Runs after a fallback to ARRAY_AGG before a scale is tried again.
RETRY_SCALED = 256

_MACRO = f"""
CREATE OR REPLACE MACRO {SCALED_SUM_MACRO}(x) AS CASE
  WHEN getvariable('hycq_sum_udf') THEN {EXACT_SUM_UDF}(ARRAY_AGG(x))
  ELSE CAST(SUM(CASE
    WHEN x IS NULL THEN NULL
    WHEN NOT isfinite(x) THEN error('hycq-sum-nonfinite')
    WHEN abs(x) >= getvariable('hycq_sum_limit') THEN error('hycq-sum-high')
    WHEN x * getvariable('hycq_sum_pow') <> round(x * getvariable('hycq_sum_pow'))
      THEN error('hycq-sum-low')
    ELSE CAST(x * getvariable('hycq_sum_pow') AS HUGEINT) END) AS DOUBLE)
    / getvariable('hycq_sum_pow')
END
"""


@dataclass
class Scale:
    """The scale of one statement's exact sums, and what the search learnt."""

    scale: int = field(default_factory=lambda: DEFAULT_SCALE)
    room: int = field(default_factory=lambda: DEFAULT_ROOM)
    udf: bool = False
    too_small: int = -1  # the largest scale that lost low bits (this search)
    too_large: int = MAX_SCALE + 1  # the smallest scale that overflowed the limit
    searches: int = 0
    #: Runs since the statement fell back to ARRAY_AGG (the data may have changed since).
    since_fallback: int = 0

    def found(self) -> None:
        """The statement ran: the next search (new data) starts afresh from here."""
        self.too_small, self.too_large = -1, MAX_SCALE + 1

    def settings(self) -> tuple[float, float, bool]:
        """(2^S, the headroom limit, ARRAY_AGG) as the connection variables hold them."""
        limit = 2.0 ** max(-1000, min(1000, 126 - self.room - self.scale))
        return 2.0**self.scale, limit, self.udf

    def learn(self, error: str) -> bool:
        """Move the scale after ``error``; False when no scale is left to try."""
        self.searches += 1
        if "hycq-sum-nonfinite" in error:
            return False
        if "hycq-sum-low" in error:
            self.too_small = max(self.too_small, self.scale)
        elif "hycq-sum-high" in error:
            self.too_large = min(self.too_large, self.scale)
        elif "Overflow in HUGEINT" in error:
            if self.room >= MAX_ROOM:
                return False
            self.room = min(MAX_ROOM, self.room + 16)
            return True
        else:
            return False
        lo, hi = self.too_small, self.too_large
        if hi - lo <= 1:
            return False
        if hi > MAX_SCALE:
            self.scale = min(MAX_SCALE, max(lo + 1, 2 * max(lo, 32)))
        elif lo < 0:
            self.scale = max(0, hi - 64) if hi > 64 else hi // 2
        else:
            self.scale = (lo + hi) // 2
        return True


def calls_macro(sql: str) -> bool:
    """Whether ``sql`` sums DOUBLEs with the macro (sqlglot writes calls in upper case)."""
    return SCALED_SUM_MACRO in sql or _MACRO_UPPER in sql


_MACRO_UPPER = SCALED_SUM_MACRO.upper()


def register_exact_sum(con: duckdb.DuckDBPyConnection) -> None:
    """The correctly rounded SUM of DOUBLE (``engines.sqlgen.dialects.EXACT_SUM_UDF``) as a
    vectorized Arrow UDF of ``con``."""
    con.create_function(
        EXACT_SUM_UDF,
        list_sums,
        [duckdb.list_type(sqltypes.DOUBLE)],
        sqltypes.DOUBLE,
        type=duckdb_func.PythonUDFType.ARROW,
        null_handling=duckdb_func.FunctionNullHandling.SPECIAL,  # a list of NULLs sums to NULL
        side_effects=False,
    )


def prepare(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``con`` able to run statements with exact sums: the ARRAY_AGG UDF, the macro
    and its variables at the default scale."""
    register_exact_sum(con)
    _set(con, Scale().settings())
    con.execute(_MACRO)


def _set(con: duckdb.DuckDBPyConnection, values: tuple[float, float, bool]) -> None:
    pow_, limit, udf = values
    con.execute(
        f"SET VARIABLE hycq_sum_pow = CAST({pow_!r} AS DOUBLE); "
        f"SET VARIABLE hycq_sum_limit = CAST({limit!r} AS DOUBLE); "
        f"SET VARIABLE hycq_sum_udf = {str(udf).lower()}"
    )


class ScaledSums:
    """Runs statements that call the macro, each at its own scale (module docstring)."""

    def __init__(self) -> None:
        self.scales: dict[str, Scale] = {}
        self._current: tuple[float, float, bool] | None = None

    def forget_connection(self) -> None:
        """A new connection holds the default variables (``prepare``)."""
        self._current = None

    def run(self, con: duckdb.DuckDBPyConnection, sql: str, execute: Callable[[], Any]) -> Any:
        """``execute()`` (which runs ``sql`` on ``con``) at the statement's scale, searching
        another scale on an exactness error; other errors propagate."""
        state = self.scales.setdefault(sql, Scale())
        if state.udf:
            state.since_fallback += 1
            if state.since_fallback >= RETRY_SCALED:  # try a scale again, once in a while
                state.udf, state.since_fallback = False, 0
                state.scale, state.room = DEFAULT_SCALE, DEFAULT_ROOM
        for _ in range(MAX_TRIES):
            values = state.settings()
            if values != self._current:
                _set(con, values)
                self._current = values
            try:
                result = execute()
            except (duckdb.InvalidInputException, duckdb.OutOfRangeException) as err:
                message = str(err)
                if state.udf or (
                    "hycq-sum-" not in message and "Overflow in HUGEINT" not in message
                ):
                    raise
                if not state.learn(message):
                    state.udf = True
                continue
            state.found()
            return result
        state.udf = True
        values = state.settings()
        _set(con, values)
        self._current = values
        return execute()

    def info(self) -> dict[str, Any]:
        """Per statement searched or fallen back: its scale (the run's metrics)."""
        return {
            "statements": len(self.scales),
            "searches": sum(s.searches for s in self.scales.values()),
            "array_agg": sum(1 for s in self.scales.values() if s.udf),
        }


def run_sql(con: duckdb.DuckDBPyConnection, sql: str, sums: ScaledSums | None = None) -> Any:
    """``sql`` on a ``prepare``d connection as an Arrow table, searching the scale of its
    exact sums (for code that holds its own connection: statistics on samples, tests)."""
    if not calls_macro(sql):
        return con.sql(sql).to_arrow_table()
    return (sums or ScaledSums()).run(con, sql, lambda: con.sql(sql).to_arrow_table())
