"""Every user mistake in a query is a positioned QueryError: class, message, line, column, hint.

The table below is the catalogue of mistakes the front end must catch (issue: "every user
mistake ... exits 2 with ``error: FILE:LINE:COL: message`` and the offending line
underlined"). Positions are 1-based and point at the first character of the offending text.
A test catalog adds a VARCHAR column (``label``) and a millisecond stream (``meters``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlglot import exp

from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import (
    BindError,
    QueryError,
    QuerySyntaxError,
    Source,
    UnsupportedError,
    UserError,
)
from optimizer.ir.plan import LogicalPlan
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from optimizer.sql.parse import parse_select

CATALOG_TOML = """
[streams.readings]
timestamp = "ts"
time_unit = "s"
rate = 2000

[streams.readings.columns]
id = "BIGINT"
ts = "BIGINT"
value = "DOUBLE"
property = "INTEGER"
plug_id = "INTEGER"
household_id = "INTEGER"
house_id = "INTEGER"
label = "VARCHAR"

[streams.meters]
timestamp = "ts"
time_unit = "ms"

[streams.meters.columns]
ts = "BIGINT"
meter = "INTEGER"
power = "DOUBLE"
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return parse_catalog_text(CATALOG_TOML, "test-catalog.toml")


@dataclass(frozen=True)
class Case:
    id: str
    query: str
    error: type[QueryError]
    message: str
    line: int
    col: int
    hint: str | None


