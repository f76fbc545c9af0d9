"""The README's main query, Q2, run every way a user runs it over one file, writes the same
bytes: the default hybrid plan, the same with ``--checkpoint``, a run killed with SIGKILL and
resumed, ``--placement row``, ``--placement column`` and DataFusion give ``.jsonl`` files
that are equal once the rows of each instant are sorted (docs/semantics.md, "Results"), and
equal, bit for bit, to the oracle's stream.

Q2 counts the readings above their plug's 5-minute AVG, so a reading equal to that AVG is
counted or not depending on the AVG's last bit: the data holds a plug whose load never
changes (every reading equals the AVG, in exact arithmetic and, with correctly rounded sums,
on every engine, although the AVG of n copies of 0.1 is not always 0.1: n = 3 gives
0.10000000000000002, so whether its readings count as above their AVG depends on n) and a
plug whose loads mix magnitudes from 1e-3 to 1e5 (where summation order changes the rounded
sum), next to the generator's plugs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest

from engines.arrow_types import arrow_schema
from optimizer.sql.catalog import load_catalog
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
QUERY = ROOT / "queries" / "smartplug" / "q2.sql"
CATALOG_PATH = ROOT / "queries" / "smartplug" / "catalog.toml"
CATALOG = load_catalog(CATALOG_PATH)
SCHEMA = arrow_schema(CATALOG.get("readings").schema)
SECONDS = 40

pytestmark = pytest.mark.slow


def _hycq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *args],
        capture_output=True, text=True, timeout=600, cwd=cwd,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r


def _data(folder: Path) -> tuple[Path, pa.Table]:
    """The generator's readings (``hycq data generate``) with two hostile plugs: plug 0 of
    household 0 of house 0 at a constant load, plug 1 at loads of mixed magnitudes."""
    raw = folder / "generated.csv"
    _hycq("data", "generate", "--out", str(raw), "--seconds", str(SECONDS), "--seed", "48",
          cwd=folder)  # fmt: skip
    table = pacsv.read_csv(
        raw,
        read_options=pacsv.ReadOptions(column_names=SCHEMA.names),
        convert_options=pacsv.ConvertOptions(column_types=SCHEMA),
    )
    home = pc.and_(pc.equal(table["house_id"], 0), pc.equal(table["household_id"], 0))
    load = pc.equal(table["property"], 1)
    constant = pc.and_(pc.and_(home, load), pc.equal(table["plug_id"], 0))
    mixed = pc.and_(pc.and_(home, load), pc.equal(table["plug_id"], 1))
    assert pc.sum(constant).as_py() > 20 and pc.sum(mixed).as_py() > 20
    n = table.num_rows
    magnitudes = pa.array([(1e-3, 0.1, 7.3, 1e5, 0.7)[i % 5] for i in range(n)], pa.float64())
    value = pc.if_else(constant, pa.scalar(0.1), table["value"])
    value = pc.if_else(mixed, magnitudes, value)
    table = table.set_column(SCHEMA.names.index("value"), "value", value)
    path = folder / "readings.csv"
    pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return path, table


def _sorted_lines(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    assert lines, f"{path.name} is empty"
    return sorted(lines)


def _killed_and_resumed(folder: Path, base: list[str]) -> Path:
    """A run replayed in real time, SIGKILLed two seconds after its first checkpoint, then
    resumed at full speed: its output file."""
    out, ckpt = folder / "resumed.jsonl", folder / "ckpt-killed"
    log = folder / "killed.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hycq.cli", *base, "--output", str(out), "--pace", "realtime",
             "--checkpoint", str(ckpt), "--checkpoint-every", "0.5"],
            stdout=subprocess.DEVNULL, stderr=err, cwd=folder,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and not list(ckpt.glob("ckpt-*.json")):
            assert time.monotonic() < deadline, "the run wrote no checkpoint"
            time.sleep(0.05)
        time.sleep(2.0)
        assert proc.poll() is None, log.read_text()
    finally:
        proc.kill()
        proc.wait()
    r = _hycq(*base, "--output", str(out), "--resume", str(ckpt), cwd=folder)
    assert "resumed from ckpt-" in r.stderr
    return out


def test_every_way_of_running_q2_writes_the_same_bytes(tmp_path: Path) -> None:
    data, table = _data(tmp_path)
    base = ["run", str(QUERY), "--data", f"readings={data}"]
    outputs: dict[str, Path] = {}
    for name, extra in {
        "default": [],
        "checkpointed": ["--checkpoint", str(tmp_path / "ckpt")],
        "row": ["--placement", "row"],
        "column": ["--placement", "column"],
        "datafusion": ["--placement", "column", "--column-engine", "datafusion"],
    }.items():
        outputs[name] = tmp_path / f"{name}.jsonl"
        _hycq(*base, *extra, "--output", str(outputs[name]), cwd=tmp_path)
    outputs["killed and resumed"] = _killed_and_resumed(tmp_path, base)
    reference = _sorted_lines(outputs["default"])
    for name, path in outputs.items():
        assert _sorted_lines(path) == reference, f"{name} differs from the default run"
    # and the bits are the oracle's (exact sums of what is in each window)
    sql = QUERY.read_text()
    expected = oracle(sql, CATALOG, without_late(sql, CATALOG, {"readings": table}))
    rows = [json.loads(line) for line in reference]
    assert_same_stream(pa.Table.from_pylist(rows, schema=expected.schema), expected, exact=True)
