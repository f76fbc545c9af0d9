"""``hycq run --checkpoint DIR`` killed with SIGKILL at random moments, again and again,
each time continued with ``--resume DIR``: the output file in the end is the oracle's result
stream (engines/runtime/checkpoint.py; in-process crash points: tests/differential).

The runs replay event time against the wall clock (``--pace realtime``), so a kill lands in
the middle of the stream at a random instant, between checkpoints or during one.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from engines.arrow_types import arrow_schema
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

#: event-seconds of data: the length of an uninterrupted run
SECONDS = 24
ROOT = Path(__file__).resolve().parents[2]
CATALOG_PATH = ROOT / "queries" / "smartplug" / "catalog.toml"
CATALOG = load_catalog(CATALOG_PATH)
SCHEMA = arrow_schema(CATALOG.get("readings").schema)
#: per plug, the average of 20-second windows and how many readings were above it: a window
#: short enough that the checkpoints' log is cut many times during the run
QUERY = """
SELECT r.plug_id, r.household_id, r.house_id, COUNT(*) AS above, MAX(a.avg_value) AS avg_value
FROM readings [RANGE 20 SECONDS SLIDE 2 SECONDS] AS r,
     (SELECT plug_id, household_id, house_id, AVG(value) AS avg_value
      FROM readings [RANGE 20 SECONDS SLIDE 2 SECONDS]
      WHERE property = 1
      GROUP BY plug_id, household_id, house_id) AS a
WHERE r.property = 1 AND r.plug_id = a.plug_id AND r.household_id = a.household_id
  AND r.house_id = a.house_id AND r.value > a.avg_value
GROUP BY r.plug_id, r.household_id, r.house_id
"""


def _data(folder: Path, seconds: int) -> tuple[Path, pa.Table]:
    table = small_smartplug(seconds, seed=23, rate=400.0).select(SCHEMA.names).cast(SCHEMA)
    path = folder / "readings.csv"
    pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return path, table


def _kill_and_resume(folder: Path, placement: str, kills: int, seed: int) -> list[str]:
    """Start the run, SIGKILL it after a random delay, resume, ... ``kills`` times, then
    let the last resume finish. What each attempt ended with."""
    sql = folder / "query.sql"
    sql.write_text(QUERY)
    data, _ = _data(folder, SECONDS)
    rng = random.Random(seed)
    base = [
        sys.executable, "-m", "hycq.cli", "run", str(sql), "--catalog", str(CATALOG_PATH),
        "--data", f"readings={data}", "--placement", placement, "--pace", "realtime",
        "--output", str(folder / "out.jsonl"), "--checkpoint-every", "0.3",
    ]  # fmt: skip
    ends = []
    for attempt in range(kills + 1):
        flag = ["--resume" if attempt else "--checkpoint", str(folder / "ckpt")]
        log = folder / f"attempt-{attempt}.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(base + flag, stdout=subprocess.DEVNULL, stderr=err, cwd=folder)
        if attempt < kills:
            deadline = time.monotonic() + rng.uniform(2.0, 4.0)
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        if proc.poll() is None and attempt < kills:
            proc.kill()
            proc.wait()
            ends.append("killed")
            continue
        proc.wait(timeout=300)
        assert proc.returncode == 0, log.read_text()
        ends.append("finished")
        break
    return ends


def _check(folder: Path) -> None:
    _, table = _data(folder, SECONDS)
    expected = oracle(QUERY, CATALOG, without_late(QUERY, CATALOG, {"readings": table}))
    rows = [json.loads(x) for x in (folder / "out.jsonl").read_text().splitlines()]
    assert_same_stream(pa.Table.from_pylist(rows, schema=expected.schema), expected)


def test_killed_runs_resume_to_the_oracles_output(tmp_path: Path) -> None:
    ends = _kill_and_resume(tmp_path, "auto", kills=4, seed=1)
    assert ends.count("killed") >= 2, ends
    _check(tmp_path)


@pytest.mark.long
@pytest.mark.parametrize("placement", ["row", "column"])
def test_twenty_kills(tmp_path: Path, placement: str) -> None:
    ends = _kill_and_resume(tmp_path, placement, kills=20, seed=7)
    assert ends.count("killed") >= 10, ends
    _check(tmp_path)
