"""``hycq quality`` and hycq/quality.py on hand-made result files: recall per period,
relative error, coverage, Phi(eps) and Phi(Gamma), each checked against numbers worked by hand
and Phi also against a second, brute-force computation; bad input exits 2."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hycq.quality import QualitySpec, measure_quality, read_result_file
from optimizer.ir.errors import DataError, OptionError
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]


def _hycq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


TRUTH = pa.table(
    {
        "k": [1, 2, 1, 2, 1, 2, 1],
        "total": [10.0, 5.0, 10.0, 4.0, 8.0, 0.0, 3.0],
        "_ts": [1, 1, 2, 2, 3, 3, 4],
    }
)
RESULT = pa.table(
    {
        "k": [1, 2, 1, 1, 3, 2, 1],
        "total": [10.0, 5.0, 9.0, 8.0, 1.0, 0.0, 3.0],
        "_ts": [1, 1, 2, 3, 3, 3, 4],
    }
)


def test_worked_example() -> None:
    q = measure_quality(RESULT, TRUTH, QualitySpec(recall_period=2, max_error=0.05, min_recall=0.8))
    r = q["recall"]
    # rows matched: (1,10,1) (2,5,1) (1,8,3) (2,0,3) (1,3,4) = 5 of 7; extra (1,9,2) (3,1,3)
    assert (r["matched"], r["missing"], r["extra"]) == (5, 2, 2)
    assert r["overall"] == pytest.approx(5 / 7)
    # tumbling periods [0,2): instant 1 -> 2/2; [2,4): instants 2, 3 -> 2/4; [4,6): 1/1
    assert [(p["start"], p["true"], p["matched"]) for p in r["periods"]] == [
        (0, 2, 2),
        (2, 4, 2),
        (4, 1, 1),
    ]
    assert r["worst_period_after_first"] == pytest.approx(0.5)
    # gamma over (T-2, T] at T = 3: instants 2,3 -> 2/4; at T = 4: instants 3,4 -> 3/3;
    # measured from T >= 1 + 2 = 3
    assert r["measurements"] == 2 and r["min_gamma"] == pytest.approx(0.5)
    assert r["phi_gamma"] == pytest.approx(0.5) and r["phi_099_gamma"] == pytest.approx(0.5)
    e = q["error"]
    # per true result: eps 0, 0, 0.1, 1 (k=2 at 2 missing -> A^=0), 0, 0 (0 vs 0), 0
    assert (e["true_results"], e["produced"], e["missing"], e["extra"]) == (7, 6, 1, 1)
    assert e["wrong"] == 2 and e["max"] == pytest.approx(1.0)
    assert e["mean"] == pytest.approx(1.1 / 7)
    assert e["phi_eps"] == pytest.approx(5 / 7)
    assert q["columns"] == {"keys": ["k"], "values": ["total"]}


def test_coverage_from_a_count_column() -> None:
    truth = pa.table({"g": ["a", "b", "a"], "n": [10, 4, 20], "_ts": [5, 5, 6]})
    result = pa.table({"g": ["a", "b", "a"], "n": [9, 4, 15], "_ts": [5, 5, 6]})
    q = measure_quality(result, truth, QualitySpec(recall_period=1, values=("n",), count="n"))
    c = q["coverage"]
    assert c["mean"] == pytest.approx((0.9 + 1 + 0.75) / 3) and c["min"] == pytest.approx(0.75)
    assert c["full"] == pytest.approx(1 / 3)
    assert q["error"]["max"] == pytest.approx(0.25)


def test_infinite_error_and_nulls() -> None:
    truth = pa.table({"k": [None, 1], "s": [0.0, None], "_ts": [1, 1]})
    result = pa.table({"k": [None, 1], "s": [2.0, None], "_ts": [1, 1]})
    q = measure_quality(result, truth, QualitySpec(recall_period=1, max_error=0.1))
    # null keys match each other; 0 estimated as 2 is an infinite error (JSON null)
    assert q["error"]["max"] is None and q["error"]["phi_eps"] == pytest.approx(0.5)
    assert q["recall"]["matched"] == 1


def _brute_phi(result: pa.Table, truth: pa.Table, period: int, gamma: float) -> float | None:
    """Phi(Gamma) by loops over instants and Counters of row tuples."""
    rows_t = Counter(zip(*(truth.column(c).to_pylist() for c in truth.column_names), strict=True))
    rows_r = Counter(zip(*(result.column(c).to_pylist() for c in truth.column_names), strict=True))
    ts_at = truth.column_names.index("_ts")
    instants = sorted({row[ts_at] for row in rows_t})
    values = []
    for t in instants:
        if t < instants[0] + period:
            continue
        true = sum(n for row, n in rows_t.items() if t - period < row[ts_at] <= t)
        got = sum(min(n, rows_r[row]) for row, n in rows_t.items() if t - period < row[ts_at] <= t)
        if true:
            values.append(got / true >= gamma)
    return sum(values) / len(values) if values else None


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 30), st.booleans(), st.integers(0, 2)),
        min_size=1,
        max_size=60,
    ),
    period=st.integers(1, 8),
    gamma=st.floats(0.1, 1.0),
)
def test_phi_gamma_equals_a_brute_force_count(
    rows: list[tuple[int, int, bool, int]], period: int, gamma: float
) -> None:
    """Each true row (key, instant) is produced 0..2 times (over-production is extra, not
    recall): the library's Phi(Gamma) equals the brute-force one."""
    truth = pa.table({"k": [r[0] for r in rows], "_ts": [r[1] for r in rows]})
    kept = [(r[0], r[1]) for r in rows for _ in range(r[3] if r[2] else 0)]
    result = pa.table(
        {
            "k": pa.array([k for k, _ in kept], pa.int64()),
            "_ts": pa.array([t for _, t in kept], pa.int64()),
        }
    )
    q = measure_quality(result, truth, QualitySpec(recall_period=period, min_recall=gamma))
    expected = _brute_phi(result, truth, period, gamma)
    got = q["recall"]["phi_gamma"]
    assert (got is None and expected is None) or got == pytest.approx(expected)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.tuples(st.floats(-100, 100), st.floats(-100, 100)), min_size=1, max_size=40),
    eps=st.floats(0.001, 2.0),
)
def test_phi_eps_equals_a_direct_count(values: list[tuple[float, float]], eps: float) -> None:
    truth = pa.table(
        {"g": list(range(len(values))), "v": [a for a, _ in values], "_ts": [1] * len(values)}
    )
    result = pa.table(
        {"g": list(range(len(values))), "v": [b for _, b in values], "_ts": [1] * len(values)}
    )
    q = measure_quality(result, truth, QualitySpec(recall_period=1, max_error=eps))
    ok = 0
    for a, b in values:
        e = (0.0 if a == b else float("inf")) if a == 0 else abs(a - b) / abs(a)
        ok += e <= eps
    assert q["error"]["phi_eps"] == pytest.approx(ok / len(values))


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_cli_reads_every_result_format(tmp_path: Path, suffix: str) -> None:
    paths = []
    for name, table in (("result", RESULT), ("truth", TRUTH)):
        path = tmp_path / f"{name}{suffix}"
        if suffix == ".csv":
            pacsv.write_csv(table, path)
        elif suffix == ".parquet":
            pq.write_table(table, path)
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()))
        paths.append(path)
    proc = _hycq("quality", paths[0], "--truth", paths[1], "--recall-period", "2",
                 "--max-error", "0.05", "--min-recall", "0.8", "--json",
                 "--value", "total")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    q = json.loads(proc.stdout)
    assert q["recall"]["matched"] == 5 and q["error"]["phi_eps"] == pytest.approx(5 / 7)
    text = _hycq("quality", paths[0], "--truth", paths[1], "--recall-period", "2")
    assert text.returncode == 0 and "recall 0.714286" in text.stdout


