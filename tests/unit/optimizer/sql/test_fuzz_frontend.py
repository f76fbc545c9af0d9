"""Fuzzing the front end: whatever the text, catalog or config, only hycq's own errors come out.

(a) Random query text through ``plan_query`` either binds or raises a ``UserError``; a
    ``QueryError`` points inside the text and renders.
(b) Random catalog TOML through ``parse_catalog_text`` either validates or raises
    ``CatalogError``.
(c) Random cost-model TOML configs through ``load_cost_model`` either load or raise
    ``ConfigError``; random placement JSON files through ``--placement``'s reader and
    ``resolve_placement`` either resolve or raise a ``UserError``; random ``hycq run`` option
    lists either parse or exit 2 with an ``error:`` line.

Anything else (AssertionError, KeyError, RecursionError, ...) would reach the CLI as exit 1,
"internal error": a bug. Nothing may hang either: every example runs under a hard timeout
(``no_hang``, SIGALRM) that fails the test and names the example. (Hypothesis' own
``deadline`` stays off: on this shared 2-core machine timing varies too much for a tight one.)
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import math
import re
import signal
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cost_models.registry import load_cost_model
from hycq import api, cli
from hycq.cli.common import parse_data
from hycq.cli.run_options import load_placement
from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import CatalogError, ConfigError, QueryError, UserError
from optimizer.ir.plan import LogicalPlan
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.shipped import READINGS

ROOT = Path(__file__).resolve().parents[4]
CATALOG_TEXT = (ROOT / "queries" / "smartplug" / "catalog.toml").read_text(encoding="utf-8")
SHIPPED = READINGS  # the smart-plug queries (keyed ones: test_multi_stream.py)

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

#: Wall seconds one example may take before it counts as a hang (the slowest take ~0.5 s).
HANG_LIMIT_S = 30.0


class Hang(BaseException):
    """An example ran past HANG_LIMIT_S. A BaseException, so that no ``except Exception`` in
    the code under test can swallow it."""


def timeboxed(limit: float) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Run every call of the decorated test under a SIGALRM timer of ``limit`` seconds."""

    def decorate(test: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(test)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            def alarm(signum: int, frame: Any) -> None:
                raise Hang(f"example still running after {limit:g} s: {kwargs!r:.2000}")

            previous = signal.signal(signal.SIGALRM, alarm)
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                test(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)

        return wrapper

    return decorate


no_hang = timeboxed(HANG_LIMIT_S)


def test_a_hanging_example_fails_and_cannot_be_swallowed() -> None:
    @timeboxed(0.2)
    def spin(text: str) -> None:
        try:
            while True:
                pass
        except Exception:  # noqa: BLE001 - as careless code under test might
            pass

    with pytest.raises(Hang, match=re.escape("after 0.2 s: {'text': 'SELECT'}")):
        spin(text="SELECT")


# -- (a) query text -------------------------------------------------------------------------

# fmt: off
KEYWORDS = [
    "SELECT", "ISTREAM", "DSTREAM", "RSTREAM", "DISTINCT", "FROM", "WHERE", "GROUP BY",
    "HAVING", "AS", "JOIN", "INNER JOIN", "LEFT JOIN", "CROSS JOIN", "NATURAL JOIN", "ON",
    "USING", "AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "CASE",
    "WHEN", "THEN", "ELSE", "END", "CAST", "ORDER BY", "LIMIT", "UNION", "WITH", "OVER",
    "EXISTS", "LIKE", "INTERVAL", "CREATE TABLE", "INSERT INTO", "VALUES", "QUALIFY",
    "TABLESAMPLE", "PIVOT", "EXCLUDE", "ALL", "ROLLUP", "FILTER", "WINDOW", "LATERAL",
]
CQL = [
    "RANGE", "ROWS", "NOW", "UNBOUNDED", "SLIDE", "SECOND", "SECONDS", "MINUTE", "MINUTES",
    "HOUR", "HOURS", "MILLISECOND", "MILLISECONDS", "DAYS",
    "[NOW]", "[UNBOUNDED]", "[RANGE 5 MINUTES SLIDE 1 SECOND]", "[ROWS 10 SLIDE 2]",
    "[RANGE 500 MILLISECONDS]", "[RANGE", "]",
]
NAMES = [
    "readings", "reading", "r", "a", "b", "d", "id", "ts", "value", "property", "plug_id",
    "household_id", "house_id", "r.value", "a.plug_id", "b.*", "r.*", "*", "x", "main.readings",
]
FUNCTIONS = [
    "COUNT(*)", "COUNT(", "SUM(", "AVG(", "MIN(", "MAX(", "MEDIAN(", "COUNT(DISTINCT ",
    "ABS(", "ROUND(", "COALESCE(", "GREATEST(", "LEAST(", "FLOOR(", "CEIL(", "foo(", "STDDEV(",
    "SUM(value) OVER (", "list_value(",
]
PUNCT = [
    ",", ".", ";", "(", ")", "[", "]", "{", "}", "=", "<>", "!=", "<", "<=", ">", ">=", "+",
    "-", "*", "/", "%", "||", "::", ":", "?", "$1", "'", '"', "`", "'abc'", '"q"', "'it''s'",
    "--", "-- c\n", "/*", "*/", "/* c */", "\n", "\r\n", "\r", "\t", " ", "  ", "\u2028",
    "\x00",
]
NUMBERS = [
    "0", "1", "-1", "1.5", "1e3", "1e999", "0x10", "99999999999999999999999", ".5", "5.",
    "-5", "2147483648",
]
# fmt: on
UNICODE = ["é", "ß", "∑", "💥", "名前", "\u200b", "ﬁ", "Ω", "\ufeff"]

TOKENS = st.sampled_from(KEYWORDS + CQL + NAMES + FUNCTIONS + PUNCT + NUMBERS + UNICODE)


@st.composite
def token_soup(draw: st.DrawFn) -> str:
    """A run of SQL/CQL tokens, sometimes after a valid prefix so parsing gets deep."""
    parts = draw(st.lists(TOKENS | st.text(max_size=3), max_size=30))
    sep = draw(st.sampled_from([" ", "", "\n"]))
    prefix = draw(
        st.sampled_from(
            [
                "",
                "SELECT ",
                "SELECT value FROM readings ",
                "SELECT plug_id, COUNT(*) FROM readings [RANGE 1 MINUTE] ",
                "SELECT r.value FROM readings [NOW] AS r WHERE ",
                "SELECT * FROM (SELECT plug_id, AVG(value) AS a FROM readings [NOW] GROUP BY ",
            ]
        )
    )
    return prefix + sep.join(parts)


@st.composite
def mutated_query(draw: st.DrawFn) -> str:
    """A shipped query with a slice deleted, duplicated or replaced by a token."""
    text = draw(st.sampled_from(SHIPPED)).read_text(encoding="utf-8")
    i = draw(st.integers(0, len(text)))
    j = draw(st.integers(i, min(len(text), i + 40)))
    action = draw(st.sampled_from(["delete", "replace", "duplicate", "insert"]))
    if action == "delete":
        return text[:i] + text[j:]
    if action == "duplicate":
        return text[:j] + text[i:j] + text[j:]
    token = draw(TOKENS)
    if action == "replace":
        return text[:i] + token + text[j:]
    return text[:i] + " " + token + " " + text[i:]


COLUMNS = ["id", "ts", "value", "property", "plug_id", "house_id", "r.value", "s.plug_id", "x"]
LITERALS = ["1", "0", "-2", "1.5", "'a'", "NULL", "TRUE", "1e999", "[1, 2]"]
WINDOWS = [
    "[NOW]",
    "[UNBOUNDED]",
    "[RANGE 5 MINUTES SLIDE 1 SECOND]",
    "[RANGE 10 SECONDS]",
    "[ROWS 100 SLIDE 10]",
    "[ROWS 5]",
    "[RANGE 500 MILLISECONDS]",
    "[RANGE 1 SECOND SLIDE 5 SECONDS]",
    "[RANGE 0 SECONDS]",
    "[UNBOUNDED SLIDE 1 MINUTE]",
    "",
]
SCALAR = st.recursive(
    st.sampled_from(COLUMNS + LITERALS),
    lambda e: st.one_of(
        st.tuples(
            e,
            st.sampled_from(
                ["+", "-", "*", "/", "%", "=", "<>", "<", ">=", "AND", "OR", "||", "LIKE"]
            ),
            e,
        ).map(" ".join),
        st.tuples(st.sampled_from(["NOT ", "-", ""]), e).map("".join),
        e.map(lambda x: f"({x})"),
        st.tuples(
            st.sampled_from(
                [
                    "COUNT",
                    "SUM",
                    "AVG",
                    "MIN",
                    "MAX",
                    "MEDIAN",
                    "ABS",
                    "ROUND",
                    "FLOOR",
                    "CEIL",
                    "COALESCE",
                    "GREATEST",
                    "foo",
                ]
            ),
            st.lists(e, max_size=3),
        ).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        e.map(lambda x: f"COUNT(DISTINCT {x})"),
        st.tuples(e, e, e).map(lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"),
        st.tuples(e, st.sampled_from(["INTEGER", "DOUBLE", "VARCHAR", "DATE"])).map(
            lambda t: f"CAST({t[0]} AS {t[1]})"
        ),
        st.tuples(e, st.lists(e, max_size=3)).map(lambda t: f"{t[0]} IN ({', '.join(t[1])})"),
        st.tuples(e, e, e).map(lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}"),
        e.map(lambda x: f"{x} IS NOT NULL"),
    ),
    max_leaves=6,
)


@st.composite
def grammar_query(draw: st.DrawFn, depth: int = 0) -> str:
    """A query that is structurally plausible CQL, so binding (not parsing) is exercised."""
    items = draw(
        st.lists(
            st.one_of(
                SCALAR,
                st.just("*"),
                st.just("r.*"),
                st.tuples(SCALAR, st.sampled_from(["a", "x", "value"])).map(" AS ".join),
            ),
            min_size=draw(st.sampled_from([0, 1, 1, 1, 1])),
            max_size=3,
        )
    )
    mode = draw(
        st.sampled_from(["", "", "", "DISTINCT "] + ["ISTREAM ", "DSTREAM "] * (depth == 0))
    )
    froms = []
    for alias in draw(st.lists(st.sampled_from(["r", "s", "d", ""]), min_size=1, max_size=3)):
        if depth < 2 and draw(st.booleans()) and draw(st.booleans()):
            rel = "(" + draw(grammar_query(depth + 1)) + ")"
        else:
            rel = draw(st.sampled_from(["readings"] * 4 + ["reading", "Readings"]))
            rel += " " + draw(st.sampled_from(WINDOWS[:6] * 3 + WINDOWS))
        froms.append(rel + (f" AS {alias}" if alias else ""))
    joiner = draw(st.sampled_from([", ", " JOIN ", " CROSS JOIN ", " LEFT JOIN "]))
    text = f"SELECT {mode}{', '.join(items)} FROM "
    if joiner.strip() in ("JOIN", "LEFT JOIN"):
        on = " ON " + draw(SCALAR)
        text += froms[0] + "".join(f"{joiner}{f}{on}" for f in froms[1:])
    else:
        text += joiner.join(froms)
    if draw(st.booleans()):
        text += " WHERE " + draw(SCALAR)
    if draw(st.booleans()):
        keys = draw(st.lists(SCALAR | st.sampled_from(["1", "2", "5"]), min_size=1, max_size=3))
        text += " GROUP BY " + ", ".join(keys)
    if draw(st.booleans()):
        text += " HAVING " + draw(SCALAR)
    return text


QUERY_TEXT = st.one_of(st.text(max_size=80), token_soup(), mutated_query(), grammar_query())


def check_query(text: str, catalog: Catalog) -> None:
    try:
        plan = plan_query(text, catalog, "fuzz.sql")
    except QueryError as err:
        assert err.source is not None and err.offset is not None, err
        lines = err.source.lines()
        assert 1 <= err.line <= len(lines), (err.line, len(lines))
        assert 1 <= err.col <= len(lines[err.line - 1]) + 1, (err.col, lines[err.line - 1])
        rendered = err.render()
        assert rendered.startswith(f"error: fuzz.sql:{err.line}:{err.col}: ")
        assert err.message
    except UserError as err:
        assert err.render().startswith("error: ")
    else:
        assert isinstance(plan, LogicalPlan)


@FUZZ
@given(QUERY_TEXT)
@example("")
@example("SELECT value FROM readings [RANGE 5 SECONDS")
@example("SELECT 'abc")
@example("SELECT /* open")
@example("SELECT value FROM readings [NOW] WHERE value IN ()")
@example("SELECT " + "(" * 3000 + "1" + ")" * 3000 + " FROM readings [NOW]")
@example("SELECT " + "+".join(["value"] * 3000) + " FROM readings [NOW]")
@example("SELECT value\rFROM readings [NOW]\rWHERE )")
@no_hang
def test_random_query_text_raises_only_user_errors(smartplug: Catalog, text: str) -> None:
    check_query(text, smartplug)


@st.composite
def valid_catalog(draw: st.DrawFn) -> Catalog:
    """A well-formed catalog: one or two streams, random column types and time units."""
    types = ["BIGINT", "INTEGER", "DOUBLE", "BOOLEAN", "VARCHAR"]
    pool = ["id", "value", "property", "plug_id", "house_id", "x", "label", "flag"]
    text = ""
    for name in draw(
        st.lists(st.sampled_from(["readings", "s", "r"]), min_size=1, max_size=2, unique=True)
    ):
        unit = draw(st.sampled_from(["s", "ms"]))
        cols = draw(st.lists(st.sampled_from(pool), max_size=5, unique=True))
        text += f'[streams.{name}]\ntimestamp = "ts"\ntime_unit = "{unit}"\n'
        text += f'[streams.{name}.columns]\nts = "BIGINT"\n'
        text += "".join(f'{c} = "{draw(st.sampled_from(types))}"\n' for c in cols)
    return parse_catalog_text(text, "fuzz.toml")


@FUZZ
@given(valid_catalog(), st.one_of(grammar_query(), token_soup()))
@no_hang
def test_random_queries_on_random_catalogs(catalog: Catalog, text: str) -> None:
    check_query(text, catalog)


def test_shipped_queries_still_bind(smartplug: Catalog) -> None:
    for path in SHIPPED:
        assert isinstance(plan_query(path.read_text(encoding="utf-8"), smartplug), LogicalPlan)


# -- (b) catalogs ---------------------------------------------------------------------------

KEYS = [
    "streams",
    "doc",
    "readings",
    "timestamp",
    "time_unit",
    "rate",
    "columns",
    "source",
    "statistics",
    "kind",
    "generator",
    "path",
    "format",
    "houses",
    "seed",
    "start",
    "households_per_house",
    "plugs_per_household",
    "distinct",
    "selectivity",
    "ts",
    "value",
    "id",
    "x",
    "Readings",
    "1abc",
    "",
    "a b",
]
SCALARS = st.one_of(
    st.sampled_from(
        [
            "ts",
            "s",
            "ms",
            "seconds",
            "BIGINT",
            "INTEGER",
            "DOUBLE",
            "VARCHAR",
            "BOOLEAN",
            "INTGER",
            "generator",
            "file",
            "smartplug",
            "debs",
            "csv",
            "parquet",
            "x.csv",
            "",
        ]
    ),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=5),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def toml_key(key: str) -> str:
    bare = key and all(c.isalnum() or c in "-_" for c in key) and key.isascii()
    return key if bare else toml_string(key)


def toml_string(s: str) -> str:
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF:
            out.append(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else "?")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    assert isinstance(v, dict)
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def to_toml(data: dict[str, Any]) -> str:
    """Inline-table TOML (one line per top-level key): valid TOML for any dict we build."""
    return "\n".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in data.items()) + "\n"


BASE = tomllib.loads(CATALOG_TEXT)


def paths(d: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    if isinstance(d, dict):
        for k, v in d.items():
            out.append((*prefix, k))
            out += paths(v, (*prefix, k))
    return out


@st.composite
def mutated_catalog(draw: st.DrawFn) -> dict[str, Any]:
    """The real catalog with a few keys dropped, renamed, retyped or added."""
    data = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        all_paths = paths(data)
        if not all_paths:
            break
        path = draw(st.sampled_from(all_paths))
        parent = data
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        action = draw(st.sampled_from(["drop", "rename", "retype", "add"]))
        if action == "drop":
            del parent[key]
        elif action == "rename":
            parent[draw(st.sampled_from(KEYS) | st.text(max_size=6))] = parent.pop(key)
        elif action == "retype":
            parent[key] = draw(VALUES)
        elif isinstance(parent[key], dict):
            parent[key][draw(st.sampled_from(KEYS))] = draw(VALUES)
    return data


CATALOGS = st.one_of(
    mutated_catalog(),
    st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
    st.fixed_dictionaries({"streams": st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3)}),
)


def check_catalog(text: str) -> None:
    try:
        catalog = parse_catalog_text(text, "fuzz.toml")
    except CatalogError as err:
        assert err.render().startswith("error: ")
    else:
        assert isinstance(catalog, Catalog)


@FUZZ
@given(CATALOGS)
@no_hang
def test_random_catalogs_raise_only_catalog_errors(data: dict[str, Any]) -> None:
    text = to_toml(data)
    tomllib.loads(text)  # the generator itself writes valid TOML
    check_catalog(text)


@FUZZ
@given(
    st.text(max_size=200) | st.builds(lambda a, b: a + b, st.just(CATALOG_TEXT[:300]), st.text())
)
@no_hang
def test_random_catalog_text_raises_only_catalog_errors(text: str) -> None:
    check_catalog(text)


@pytest.mark.parametrize(
    "text",
    [
        CATALOG_TEXT,
        CATALOG_TEXT.replace("rate = 2000", "rate = nan"),
        CATALOG_TEXT.replace("rate = 2000", "rate = inf"),
        CATALOG_TEXT.replace('ts = "BIGINT"', "ts = 1"),
        CATALOG_TEXT.replace("houses = 40", "houses = 99999999999999999999"),
        CATALOG_TEXT.replace("[streams.readings]", '[streams."rea dings"]'),
        "streams = []\n",
        "streams = {readings = 1}\n",
        '[streams.readings]\ntimestamp = "ts"\ncolumns = {ts = "BIGINT"}\nsource = []\n',
        '[streams.readings]\ntimestamp = "ts"\ncolumns = {ts = "BIGINT"}\nstatistics = 1\n',
        '[streams.readings]\ntimestamp = "ts"\ncolumns = {ts = "BIGINT"}\n'
        "statistics = {distinct = {nope = 3}}\n",
    ],
)
def test_catalog_edge_cases_raise_only_catalog_errors(text: str) -> None:
    check_catalog(text)


# -- (c) cost-model configs, placement files, run options ------------------------------------

CONFIG_DIR = Path(tempfile.mkdtemp(prefix="hycq-fuzz-"))

#: Bases a config may name. Arbitrary dotted paths are not generated: a config naming, say,
#: ``os:abort`` runs it by design (the user named it); these cover every kind of base.
BASES = st.sampled_from(
    [
        "analytical",
        "calibrated",  # no profile in tests: a ConfigError
        "analytcal",
        "",
        " ",
        "cost_models.analytical:AnalyticalCostModel",
        "cost_models.analytical.AnalyticalCostModel",
        "cost_models.registry:available",
        "cost_models.registry:BUILTIN",
        "math:pi",
        "no_such_module_q:Model",
        "cost_models.analytical:",
        ":Model",
        "a.b.c:d.e",
        "other.toml",
        "./missing.py:Model",
        "./missing.py",
        "a/b",
        "sneaky",
    ]
) | st.text(alphabet=st.characters(blacklist_characters=".:/\\", blacklist_categories=("Cs",)))
PARAMETER_NAMES = [
    "select", "project", "agg_base", "join_input", "join_output", "window", "r2s",
    "to_arrow", "from_arrow", "engines", "name", "selct", "fixed", "",
]  # fmt: skip
ENGINE_TABLES = st.dictionaries(
    st.sampled_from(["duckdb", "spark", "row", "x"]),
    st.dictionaries(st.sampled_from(["fixed", "per_row", "fixd", "scan"]), VALUES, max_size=3)
    | VALUES,
    max_size=3,
)
PARAMETERS = st.dictionaries(
    st.sampled_from(PARAMETER_NAMES) | st.text(max_size=4),
    st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5) | VALUES | ENGINE_TABLES,
    max_size=4,
)
COST_CONFIGS = st.one_of(
    st.fixed_dictionaries(
        {
            "cost_model": st.fixed_dictionaries(
                {},
                optional={
                    "name": st.text(max_size=6) | VALUES,
                    "base": BASES | VALUES,
                    "parameters": PARAMETERS | VALUES,
                    "extra": VALUES,
                },
            )
        }
    ),
    st.dictionaries(
        st.sampled_from(["cost_model", "costmodel", "base", "name"]), VALUES, max_size=3
    ),
)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120)


