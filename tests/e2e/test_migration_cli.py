"""``hycq run --migrate AT=TARGET.json`` / ``--migration`` / ``--adapt`` and ``--join-order``
through the CLI: the happy path against the oracle (with the metrics record's fields), and
every class of bad target or option refused with exit 2 and a message before the run starts.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from hycq.cli import main
from optimizer.sql.catalog import load_catalog
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
J3 = ROOT / "queries" / "keyed" / "j3.sql"
SMARTPLUG_Q1 = ROOT / "queries" / "smartplug" / "q1.sql"

RECORD_FIELDS = {
    "at", "reason", "strategy", "from", "to", "duration_ms", "states_moved",
    "states_recomputed", "keys_completed", "output_gap_ms", "old_plan_dropped_at",
}  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("keyed")
    code = main(
        ["data", "generate", "--generator", "keyed", "--out", str(folder), "--seconds", "40",
         "--rate", "10", "--keys", "15"]
    )  # fmt: skip
    assert code == 0
    return folder


def _run(data: Path, *extra: str | Path) -> list[str]:
    return [
        "run", str(J3), "--catalog", str(data / "catalog.toml"), "--placement", "row",
        *map(str, extra),
    ]  # fmt: skip


def _target(tmp: Path, obj: Any, name: str = "target.json") -> Path:
    path = tmp / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def test_migrate_happy_path_with_metrics_records(data: Path, tmp_path: Path) -> None:
    first = _target(tmp_path, {"join_order": ["t", "s", "r"], "placement": "row"}, "a.json")
    explain = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "explain", str(J3), "--catalog",
         str(data / "catalog.toml"), "--join-order", "s,r,t", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert explain.returncode == 0, explain.stderr
    ops = json.loads(explain.stdout)["operators"]
    join_ids = [o["id"] for o in ops if o["kind"] == "join"]
    # explain's ids name the operators of the target plan: put its joins on DuckDB
    second = _target(
        tmp_path,
        {"join_order": ["s", "r", "t"], "placement": dict.fromkeys(join_ids, "duckdb")},
        "b.json",
    )
    out, metrics = tmp_path / "out.parquet", tmp_path / "m.json"
    code = main(
        _run(data, "--output", out, "--metrics", metrics, "--migrate", f"12={first}",
             "--migrate", f"25={second}", "--migration", "ghm")
    )  # fmt: skip
    assert code == 0
    names = "rst"
    tables = {n: pacsv.read_csv(data / f"{n}.csv") for n in names}
    catalog = load_catalog(data / "catalog.toml")
    assert_same_stream(pq.read_table(out), oracle(J3.read_text(), catalog, tables))
    m = json.loads(metrics.read_text())
    recs = m["migrations"]
    assert len(recs) == 2
    for rec in recs:
        assert set(rec) >= RECORD_FIELDS, RECORD_FIELDS - set(rec)
        assert rec["strategy"] == "ghm" and rec["reason"] == {"kind": "scripted"}
        assert rec["states_moved"] == 0 and rec["states_recomputed"] is None
        assert rec["duration_ms"] >= 0 and rec["output_gap_ms"] >= 0
    assert recs[0]["to"]["join_order"] == ["t", "s", "r"]
    assert recs[1]["from"]["join_order"] == ["t", "s", "r"]
    assert recs[1]["to"]["join_order"] == ["s", "r", "t"]
    assert {m["placement"][j] for j in join_ids} == {"duckdb"}
    assert m["plans"][-1]["join_order"] == ["s", "r", "t"]


def test_join_order_on_run_and_explain(data: Path, tmp_path: Path, capsys: Any) -> None:
    cat = str(data / "catalog.toml")
    assert main(["explain", str(J3), "--catalog", cat, "--join-order", "T, s ,r", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["join_orders"] == [["window3", "window2", "window1"]]
    out = tmp_path / "o.parquet"
    assert main(_run(data, "--join-order", "t,s,r", "--output", out)) == 0
    tables = {n: pacsv.read_csv(data / f"{n}.csv") for n in "rst"}
    expected = oracle(J3.read_text(), load_catalog(data / "catalog.toml"), tables)
    assert_same_stream(pq.read_table(out), expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--join-order", "r,s,x"], "unknown alias x"),
        (["--join-order", "r,s"], "missing t"),
        (["--join-order", "r,s,s,t"], "twice"),
        (["--join-order", "r,,s"], "empty alias"),
    ],
)
def test_bad_join_order(data: Path, capsys: Any, args: list[str], message: str) -> None:
    for command in (["explain", str(J3), "--catalog", str(data / "catalog.toml")], _run(data)):
        assert main([*command, *args]) == 2
        err = capsys.readouterr().err
        assert message in err and "hint:" in err


def test_join_order_on_a_query_without_joins(capsys: Any) -> None:
    assert main(["explain", str(SMARTPLUG_Q1), "--join-order", "a,b"]) == 2
    assert "no join" in capsys.readouterr().err


BAD_TARGETS: list[tuple[Any, str]] = [
    ("{not json", "invalid JSON"),
    ('["row"]', "must be a JSON object"),
    ({"placement": "row", "joinorder": ["r"]}, "unknown key 'joinorder'"),
    ({"join_order": ["r", "s", "t"]}, "'placement' is missing"),
    ('{"placement": "row", "placement": "column"}', "given twice"),
    ({"join_order": ["r", "s"], "placement": "row"}, "missing t"),
    ({"join_order": ["r", "s", "q"], "placement": "row"}, "unknown alias q"),
    ({"join_order": "r,s,t", "placement": "row"}, "must be a list"),
    ({"placement": {"nosuchop": "duckdb"}}, "unknown operator 'nosuchop'"),
    ({"placement": {"join1": "oracle"}}, "unknown engine 'oracle'"),
    ({"placement": {"source1": "duckdb"}}, "source1"),
    ({"placement": 3}, "'placement' must be"),
]


@pytest.mark.parametrize(("target", "message"), BAD_TARGETS)
def test_bad_target(data: Path, tmp_path: Path, capsys: Any, target: Any, message: str) -> None:
    path = _target(tmp_path, target)
    out = tmp_path / "never.csv"
    assert main(_run(data, "--migrate", f"10={path}", "--output", out)) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert str(path) in err
    assert not out.exists()  # refused before the run started


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--migrate", "x=t.json"], "is not a number"),
        (["--migrate=-3=t.json"], ">= 0"),
        (["--migrate", "nan=t.json"], ">= 0"),
        (["--migrate", "10"], "expects AT=TARGET.json"),
        (["--migrate", "10=t.txt"], ".json"),
        (["--migrate", "10=missing.json"], "not found"),
        (["--migration", "pt", "--migrate", "10=T"], "must run on the row engine"),
        (["--migration", "jisc", "--migrate", "10=T"], "must run on the row engine"),
        (["--migration", "ms", "--migrate", "10=T"], "must run on the row engine"),
        (["--migration", "hybmig", "--migrate", "10=T"], "must run on the row engine"),
        (["--migration", "gms"], "without a migration"),
        (["--reoptimize-every", "5"], "only for --adapt"),
    ],
)
def test_bad_migration_options(
    data: Path, tmp_path: Path, capsys: Any, option: list[str], message: str
) -> None:
    target = _target(tmp_path, {"placement": "column"})
    option = [o.replace("=T", f"={target}") for o in option]
    assert main(_run(data, *option)) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "hint:" in err or "usage" in err


def test_unknown_strategy_is_an_argument_error(data: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(_run(data, "--migration", "gmz"))
    assert exit_.value.code == 2
    assert "did you mean 'gms'" in capsys.readouterr().err


def test_strategy_that_cannot_migrate_these_plans(data: Path, tmp_path: Path, capsys: Any) -> None:
    text = "SELECT k, COUNT(*) AS n FROM r [UNBOUNDED] GROUP BY k"
    query = tmp_path / "u.sql"
    query.write_text(text)
    target = _target(tmp_path, {"placement": "column"})
    cat = str(data / "catalog.toml")
    for strategy in ("auto", "gms", "gpt"):
        code = main(["run", str(query), "--catalog", cat, "--placement", "row",
                     "--migrate", f"5={target}", "--migration", strategy])  # fmt: skip
        assert code == 2
        assert "UNBOUNDED" in capsys.readouterr().err


def test_migration_beyond_the_input_is_recorded_as_never_happened(
    data: Path, tmp_path: Path
) -> None:
    target = _target(tmp_path, {"placement": "column"})
    metrics = tmp_path / "m.json"
    assert main(_run(data, "--duration", "20", "--migrate", f"100={target}",
                     "--metrics", metrics)) == 0  # fmt: skip
    (rec,) = json.loads(metrics.read_text())["migrations"]
    assert rec["happened"] is False and "ended" in rec["note"]


def test_report_after_a_migrating_run_shows_the_final_plan(data: Path, tmp_path: Path) -> None:
    target = _target(tmp_path, {"join_order": ["t", "s", "r"], "placement": "row"})
    report = tmp_path / "r.html"
    assert main(_run(data, "--duration", "25", "--migrate", f"8={target}", "--migration", "gms",
                     "--report", report)) == 0  # fmt: skip
    assert "final plan, after 1 migration" in report.read_text()


def test_adapt_checks_every_interval_within_one_input_batch(tmp_path: Path) -> None:
    """A file is read in batches of 65,536 rows (33 event-seconds at 2k tuples/s); the
    controller still looks every ``--reoptimize-every`` event-seconds: the driver cuts a
    batch at the next check."""
    file = tmp_path / "plugs.parquet"
    code = main(["data", "generate", "--out", str(file), "--seconds", "60", "--rate", "2000",
                 "--seed", "5"])  # fmt: skip
    assert code == 0
    metrics = tmp_path / "m.json"
    code = main(["run", str(SMARTPLUG_Q1), "--data", f"readings={file}", "--placement", "row",
                 "--adapt", "--reoptimize-every", "5", "--metrics", str(metrics),
                 "--output", str(tmp_path / "out.csv")])  # fmt: skip
    assert code == 0
    m = json.loads(metrics.read_text())
    ats = [d["at"] for d in m["adapt_decisions"]]
    gaps = [b - a for a, b in itertools.pairwise(ats)]  # smart-plug ts: seconds
    assert len(ats) >= 10 and all(5 <= g <= 6 for g in gaps), gaps


# -- --adapt with a forced strategy: only the plans it can reach ------------------------------

SMARTPLUG_Q2 = ROOT / "queries" / "smartplug" / "q2.sql"


def _adapt_q2(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Q2 at 20,000 tuples/s with --adapt (the all-row plan cannot keep up there, and the
    unrestricted optimizer moves the join and the counts to DuckDB)."""
    metrics = tmp_path / "m.json"
    argv = ["run", str(SMARTPLUG_Q2), "--rate", "20000", "--duration", "30", "--adapt",
            "--reoptimize-every", "2", "--metrics", str(metrics), "--output",
            str(tmp_path / "o.jsonl"), *extra]  # fmt: skip
    code = main(argv)
    m = json.loads(metrics.read_text()) if metrics.exists() else {}
    return code, m


