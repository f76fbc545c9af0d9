"""The plan-migration experiment scripts (experiments/jisc_fig_7_8.py, jisc_fig_10.py,
hybmig_fig_15_16.py) run end to end at a tiny size and write valid JSON; their correctness
check against the new plan from scratch can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from experiments.migration_bench import (
    Outputs,
    batches,
    best_case,
    catalog_text,
    plan,
    query,
    run_migrated,
    run_plain,
    same_stream,
    uniform_inputs,
    worst_case,
)
from optimizer.sql.catalog import parse_catalog_text
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    png = tmp_path / f"{name}.png"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = str(ROOT / "experiments" / f"{name}.py")
    proc = subprocess.run(
        [sys.executable, script, *args, "--reps", "1", "--json", str(out), "--plot", str(png)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert png.stat().st_size > 0
    return json.loads(out.read_text())


def test_fig_7_8_script(tmp_path: Path) -> None:
    d = _script("jisc_fig_7_8", tmp_path, "--joins", "2,4", "--window", "3", "--keys", "12")
    assert [(r["joins"], r["case"]) for r in d["records"]] == [
        (2, "best"),
        (4, "best"),
        (2, "worst"),
        (4, "worst"),
    ]
    for r in d["records"]:
        assert set(r["median_s"]) == {"new_alone", "ms", "jisc", "pt", "hybmig"}
        assert r["oracle_checked"] and r["figures"]["outputs"] > 0
        assert r["figures"]["pt"]["dropped_at"] is not None
    assert "load average" in d["note"]  # the machine's load when written (migration_bench)


def test_fig_10_script(tmp_path: Path) -> None:
    d = _script("jisc_fig_10", tmp_path, "--joins", "3", "--windows", "2,3", "--rate", "4")
    assert [r["window_s"] for r in d["records"]] == [2, 3]
    for r in d["records"]:
        assert set(r["first_output_median_s"]) == {"ms", "jisc"}
        assert r["first_instant"]["ms"] == r["first_instant"]["jisc"]


def test_fig_15_16_script_takes_the_strategy_list(tmp_path: Path) -> None:
    d = _script(
        "hybmig_fig_15_16",
        tmp_path,
        *("--strategies", "pt,jisc", "--window", "3", "--keys", "12", "--streams", "4"),
    )
    assert set(d["summary"]) == {"pt", "jisc"}
    assert d["summary"]["pt"]["dropped_at"] is not None
    seconds = d["setup"]["seconds"]
    assert all(len(s) == seconds for s in d["per_second"].values())
    assert sum(r["outputs"] for r in d["per_second"]["pt"]) > 0


@pytest.mark.parametrize("n", [3, 5])
def test_every_strategy_matches_the_new_plan_and_a_wrong_stream_is_caught(n: int) -> None:
    window = 3
    feed = batches(uniform_inputs(n, 3 * window + 3, window, 12, seed=n))
    for order in (best_case(n), worst_case(n)):
        new = plan(n, window, order)
        ref, _ = run_plain(new, feed, (0, 0))
        assert ref.count > 0
        for s in ("ms", "jisc", "pt"):
            same_stream(run_migrated(s, plan(n, window), new, feed, window + 1, 99).outputs, ref)
        wrong = Outputs(bags={t: Counter(b) for t, b in ref.bags.items()})
        t = next(iter(wrong.bags))
        wrong.bags[t][next(iter(wrong.bags[t]))] -= 1
        with pytest.raises(AssertionError, match="missing"):
            same_stream(ref, wrong)


def test_uniform_inputs_hold_each_key_once_per_window() -> None:
    inputs = uniform_inputs(3, 12, 4, 8, seed=2)
    for t in inputs.values():
        ts, k = t.column("ts").to_pylist(), t.column("k").to_pylist()
        for end in range(3, 12):
            keys = [x for s, x in zip(ts, k, strict=True) if end - 4 < s <= end]
            assert sorted(keys) == list(range(8))


@pytest.mark.parametrize("n", [3, 4])
def test_the_reference_run_matches_the_oracle(n: int) -> None:
    """The experiments judge strategies against the new plan run from scratch; that run
    itself gives the DuckDB oracle's stream (small case)."""
    window = 3
    inputs = uniform_inputs(n, 3 * window + 3, window, 9, seed=n, copies=2)
    ref, _ = run_plain(plan(n, window, worst_case(n)), batches(inputs), (0, 0))
    expected = oracle(query(n, window), parse_catalog_text(catalog_text(n)), inputs)
    rows = [(*r, t) for t, bag in ref.bags.items() for r in bag.elements()]
    cols = list(zip(*rows, strict=True))
    actual = pa.table(
        {f.name: pa.array(list(c), type=f.type) for f, c in zip(expected.schema, cols, strict=True)}
    )
    assert actual.num_rows > 0
    assert_same_stream(actual, expected)