CASES = [
    Case(
        "syntax-double-comma",
        "SELECT value,, id FROM readings [NOW]",
        QuerySyntaxError,
        "unexpected ','",
        1,
        14,
        None,
    ),
    Case(
        "syntax-incomplete-multiline",
        "SELECT value\nFROM readings [NOW]\nWHERE value >",
        QuerySyntaxError,
        "incomplete clause near '>'",
        3,
        13,
        "missing its expression",
    ),
    Case(
        "syntax-from-without-stream",
        "SELECT value\nFROM",
        QuerySyntaxError,
        "expected a stream name after 'FROM'",
        2,
        1,
        None,
    ),
    Case(
        "missing-bracket-multiline",
        "SELECT value\nFROM readings [RANGE 5 SECONDS\nWHERE value > 1",
        QuerySyntaxError,
        "expected ']' to close the window clause",
        3,
        1,
        "[RANGE 5 MINUTES SLIDE 1 SECOND]",
    ),
    Case(
        "missing-bracket-at-end",
        "SELECT value FROM readings [RANGE 5 SECONDS",
        QuerySyntaxError,
        "expected ']' to close the window clause",
        1,
        44,
        None,
    ),
    Case(
        "unterminated-string",
        "SELECT value\nFROM readings [NOW]\nWHERE label = 'abc\n",
        QuerySyntaxError,
        "unterminated string",
        3,
        15,
        "close it with '",
    ),
    Case(
        "unterminated-identifier",
        'SELECT "value FROM readings [NOW]',
        QuerySyntaxError,
        "unterminated quoted identifier",
        1,
        8,
        None,
    ),
    Case(
        "unterminated-comment",
        "SELECT value /* a comment\nFROM readings [NOW]",
        QuerySyntaxError,
        "unterminated comment",
        1,
        14,
        "*/",
    ),
    Case(
        "empty-query",
        "",
        QuerySyntaxError,
        "the query is empty",
        1,
        1,
        "SELECT",
    ),
    Case(
        "only-comment",
        "-- nothing to see here\n/* or here */\n",
        QuerySyntaxError,
        "the query is empty",
        1,
        1,
        "SELECT",
    ),
    Case(
        "only-semicolons",
        " ; ;",
        QuerySyntaxError,
        "the query is empty",
        1,
        1,
        None,
    ),
    Case(
        "unmatched-close-paren",
        "SELECT value\nFROM readings [NOW]\nWHERE value > 1)",
        QuerySyntaxError,
        "unmatched ')'",
        3,
        16,
        None,
    ),
    Case(
        "unclosed-paren",
        "SELECT ROUND(value, 2\nFROM readings [NOW]",
        QuerySyntaxError,
        "'(' is never closed",
        1,
        13,
        "')'",
    ),
    Case(
        "empty-select-list",
        "SELECT FROM readings [NOW]",
        QuerySyntaxError,
        "the SELECT list is empty",
        1,
        1,
        None,
    ),
    Case(
        "unknown-stream-suggestion",
        "SELECT value FROM reading [NOW]",
        BindError,
        "unknown stream 'reading'",
        1,
        19,
        "did you mean 'readings'?",
    ),
    Case(
        "unknown-stream-list",
        "SELECT *\n  FROM sensors [NOW]",
        BindError,
        "unknown stream 'sensors'",
        2,
        8,
        "streams in the catalog: readings, meters",
    ),
    Case(
        "unknown-column-suggestion",
        "SELECT plug_id,\n       valeu\nFROM readings [NOW]",
        BindError,
        "unknown column 'valeu'",
        2,
        8,
        "did you mean 'value'?",
    ),
    Case(
        "unknown-column-qualified",
        "SELECT r.valu FROM readings [NOW] AS r",
        BindError,
        "unknown column 'valu' in 'r'",
        1,
        8,
        "did you mean 'value'?",
    ),
    Case(
        "unknown-table-alias",
        "SELECT x.value FROM readings [NOW] AS r",
        BindError,
        "unknown table alias 'x'",
        1,
        8,
        "aliases in scope: r",
    ),
    Case(
        "unknown-alias-star",
        "SELECT q.* FROM readings [NOW] AS r",
        BindError,
        "unknown table alias 'q'",
        1,
        8,
        None,
    ),
    Case(
        "star-outside-select",
        "SELECT value FROM readings [NOW] AS r WHERE r.* > 1",
        BindError,
        "'t.*' is only allowed in the SELECT list",
        1,
        45,
        None,
    ),
    Case(
        "ambiguous-column",
        "SELECT plug_id\nFROM readings [NOW] AS a,\n     readings [RANGE 1 MINUTE] AS b",
        BindError,
        "column reference 'plug_id' is ambiguous",
        1,
        8,
        "qualify it: a.plug_id or b.plug_id",
    ),
    Case(
        "duplicate-alias",
        "SELECT a.value\nFROM readings [NOW] AS a, readings [UNBOUNDED] AS a",
        BindError,
        "duplicate table alias 'a'",
        2,
        27,
        "own alias",
    ),
    Case(
        "duplicate-stream-no-alias",
        "SELECT 1 FROM readings [NOW], readings [UNBOUNDED]",
        BindError,
        "duplicate table alias 'readings'",
        1,
        31,
        None,
    ),
    Case(
        "compare-varchar-number",
        "SELECT value FROM readings [NOW] WHERE label = 5",
        BindError,
        "cannot compare VARCHAR with BIGINT",
        1,
        40,
        "CAST",
    ),
    Case(
        "compare-in-list",
        "SELECT value FROM readings [NOW] WHERE plug_id IN (1, 'two')",
        BindError,
        "cannot compare INTEGER with VARCHAR",
        1,
        55,
        None,
    ),
    Case(
        "arith-on-varchar",
        "SELECT label + 1 FROM readings [NOW]",
        BindError,
        "cannot apply '+' to VARCHAR and BIGINT",
        1,
        8,
        "numeric operands",
    ),
    Case(
        "sum-varchar",
        "SELECT plug_id, SUM(label)\nFROM readings [NOW]\nGROUP BY plug_id",
        BindError,
        "SUM needs a numeric argument, got VARCHAR",
        1,
        21,
        None,
    ),
    Case(
        "avg-varchar",
        "SELECT AVG(label) FROM readings [NOW]",
        BindError,
        "AVG needs a numeric argument, got VARCHAR",
        1,
        12,
        None,
    ),
    Case(
        "where-not-boolean",
        "SELECT value FROM readings [NOW]\nWHERE value",
        BindError,
        "WHERE needs a BOOLEAN condition, got DOUBLE",
        2,
        7,
        "value > 0",
    ),
    Case(
        "having-not-boolean",
        "SELECT plug_id FROM readings [NOW] GROUP BY plug_id HAVING COUNT(*)",
        BindError,
        "HAVING needs a BOOLEAN condition, got BIGINT",
        1,
        60,
        None,
    ),
    Case(
        "and-not-boolean",
        "SELECT value FROM readings [NOW] WHERE value > 1 AND plug_id",
        BindError,
        "AND needs a BOOLEAN condition, got INTEGER",
        1,
        54,
        None,
    ),
    Case(
        "non-aggregated-column",
        "SELECT plug_id, value, COUNT(*)\nFROM readings [NOW]\nGROUP BY plug_id",
        BindError,
        "column 'value' must appear in GROUP BY",
        1,
        17,
        "MAX(value)",
    ),
    Case(
        "non-aggregated-no-group",
        "SELECT house_id, AVG(value) FROM readings [NOW]",
        BindError,
        "column 'house_id' must appear in GROUP BY",
        1,
        8,
        "add it to GROUP BY",
    ),
    Case(
        "aggregate-in-where",
        "SELECT plug_id FROM readings [NOW]\nWHERE MAX(value) > 10",
        BindError,
        "aggregate functions are not allowed in WHERE",
        2,
        7,
        "use HAVING",
    ),
    Case(
        "aggregate-in-group-by",
        "SELECT COUNT(*) FROM readings [NOW] GROUP BY SUM(value)",
        BindError,
        "aggregate functions are not allowed in GROUP BY",
        1,
        46,
        None,
    ),
    Case(
        "nested-aggregates",
        "SELECT plug_id, MAX(AVG(value))\nFROM readings [NOW] GROUP BY plug_id",
        BindError,
        "aggregate functions cannot be nested",
        1,
        21,
        "derived table",
    ),
    Case(
        "having-without-group-by",
        "SELECT value FROM readings [NOW] HAVING value > 1",
        BindError,
        "HAVING needs GROUP BY or an aggregate",
        1,
        41,
        "use WHERE",
    ),
    Case(
        "group-by-position",
        "SELECT plug_id, COUNT(*) FROM readings [NOW]\nGROUP BY 3",
        BindError,
        "GROUP BY position 3 is not in the SELECT list",
        2,
        10,
        "positions run from 1 to 2",
    ),
    Case(
        "group-by-position-zero",
        "SELECT plug_id FROM readings [NOW] GROUP BY 0",
        BindError,
        "GROUP BY position 0 is not in the SELECT list",
        1,
        45,
        None,
    ),
    Case(
        "stream-without-window",
        "SELECT value FROM readings",
        BindError,
        "stream 'readings' needs a window",
        1,
        19,
        "readings [RANGE 5 MINUTES SLIDE 1 SECOND]",
    ),
    Case(
        "stream-without-window-join",
        "SELECT a.value\nFROM readings [NOW] AS a\nJOIN readings AS b ON a.id = b.id",
        BindError,
        "stream 'readings' needs a window",
        3,
        6,
        "readings [NOW]",
    ),
    Case(
        "window-negative",
        "SELECT value FROM readings [RANGE -5 SECONDS]",
        QuerySyntaxError,
        "window range must be positive",
        1,
        35,
        None,
    ),
    Case(
        "window-zero",
        "SELECT value FROM readings [RANGE 0 SECONDS]",
        QuerySyntaxError,
        "window range must be positive, got 0",
        1,
        35,
        None,
    ),
    Case(
        "window-zero-slide",
        "SELECT value FROM readings [RANGE 5 SECONDS SLIDE 0 SECONDS]",
        QuerySyntaxError,
        "window slide must be positive, got 0",
        1,
        51,
        None,
    ),
    Case(
        "window-unknown-unit",
        "SELECT value FROM readings [RANGE 5 MONTHS]",
        QuerySyntaxError,
        "unknown time unit 'MONTHS'",
        1,
        37,
        "MILLISECOND(S), SECOND(S), MINUTE(S), HOUR(S), DAY(S) and WEEK(S)",
    ),
    Case(
        "window-unknown-slide-unit",
        "SELECT value\nFROM readings [RANGE 5 MINUTES SLIDE 1 YEAR]",
        QuerySyntaxError,
        "unknown time unit 'YEAR'",
        2,
        40,
        "HOUR(S)",
    ),
    Case(
        "window-missing-unit",
        "SELECT value FROM readings [RANGE 5]",
        QuerySyntaxError,
        "expected a time unit",
        1,
        36,
        "SECOND(S)",
    ),
    Case(
        "window-missing-size",
        "SELECT value FROM readings [RANGE SECONDS]",
        QuerySyntaxError,
        "expected a number for the window range",
        1,
        35,
        None,
    ),
    Case(
        "window-fractional",
        "SELECT value FROM readings [RANGE 1.5 SECONDS]",
        QuerySyntaxError,
        "window range must be a whole number, got 1.5",
        1,
        35,
        "1500 MILLISECONDS",
    ),
    Case(
        "window-fractional-rows",
        "SELECT value FROM readings [ROWS 2.5]",
        QuerySyntaxError,
        "window row count must be a whole number",
        1,
        34,
        None,
    ),
    Case(
        "window-below-time-unit",
        "SELECT value FROM readings [RANGE 500 MILLISECONDS]",
        BindError,
        "window range 500 MILLISECONDS is not a whole number of seconds",
        1,
        28,
        "multiple of 1 second",
    ),
    Case(
        "window-slide-below-time-unit",
        "SELECT value FROM readings [RANGE 5 SECONDS SLIDE 1500 MILLISECONDS]",
        BindError,
        "window slide 1500 MILLISECONDS is not a whole number of seconds",
        1,
        28,
        None,
    ),
    Case(
        "window-unknown-kind",
        "SELECT value FROM readings [RANGES 5 SECONDS]",
        QuerySyntaxError,
        "unknown window 'RANGES'",
        1,
        29,
        "did you mean 'RANGE'?",
    ),
    Case(
        "window-empty",
        "SELECT value FROM readings []",
        QuerySyntaxError,
        "empty window clause",
        1,
        28,
        None,
    ),
    Case(
        "window-twice",
        "SELECT value FROM readings [RANGE 5 SECONDS] [NOW]",
        QuerySyntaxError,
        "a stream reference takes one window",
        1,
        46,
        None,
    ),
    Case(
        "window-after-alias",
        "SELECT r.value FROM readings AS r [NOW]",
        QuerySyntaxError,
        "unexpected window clause",
        1,
        35,
        "before its alias",
    ),
    Case(
        "window-too-large",
        "SELECT value FROM readings [RANGE 99999999999999999999 HOURS]",
        BindError,
        "window range is too large",
        1,
        28,
        None,
    ),
    Case(
        "two-statements",
        "SELECT value FROM readings [NOW];\nSELECT id FROM readings [NOW]",
        UnsupportedError,
        "several statements are not supported",
        2,
        1,
        "one query per file",
    ),
    Case(
        "create-table",
        "CREATE TABLE t (a INTEGER)",
        UnsupportedError,
        "CREATE statements are not supported",
        1,
        1,
        "one continuous SELECT",
    ),
    Case(
        "insert",
        "\n  INSERT INTO t SELECT * FROM readings [NOW]",
        UnsupportedError,
        "INSERT statements are not supported",
        2,
        3,
        None,
    ),
    Case(
        "union",
        "SELECT value FROM readings [NOW]\nUNION\nSELECT value FROM readings [UNBOUNDED]",
        UnsupportedError,
        "set operations (UNION) are not supported",
        2,
        1,
        "separately",
    ),
    Case(
        "with-cte",
        "WITH w AS (SELECT value FROM readings [NOW])\nSELECT * FROM w",
        UnsupportedError,
        "WITH (common table expressions) is not supported",
        1,
        1,
        "FROM (SELECT ...) AS name",
    ),
    Case(
        "left-join",
        "SELECT a.value\nFROM readings [NOW] AS a\nLEFT JOIN readings [NOW] AS b ON a.id = b.id",
        UnsupportedError,
        "LEFT JOIN is not supported",
        3,
        11,
        "inner joins",
    ),
    Case(
        "full-outer-join",
        (
            "SELECT a.value FROM readings [NOW] AS a FULL OUTER JOIN readings [NOW] AS b ON a.id "
            "= b.id"
        ),
        UnsupportedError,
        "FULL OUTER JOIN is not supported",
        1,
        57,
        "inner joins",
    ),
    Case(
        "join-using",
        "SELECT a.value FROM readings [NOW] AS a JOIN readings [NOW] AS b USING (id)",
        UnsupportedError,
        "JOIN ... USING is not supported",
        1,
        46,
        "ON a.col = b.col",
    ),
    Case(
        "natural-join",
        "SELECT a.value FROM readings [NOW] AS a NATURAL JOIN readings [NOW] AS b",
        UnsupportedError,
        "NATURAL JOIN is not supported",
        1,
        54,
        "ON",
    ),
    Case(
        "order-by",
        "SELECT value\nFROM readings [NOW]\nORDER BY value DESC",
        UnsupportedError,
        "ORDER BY is not supported",
        3,
        1,
        "sort the output",
    ),
    Case(
        "limit",
        "SELECT value FROM readings [NOW] LIMIT 10",
        UnsupportedError,
        "LIMIT is not supported",
        1,
        34,
        "WHERE or HAVING",
    ),
    Case(
        "window-function",
        "SELECT plug_id,\n       AVG(value) OVER (PARTITION BY plug_id)\nFROM readings [NOW]",
        UnsupportedError,
        "SQL window functions (OVER ...) are not supported",
        2,
        19,
        "readings [RANGE 5 MINUTES]",
    ),
    Case(
        "scalar-subquery",
        "SELECT (SELECT MAX(value) FROM readings [NOW]) AS m\nFROM readings [NOW]",
        UnsupportedError,
        "subqueries in expressions are not supported",
        1,
        8,
        "derived table",
    ),
    Case(
        "in-subquery",
        (
            "SELECT value FROM readings [NOW]\nWHERE plug_id IN (SELECT plug_id FROM readings "
            "[UNBOUNDED])"
        ),
        UnsupportedError,
        "IN with a subquery is not supported",
        2,
        7,
        "derived table",
    ),
    Case(
        "exists-subquery",
        "SELECT value FROM readings [NOW] WHERE EXISTS (SELECT 1 FROM readings [NOW])",
        UnsupportedError,
        "subqueries in expressions are not supported",
        1,
        40,
        None,
    ),
    Case(
        "istream-in-derived-table",
        "SELECT d.value\nFROM (SELECT ISTREAM value FROM readings [NOW]) AS d",
        UnsupportedError,
        "ISTREAM is only allowed in the outermost SELECT",
        2,
        14,
        "drop the keyword",
    ),
    Case(
        "conflicting-modes",
        "SELECT ISTREAM DSTREAM value FROM readings [NOW]",
        QuerySyntaxError,
        "conflicting output modes ISTREAM, DSTREAM",
        1,
        16,
        None,
    ),
    Case(
        "unknown-function-suggestion",
        "SELECT abss(value) FROM readings [NOW]",
        UnsupportedError,
        "unknown function ABSS",
        1,
        8,
        "did you mean 'ABS'?",
    ),
    Case(
        "unknown-function-list",
        "SELECT cbrt(value) FROM readings [NOW]",
        UnsupportedError,
        "unknown function CBRT",
        1,
        8,
        "supported: ABS",
    ),
    # A function is refused by the name the query writes (sqlglot parses REGEXP_MATCHES
    # as its REGEXP_LIKE node, SUBSTR as SUBSTRING, POW as POWER, LCASE as LOWER).
    Case(
        "unknown-function-as-written",
        "SELECT value FROM readings [NOW]\nWHERE regexp_matches(label, 'a.c')",
        UnsupportedError,
        "unknown function REGEXP_MATCHES",
        2,
        7,
        "regular expressions are not supported",
    ),
    Case(
        "regexp-operator",
        "SELECT value FROM readings [NOW] WHERE label ~ 'a'",
        UnsupportedError,
        "the regular-expression match '~' is not supported",
        1,
        40,
        "STARTS_WITH, ENDS_WITH or CONTAINS",
    ),
    Case(
        "concat-ws-is-not-concat",
        "SELECT concat_ws(',', label, label) FROM readings [NOW]",
        UnsupportedError,
        "unknown function CONCAT_WS",
        1,
        8,
        "did you mean 'CONCAT'?",
    ),
    Case(
        "function-arity-as-written",
        "SELECT substr(label) FROM readings [NOW]",
        BindError,
        "wrong number of arguments to SUBSTR",
        1,
        8,
        None,
    ),
    Case(
        "function-types-as-written",
        "SELECT pow(label, 2) FROM readings [NOW]",
        BindError,
        "POW cannot take (VARCHAR, BIGINT)",
        1,
        8,
        "a number",
    ),
    Case(
        "concat-of-a-number",
        "SELECT label || plug_id FROM readings [NOW]",
        BindError,
        "|| cannot take (VARCHAR, INTEGER)",
        1,
        8,
        "CAST(x AS VARCHAR)",
    ),
    Case(
        "lpad-empty-padding",
        "SELECT lpad(label, 4, '') FROM readings [NOW]",
        BindError,
        "LPAD's padding must be a non-empty string literal",
        1,
        23,
        "LPAD(s, 8, ' ')",
    ),
    Case(
        "rpad-bigint-length",
        "SELECT rpad(label, id, 'x') FROM readings [NOW]",
        BindError,
        "RPAD's length must be an INTEGER, not a BIGINT",
        1,
        20,
        "CAST(n AS INTEGER)",
    ),
    Case(
        "nullif-incomparable",
        "SELECT nullif(label, 1) FROM readings [NOW]",
        BindError,
        "cannot compare VARCHAR with BIGINT",
        1,
        8,
        None,
    ),
    Case(
        "unsupported-aggregate",
        "SELECT STDDEV(value) FROM readings [NOW]",
        UnsupportedError,
        "aggregate function STDDEV is not supported",
        1,
        8,
        "MEDIAN",
    ),
    Case(
        "function-arity",
        "SELECT FLOOR() FROM readings [NOW]",
        BindError,
        "wrong number of arguments to FLOOR",
        1,
        8,
        None,
    ),
    Case(
        "function-arity-round",
        "SELECT ROUND(value, 1, 2) FROM readings [NOW]",
        BindError,
        "wrong number of arguments to ROUND",
        1,
        8,
        None,
    ),
    Case(
        "empty-in-list",
        "SELECT value FROM readings [NOW] WHERE plug_id IN ()",
        BindError,
        "IN needs at least one value",
        1,
        40,
        None,
    ),
    Case(
        "tablesample",
        "SELECT value FROM readings [NOW] TABLESAMPLE 10%",
        UnsupportedError,
        "TABLESAMPLE is not supported",
        1,
        46,
        None,
    ),
    Case(
        "group-by-all",
        "SELECT plug_id, COUNT(*) FROM readings [NOW] GROUP BY ALL",
        UnsupportedError,
        "GROUP BY ALL is not supported",
        1,
        46,
        "GROUP BY a, b",
    ),
    Case(
        "star-exclude",
        "SELECT * EXCLUDE (id) FROM readings [NOW]",
        UnsupportedError,
        "SELECT * EXCLUDE is not supported",
        1,
        8,
        "list the columns",
    ),
    Case(
        "no-from",
        "SELECT 1 AS one",
        BindError,
        "the query has no FROM clause",
        1,
        1,
        "FROM readings [RANGE 1 MINUTE]",
    ),
    Case(
        "table-function",
        "SELECT * FROM range(10)",
        UnsupportedError,
        "table functions in FROM are not supported",
        1,
        15,
        None,
    ),
    Case(
        "number-out-of-range",
        "SELECT value * 1e999 FROM readings [NOW]",
        BindError,
        "number literal 1e999 is out of range",
        1,
        16,
        None,
    ),
    Case(
        "crlf-lines",
        "SELECT value\r\nFROM readings [NOW]\r\nWHERE valeu > 1",
        BindError,
        "unknown column 'valeu'",
        3,
        7,
        "did you mean 'value'?",
    ),
    Case(
        "tab-indented",
        "SELECT value\n\tFROM readings [NOW]\n\tWHERE label > 1",
        BindError,
        "cannot compare VARCHAR with BIGINT",
        3,
        8,
        None,
    ),
]