@pytest.mark.parametrize("strategy", ["hybmig", "jisc", "ms"])
def test_adapt_with_a_row_strategy_migrates_only_to_all_row_plans(
    tmp_path: Path, capsys: Any, strategy: str
) -> None:
    """Under load the best plan is a DuckDB one, which a row-level strategy cannot reach:
    the run goes on (no exit 2 in the middle of it), re-planning over the row engine."""
    code, m = _adapt_q2(tmp_path, "--placement", "row", "--migration", strategy)
    err = capsys.readouterr().err
    assert code == 0, err
    assert set(m["placement"].values()) == {"row"}
    for rec in m["migrations"]:
        assert set(rec["to"]["placement"].values()) == {"row"}, rec
    checked = [d for d in m["adapt_decisions"] if "best" in d]
    assert checked, m["adapt_decisions"]


def test_adapt_with_a_row_strategy_starts_on_the_row_engine(tmp_path: Path, capsys: Any) -> None:
    """--placement auto would start Q2 on DuckDB at this rate; a row-level strategy could
    then never migrate, so the start is planned over the row engine too, and said."""
    code, m = _adapt_q2(tmp_path, "--migration", "hybmig")
    err = capsys.readouterr().err
    assert code == 0, err
    assert set(m["placement"].values()) == {"row"}
    assert "note: --migration hybmig moves row-engine state" in err


def test_adapt_with_a_row_strategy_refuses_a_columnar_start(tmp_path: Path, capsys: Any) -> None:
    code, _ = _adapt_q2(tmp_path, "--migration", "hybmig", "--placement", "column")
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: "), err
    assert "--migration hybmig" in err and "--placement column" in err
    assert not (tmp_path / "o.jsonl").exists()


def test_adapt_with_a_strategy_the_windows_rule_out_is_refused_at_the_start(
    data: Path, tmp_path: Path, capsys: Any
) -> None:
    """GPT waits for tuples to leave windows by time: with a ROWS window no migration of
    this query is possible, so --adapt --migration gpt stops before the run, not at the
    first migration."""
    query = tmp_path / "rows.sql"
    query.write_text("SELECT k, COUNT(*) AS n FROM r [ROWS 50] GROUP BY k")
    out = tmp_path / "o.jsonl"
    code = main(["run", str(query), "--catalog", str(data / "catalog.toml"), "--adapt",
                 "--migration", "gpt", "--output", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "not a time-based window" in err and "--adapt" in err, err
    assert not out.exists()
