"""Checkpoints (engines/runtime/checkpoint.py): a run that crashes and is resumed writes the
oracle's result stream, on every placement, one stream and several, at many crash points.

A crash here is an exception raised inside the engine's ``ingest`` at a chosen batch: the
run stops at once between two checkpoints, its partial output holds instants the last
checkpoint does not cover, and the resumed run must cut them back and produce them again.
(tests/e2e/test_checkpoint_kill.py kills real processes with SIGKILL.)
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from engines.arrow_types import arrow_schema
from engines.runtime import RunOptions
from engines.runtime.checkpoint import CheckpointOptions, Recorder, history_ticks
from hycq import api
from optimizer.ir.errors import CheckpointError, OptionError
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.differential.test_multi_stream import CATALOG as KEYED_CATALOG
from tests.differential.test_multi_stream import QUERIES as KEYED_QUERIES
from tests.differential.test_multi_stream import _workload
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
SMARTPLUG = ROOT / "queries" / "smartplug"
CATALOG = load_catalog(SMARTPLUG / "catalog.toml")
SCHEMA = arrow_schema(CATALOG.get("readings").schema)
BAD = b"garbage,line\n"


class Crash(Exception):
    """Stands for the process dying: raised from inside the engine."""


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """A raw DEBS file with a bad line in it, and the valid rows it holds."""
    table = small_smartplug(400, seed=11, rate=6.0).select(SCHEMA.names).cast(SCHEMA)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    lines = sink.getvalue().to_pybytes().splitlines(keepends=True)
    cut = len(lines) // 4
    path = tmp_path_factory.mktemp("ckpt") / "readings.csv"
    path.write_bytes(b"".join(lines[:cut]) + BAD + b"".join(lines[cut:]))
    return path, table


def _crash_at(monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    """Make the ``batch``-th batch the engine is given (not counting a replay) crash."""
    seen = [0]
    original = Recorder.ingest

    def ingest(self: Recorder, stream: str, b: pa.RecordBatch, t: int) -> int:
        if not self.replaying:
            seen[0] += 1
            if seen[0] == batch:
                raise Crash
        return original(self, stream, b, t)

    monkeypatch.setattr(Recorder, "ingest", ingest)


def _options(tmp: Path, data: dict[str, Path], resume: bool, **kw: Any) -> RunOptions:
    return RunOptions(
        data=dict(data),
        output=str(tmp / "out.jsonl"),
        dead_letter=tmp / "dead.jsonl",
        read_batch_rows=kw.pop("read_batch_rows", 80),
        checkpoint=CheckpointOptions(tmp / "ckpt", resume=resume, every_batches=3),
        **kw,
    )


def _crash_and_resume(
    monkeypatch: pytest.MonkeyPatch,
    q: api.LoadedQuery,
    tmp: Path,
    data: dict[str, Path],
    placement: str,
    crashes: list[int],
) -> dict[str, Any]:
    """Run, crash at each of ``crashes`` (counted per attempt), resume; the last metrics."""
    for i, at in enumerate(crashes):
        with monkeypatch.context() as m:
            _crash_at(m, at)
            with pytest.raises(Crash):
                api.run(q, _options(tmp, data, resume=i > 0), placement)
    result = api.run(q, _options(tmp, data, resume=bool(crashes)), placement)
    return dict(result.metrics)


def _read_jsonl(path: Path, schema: pa.Schema) -> pa.Table:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


@pytest.mark.parametrize(
    ("query", "placement", "crashes"),
    [
        ("q1", "row", [5]),
        ("q1", "column", [4, 7]),
        ("q2", "auto", [8]),
        ("q4", "row", [2, 3, 9]),
        ("q5", "column", [6]),
        ("q6", "row", [10]),
    ],
)
def test_crash_and_resume_equals_the_oracle(
    readings: tuple[Path, pa.Table],
    query: str,
    placement: str,
    crashes: list[int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, table = readings
    q = api.load_query(str(SMARTPLUG / f"{query}.sql"), None)
    m = _crash_and_resume(monkeypatch, q, tmp_path, {"readings": path}, placement, crashes)
    text = (SMARTPLUG / f"{query}.sql").read_text()
    expected = oracle(text, CATALOG, without_late(text, CATALOG, {"readings": table}))
    got = _read_jsonl(tmp_path / "out.jsonl", expected.schema)
    assert_same_stream(got, expected)
    assert m["results"] == expected.num_rows
    # the bad line is written once, though the resumed runs read it again
    letters = (tmp_path / "dead.jsonl").read_text().splitlines()
    assert [json.loads(x)["row"] for x in letters] == ["garbage,line"]
    assert m["dead_letter"] == 1
    resumed = m["checkpoint"]["resumed"]
    assert resumed["skipped_rows"] > 0 and resumed["replayed_rows"] > 0
    assert (tmp_path / "ckpt" / "finished.json").exists()


@pytest.mark.parametrize(
    ("query", "shape", "placement", "crashes"),
    [
        ("j2", "densities", "row", [6]),
        ("j3", "start_end", "column", [5, 11]),
        ("istream", "silent", "row", [9]),
        ("join_aggs", "equal", "auto", [7]),
        ("mixed_units", "densities", "row", [4]),
    ],
)
def test_several_streams_crash_and_resume(
    query: str,
    shape: str,
    placement: str,
    crashes: list[int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tables = _workload(shape, 90)
    plan = plan_query(KEYED_QUERIES[query], KEYED_CATALOG, f"{query}.sql")
    reads = {op.stream for op in plan.operators() if hasattr(op, "stream")}
    data = {}
    for name, t in tables.items():
        if name in reads:
            data[name] = tmp_path / f"{name}.csv"
            pacsv.write_csv(t, data[name])
    q = api.load_query(str(ROOT / "queries" / "keyed" / f"{query}.sql"), None)
    _crash_and_resume(monkeypatch, q, tmp_path, data, placement, crashes)
    expected = oracle(KEYED_QUERIES[query], KEYED_CATALOG, {n: tables[n] for n in reads})
    assert_same_stream(_read_jsonl(tmp_path / "out.jsonl", expected.schema), expected)


def test_the_log_keeps_only_what_the_window_needs(
    readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """Q2's windows are 5 minutes: once the run is past them, the checkpoint no longer
    needs the first segments (they are dropped, their progress kept in the prefix)."""
    path, _ = readings
    q = api.load_query(str(SMARTPLUG / "q2.sql"), None)
    m = api.run(q, _options(tmp_path, {"readings": path}, resume=False), "row").metrics
    manifest = max((tmp_path / "ckpt").glob("ckpt-*.json"))
    kept = json.loads(manifest.read_text())
    assert kept["segments"][0]["number"] > 1
    assert kept["prefix"]["progress"]
    assert m["checkpoint"]["written"] >= 5
    plan = plan_query((SMARTPLUG / "q2.sql").read_text(), CATALOG, "q2.sql")
    # 300 s windows sliding by 1 s, in ticks of seconds (+ a tick)
    assert history_ticks(plan, "s") == {"readings": 302}


def test_damaged_checkpoints_are_refused(
    readings: tuple[Path, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest checkpoint damaged: the one before is used (a warning says why). Every
    one damaged: CheckpointError (exit 2). A finished run cannot be resumed."""
    path, table = readings
    q = api.load_query(str(SMARTPLUG / "q1.sql"), None)
    data = {"readings": path}
    with monkeypatch.context() as m:
        _crash_at(m, 14)
        with pytest.raises(Crash):
            api.run(q, _options(tmp_path, data, resume=False), "row")
    folder = tmp_path / "ckpt"
    newest, older = sorted(folder.glob("ckpt-*.json"), reverse=True)[:2]
    segment = max(folder.glob("seg-*-0.arrow"))
    blob = bytearray(segment.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    segment.write_bytes(bytes(blob))
    with pytest.warns(RuntimeWarning, match=f"{newest.name} refused: .* is damaged"):
        result = api.run(q, _options(tmp_path, data, resume=True), "row")
    assert result.metrics["checkpoint"]["resumed"]["checkpoint"] == older.name
    text = (SMARTPLUG / "q1.sql").read_text()
    expected = oracle(text, CATALOG, without_late(text, CATALOG, {"readings": table}))
    assert_same_stream(_read_jsonl(tmp_path / "out.jsonl", expected.schema), expected)
    with pytest.raises(CheckpointError, match="finished; nothing to resume"):
        api.run(q, _options(tmp_path, data, resume=True), "row")

    other = tmp_path / "other"
    other.mkdir()
    with monkeypatch.context() as m:
        _crash_at(m, 9)
        with pytest.raises(Crash):
            api.run(q, _options(other, data, resume=False), "row")
    for manifest in (other / "ckpt").glob("ckpt-*.json"):
        manifest.write_text(manifest.read_text()[:-20])  # torn writes
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        api.run(q, _options(other, data, resume=True), "row")


def test_resume_refuses_another_run_and_a_fresh_run_an_old_folder(
    readings: tuple[Path, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = readings
    data = {"readings": path}
    q1 = api.load_query(str(SMARTPLUG / "q1.sql"), None)
    with monkeypatch.context() as m:
        _crash_at(m, 6)
        with pytest.raises(Crash):
            api.run(q1, _options(tmp_path, data, resume=False), "row")
    q2 = api.load_query(str(SMARTPLUG / "q2.sql"), None)
    with pytest.raises(CheckpointError, match=r"of another run .*plan"):
        api.run(q2, _options(tmp_path, data, resume=True), "row")
    with pytest.raises(CheckpointError, match="already holds the checkpoints"):
        api.run(q1, _options(tmp_path, data, resume=False), "row")
    opts = _options(tmp_path, data, resume=True)
    opts.output = str(tmp_path / "out.parquet")
    with pytest.raises(OptionError, match="Parquet"):
        api.run(q1, opts, "row")


def test_resume_before_the_first_checkpoint_starts_over(
    readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """Killed after making its folder but before writing a checkpoint: ``--resume`` warns
    and runs from the beginning (nothing had been committed)."""
    path, table = readings
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "output.partial").write_text('{"half": "a line"')
    q = api.load_query(str(SMARTPLUG / "q4.sql"), None)
    with pytest.warns(RuntimeWarning, match="no checkpoint yet; starting from the beginning"):
        api.run(q, _options(tmp_path, {"readings": path}, resume=True), "row")
    text = (SMARTPLUG / "q4.sql").read_text()
    expected = oracle(text, CATALOG, without_late(text, CATALOG, {"readings": table}))
    assert_same_stream(_read_jsonl(tmp_path / "out.jsonl", expected.schema), expected)


# -- a resumed run refuses a changed input ---------------------------------------------------


def _same_size_edit(path: Path, line: int) -> None:
    """Change one digit of the value on ``line`` (0-based), keeping the file's size and its
    modification time: only the rows themselves show the change."""
    st = path.stat()
    lines = path.read_bytes().split(b"\n")
    fields = lines[line].split(b",")
    digit = fields[2][-1:]
    fields[2] = fields[2][:-1] + (b"1" if digit != b"1" else b"2")
    lines[line] = b",".join(fields)
    path.write_bytes(b"\n".join(lines))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def _generator_catalog(folder: Path, **settings: Any) -> Path:
    """The smart-plug catalog with its generator's settings replaced (small and quick)."""
    text = (SMARTPLUG / "catalog.toml").read_text()
    base = {"houses": 1, "seed": 42, **settings}
    text = text.replace("houses = 40\nseed = 42", "\n".join(f"{k} = {v}" for k, v in base.items()))
    text = text.replace("rate = 2000", "rate = 40")
    path = folder / "catalog.toml"
    path.write_text(text)
    return path


def _file_catalog(folder: Path, data: Path) -> Path:
    """The smart-plug catalog whose stream is read from ``data`` (a catalog's own file)."""
    text = (SMARTPLUG / "catalog.toml").read_text()
    head = text.split("[streams.readings.source]")[0]
    path = folder / "catalog.toml"
    path.write_text(f'{head}[streams.readings.source]\nkind = "file"\npath = "{data.name}"\n')
    return path


def _parquet(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path, row_group_size=80)
    return path


CHANGES: dict[str, tuple[str, str]] = {
    # name: (what the first run reads, what the error says)
    "csv edited in place, same size and time": ("csv", r"first \d[\d,]* rows of .*readings\.csv"),
    "csv with a row appended": ("csv", r"readings\.csv \(size [\d,]+ -> [\d,]+ bytes"),
    "csv touched": ("csv", r"readings\.csv \(modified .* -> "),
    "parquet rewritten": ("parquet", r"readings\.parquet \(size"),
    "catalog's file edited": ("catalog-file", r"readings\.csv \(.*modified"),
    "generator seed": ("generator", r"its catalog definition: source\.options\.seed 42 -> 43"),
    "generator shape": ("generator", r"source\.options\.houses 1 -> 2"),
    "generator rate": ("generator", r"its catalog definition: rate 40.0 -> 50.0"),
    "catalog column dropped": ("generator", r"its catalog definition: columns \["),
    "query constant": ("csv", r"the query's plan differs"),
    "idle timeout": ("csv", r"idle_timeout None -> 5"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_resume_refuses_a_changed_input(
    readings: tuple[Path, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """Whatever a checkpoint replays or re-reads changed since (a file's rows, size or time;
    a catalog's file, a generator's settings, a column; the query; an option): ``--resume``
    is refused naming what changed (CheckpointError, exit 2), and with the original input
    restored it resumes to the oracle's stream."""
    kind, message = CHANGES[change]
    original, table = readings
    folder = tmp_path / "in"
    folder.mkdir()
    query = SMARTPLUG / "q1.sql"
    catalog: Path | None = None
    data: dict[str, Path] = {}
    if kind == "csv":
        data = {"readings": folder / "readings.csv"}
        shutil.copy2(original, data["readings"])
    elif kind == "parquet":
        data = {"readings": _parquet(table, folder / "readings.parquet")}
    elif kind == "catalog-file":
        shutil.copy2(original, folder / "readings.csv")
        catalog = _file_catalog(folder, folder / "readings.csv")
    else:
        catalog = _generator_catalog(folder)
    q = api.load_query(str(query), catalog)
    extra: dict[str, Any] = {"duration": 60.0} if kind == "generator" else {}
    with monkeypatch.context() as m:
        _crash_at(m, 8)
        with pytest.raises(Crash):
            api.run(q, _options(tmp_path, data, resume=False, **extra), "row")
    saved = {p: p.read_bytes() for p in folder.iterdir()}
    times = {p: p.stat() for p in folder.iterdir()}
    resumed_q = q
    if change == "csv edited in place, same size and time":
        _same_size_edit(data["readings"], 3)
    elif change == "csv with a row appended":
        with data["readings"].open("ab") as fh:
            fh.write(b"999999,1377986401,1.0,1,0,0,0\n")
    elif change in ("csv touched", "catalog's file edited"):
        path = data.get("readings", folder / "readings.csv")
        if change == "catalog's file edited":
            path.write_bytes(path.read_bytes().replace(b",1,", b",0,", 1))
        os.utime(path, ns=(time.time_ns(), time.time_ns()))
    elif change == "parquet rewritten":
        values = pc.add(table.column("value"), 1.0)
        _parquet(table.set_column(2, "value", values), data["readings"])
    elif change == "generator seed":
        resumed_q = api.load_query(str(query), _generator_catalog(folder, seed=43))
    elif change == "generator shape":
        resumed_q = api.load_query(str(query), _generator_catalog(folder, houses=2))
    elif change == "generator rate":
        catalog = _generator_catalog(folder)
        catalog.write_text(catalog.read_text().replace("rate = 40", "rate = 50"))
        resumed_q = api.load_query(str(query), catalog)
    elif change == "catalog column dropped":  # one the query does not read
        catalog = _generator_catalog(folder)
        catalog.write_text(catalog.read_text().replace('id = "BIGINT"\n', "", 1))
        resumed_q = api.load_query(str(query), catalog)
    elif change == "query constant":
        edited = folder / "q1.sql"
        edited.write_text(query.read_text().replace("0.9 * m.max_load", "0.8 * m.max_load"))
        resumed_q = api.load_query(str(edited), SMARTPLUG / "catalog.toml")
    elif change == "idle timeout":
        extra["idle_timeout"] = 5.0
    with pytest.raises(CheckpointError, match=message) as caught:
        api.run(resumed_q, _options(tmp_path, data, resume=True, **extra), "row")
    assert caught.value.hint
    # nothing was lost: the original input resumes to the uninterrupted run's stream
    for path, blob in saved.items():
        path.write_bytes(blob)
        os.utime(path, ns=(times[path].st_atime_ns, times[path].st_mtime_ns))
    extra.pop("idle_timeout", None)
    api.run(q, _options(tmp_path, data, resume=True, **extra), "row")
    plain = tmp_path / "plain"
    plain.mkdir()
    opts = _options(plain, data, resume=False, **extra)
    opts.checkpoint = None
    api.run(q, opts, "row")
    expected = _inferred(plain / "out.jsonl")
    assert expected.num_rows > 0
    assert_same_stream(_inferred(tmp_path / "out.jsonl"), expected)


def _inferred(path: Path) -> pa.Table:
    return pa.Table.from_pylist([json.loads(line) for line in path.read_text().splitlines()])


@pytest.mark.parametrize(("given", "kept"), [(None, 7.5), (3.0, 3.0)])
def test_a_resumed_run_keeps_its_interval_unless_given_anew(
    readings: tuple[Path, pa.Table],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    given: float | None,
    kept: float,
) -> None:
    path, _ = readings
    q = api.load_query(str(SMARTPLUG / "q4.sql"), None)
    opts = _options(tmp_path, {"readings": path}, resume=False)
    opts.checkpoint = CheckpointOptions(tmp_path / "ckpt", every_s=7.5, every_batches=3)
    with monkeypatch.context() as m:
        _crash_at(m, 7)
        with pytest.raises(Crash):
            api.run(q, opts, "row")
    assert json.loads(max((tmp_path / "ckpt").glob("ckpt-*.json")).read_text())["every_s"] == 7.5
    opts.checkpoint = CheckpointOptions(tmp_path / "ckpt", every_s=given, resume=True)
    result = api.run(q, opts, "row")
    assert result.metrics["checkpoint"]["every_s"] == kept


def test_a_stop_while_the_log_is_replayed_ends_the_resume_cleanly(
    readings: tuple[Path, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop request during a resumed run's replay: the run ends as interrupted (nothing
    new committed, the checkpoint still good), and the next resume finishes the stream."""
    from engines import interrupts

    path, table = readings
    q = api.load_query(str(SMARTPLUG / "q2.sql"), None)
    data = {"readings": path}
    with monkeypatch.context() as m:
        _crash_at(m, 12)
        with pytest.raises(Crash):
            api.run(q, _options(tmp_path, data, resume=False), "row")
    original = Recorder.ingest
    replayed = [0]

    def ingest(self: Recorder, stream: str, b: pa.RecordBatch, t: int) -> int:
        if self.replaying:
            replayed[0] += 1
            if replayed[0] == 2:
                interrupts.request_stop()
        return original(self, stream, b, t)

    with monkeypatch.context() as m:
        m.setattr(Recorder, "ingest", ingest)
        metrics = api.run(q, _options(tmp_path, data, resume=True), "row").metrics
    assert metrics["interrupted"] == "SIGINT" and metrics["tuples_in"] == 0
    assert replayed[0] >= 2
    api.run(q, _options(tmp_path, data, resume=True), "row")
    text = (SMARTPLUG / "q2.sql").read_text()
    expected = oracle(text, CATALOG, without_late(text, CATALOG, {"readings": table}))
    assert_same_stream(_read_jsonl(tmp_path / "out.jsonl", expected.schema), expected)