def test_case_ids_are_unique() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_query(catalog: Catalog, case: Case) -> None:
    with pytest.raises(QueryError) as info:
        plan_query(case.query, catalog, "q.sql")
    err = info.value
    assert type(err) is case.error, f"{type(err).__name__}: {err.message}"
    assert case.message in err.message
    assert (err.line, err.col) == (case.line, case.col), err.render()
    if case.hint is not None:
        assert err.hint is not None and case.hint in err.hint, err.hint
    # The rendered message: FILE:LINE:COL, then the offending line with a caret under it.
    rendered = err.render()
    assert rendered.startswith(f"error: q.sql:{case.line}:{case.col}: {err.message}")
    line_text = Source(case.query).line_text(case.line)
    if line_text.strip():
        shown, carets = rendered.split("\n")[1:3]
        assert shown == f"  {line_text}"
        assert carets.strip().startswith("^")
        assert len(carets) - len(carets.lstrip()) == case.col + 1  # "  " + col - 1
    assert "Traceback" not in rendered


def test_rendered_error_underlines_the_offending_text(catalog: Catalog) -> None:
    query = "SELECT plug_id,\n       valeu\nFROM readings [NOW]"
    with pytest.raises(BindError) as info:
        plan_query(query, catalog, "q.sql")
    assert info.value.render() == (
        "error: q.sql:2:8: unknown column 'valeu'\n"
        "         valeu\n"
        "         ^^^^^\n"
        "  hint: did you mean 'value'?"
    )


