"""Hostile identifiers and literals cannot change the meaning of the generated SQL.

Quotes, semicolons, comments and SQL keywords go through the CQL parser, the binder and the
SQL generator for DuckDB, Spark and DataFusion:

* catalog names must be plain identifiers (anything else is a CatalogError);
* query identifiers (aliases of columns and derived tables) never reach the generated SQL,
  which names every relation and column positionally (``in0``, ``t0``, ``c0``); they only
  name the result's columns, exactly as written;
* string literals reach the SQL as sqlglot literals: the statement parses back to exactly one
  SELECT whose string literals are exactly the query's;
* the columnar engines' results equal the row engine's and the oracle's.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

from engines.sqlgen import group_sql
from hycq.api import execute, resolve_placement
from optimizer.ir.errors import CatalogError
from optimizer.ir.placement import groups
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.oracle import assert_same_stream, oracle

CATALOG = parse_catalog_text(
    '[streams.events]\ntimestamp = "ts"\ntime_unit = "s"\nrate = 10\n'
    '[streams.events.columns]\nts = "BIGINT"\nlabel = "VARCHAR"\nv = "DOUBLE"\n'
)

#: Texts a string literal or a quoted identifier may carry.
HOSTILE = [
    "it's",
    "'; DROP TABLE events; --",
    "x' OR '1'='1",
    "a -- comment",
    "/* open",
    "close */",
    '"quoted"',
    "semi;colon",
    "back\\slash'",
    "g0_in0",
]
#: Quoted aliases (a " inside is written "").
ALIASES = ["out; DROP TABLE g0_in0; --", 'n"x', "m -- z */", "/* p */ SELECT"]


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_ident(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


A, N, M, P = (sql_ident(a) for a in ALIASES)
IN_LIST = ", ".join(sql_string(t) for t in HOSTILE[1:7])
QUERY = f"""
SELECT {P}.label AS {A}, COUNT(*) AS {N}, MAX({P}.v) AS {M}
FROM (SELECT label, v FROM events [RANGE 10 SECONDS SLIDE 2 SECONDS]
      WHERE label <> {sql_string(HOSTILE[0])} OR v > 7) AS {P}
WHERE {P}.label IN ({IN_LIST}) OR {P}.label = {sql_string(HOSTILE[-2])}
GROUP BY {P}.label
HAVING MAX({P}.v) >= 0 OR {P}.label = {sql_string(HOSTILE[-1])}
"""


def data() -> pa.Table:
    rows = [(100 + i // 9, HOSTILE[i % len(HOSTILE)], float(i % 11)) for i in range(90)]
    ts, label, v = zip(*rows, strict=True)
    return pa.table({"ts": list(ts), "label": list(label), "v": list(v)})


#: Special DOUBLE constants the generator writes itself (``CAST('NaN' AS DOUBLE)``).
SPECIAL_DOUBLES = {"NaN", "Infinity", "-Infinity", "-0.0"}


def literals(tree: exp.Expression) -> set[str]:
    """The string literals of ``tree`` except the generator's own special DOUBLE constants."""
    return {
        lit.this
        for lit in tree.find_all(exp.Literal)
        if lit.is_string
        and not (
            lit.this in SPECIAL_DOUBLES
            and isinstance(lit.parent, exp.Cast)
            and lit.parent.to.this is exp.DType.DOUBLE
        )
    }


@pytest.mark.parametrize(
    "name",
    ['"r;x"', '"a--b"', "'a\"b'", '"x /* y */"', '"drop table events"', '"1abc"'],
)
def test_catalog_names_must_be_identifiers(name: str) -> None:
    for text in (
        f'[streams.{name}]\ntimestamp = "ts"\n[streams.{name}.columns]\nts = "BIGINT"\n',
        f'[streams.s]\ntimestamp = "ts"\n[streams.s.columns]\nts = "BIGINT"\n{name} = "DOUBLE"\n',
    ):
        with pytest.raises(CatalogError, match="not a valid identifier"):
            parse_catalog_text(text, "hostile.toml")


@pytest.mark.parametrize("dialect", ["duckdb", "spark", "datafusion"])
def test_generated_sql_is_one_statement_with_the_query_literals(dialect: str) -> None:
    plan = plan_query(QUERY, CATALOG, "hostile.sql")
    placement = resolve_placement(plan, "column", dialect)
    columnar = [g for g in groups(plan, placement) if g.engine == dialect]
    assert columnar
    user_literals = {HOSTILE[0], *HOSTILE[1:7], HOSTILE[-2], HOSTILE[-1]}  # those in QUERY
    seen: set[str] = set()
    for g in columnar:
        sql = group_sql(plan, g.operators, dialect).sql
        statements = sqlglot.parse(sql, read=dialect)
        assert len(statements) == 1 and isinstance(statements[0], exp.Select), sql
        tree = statements[0]
        assert not list(tree.find_all(exp.Drop, exp.Command, exp.Insert, exp.Delete)), sql
        assert literals(tree) <= user_literals, sql
        seen |= literals(tree)
        # No identifier the user wrote reaches the SQL: relations and columns are positional.
        names = {i.name for i in tree.find_all(exp.Identifier)}
        assert not names & set(ALIASES), sql
        assert all(n in ("s", "l", "r") or n[0] in "tck" or n.startswith("in") for n in names)
        # Round trip: the SQL regenerated from its own parse is the same statement.
        assert tree.sql(dialect=dialect) == sql
    assert seen == user_literals  # every literal made it through, unchanged


def _run(placement: str, column_engine: str = "duckdb") -> Any:
    plan = plan_query(QUERY, CATALOG, "hostile.sql")
    return execute(plan, CATALOG, {"events": data()}, placement, column_engine=column_engine)


def test_results_on_every_engine_equal_the_oracle() -> None:
    expected = oracle(QUERY, CATALOG, {"events": data()})
    labels = set(expected.column(0).to_pylist())
    assert labels >= set(HOSTILE[1:7]) | {HOSTILE[-2]}  # the hostile texts matched as data
    for placement in ("row", "column"):
        got = _run(placement).table
        assert got.column_names == [*ALIASES[:3], "_ts"]  # names exactly as written
        assert_same_stream(got, expected)


def test_results_on_datafusion_equal_the_oracle() -> None:
    pytest.importorskip("datafusion")
    got = _run("column", "datafusion").table
    assert got.column_names == [*ALIASES[:3], "_ts"]
    assert_same_stream(got, oracle(QUERY, CATALOG, {"events": data()}))


@pytest.mark.spark
def test_results_on_spark_equal_the_oracle() -> None:
    pytest.importorskip("pyspark")
    got = _run("column", "spark").table
    assert got.column_names == [*ALIASES[:3], "_ts"]
    assert_same_stream(got, oracle(QUERY, CATALOG, {"events": data()}))
