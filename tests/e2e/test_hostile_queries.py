"""Queries that used to be internal errors (exit 1) and are really bad input, or valid input.

* Long IN lists and OR / AND chains are flat, not deep: 10,000 items run on the row engine
  (a set lookup), DuckDB and Spark (flat SQL), with the oracle's result; redundant
  parentheses are not depth; truly deep queries stay a positioned exit 2.
* Integer overflow is an error on every placement (one line, exit 2; docs/semantics.md), as
  is a CAST of a non-finite value to an integer.
* A cost-model plugin that raises or returns a non-finite or negative cost is reported as
  the plugin's failure (exit 2, naming it); ``[...engines.oracle]`` in a cost-model TOML is
  refused.
* A query file that starts with a UTF-8 BOM is read like any other.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from hycq.api import execute
from optimizer.ir.errors import DataError
from optimizer.ir.expr import InList, Unary
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.cli import run_main
from tests.datagen import make_readings, small_smartplug
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG_PATH = ROOT / "queries" / "smartplug" / "catalog.toml"
CATALOG = load_catalog(CATALOG_PATH)


def assert_one_error(code: int, err: str, *parts: str) -> None:
    assert code == 2, (code, err)
    assert err.count("error: ") == 1 and "internal error" not in err, err
    assert "Traceback" not in err, err
    error = err[err.index("error: ") :]
    assert len(error.splitlines()) <= 4, error  # a message, maybe the query line, a hint
    for part in parts:
        assert part in err, (part, err)


# -- long lists and chains -----------------------------------------------------------------


@pytest.fixture(scope="module")
def data() -> pa.Table:
    return small_smartplug(2, seed=11, rate=40.0)


def _ids(n: int, seed: int) -> list[int]:
    return random.Random(seed).sample(range(0, 4 * n), n)


def long_queries(n: int) -> dict[str, str]:
    ids = _ids(n, n)
    listed = ", ".join(map(str, ids))
    return {
        "in": f"SELECT plug_id, COUNT(*) AS c FROM readings [RANGE 2 SECONDS] "
        f"WHERE id IN ({listed}) GROUP BY plug_id",
        "not in": f"SELECT COUNT(*) AS c FROM readings [RANGE 2 SECONDS] "
        f"WHERE NOT (id IN ({listed}))",
        "or": "SELECT COUNT(*) AS c, SUM(value) AS s FROM readings [RANGE 3 SECONDS] WHERE "
        + " OR ".join(f"id = {i}" for i in ids),
        "or mixed": "SELECT COUNT(*) AS c FROM readings [RANGE 2 SECONDS] WHERE "
        + " OR ".join(f"id = {i}" if k % 2 else f"(value > {i} AND plug_id = {k % 5})"
                      for k, i in enumerate(ids)),
        "and": "SELECT COUNT(*) AS c FROM readings [RANGE 2 SECONDS] WHERE "
        + " AND ".join(f"id <> {i}" for i in ids),
        "in values": "SELECT COUNT(*) AS c FROM readings [NOW] "
        f"WHERE value IN ({', '.join(f'{i / 4}' for i in ids)}, NULL)",
        "in columns": "SELECT COUNT(*) AS c FROM readings [NOW] "
        f"WHERE id IN (plug_id, house_id + 1, {listed})",
    }  # fmt: skip


#: Items per kind: 10,000, but 2,000 for the OR of mixed predicates (no set lookup: 10,000 of
#: them take DuckDB ~4 s per slide; the oracle as long) and for DOUBLE values (the same flat
#: IN as "in", with a NULL item; the oracle takes 12 s over 10,000).
SIZES = {"or mixed": 2_000, "in values": 2_000}


@pytest.mark.parametrize("kind", [k for k in long_queries(3) if k != "and"])
def test_ten_thousand_items_on_the_row_engine_and_duckdb(data: pa.Table, kind: str) -> None:
    text = long_queries(SIZES.get(kind, 10_000))[kind]
    plan = plan_query(text, CATALOG)
    expected = oracle(text, CATALOG, {"readings": data})
    assert expected.num_rows > 0
    for placement in ("row", "column"):
        got = execute(plan, CATALOG, {"readings": data}, placement)
        assert_same_stream(got.table, expected)


def test_ten_thousand_conjuncts(data: pa.Table) -> None:
    """``id <> a AND id <> b AND ...`` is ``NOT (id IN (a, b, ...))`` for non-NULL ids: the
    oracle checks that form (its own rewrite of a 10,000-term AND takes minutes)."""
    queries = long_queries(10_000)
    plan = plan_query(queries["and"], CATALOG)
    expected = oracle(queries["not in"], CATALOG, {"readings": data})
    for placement in ("row", "column"):
        got = execute(plan, CATALOG, {"readings": data}, placement)
        assert_same_stream(got.table, expected)


def test_a_long_or_of_equalities_is_one_set_lookup() -> None:
    plan = plan_query(long_queries(10_000)["or"], CATALOG)
    preds = [op.predicate for op in plan.operators() if op.kind == "select"]  # type: ignore[attr-defined]
    assert len(preds) == 1 and isinstance(preds[0], InList) and len(preds[0].items) == 10_000


def test_a_long_and_of_inequalities_is_a_negated_set_lookup() -> None:
    plan = plan_query(long_queries(10_000)["and"], CATALOG)
    preds = [op.predicate for op in plan.operators() if op.kind == "select"]  # type: ignore[attr-defined]
    assert len(preds) == 1 and isinstance(preds[0], Unary) and preds[0].op == "NOT"
    assert isinstance(preds[0].operand, InList) and len(preds[0].operand.items) == 10_000


@pytest.mark.parametrize("null_item", [False, True])
def test_the_negated_set_lookup_keeps_three_valued_logic(data: pa.Table, null_item: bool) -> None:
    """The oracle runs the AND chain itself (200 terms: DuckDB takes it in well under a
    second), so the rewrite is checked against SQL's own evaluation, NULL items included."""
    ids = _ids(200, 200)
    terms = [f"id <> {i}" for i in ids] + (["id <> NULL"] if null_item else [])
    q = (
        "SELECT plug_id, COUNT(*) AS c FROM readings [RANGE 2 SECONDS] WHERE "
        + " AND ".join(terms)
        + " GROUP BY plug_id"
    )
    expected = oracle(q, CATALOG, {"readings": data})
    plan = plan_query(q, CATALOG)
    for placement in ("row", "column"):
        got = execute(plan, CATALOG, {"readings": data}, placement)
        assert_same_stream(got.table, expected)


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["in", "or", "and", "in columns"])
def test_ten_thousand_items_on_spark(data: pa.Table, kind: str) -> None:
    pytest.importorskip("pyspark")
    queries = long_queries(10_000)
    plan = plan_query(queries[kind], CATALOG)
    expected = oracle(queries["not in" if kind == "and" else kind], CATALOG, {"readings": data})
    got = execute(plan, CATALOG, {"readings": data}, "column", column_engine="spark")
    assert_same_stream(got.table, expected)