def test_caret_follows_tabs(catalog: Catalog) -> None:
    query = "SELECT value\n\tFROM readings [NOW]\n\tWHERE label > 1"
    with pytest.raises(BindError) as info:
        plan_query(query, catalog, "q.sql")
    lines = info.value.render().split("\n")
    assert lines[1] == "  \tWHERE label > 1"
    assert lines[2] == "  \t      ^^^^^^^^^"


def test_errors_are_user_errors_with_exit_status_2(catalog: Catalog) -> None:
    for case in CASES:
        with pytest.raises(UserError) as info:
            plan_query(case.query, catalog, "q.sql")
        assert info.value.exit_code == 2


# -- positive controls ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        # a derived table with an alias is fine
        "SELECT d.v FROM (SELECT value AS v FROM readings [NOW]) AS d",
        "SELECT p.plug_id, MAX(p.total) AS m\n"
        "FROM (SELECT plug_id, SUM(value) AS total\n"
        "      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]\n"
        "      GROUP BY plug_id) AS p\n"
        "GROUP BY p.plug_id",
        # a sub-second window on a millisecond stream
        "SELECT meter, AVG(power) FROM meters [RANGE 500 MILLISECONDS] GROUP BY meter",
        # a VARCHAR column compared with a string, counted, grouped
        "SELECT label, COUNT(*) FROM readings [NOW] WHERE label <> 'x' GROUP BY label",
        "SELECT ISTREAM value FROM readings [ROWS 10 SLIDE 2] WHERE value > 1",
        "SELECT a.value, b.value FROM readings [NOW] AS a JOIN readings [UNBOUNDED] AS b "
        "ON a.id = b.id",
        "-- a leading comment\nSELECT value FROM readings [NOW]; -- and a trailing one\n",
        "SELECT value, FROM readings [NOW]",  # DuckDB allows a trailing comma
        "SELECT value\r\nFROM readings [NOW]\r\nWHERE value > 1\r\n",
        "SELECT plug_id, COUNT(*) FROM readings [NOW] GROUP BY 1",
        # windows of days and weeks (fixed lengths of event time)
        "SELECT COUNT(*) FROM readings [RANGE 10 DAYS SLIDE 1 SECOND]",
        "SELECT COUNT(*) FROM readings [RANGE 1 WEEK SLIDE 1 DAY]",
        # the scalar functions of docs/semantics.md, under their names and aliases
        "SELECT NULLIF(value, 0), SQRT(value), POW(value, 2), value ** 2, LN(value), "
        "LOG(value), LOG10(value), LOG2(value), LOG(2, value), EXP(value), SIGN(value), "
        "MOD(id, 7) FROM readings [NOW]",
        "SELECT LENGTH(label), CHAR_LENGTH(label), LOWER(label), LCASE(label), UPPER(label), "
        "SUBSTRING(label, 2, 3), SUBSTR(label, 2), SUBSTRING(label FROM 2 FOR 1), "
        "TRIM(label), LTRIM(label), RTRIM(label, 'x'), TRIM(LEADING 'a' FROM label), "
        "REPLACE(label, 'a', 'b'), CONCAT(label, 'x'), label || 'x', "
        "LPAD(label, 5, '*'), RPAD(label, plug_id, '*') FROM readings [NOW] "
        "WHERE STARTS_WITH(label, 'a') OR ENDS_WITH(label, 'z') OR CONTAINS(label, 'q')",
    ],
)
def test_valid_queries_bind(catalog: Catalog, query: str) -> None:
    assert isinstance(plan_query(query, catalog, "ok.sql"), LogicalPlan)


