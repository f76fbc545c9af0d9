"""End to end: ``hycq run --disorder quality`` on out-of-order data from ``hycq data generate
--delay``, measured with hycq.quality against the truth (the same query with ``--disorder
kslack:<max delay>``, which equals the oracle on sorted input: tests/e2e/test_disorder_cli.py).

Steady state: the first seconds of a run are K = 0 (warm-up) while the windows fill, so the
targets are checked on the results after the first window plus 30 s (aggregates) or after
the first recall period (joins). Tolerances are stated where they are used.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hycq.quality import QualitySpec, measure_quality

ROOT = Path(__file__).resolve().parents[2]
SMARTPLUG = ROOT / "queries" / "smartplug" / "catalog.toml"
#: Per-house SUM of the load over 60 s (10 houses: 10 groups of about 40 tuples/s).
SUM_QUERY = (
    "SELECT house_id, SUM(value) AS s FROM readings [RANGE 60 SECONDS SLIDE 1 SECOND] "
    "WHERE property = 1 GROUP BY house_id\n"
)
JOIN_QUERY = (
    "SELECT ISTREAM r.ts AS t1, s.ts AS t2, r.k FROM r [RANGE 2 SECONDS SLIDE 10 MILLISECONDS] "
    "AS r, s [RANGE 2 SECONDS SLIDE 10 MILLISECONDS] AS s WHERE r.k = s.k\n"
)


def _hycq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


def _ok(*args: str | Path) -> None:
    r = _hycq(*args)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def plugs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """10 houses, 600 event-seconds, Zipf delays up to 30 s; the query; the truth."""
    d = tmp_path_factory.mktemp("plugs")
    data, query, truth = d / "sp.csv", d / "sum.sql", d / "truth.parquet"
    _ok("data", "generate", "--out", data, "--seconds", "600", "--houses", "10",
        "--delay", "zipf:30,1.0", "--seed", "5")  # fmt: skip
    query.write_text(SUM_QUERY)
    _ok("run", query, "--catalog", SMARTPLUG, "--data", f"readings={data}", "--placement", "row",
        "--disorder", "kslack:30s", "--output", truth)  # fmt: skip
    return {"data": data, "query": query, "truth": truth, "dir": d}


def _run_quality(p: dict[str, Path], name: str, *flags: str) -> tuple[Any, dict[str, Any]]:
    res, met = p["dir"] / f"{name}.parquet", p["dir"] / f"{name}.json"
    _ok("run", p["query"], "--catalog", SMARTPLUG, "--data", f"readings={p['data']}",
        "--placement", "row", "--disorder", "quality", *flags, "--output", res,
        "--metrics", met)  # fmt: skip
    return pq.read_table(res), json.loads(met.read_text())["disorder"]


def _steady_phi(result: Any, truth: Any, skip_s: int) -> float:
    lo = pc.min(truth["_ts"]).as_py() + skip_s
    keep = lambda t: t.filter(pc.greater_equal(t["_ts"], lo))  # noqa: E731
    q = measure_quality(keep(result), keep(truth), QualitySpec(60, values=("s",), max_error=0.01))
    phi = q["error"]["phi_eps"]
    assert phi is not None
    return float(phi)


def test_aggregate_am_meets_the_error_target(plugs: dict[str, Path]) -> None:
    result, dis = _run_quality(plugs, "am", "--max-error", "0.01", "--confidence", "0.95")
    q = dis["quality"]
    # K adapted: it moved from its start (0) more than once, and stays under Max-K-slack
    assert len(q["k_history"]) > 3 and 0 < q["k"]["readings"] <= 30
    assert len({k for _, _, k in q["k_history"]}) > 2
    # the report carries the shape, the threshold and the cost per adaptation (< 1 ms)
    assert q["shape"] == {"kind": "aggregate", "aggregate": "sum", "windows_s": {"readings": 60.0}}
    assert q["groups"] == {"readings": 10}
    assert 0.9 < q["coverage_threshold"]["readings"] < 1
    assert q["adaptations"] > 100 and q["adapt_us_mean"] < 1000
    # event-time latency below Max-K-slack's (K = the 30 s maximum delay)
    assert dis["event_latency_s"]["p50"] < 30
    # Phi(0.01) >= 95% (target) within 0.03: measured 0.947 on these 10 houses x 510
    # steady instants; 60 s windows sliding by 1 s make the results strongly correlated
    # (about 85 independent windows), so one standard deviation of Phi is about 0.024.
    phi = _steady_phi(result, pq.read_table(plugs["truth"]), 90)
    assert phi >= 0.95 - 0.03, phi


@pytest.mark.parametrize("placement", ["row", "column"])
def test_pd_for_an_aggregate_is_refused_with_a_pointer_to_am(
    plugs: dict[str, Path], placement: str
) -> None:
    """PD steers a window's mean coverage to the threshold, so about half the windows miss
    it (measured Phi(0.01) 0.79 here, 0.36 on experiments/quality_targets.py's data): the
    combination is refused before a tuple is read, pointing to AM."""
    out = plugs["dir"] / f"pd_{placement}.csv"
    r = _hycq("run", plugs["query"], "--catalog", SMARTPLUG, "--data", f"readings={plugs['data']}",
              "--placement", placement, "--disorder", "quality", "--max-error", "0.01",
              "--adapt-method", "pd", "--output", out)  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and "--adapt-method pd with --max-error" in lines[0]
    assert "Traceback" not in r.stderr and "--adapt-method am" in r.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two keyed streams (50 tuples/s, 10 keys, Zipf delays up to 4 s, 40 s), their
    2-second-window equi-join (every result once), and its truth."""
    d = tmp_path_factory.mktemp("keyed")
    _ok("data", "generate", "--generator", "keyed", "--out", d, "--seconds", "40", "--rate",
        "50", "--time-unit", "ms", "--keys", "10", "--delay", "zipf:4s,1.0", "--stream", "r",
        "--stream", "s", "--seed", "4")  # fmt: skip
    (d / "j.sql").write_text(JOIN_QUERY)
    _ok("run", d / "j.sql", "--catalog", d / "catalog.toml", "--placement", "row",
        "--disorder", "kslack:4s", "--output", d / "truth.parquet")  # fmt: skip
    return {"dir": d}


def _join(k: dict[str, Path], name: str, *flags: str) -> tuple[dict[str, Any], dict[str, Any]]:
    d = k["dir"]
    _ok("run", d / "j.sql", "--catalog", d / "catalog.toml", "--placement", "row",
        "--disorder", "quality", *flags, "--output", d / f"{name}.parquet",
        "--metrics", d / f"{name}.json")  # fmt: skip
    dis = json.loads((d / f"{name}.json").read_text())["disorder"]
    gamma = float(flags[flags.index("--min-recall") + 1])
    spec = QualitySpec(10_000, min_recall=gamma, any_instant=True)  # P = 10 s (ms ticks)
    q = measure_quality(pq.read_table(d / f"{name}.parquet"), pq.read_table(d / "truth.parquet"),
                        spec)  # fmt: skip
    return q["recall"], dis


@pytest.mark.parametrize("gamma", [0.95, 0.999])
def test_join_am_meets_the_recall_target(keyed: dict[str, Path], gamma: float) -> None:
    recall, dis = _join(keyed, f"am{gamma}", "--min-recall", str(gamma))
    q = dis["quality"]
    assert q["shape"]["kind"] == "join" and q["k_history"]
    ks = q["k"]
    assert ks["r"] == ks["s"] and 0 < ks["r"] <= 4000  # Same-K, adapted, under the max
    assert q["adapt_us_mean"] < 1000
    # After the first period (warm-up: K = 0 while the delay statistics fill), every 10 s
    # period's recall reaches 0.99 Gamma (Phi(0.99 Gamma) of the seed's join figures).
    # Measured with the buffer-side join counts (NonEqSel, Gamma' never below Gamma) and
    # the row engine's late insertion priced: 0.958-0.967 with K 1.6-2.0 s for Gamma 0.95,
    # 0.999-1.0 with K 3.5-3.9 s for 0.999.
    steady = [p["recall"] for p in recall["periods"][1:]]
    assert steady and min(steady) >= 0.99 * gamma, steady
    assert recall["phi_099_gamma"] is not None and recall["phi_099_gamma"] >= 0.95


def test_join_pd_with_buffer_side_counts(keyed: dict[str, Path]) -> None:
    """The K-slack buffers count each arriving tuple's join partners (NonEqSel) and the
    results produced in time (engines/disorder/join_counts.py): PD steers K by the recall."""
    recall, dis = _join(keyed, "pd", "--min-recall", "0.95", "--adapt-method", "pd")
    q = dis["quality"]
    assert q["join_counts"]["fed"] and q["join_counts"]["keys"] == {"r": 1, "s": 1}
    assert q["join_counts"]["tuples_counted"] > 0
    ks = q["k"]
    assert ks["r"] == ks["s"] and 0 < ks["r"] <= 4000 and q["adaptations"] > 0
    # Measured: 0.999, 0.994, 0.985, 0.985 with K coming down from the largest delay to
    # 2.0 s (the setpoint halves the allowed misses: 0.975; AM at the same target:
    # 0.958-0.967 with K 1.6-2.0 s). Held to the mean of the steady periods, and every
    # period within 3% of the target.
    steady = [p["recall"] for p in recall["periods"][1:]]
    assert steady and sum(steady) / len(steady) >= 0.99 * 0.95, steady
    assert min(steady) >= 0.97 * 0.95, steady


@pytest.mark.parametrize(
    ("extra", "query", "message"),
    [
        (["--disorder", "quality"], SUM_QUERY, "needs a quality target"),
        (["--max-error", "0.01"], SUM_QUERY, "only apply to --disorder quality"),
        (["--disorder", "max", "--min-recall", "0.9"], SUM_QUERY, "only apply to --disorder"),
        (
            ["--disorder", "quality", "--max-error", "0.01"],
            SUM_QUERY.replace("SUM(", "MAX("),
            "not MAX",
        ),
        (
            ["--disorder", "quality", "--min-recall", "0.9"],
            SUM_QUERY,
            "aggregate's target is --max-error",
        ),
        (
            ["--disorder", "quality", "--max-error", "0.01"],
            SUM_QUERY.replace("SUM(value) AS s", "SUM(value) AS s, COUNT(*) AS n"),
            "one SUM, COUNT or AVG",
        ),
        (
            ["--disorder", "quality", "--max-error", "0.01"],
            SUM_QUERY.replace("RANGE 60 SECONDS SLIDE 1 SECOND", "ROWS 100"),
            "not a time range window",
        ),
    ],
)
def test_unservable_requests_exit_2(
    tmp_path: Path, extra: list[str], query: str, message: str
) -> None:
    data, q = tmp_path / "sp.csv", tmp_path / "q.sql"
    _ok("data", "generate", "--out", data, "--seconds", "5", "--houses", "1")
    q.write_text(query)
    r = _hycq("run", q, "--catalog", SMARTPLUG, "--data", f"readings={data}", "--placement",
              "row", *extra, "--output", tmp_path / "out.csv")  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "out.csv").exists()