def test_the_cli_runs_a_long_in_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "q.sql").write_text(long_queries(10_000)["in"])
    for placement in ("row", "column"):
        code, err = run_main(
            capsys, "run", tmp_path / "q.sql", "--catalog", CATALOG_PATH, "--duration", "3",
            "--placement", placement,
        )  # fmt: skip
        assert code == 0, err


@pytest.mark.parametrize("depth", [40, 128, 1000, 5000])
def test_redundant_parentheses_are_not_depth(data: pa.Table, depth: int) -> None:
    text = (
        "SELECT COUNT(*) AS c FROM readings [RANGE 2 SECONDS] WHERE "
        + "(" * depth + "value > 1 AND (plug_id = 1 OR house_id = 0)" + ")" * depth
    )  # fmt: skip
    plan = plan_query(text, CATALOG)
    expected = oracle(text, CATALOG, {"readings": data})
    got = execute(plan, CATALOG, {"readings": data}, "row")
    assert_same_stream(got.table, expected)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT " + "(" * 200 + "value" + " + 1)" * 200 + " AS x FROM readings [NOW]",
        "SELECT " + "ABS(" * 200 + "value" + ")" * 200 + " AS x FROM readings [NOW]",
        "SELECT " + " * ".join(["value"] * 300) + " AS x FROM readings [NOW]",
        "SELECT COUNT(*) AS c FROM readings [NOW] WHERE " + "NOT (" * 300 + "value > 1" + ")" * 300,
    ],
    ids=["parens", "calls", "product", "not"],
)
def test_truly_deep_queries_stay_a_positioned_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    (tmp_path / "deep.sql").write_text(text + "\n")
    code, err = run_main(capsys, "run", tmp_path / "deep.sql", "--catalog", CATALOG_PATH)
    assert_one_error(code, err, "deep.sql:1:", "nested too deeply")