def test_shipped_queries_bind() -> None:
    root = Path(__file__).resolve().parents[4] / "queries"
    for folder in ("smartplug", "joins"):
        from optimizer.sql.catalog import load_catalog

        cat = load_catalog(root / folder / "catalog.toml")
        for path in sorted((root / folder).glob("*.sql")):
            plan = plan_query(path.read_text(encoding="utf-8"), cat, str(path))
            assert isinstance(plan, LogicalPlan)


# -- DuckDB syntax still parses through the CQL dialect -------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a[2] FROM t",
        "SELECT [1, 2, 3] AS l FROM t",
        "SELECT [1, 2][1] AS x FROM t",
        "SELECT a[1:2], {'k': 1} AS s FROM t",
        "SELECT list_value(1, 2)[1] FROM t",
        "SELECT a, COUNT(*) FROM t WHERE a > 1 AND b IN (1, 2) GROUP BY a HAVING COUNT(*) > 1",
        "SELECT x.a FROM t AS x JOIN u AS y ON x.id = y.id",
        "SELECT CASE WHEN a > 0 THEN 'p' ELSE 'n' END, CAST(b AS DOUBLE), b::VARCHAR FROM t",
        "FROM t SELECT a",
        "SELECT a FROM t [RANGE 5 MINUTES SLIDE 1 SECOND] AS w WHERE w.a[1] > 0",
    ],
)
def test_duckdb_syntax_parses(sql: str) -> None:
    select = parse_select(Source(sql))
    assert isinstance(select, exp.Select) and select.expressions
    assert {t.name for t in select.find_all(exp.Table)} <= {"t", "u"}
    assert select.args.get("from_") is not None