def test_a_join_with_an_error_target_exits_2(keyed: dict[str, Path]) -> None:
    d = keyed["dir"]
    r = _hycq("run", d / "j.sql", "--catalog", d / "catalog.toml", "--disorder", "quality",
              "--max-error", "0.01", "--output", d / "x.csv")  # fmt: skip
    assert r.returncode == 2 and "join's target is --min-recall" in r.stderr, r.stderr


def test_columnar_placement_prices_its_dropped_late_tuples(tmp_path: Path) -> None:
    """The aggregate policy is fed at the K-slack buffer, whatever the placement, and prices
    what the placement does with late tuples: a columnar (DuckDB) window drops them, so on
    the same arrivals it holds a larger K than the row engine, which inserts them."""
    data, query = tmp_path / "sp.csv", tmp_path / "q.sql"
    _ok("data", "generate", "--out", data, "--seconds", "300", "--houses", "2",
        "--delay", "zipf:30,1.0", "--seed", "3")  # fmt: skip
    query.write_text(SUM_QUERY)
    reports = []
    for placement in ("row", "column"):
        met = tmp_path / f"{placement}.json"
        _ok("run", query, "--catalog", SMARTPLUG, "--data", f"readings={data}", "--placement",
            placement, "--disorder", "quality", "--max-error", "0.01", "--output",
            tmp_path / f"{placement}.parquet", "--metrics", met)  # fmt: skip
        reports.append(json.loads(met.read_text())["disorder"])
    row, column = (r["quality"] for r in reports)
    assert len(row["k_history"]) > 3 and column["k_history"]
    assert row["late"] == {"readings": "insert"} and column["late"] == {"readings": "drop"}
    # the same statistics from the same arrivals, a larger K for the dropping placement
    assert column["groups"] == row["groups"]
    assert column["coverage_threshold"] == row["coverage_threshold"]
    k_row, k_column = (
        [k for _, k in r["streams"]["readings"]["k_timeline"][60:]] for r in reports
    )  # per event-second after the first minute
    assert sum(k_column) > sum(k_row) and max(k_column) <= 30, (k_column, k_row)


