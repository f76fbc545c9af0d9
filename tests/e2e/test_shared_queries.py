"""``hycq run Q1.sql Q2.sql ... --output-dir DIR`` (hycq/shared_run.py): several queries over
one Zipf-delayed smart-plug stream, their filters shared, their K-slack buffering laid out by
each configuration algorithm. With every K covering the largest delay each query's result
stream is the oracle's on the event-time-sorted input; whatever K, every algorithm gives
every query the same result stream (only the buffered tuples differ, and OPT holds the
fewest); bad requests exit 2 before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from optimizer.sql.catalog import load_catalog
from tests.e2e.test_multi_stream_cli import hycq
from tests.kslack_reference import delays
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"

QUERIES = {
    # Nested conjunct sets: {property = 1} < {property = 1, value > 50} < {... house_id < 3}.
    "loads": "SELECT house_id, household_id, plug_id, MAX(value) AS v FROM readings "
    "[RANGE 20 SECONDS SLIDE 5 SECONDS] WHERE property = 1 "
    "GROUP BY house_id, household_id, plug_id",
    "hot": "SELECT house_id, AVG(value) AS v FROM readings [RANGE 10 SECONDS SLIDE 1 SECOND] "
    "WHERE property = 1 AND value > 50 GROUP BY house_id",
    "few": "SELECT COUNT(*) AS n, SUM(value) AS s FROM readings "
    "[RANGE 5 SECONDS SLIDE 1 SECOND] WHERE value > 50 AND property = 1 AND house_id < 3",
    # No filter at all, and one sharing only part of the others' conjuncts.
    "all": "SELECT COUNT(*) AS n FROM readings [RANGE 3 SECONDS SLIDE 1 SECOND]",
    "work": "SELECT ISTREAM house_id, COUNT(*) AS n FROM readings "
    "[RANGE 4 SECONDS SLIDE 2 SECONDS] WHERE property = 0 AND house_id < 3 GROUP BY house_id",
}


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], int]:
    d = tmp_path_factory.mktemp("shared")
    data = d / "readings.parquet"
    gen = hycq("data", "generate", "--out", data, "--seconds", "40", "--rate", "300",
               "--houses", "4", "--delay", "zipf:6s,1.2", "--seed", "5")  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    files = []
    for name, sql in QUERIES.items():
        (d / f"{name}.sql").write_text(sql + "\n")
        files.append(d / f"{name}.sql")
    max_delay = max(delays(pq.read_table(data).column("ts").to_pylist()))
    assert max_delay >= 3  # the data are out of order
    return data, files, max_delay


def _run(tmp: Path, data: Path, files: list[Path], *flags: str) -> tuple[Path, dict]:
    out = tmp / "out"
    run = hycq("run", *files, "--catalog", CATALOG, "--data", f"readings={data}",
               "--output-dir", out, "--dead-letter", tmp / "dead.jsonl", *flags)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "K-slack buffers" in run.stderr
    return out, json.loads((out / "shared.json").read_text())


def test_k_covering_the_delays_gives_each_query_the_oracles_stream(tmp_path: Path, workload):
    data, files, max_delay = workload
    k = [max_delay, max_delay + 2, max_delay + 5]
    flags = ["--disorder", f"kslack:{k[0]}s", "--disorder-of", f"loads=kslack:{k[1]}s",
             "--disorder-of", f"all=kslack:{k[2]}s", "--placement", "row"]  # fmt: skip
    out, shared = _run(tmp_path, data, files, *flags)
    truth_input = {"readings": pq.read_table(data)}
    catalog = load_catalog(CATALOG)
    for name, sql in QUERIES.items():
        result = _jsonl(out / f"{name}.jsonl")
        assert_same_stream(result, oracle(sql, catalog, truth_input))
        m = json.loads((out / f"{name}.metrics.json").read_text())
        assert m["dead_letter"] == 0 and m["results"] == result.num_rows
    assert not (tmp_path / "dead.jsonl").read_text()
    tree = {n["name"]: n for n in shared["shared"]["tree"]}
    # property = 1 is shared by three queries: one filter whose children include the others'.
    assert sum(1 for n in tree.values() if n["kind"] == "filter") >= 3
    assert shared["shared"]["kappa_ticks"]["loads"] == k[1]
    assert shared["shared"]["buffered_mean"] > 0


def _jsonl(path: Path):
    import pyarrow as pa

    rows = [json.loads(line) for line in path.read_text().splitlines()]
    if not rows:
        return pa.table({})
    return pa.Table.from_pylist(rows).select(list(rows[0]))


def test_every_configuration_gives_the_same_streams_and_opt_holds_the_fewest(
    tmp_path: Path, workload
):
    data, files, _ = workload
    flags = ["--disorder", "kslack:1s", "--disorder-of", "loads=kslack:4s",
             "--disorder-of", "hot=none", "--placement", "row"]  # fmt: skip
    held, outputs = {}, {}
    for algorithm in ("unshared", "chained", "greedy", "opt"):
        d = tmp_path / algorithm
        d.mkdir()
        out, shared = _run(d, data, files, *flags, "--shared-buffers", algorithm)
        held[algorithm] = shared["shared"]["buffered_mean"]
        outputs[algorithm] = {n: (out / f"{n}.jsonl").read_text() for n in QUERIES}
        dead = (d / "dead.jsonl").read_text().splitlines()
        per_query = {n: json.loads((out / f"{n}.metrics.json").read_text()) for n in QUERIES}
        assert len(dead) == sum(m["dead_letter"] for m in per_query.values())
        assert all(json.loads(line)["reason"].startswith("query ") for line in dead)
    for algorithm in ("chained", "greedy", "opt"):
        assert outputs[algorithm] == outputs["unshared"], algorithm
    assert held["opt"] <= min(held.values()) * 1.05


def test_max_k_slack_adapts_the_shared_buffers_as_the_delays_grow(tmp_path: Path, workload):
    data, files, max_delay = workload
    outputs = {}
    for algorithm in ("unshared", "opt"):
        d = tmp_path / algorithm
        flags = ["--disorder", "kslack:1s", "--disorder-of", "loads=max",
                 "--disorder-of", "few=max", "--placement", "row",
                 "--shared-buffers", algorithm]  # fmt: skip
        out, shared = _run(d, data, files, *flags)
        assert shared["shared"]["adaptations"] >= 1
        assert shared["shared"]["kappa_ticks"]["loads"] == max_delay
        m = json.loads((out / "few.metrics.json").read_text())
        assert m["disorder"] == {"policy": "max", "k_s": max_delay}
        outputs[algorithm] = {n: (out / f"{n}.jsonl").read_text() for n in QUERIES}
    assert outputs["opt"] == outputs["unshared"]


def test_a_column_placement_gives_the_same_streams(tmp_path: Path, workload):
    data, files, max_delay = workload
    flags = ["--disorder", f"kslack:{max_delay}s"]
    row, _ = _run(tmp_path / "r", data, files[:2], *flags, "--placement", "row")
    col, _ = _run(tmp_path / "c", data, files[:2], *flags, "--placement", "column")
    for f in files[:2]:
        assert_same_stream(_jsonl(col / f"{f.stem}.jsonl"), _jsonl(row / f"{f.stem}.jsonl"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--output-dir"),
        (["--output-dir", "X", "--output", "o.jsonl"], "--output is for runs of one query"),
        (["--output-dir", "X", "--disorder-of", "nope=kslack:1s"], "NAME=SPEC"),
        (["--output-dir", "X", "--disorder-of", "hot=quality"], "none, kslack:K or max"),
        (["--output-dir", "X", "--adapt"], "--adapt is for runs of one query"),
    ],
)
def test_bad_shared_runs_exit_2(tmp_path: Path, workload, extra: list[str], message: str):
    data, files, _ = workload
    extra = [str(tmp_path / "out") if e == "X" else e for e in extra]
    run = hycq("run", *files[:2], "--catalog", CATALOG, "--data", f"readings={data}", *extra)
    assert run.returncode == 2, run.stderr
    assert message in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_queries_over_other_streams_or_with_one_name_exit_2(tmp_path: Path, workload):
    data, files, _ = workload
    twin = tmp_path / "sub"
    twin.mkdir()
    (twin / "hot.sql").write_text(QUERIES["few"] + "\n")
    run = hycq("run", files[1], twin / "hot.sql", "--catalog", CATALOG,
               "--data", f"readings={data}", "--output-dir", tmp_path / "o")  # fmt: skip
    assert run.returncode == 2 and "both write hot.jsonl" in run.stderr
    keyed = ROOT / "queries" / "keyed"
    run = hycq("run", keyed / "j2.sql", keyed / "theta.sql", "--output-dir", tmp_path / "o")
    assert run.returncode == 2 and "one stream" in run.stderr, run.stderr


def test_a_shared_run_over_stdin_is_judged_by_lag(tmp_path: Path, workload) -> None:
    """A shared run reading a live source (stdin) judges ``kept_up`` by its lag behind the
    stream's event time, as ``hycq run`` does for one query (engines/runtime/live_lag.py)."""
    import subprocess
    import sys

    import pyarrow.csv as pacsv

    data, files, _ = workload
    csv_path = tmp_path / "readings.csv"
    pacsv.write_csv(pq.read_table(data), csv_path)
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", *map(str, files[:2]), "--catalog",
         str(CATALOG), "--data", "readings=-", "--output-dir", str(out), "--dead-letter",
         str(tmp_path / "dead.jsonl"), "--disorder", "kslack:7s"],
        input=csv_path.read_bytes(), capture_output=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr.decode()
    for f in files[:2]:
        m = json.loads((out / f"{f.stem}.metrics.json").read_text())
        assert m["kept_up_rule"] == "lag" and m["kept_up"] is True, m
        assert 0 <= m["live_lag_s"] <= 1.0, m