def test_array_literal_in_query_is_a_clear_error(catalog: Catalog) -> None:
    query = "SELECT [1,2][1] AS x, value FROM readings [NOW]"
    with pytest.raises(UnsupportedError) as info:
        plan_query(query, catalog, "q.sql")
    assert (info.value.line, info.value.col) == (1, 8)
    assert "unsupported expression: [1, 2][1]" in info.value.message


def test_subscript_in_query_is_a_clear_error(catalog: Catalog) -> None:
    with pytest.raises(UnsupportedError) as info:
        plan_query("SELECT value[2] FROM readings [NOW]", catalog, "q.sql")
    assert (info.value.line, info.value.col) == (1, 8)


def test_window_is_parsed_with_its_span() -> None:
    query = "SELECT value FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] AS r"
    table = parse_select(Source(query)).args["from_"].this
    window = table.args["cql_window"]
    assert window.args["kind"] == "range"
    assert (window.args["size"], window.args["unit"]) == (5, "MINUTES")
    assert (window.args["slide"], window.args["slide_unit"]) == (1, "SECONDS")
    assert query[window.args["start"]] == "[" and query[window.args["end"]] == "]"
    assert table.alias == "r"


def test_deep_nesting_is_a_user_error(catalog: Catalog) -> None:
    redundant = "SELECT " + "(" * 3000 + "1" + ")" * 3000 + " AS x FROM readings [NOW]"
    plan_query(redundant, catalog)  # redundant parentheses are not depth
    parens = "SELECT " + "(" * 3000 + "1" + " + 1)" * 3000 + " FROM readings [NOW]"
    with pytest.raises(QueryError, match="nested too deeply"):
        plan_query(parens, catalog)
    long_sum = "SELECT " + " + ".join(["value"] * 3000) + " FROM readings [NOW]"
    with pytest.raises(QueryError, match="nested too deeply"):
        plan_query(long_sum, catalog)


@pytest.mark.parametrize("mode", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_r2s_keyword_before_or_after_distinct(catalog: Catalog, mode: str) -> None:
    """``SELECT ISTREAM DISTINCT`` and ``SELECT DISTINCT ISTREAM`` are the same query."""
    from optimizer.ir.display import render_plan

    plans = [
        plan_query(f"SELECT {head} plug_id FROM readings [RANGE 5 SECONDS]", catalog)
        for head in (f"{mode} DISTINCT", f"DISTINCT {mode}")
    ]
    text = [render_plan(p) for p in plans]
    assert text[0] == text[1]
    assert "aggregate" in text[0] and mode.lower() in text[0]
    all_first = plan_query(f"SELECT {mode} ALL plug_id FROM readings [NOW]", catalog)
    assert "aggregate" not in render_plan(all_first)


def test_r2s_keyword_after_distinct_on_a_subquery_is_still_refused(catalog: Catalog) -> None:
    with pytest.raises(UnsupportedError, match="only allowed in the outermost SELECT") as err:
        plan_query(
            "SELECT d.plug_id FROM (SELECT ISTREAM DISTINCT plug_id FROM readings [NOW]) AS d",
            catalog,
        )
    assert err.value.col == 31  # the ISTREAM keyword as written