# -- every placement and late policy (issue 48): the models price what the engine does with
# late tuples (inserted into the row engine's windows, or dropped: columnar windows and
# --late drop), and the join counts follow it. Short data of the kind of
# experiments/quality_targets.py (windows as long as the largest delay, a recall period of
# 10 s). Each case failed before: worst period after the first 0.84 (DuckDB, DataFusion),
# 0.85 (mixed), 0.88 (row, --late drop), 0.92 (PD, DuckDB); Phi(0.01) 0.37 (SUM).

#: Two keyed streams with Zipf delays up to 3 s (r: skew 1.0, s: 1.5), their ISTREAM join
#: over 3 s windows sliding by 300 ms; ``{extra}`` adds the always-true filter that the
#: mixed placement puts on DuckDB (r's window then feeds a MIG, s's stays a row window).
PLACED_JOIN = (
    "SELECT ISTREAM r.ts AS t1, s.ts AS t2, r.k FROM r [RANGE 3 SECONDS SLIDE 300 MILLISECONDS] "
    "AS r, s [RANGE 3 SECONDS SLIDE 300 MILLISECONDS] AS s WHERE r.k = s.k{extra}\n"
)
#: A per-key SUM over 6 s windows of one stream with Zipf delays up to 3 s.
PLACED_SUM = "SELECT k, SUM(v) AS total FROM s [RANGE 6 SECONDS SLIDE 1 SECOND]{where} GROUP BY k\n"
PLACEMENTS = {
    "duckdb": ["--placement", "column", "--column-engine", "duckdb"],
    "datafusion": ["--placement", "column", "--column-engine", "datafusion"],
    "row": ["--placement", "row"],
}