# -- integer overflow ----------------------------------------------------------------------

OVERFLOWS = {
    "sum": "SELECT SUM(CAST(9223372036854775807 AS BIGINT)) AS s FROM readings [RANGE 2 SECONDS]",
    "product": "SELECT id * 9223372036854775807 AS x FROM readings [NOW]",
    "sum of column": "SELECT SUM(id * 4611686018427387904) AS s FROM readings [RANGE 3 SECONDS]",
    "negation": "SELECT -(id - 9223372036854775807 - 2) AS x FROM readings [NOW]",
    "cast to integer": "SELECT CAST(id * 4294967296 AS INTEGER) AS x FROM readings [NOW]",
    "cast of infinity": "SELECT CAST(value / 0.0 AS BIGINT) AS x FROM readings [NOW]",
}


@pytest.mark.parametrize("kind", list(OVERFLOWS))
@pytest.mark.parametrize("placement", ["row", "column", "auto"])
def test_integer_overflow_is_one_clear_error_on_every_placement(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str, placement: str
) -> None:
    (tmp_path / "q.sql").write_text(OVERFLOWS[kind] + "\n")
    (tmp_path / "d.csv").write_text(
        "".join(f"{i},{1377986401 + i // 2},{i + 0.5},1,0,0,0\n" for i in range(1, 9))
    )
    code, err = run_main(
        capsys, "run", tmp_path / "q.sql", "--catalog", CATALOG_PATH, "--data",
        f"readings={tmp_path / 'd.csv'}", "--placement", placement, "--output",
        tmp_path / "o.parquet",
    )  # fmt: skip
    assert_one_error(code, err, "hint:")
    assert "integer overflow" in err or "CAST" in err or "cannot be computed" in err, err
    assert not (tmp_path / "o.parquet").exists()
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["sum", "product", "cast to integer"])
def test_integer_overflow_on_spark(kind: str) -> None:
    pytest.importorskip("pyspark")
    data = make_readings([(1377986401 + i // 2, i + 0.5) for i in range(8)])
    plan = plan_query(OVERFLOWS[kind], CATALOG)
    with pytest.raises(DataError, match=r"overflow|cannot be computed"):
        execute(plan, CATALOG, {"readings": data}, "column", column_engine="spark")


def test_values_that_fit_are_not_an_error(data: pa.Table) -> None:
    text = (
        "SELECT SUM(id * 1000000000000) AS s, MAX(-id) AS m, CAST(MAX(id) AS INTEGER) AS c "
        "FROM readings [RANGE 5 SECONDS]"
    )
    plan = plan_query(text, CATALOG)
    expected = oracle(text, CATALOG, {"readings": data})
    for placement in ("row", "column"):
        assert_same_stream(execute(plan, CATALOG, {"readings": data}, placement).table, expected)


# -- cost-model plugins ----------------------------------------------------------------------

PLUGIN = """
class Model:
    name = "{name}"

    def unit_cost(self, op, engine, estimates):
        {unit}

    def group_cost(self, group, estimates):
        return 1e-3
"""


@pytest.mark.parametrize(
    ("unit", "part"),
    [
        (
            "raise ZeroDivisionError('oops')",
            "): ZeroDivisionError: oops",
        ),
        ("return float('nan')", "returned nan from unit_cost("),
        ("return -1.0", "returned -1.0 from unit_cost("),
        ("return 'fast'", "returned 'fast' from unit_cost("),
        ("return None", "returned None from unit_cost("),
    ],
    ids=["raises", "nan", "negative", "string", "none"],
)
@pytest.mark.parametrize("command", ["explain", "run", "report"])
def test_a_broken_cost_model_plugin_is_reported_as_the_plugins(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    unit: str,
    part: str,
    command: str,
) -> None:
    (tmp_path / "model.py").write_text(PLUGIN.format(name="mine", unit=unit))
    extra = {"run": ("--duration", "2"), "report": ("--out", tmp_path / "r.html")}.get(command, ())
    code, err = run_main(
        capsys, command, ROOT / "queries" / "smartplug" / "q1.sql", "--cost-model",
        f"{tmp_path / 'model.py'}:Model", *extra,
    )  # fmt: skip
    assert_one_error(code, err, "cost model 'mine'", "model.py:Model", part)


def test_an_unknown_engine_in_a_cost_model_toml_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for engine, hint in (
        ("oracle", "columnar engines: datafusion, duckdb, spark"),
        ("duckbd", "duckdb"),
    ):
        toml = tmp_path / f"{engine}.toml"
        toml.write_text(
            '[cost_model]\nbase = "analytical"\n'
            f"[cost_model.parameters.engines.{engine}]\nfixed = 0.001\n"
        )
        code, err = run_main(
            capsys, "explain", ROOT / "queries" / "smartplug" / "q1.sql", "--cost-model", toml
        )
        assert_one_error(code, err, f"unknown columnar engine 'engines.{engine}'", hint)


# -- text encodings ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["explain", "run"])
def test_a_query_file_with_a_bom_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    query = tmp_path / "q.sql"
    query.write_bytes(b"\xef\xbb\xbf" + (ROOT / "queries" / "smartplug" / "q5.sql").read_bytes())
    (tmp_path / "catalog.toml").write_bytes(b"\xef\xbb\xbf" + CATALOG_PATH.read_bytes())
    code, err = run_main(capsys, command, query, *(("--duration", "2") if command == "run" else ()))
    assert code == 0, err


def test_a_bom_on_stdin_is_not_query_text(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    text = "\ufeff" + (ROOT / "queries" / "smartplug" / "q5.sql").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, err = run_main(capsys, "explain", "-", "--catalog", CATALOG_PATH)
    assert code == 0, err


# -- result columns renamed ----------------------------------------------------------------

RENAMING = {
    # (query, the renames the note names, the result's columns)
    "case": (
        'SELECT plug_id AS "x", value AS "X" FROM readings [NOW]',
        ["'X' -> 'X_1'"],
        ["x", "X_1"],
    ),
    "exact": (
        "SELECT plug_id, plug_id, value AS plug_id_1 FROM readings [NOW]",
        ["'plug_id' -> 'plug_id_1'", "'plug_id_1' -> 'plug_id_1_1'"],
        ["plug_id", "plug_id_1", "plug_id_1_1"],
    ),
    "derived": (
        "SELECT d.n FROM (SELECT plug_id AS n, value AS N FROM readings [NOW]) AS d",
        ["'N' -> 'N_1'"],
        ["n"],
    ),
}


@pytest.mark.parametrize("name", sorted(RENAMING))
@pytest.mark.parametrize("command", ["run", "explain"])
def test_renamed_result_columns_are_noted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, command: str
) -> None:
    """Result columns whose names collide (exactly, or in another case: names are
    case-insensitive) get ``_1``, ``_2``, ...: one ``note:`` line on stderr says so, naming
    each rename and where the list is; the names in the output are those of the note."""
    text, renames, columns = RENAMING[name]
    (tmp_path / "q.sql").write_text(f"-- renames\n{text}\n")
    out = tmp_path / "out.jsonl"
    args = ["--duration", "2", "--output", out] if command == "run" else []
    code, err = run_main(capsys, command, tmp_path / "q.sql", "--catalog", CATALOG_PATH, *args)
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, err
    assert notes[0].startswith(f"note: {tmp_path / 'q.sql'}:2:"), notes
    for rename in renames:
        assert rename in notes[0], notes
    if command == "run":
        import json

        first = json.loads(out.read_text().splitlines()[0])
        assert list(first) == [*columns, "_ts"]


def test_distinct_names_give_no_note(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "q.sql").write_text('SELECT plug_id AS "x", value AS "y" FROM readings [NOW]\n')
    code, err = run_main(capsys, "explain", tmp_path / "q.sql", "--catalog", CATALOG_PATH)
    assert code == 0 and "note:" not in err, err


def test_shared_runs_note_renames_per_query(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a.sql").write_text('SELECT value AS "v", plug_id AS "V" FROM readings [NOW]\n')
    (tmp_path / "b.sql").write_text("SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS]\n")
    code, err = run_main(
        capsys, "run", tmp_path / "a.sql", tmp_path / "b.sql", "--catalog", CATALOG_PATH,
        "--duration", "2", "--output-dir", tmp_path / "out",
    )  # fmt: skip
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and f"{tmp_path / 'a.sql'}:1:" in notes[0], err
    assert "'V' -> 'V_1'" in notes[0]