def check_cost_model(text: str) -> None:
    path = CONFIG_DIR / "fuzz.toml"
    path.write_text(text, encoding="utf-8")
    try:
        model = load_cost_model(str(path))
    except ConfigError as err:
        assert err.render().startswith("error: ")
    else:
        assert isinstance(model.name, str) and model.name


@FUZZ
@given(COST_CONFIGS)
@example({"cost_model": {"base": "analytical", "parameters": {"select": -1.0}}})
@example({"cost_model": {"base": "analytical", "parameters": {"engines": {"duckdb": 1}}}})
@example({"cost_model": {"base": "math:pi"}})
@example({"cost_model": {"name": "", "base": "analytical"}})
@no_hang
def test_random_cost_model_configs_raise_only_config_errors(data: dict[str, Any]) -> None:
    text = to_toml(data)
    tomllib.loads(text)
    check_cost_model(text)


@FUZZ
@given(TEXT | st.builds(lambda a, b: a + b, st.just('[cost_model]\nbase = "analytical"\n'), TEXT))
@no_hang
def test_random_cost_model_text_raises_only_config_errors(text: str) -> None:
    check_cost_model(text)


SMARTPLUG = parse_catalog_text(CATALOG_TEXT, "catalog.toml")
Q1_PLAN = plan_query((ROOT / "queries" / "smartplug" / "q1.sql").read_text(), SMARTPLUG)
OP_IDS = [op.id for op in Q1_PLAN.operators()]
PLACEMENTS = st.one_of(
    # well-formed files: every operator id and engine known, so complete_placement is reached
    st.dictionaries(st.sampled_from(OP_IDS), st.sampled_from(["row", "duckdb", "spark"])),
    st.dictionaries(
        st.sampled_from([*OP_IDS, "x", "", "Join1"]),
        st.sampled_from(["row", "duckdb", "spark", "oracle", "ROW", ""]) | VALUES,
        max_size=6,
    ),
    VALUES,
)