def test_cli_time_unit_scales_the_period(tmp_path: Path) -> None:
    truth = pa.table({"k": [1, 1], "_ts": [1000, 2500]})
    result = pa.table({"k": [1], "_ts": [2500]})
    pacsv.write_csv(truth, tmp_path / "t.csv")
    pacsv.write_csv(result, tmp_path / "r.csv")
    proc = _hycq("quality", tmp_path / "r.csv", "--truth", tmp_path / "t.csv",
                 "--recall-period", "1", "--time-unit", "ms", "--json")  # fmt: skip
    periods = json.loads(proc.stdout)["recall"]["periods"]
    assert [p["start"] for p in periods] == [1000, 2000]


def test_bad_input_exits_2(tmp_path: Path) -> None:
    good = tmp_path / "t.csv"
    pacsv.write_csv(TRUTH, good)
    no_ts = tmp_path / "no_ts.csv"
    pacsv.write_csv(pa.table({"k": [1]}), no_ts)
    other = tmp_path / "other.csv"
    pacsv.write_csv(pa.table({"x": [1], "_ts": [1]}), other)
    dup = tmp_path / "dup.csv"
    pacsv.write_csv(pa.table({"k": [1, 1], "total": [1.0, 2.0], "_ts": [1, 1]}), dup)
    garbage = tmp_path / "g.parquet"
    garbage.write_text("not parquet")
    cases = [
        (("quality", tmp_path / "missing.csv", "--truth", good), "no such file"),
        (("quality", no_ts, "--truth", good), "no '_ts' column"),
        (("quality", other, "--truth", good), "different columns"),
        (("quality", dup, "--truth", good, "--value", "total"), "several rows"),
        (("quality", garbage, "--truth", good), "cannot read"),
        (("quality", good, "--truth", tmp_path / "t.txt"), "must end in"),
        (("quality", good, "--truth", good, "--value", "nope"), "no such result column"),
        (("quality", good, "--truth", good, "--min-recall", "1.5"), "(0, 1]"),
        (("quality", good, "--truth", good, "--recall-period", "0"), "positive"),
        (("quality", good, "--truth", good, "--recall-period", "0.0001"), "below one tick"),
        (("quality", good, "--truth", good, "--count", "k"), "value columns"),
    ]
    for args, message in cases:
        proc = _hycq(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("error: ") and message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_library_errors() -> None:
    with pytest.raises(OptionError):
        measure_quality(RESULT, TRUTH, QualitySpec(recall_period=0))
    with pytest.raises(DataError):
        read_result_file("nope.csv", "RESULT")
    # an empty result: recall 0, every true result missing
    empty = RESULT.slice(0, 0)
    q = measure_quality(empty, TRUTH, QualitySpec(recall_period=2, max_error=0.1))
    assert q["recall"]["matched"] == 0 and q["error"]["missing"] == 7
    assert np.isclose(q["error"]["phi_eps"], 1 / 7)  # the true 0.0 estimated as 0 is exact


def test_any_instant_matches_late_copies() -> None:
    truth = pa.table({"a": [1, 2, 1, 3], "_ts": [10, 10, 20, 30]})
    # (1) twice in the truth (10, 20), once in the run at 25; (2) at 40, late; (3) missing
    result = pa.table({"a": [1, 2, 9], "_ts": [25, 40, 40]})
    strict = measure_quality(result, truth, QualitySpec(recall_period=100))["recall"]
    assert strict["matched"] == 0 and strict["extra"] == 3
    q = measure_quality(result, truth, QualitySpec(recall_period=10, any_instant=True))["recall"]
    # the earliest copy of (1) and the one (2) count, at their true instants 10 and 10
    assert (q["matched"], q["missing"], q["extra"]) == (2, 2, 1)
    assert [(p["start"], p["true"], p["matched"]) for p in q["periods"]] == [
        (10, 2, 2),
        (20, 1, 0),
        (30, 1, 0),
    ]


@settings(max_examples=60, deadline=None)
@given(
    true_rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 20)), min_size=1, max_size=40),
    run_rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 30)), max_size=40),
)
def test_any_instant_recall_equals_a_greedy_count(
    true_rows: list[tuple[int, int]], run_rows: list[tuple[int, int]]
) -> None:
    truth = pa.table({"a": [r[0] for r in true_rows], "_ts": [r[1] for r in true_rows]})
    result = pa.table(
        {
            "a": pa.array([r[0] for r in run_rows], pa.int64()),
            "_ts": pa.array([r[1] for r in run_rows], pa.int64()),
        }
    )
    q = measure_quality(result, truth, QualitySpec(recall_period=5, any_instant=True))["recall"]
    have = Counter(a for a, _ in run_rows)
    matched = 0
    for a, _ in sorted(true_rows, key=lambda r: r[1]):
        if have[a] > 0:
            have[a] -= 1
            matched += 1
    assert q["matched"] == matched and q["extra"] == len(run_rows) - matched