@pytest.fixture(scope="module")
def placed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The join's and the aggregate's data (60 event-seconds), queries and truths."""
    d = tmp_path_factory.mktemp("placed")
    _ok("data", "generate", "--generator", "keyed", "--out", d / "j", "--seconds", "60",
        "--rate", "40", "--time-unit", "ms", "--keys", "10", "--stream", "r:delay=zipf:3s,1.0",
        "--stream", "s:delay=zipf:3s,1.5", "--seed", "11")  # fmt: skip
    _ok("data", "generate", "--generator", "keyed", "--out", d / "a", "--seconds", "60",
        "--rate", "200", "--time-unit", "ms", "--keys", "5", "--stream", "s:delay=zipf:3s,1.0",
        "--seed", "12")  # fmt: skip
    files = {"dir": d, "mixed": d / "mixed.json"}
    files["mixed"].write_text(json.dumps({"select1": "duckdb"}))
    for name, text, catalog in (
        ("join", PLACED_JOIN.format(extra=""), d / "j" / "catalog.toml"),
        ("join_mixed", PLACED_JOIN.format(extra=" AND r.v >= 0"), d / "j" / "catalog.toml"),
        ("sum", PLACED_SUM.format(where=""), d / "a" / "catalog.toml"),
        ("sum_mixed", PLACED_SUM.format(where=" WHERE v >= 0"), d / "a" / "catalog.toml"),
    ):
        files[name] = d / f"{name}.sql"
        files[name].write_text(text)
        files[f"{name}_catalog"] = catalog
    for name in ("join", "sum"):
        files[f"{name}_truth"] = d / f"{name}_truth.parquet"
        _ok("run", files[name], "--catalog", files[f"{name}_catalog"], "--placement", "row",
            "--disorder", "kslack:3s", "--output", files[f"{name}_truth"])  # fmt: skip
    return files


def _placed_run(
    p: dict[str, Path], kind: str, placement: str, *flags: str
) -> tuple[Any, dict[str, Any]]:
    """Run the join or the aggregate with ``--disorder quality`` on ``placement`` (a key of
    PLACEMENTS, or ``mixed``); the result table and the run's ``disorder`` metrics."""
    query = p[f"{kind}_mixed"] if placement == "mixed" else p[kind]
    where = ["--placement", str(p["mixed"])] if placement == "mixed" else PLACEMENTS[placement]
    tag = "_".join([kind, placement, *flags]).replace("-", "").replace(".", "")
    res, met = p["dir"] / f"{tag}.parquet", p["dir"] / f"{tag}.json"
    _ok("run", query, "--catalog", p[f"{kind}_catalog"], *where, "--disorder", "quality",
        *flags, "--output", res, "--metrics", met)  # fmt: skip
    return pq.read_table(res), json.loads(met.read_text())["disorder"]