@FUZZ
@given(PLACEMENTS, st.sampled_from(["duckdb", "spark"]))
@example(dict.fromkeys(OP_IDS, "duckdb"), "duckdb")
@example(dict.fromkeys(OP_IDS, "spark"), "spark")
@example({"source1": "duckdb"}, "duckdb")
@no_hang
def test_random_placement_files_raise_only_user_errors(placement: Any, engine: str) -> None:
    path = CONFIG_DIR / "placement.json"
    path.write_text(json.dumps(placement), encoding="utf-8")
    try:
        loaded = load_placement(str(path))
        engines = api.resolve_placement(Q1_PLAN, loaded, engine)
    except UserError as err:
        assert err.render().startswith("error: ")
    else:
        assert set(engines) == set(OP_IDS)
        assert set(engines.values()) <= {"row", "duckdb", "spark"}


RUN_OPTIONS = [
    "--rate", "--duration", "--pace", "--placement", "--data", "--output", "--column-engine",
    "--duckdb-threads", "--spark-conf", "--metrics", "--dead-letter", "--cost-model",
    "--row-core", "--catalog", "--progress", "--no-progress", "--debug", "--nope",
]  # fmt: skip
OPTION_VALUES = st.sampled_from(
    [
        "0", "-1", "1", "2.5", "1e999", "nan", "inf", "-inf", "abc", "", " ", "-", "--",
        "max", "realtime", "auto", "row", "column", "duckdb", "spark", "shared",
        "readings=x.csv", "readings=", "=x.csv", "a=b=c", "x.json", "p.parquet", "o.txt",
        "spark.master=local", "master=local",
    ]
) | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)  # fmt: skip


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(RUN_OPTIONS), OPTION_VALUES), max_size=5))
@no_hang
def test_random_run_options_parse_or_exit_2(options: list[tuple[str, str]]) -> None:
    argv = ["run", "q.sql"] + [part for pair in options for part in pair]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = cli.build_parser().parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 2
        assert err.getvalue().startswith("error: ") and "hint:" in err.getvalue()
        return
    try:  # the checks the command makes before reading anything
        parse_data(args.data)
        load_placement(args.placement)
    except UserError as user:
        assert user.render().startswith("error: ")