@pytest.mark.parametrize(
    ("placement", "late", "gamma", "method"),
    [
        ("duckdb", "insert", 0.9, "am"),
        ("datafusion", "insert", 0.9, "am"),
        ("mixed", "insert", 0.9, "am"),  # r's late tuples dropped, s's inserted
        ("row", "drop", 0.95, "am"),
        ("duckdb", "insert", 0.95, "pd"),
    ],
)
def test_join_recall_holds_every_period_on_any_placement_and_late_policy(
    placed: dict[str, Path], placement: str, late: str, gamma: float, method: str
) -> None:
    flags = ["--late", late, "--min-recall", str(gamma), "--recall-period", "10"]
    result, dis = _placed_run(placed, "join", placement, *flags, "--adapt-method", method)
    spec = QualitySpec(10_000, min_recall=gamma, any_instant=True)
    recall = measure_quality(result, pq.read_table(placed["join_truth"]), spec)["recall"]
    steady = [p["recall"] for p in recall["periods"][1:]]
    assert len(steady) >= 4 and min(steady) >= gamma, steady
    q = dis["quality"]
    expect = {"row": {"r": late, "s": late}, "mixed": {"r": "drop", "s": "insert"}}
    assert q["late"] == expect.get(placement, {"r": "drop", "s": "drop"})
    # the policy's own estimate (buffer-side counts) errs low, by little
    assert gamma <= q["estimated_recall"] <= recall["overall"] + 0.01


@pytest.mark.parametrize(
    ("placement", "late"), [("duckdb", "insert"), ("datafusion", "insert"), ("row", "drop"),
                            ("mixed", "insert")]
)  # fmt: skip
def test_sum_error_target_holds_where_late_tuples_are_dropped(
    placed: dict[str, Path], placement: str, late: str
) -> None:
    """Dropped late tuples count in no window: the coverage is the share in order after
    the buffer (before: the model counted them in later windows, Phi(0.01) 0.004)."""
    result, dis = _placed_run(placed, "sum", placement, "--late", late, "--max-error", "0.01")
    truth = pq.read_table(placed["sum_truth"])
    lo = pc.min(truth["_ts"]).as_py() + 10_000  # after the first 10 s
    keep = lambda t: t.filter(pc.greater_equal(t["_ts"], lo))  # noqa: E731
    spec = QualitySpec(10_000, values=("total",), max_error=0.01)
    phi = measure_quality(keep(result), keep(truth), spec)["error"]["phi_eps"]
    assert phi is not None and phi >= 0.95, phi
    assert set(dis["quality"]["late"].values()) == {"drop"}


@pytest.mark.slow
def test_join_am_holds_a_high_recall_in_every_period(tmp_path: Path) -> None:
    """The issue's join at Gamma = 0.99 on the row engine (experiments/quality_targets.py's
    data, 300 s; about 40 s here): every 60 s period after the first reaches 0.99. Before,
    Eq. 4.9 lowered K to spend a surplus and the bound's lag lost more (overall 0.995, the
    worst period 0.979)."""
    _ok("data", "generate", "--generator", "keyed", "--out", tmp_path, "--seconds", "300",
        "--rate", "20", "--time-unit", "ms", "--keys", "20", "--stream",
        "r:delay=zipf:10s,1.0", "--stream", "s:delay=zipf:10s,1.5", "--seed", "7")  # fmt: skip
    query = tmp_path / "j.sql"
    query.write_text(
        "SELECT ISTREAM r.ts AS t1, s.ts AS t2, r.k FROM r [RANGE 10 SECONDS SLIDE 1 SECOND] "
        "AS r, s [RANGE 10 SECONDS SLIDE 1 SECOND] AS s WHERE r.k = s.k\n"
    )
    catalog, truth, res = tmp_path / "catalog.toml", tmp_path / "t.parquet", tmp_path / "r.parquet"
    _ok("run", query, "--catalog", catalog, "--placement", "row", "--disorder", "kslack:10s",
        "--output", truth)  # fmt: skip
    _ok("run", query, "--catalog", catalog, "--placement", "row", "--disorder", "quality",
        "--min-recall", "0.99", "--output", res)  # fmt: skip
    spec = QualitySpec(60_000, min_recall=0.99, any_instant=True)
    recall = measure_quality(pq.read_table(res), pq.read_table(truth), spec)["recall"]
    assert recall["worst_period_after_first"] >= 0.99, recall["periods"]
