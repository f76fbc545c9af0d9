"""``hycq bench``: the warm start does not change what a plan computes, and the command
writes the CONTRACT records and a plot."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engines.assembly import Assembly
from hycq.api import resolve_placement
from hycq.bench import warm_seconds
from optimizer.ir.placement import complete_placement
from optimizer.sql import plan_query
from tests.datagen import small_smartplug
from tests.e2e.test_cli_errors import QUERIES, assert_user_error, hycq

PER_PLUG_MAX = (
    "SELECT house_id, household_id, plug_id, MAX(value) AS m "
    "FROM readings [RANGE 20 SECONDS SLIDE 1 SECOND] WHERE property = 1 "
    "GROUP BY house_id, household_id, plug_id"
)


def _stream(
    plan, placement, data: pa.Table, defer_until: int | None
) -> tuple[dict[int, list], int]:
    """Result relation per instant; MIGs deferred while the input is before ``defer_until``."""
    out: dict[int, list] = {}

    def emit(instant: int, rows) -> None:
        out[instant] = sorted(rows.to_pylist() if hasattr(rows, "to_pylist") else rows, key=str)

    asm = Assembly(plan, placement)
    try:
        engine = asm.make_engine(emit)
        for mig in asm.migs:
            mig.defer = defer_until is not None
        for batch in data.to_batches(max_chunksize=50):
            ts = batch.column(1)[0].as_py()
            if defer_until is not None and ts >= defer_until:
                for mig in asm.migs:
                    mig.defer = False
            engine.ingest("readings", batch, 1)
        engine.finish()
    finally:
        asm.close()
    return out, sum(m.stats.queries for m in asm.migs)


@pytest.mark.parametrize("query", [PER_PLUG_MAX, (QUERIES / "smartplug" / "q1.sql").read_text()])
def test_deferred_migs_give_the_same_stream_after_the_warm_start(smartplug, query: str) -> None:
    plan = plan_query(query.replace("5 MINUTES", "20 SECONDS"), smartplug)
    data = small_smartplug(60, seed=5, rate=30.0).sort_by("ts")
    for placement in ("column", dict.fromkeys(plan.r2r_ids()[-2:], "duckdb")):
        p = (
            resolve_placement(plan, placement)
            if isinstance(placement, str)
            else complete_placement(plan, placement)
        )
        full, queries_full = _stream(plan, p, data, None)
        warm = 21 + data.column("ts")[0].as_py()
        deferred, queries_deferred = _stream(plan, p, data, warm)
        assert queries_deferred < queries_full - 15  # ~20 warm-up slides ran no query
        # Before the warm start ends the deferred groups emit nothing; from the first
        # instant after it, every result relation is identical.
        after = {t: rows for t, rows in full.items() if t > warm}
        assert after and {t: deferred.get(t) for t in after} == after


def test_warm_seconds_cover_the_longest_window(smartplug) -> None:
    plan = plan_query((QUERIES / "smartplug" / "q3.sql").read_text(), smartplug)
    assert warm_seconds(plan, 2000) == 302.0  # 5 minutes + one slide, rounded up


def test_bench_writes_records_and_a_plot(tmp_path: Path) -> None:
    out, png = tmp_path / "b.json", tmp_path / "b.png"
    q = tmp_path / "q.sql"
    q.write_text(PER_PLUG_MAX)
    (tmp_path / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    r = hycq(
        "bench",
        q,
        "--rates",
        "1000,4000",
        "--measure",
        "2",
        "--repeat",
        "2",
        "--max-repeat",
        "2",
        "--cost-model",
        "analytical",
        "--json",
        out,
        "--plot",
        png,
    )
    assert r.returncode == 0, r.stderr
    records = json.loads(out.read_text())
    assert [(x["rate"], x["plan"]) for x in records] == [
        (rate, plan) for rate in (1000.0, 4000.0) for plan in ("auto", "row", "column")
    ]
    for x in records:
        assert set(x["predicted"]) >= {"bottleneck", "utilization", "feasible"}
        m = x["measured"]
        assert m["throughput"] > 0 and len(m["spans"]) == 2
        assert m["kept_up"] is (m["throughput"] >= x["rate"])
        assert m["tuples"] > 0 and m["results"] > 0  # windows were full and produced results
        lo, hi = m["ci95"]
        assert lo <= m["throughput"] <= hi and 0 <= m["clean_spans"] <= 2
        assert len(x["load"]["other_cores"]) == 2 and x["interleaved"] in (2, 3)
        assert 0 < m["vs_best"] <= 1 and isinstance(m["tied_with_best"], bool)
    for rate in (1000.0, 4000.0):
        point = [x["measured"] for x in records if x["rate"] == rate]
        assert max(m["vs_best"] for m in point) == 1.0
        assert x["warm_start"]["event_s"] == 22.0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_rejects_bad_options(tmp_path: Path) -> None:
    q1 = QUERIES / "smartplug" / "q1.sql"
    assert_user_error(hycq("bench", q1, "--rates", "10,x"), "--rates")
    assert_user_error(hycq("bench", q1, "--plans", "auot"), "did you mean 'auto'")
    assert_user_error(hycq("bench", q1, "--plot", tmp_path / "p.svg"), ".png")


def test_a_plan_that_cannot_fill_its_windows_in_time_is_marked_incomplete(
    tmp_path: Path,
) -> None:
    out = tmp_path / "b.json"
    q = tmp_path / "q.sql"
    q.write_text(PER_PLUG_MAX.replace("20 SECONDS", "10 MINUTES"))
    (tmp_path / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    r = hycq(
        "bench",
        q,
        "--rates",
        "40000",
        "--plans",
        "row",
        "--measure",
        "2",
        "--repeat",
        "1",
        "--warm-limit",
        "2",
        "--cost-model",
        "analytical",
        "--json",
        out,
    )
    assert r.returncode == 0, r.stderr
    (rec,) = json.loads(out.read_text())
    assert rec["warm_start"]["complete"] is False and rec["warm_start"]["wall_s"] < 10
    assert rec["measured"]["throughput"] > 0


def _per_plug_max(tmp_path: Path, plan_name: str) -> tuple[Path, Any, dict[str, str]]:
    """PER_PLUG_MAX as a query file beside the smart-plug catalog: the file, the loaded
    query and its ``plan_name`` placement (row or column)."""
    from hycq.api import load_query

    q = tmp_path / "q.sql"
    q.write_text(PER_PLUG_MAX)
    (tmp_path / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    loaded = load_query(q)
    plan = loaded.plan
    return q, loaded, complete_placement(plan, resolve_placement(plan, plan_name, "duckdb"))


def _row_and_column(tmp_path: Path) -> tuple[Any, list[dict[str, str]]]:
    """PER_PLUG_MAX loaded (``_per_plug_max``) with its row and column placements."""
    _q, loaded, row = _per_plug_max(tmp_path, "row")
    _q, _loaded, column = _per_plug_max(tmp_path, "column")
    return loaded, [row, column]


def test_measured_spans_process_every_tuple(smartplug, tmp_path: Path) -> None:
    """Each span's batches are read ahead of timing; the progress the merge reported while
    reading them is told batch by batch, so no tuple of a span arrives behind its own
    announced progress (told all at once, it dropped most of a long span as late and
    "measured" Q1's row plan at 16 M tuples/s). The spans produce the results a plain run
    produces for the same event-seconds."""
    from hycq.bench import BenchOptions, measure

    q, loaded, placement = _per_plug_max(tmp_path, "row")
    plan = loaded.plan
    o = BenchOptions(rates=[500.0], measure_seconds=40, repeat=3, max_repeat=3)
    m = measure(loaded, plan, placement, 500.0, o)
    assert m.late == 0
    assert m.tuples_measured == 3 * 40 * 500
    out = tmp_path / "o.parquet"
    total = m.warm_s + 3 * 40
    r = hycq("run", q, "--placement", "row", "--rate", "500", "--duration", f"{total:g}",
             "--output", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    ts = pq.read_table(out).column("_ts").to_pylist()
    first = min(ts)
    assert m.results == sum(1 for t in ts if t - first >= m.warm_s)


def test_interleaved_plans_see_the_same_spans_and_stop_at_the_precision(
    smartplug, tmp_path: Path
) -> None:
    """Two placements measured side by side get the same batches (so the same result rows
    and tuple counts); a loose --precision stops at --repeat spans, an unreachable one runs
    the whole span budget."""
    from hycq.bench import BenchOptions, measure_point
    from hycq.bench_stats import is_clean

    loaded, placements = _row_and_column(tmp_path)
    plan = loaded.plan
    loose = BenchOptions(rates=[500.0], measure_seconds=2, repeat=2, max_repeat=6, precision=10)
    row, col = measure_point(loaded, plan, placements, 500.0, loose)
    disturbed = not all(is_clean(c) for c in row.other_cores + col.other_cores)
    assert len(row.spans) == len(col.spans) and (len(row.spans) == 2 or disturbed)
    assert row.tuples_measured == col.tuples_measured == len(row.spans) * 2 * 500
    assert row.results == col.results > 0
    tight = BenchOptions(rates=[500.0], measure_seconds=2, repeat=2, max_repeat=5, precision=1e-9)
    row, col = measure_point(loaded, plan, placements, 500.0, tight)
    assert len(row.spans) == len(col.spans) == 5
    assert row.tuples_measured == col.tuples_measured == 5 * 2 * 500
    assert row.ci[0] <= row.throughput <= row.ci[1]


def test_a_data_file_at_a_low_rate_is_measured_in_one_second_batches(
    smartplug, tmp_path: Path
) -> None:
    """A --data file is read in batches of about one event-second at the rate: read in the
    file reader's 64k-row batches, 100 tuples/s put the whole warm start and every span in
    one batch, and no span was measured at all."""
    from engines.sources.smartplug import generate_to_file
    from hycq.api import load_query
    from hycq.bench import BenchOptions, measure_point

    data = tmp_path / "d.parquet"
    generate_to_file(data, 60, rate=100.0, plugs=200)
    q = tmp_path / "q.sql"
    q.write_text(PER_PLUG_MAX)
    (tmp_path / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    loaded = load_query(q)
    placement = complete_placement(loaded.plan, resolve_placement(loaded.plan, "row"))
    o = BenchOptions(
        rates=[100.0], measure_seconds=3, repeat=3, max_repeat=3, data={"readings": data}
    )
    (m,) = measure_point(loaded, loaded.plan, [placement], 100.0, o)
    assert len(m.spans) == 3 and m.tuples_measured == 3 * 3 * 100 and m.results > 0


def test_spans_hold_whole_slides(smartplug) -> None:
    """A span is a multiple of the longest slide: 3 event-seconds of a 5-second slide would
    hold one slide instant or none, and its throughput would swing tenfold."""
    from hycq.bench import span_seconds

    u2 = plan_query((QUERIES / "unseen" / "u2_house_work_spread.sql").read_text(), smartplug)
    assert [span_seconds(u2, m) for m in (1, 3, 5, 7, 10)] == [5, 5, 5, 10, 10]
    q1 = plan_query((QUERIES / "smartplug" / "q1.sql").read_text(), smartplug)
    assert [span_seconds(q1, m) for m in (1, 3, 7)] == [1, 3, 7]


def test_operator_metrics_are_summed_over_the_timed_spans_only(tmp_path: Path) -> None:
    """``BenchOptions.operator_metrics``: each operator's counters over the timed spans,
    not the warm start. The window's arrivals over the spans are exactly the tuples
    measured, the group above it on DuckDB was busy, and the spans' wall time is what the
    throughputs imply."""
    from hycq.bench import BenchOptions, measure

    _q, loaded, placement = _per_plug_max(tmp_path, "column")
    plan = loaded.plan
    o = BenchOptions(
        rates=[500.0], measure_seconds=10, repeat=3, max_repeat=3, operator_metrics=True
    )
    m = measure(loaded, plan, placement, 500.0, o)
    assert m.tuples_measured == 3 * 10 * 500
    windows = [i for i in plan.topological() if plan.op(i).kind == "window"]
    assert [m.operators[w]["tuples_out"] for w in windows] == [m.tuples_measured]
    (mig,) = [k for k in m.operators if k.startswith("mig[")]
    assert 0 < m.operators[mig]["busy_s"] < m.spans_wall_s
    assert m.spans_wall_s == pytest.approx(sum(10 * 500 / s for s in m.spans), rel=1e-6)
    plain = measure(loaded, plan, placement, 500.0, BenchOptions(rates=[500.0], repeat=1))
    assert plain.operators == {}


def _bench_every_placement(tmp_path: Path, interleave: int) -> list[dict[str, Any]]:
    """``hycq bench --plans auto,row,column,all`` of the per-plug MAX at 1k tuples/s, three
    2-second spans per plan, ``interleave`` plans side by side."""
    from hycq import bench as hb
    from hycq.api import load_query

    q = tmp_path / "q.sql"
    q.write_text(PER_PLUG_MAX)
    (tmp_path / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    o = hb.BenchOptions(
        rates=[1000.0],
        plans=["auto", "row", "column", "all"],
        measure_seconds=2,
        repeat=3,
        max_repeat=3,
        interleave=interleave,
    )
    return hb.bench([load_query(q)], o)


def test_placements_in_several_groups_are_measured_against_the_same_anchor(
    tmp_path: Path,
) -> None:
    """With more placements than --interleave, the auto plan runs in every group and the
    others' throughputs are their ratios to it, round by round (``bench_stats.anchored``)."""
    records = _bench_every_placement(tmp_path, interleave=2)
    distinct = {json.dumps(x["placement"], sort_keys=True): x for x in records}
    assert len(distinct) >= 3  # more placements than one group holds
    auto = next(x for x in records if x["plan"] == "auto")
    groups = len(distinct) - 1  # the anchor beside one other placement per group
    assert len(auto["measured"]["spans"]) == 3 * groups
    for x in distinct.values():
        m = x["measured"]
        assert m["anchored_to"] == "auto"
        if x["placement"] == auto["placement"]:
            assert m["anchored_spans"] is None
            continue
        scaled = m["anchored_spans"]
        if scaled is None:  # disturbed rounds: raw spans kept
            continue
        assert len(scaled) <= 3 and m["ci95"][0] <= m["throughput"] <= m["ci95"][1]
        assert m["throughput"] == pytest.approx(statistics.median(scaled))


def test_the_runoff_measures_the_fastest_again_in_one_group_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BenchOptions.runoff``: after the groups, the anchor and the plans that could be the
    best run once more side by side; their records then come from that group alone (ratios
    to the anchor's spans in it), and say what their first group measured."""
    from hycq import bench as hb

    chosen: list[list[Any]] = []
    runoff = hb._runoff

    def forced(runs: list[Any], done: dict[Any, Any], size: int) -> list[Any]:
        # which plans come near the best is the machine's to say: when none would run
        # off, take one plan from each of two groups so the merge is always exercised
        picked = runoff(runs, done, size) or [runs[0][0][0], runs[0][0][1], runs[1][0][1]]
        chosen.append(picked)
        return picked

    monkeypatch.setattr(hb, "_runoff", forced)
    records = _bench_every_placement(tmp_path, interleave=3)
    distinct = {json.dumps(x["placement"], sort_keys=True): x for x in records}
    groups = -(-(len(distinct) - 1) // 2)  # the anchor beside two others per group
    assert groups >= 2 and len(chosen) == 1
    auto = next(x for x in records if x["plan"] == "auto")
    assert auto["measured"]["runoff"] and len(auto["measured"]["spans"]) == 3 * (groups + 1)
    others = [x for x in distinct.values() if x["placement"] != auto["placement"]]
    ran = [x for x in others if x["measured"]["runoff"]]
    assert 1 <= len(ran) == len(chosen[0]) - 1 <= 2
    for x in others:
        m = x["measured"]
        assert (m["first_group_throughput"] is not None) == (x in ran)
        if x in ran:
            assert len(m["spans"]) == 3  # the run-off's spans, not its group's
            if m["anchored_spans"] is not None:
                assert m["throughput"] == pytest.approx(statistics.median(m["anchored_spans"]))


@pytest.mark.parametrize("preroll", [0, 2])
def test_each_plan_runs_its_preroll_untimed_before_every_span(
    smartplug, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preroll: int
) -> None:
    """``BenchOptions.preroll``: side by side, every plan ingests ``preroll`` more
    event-seconds before each of its spans; they are neither timed nor counted (tuples,
    result rows, operator metrics). A plan measured alone has none."""
    from hycq import bench as hb

    fed: list[list[int]] = []
    make_engine = Assembly.make_engine

    def counting(self: Assembly, emit: Any) -> Any:
        engine = make_engine(self, emit)
        seen = [0]
        fed.append(seen)
        ingest = engine.ingest

        def counted(stream: str, batch: Any, ts: int) -> Any:
            seen[0] += batch.num_rows
            return ingest(stream, batch, ts)

        engine.ingest = counted
        return engine

    monkeypatch.setattr(Assembly, "make_engine", counting)
    loaded, placements = _row_and_column(tmp_path)
    plan = loaded.plan
    o = hb.BenchOptions(
        rates=[500.0], measure_seconds=2, repeat=3, max_repeat=3, preroll=preroll,
        operator_metrics=True,
    )  # fmt: skip
    row, col = hb.measure_point(loaded, plan, placements, 500.0, o)
    untimed = (row.warm_s + hb.SETTLE_S) * 500
    assert row.tuples_measured == col.tuples_measured == 3 * 2 * 500
    assert fed[0][0] == fed[1][0] == untimed + 3 * (preroll + 2) * 500
    assert row.results == col.results > 0
    windows = [i for i in plan.topological() if plan.op(i).kind == "window"]
    assert [col.operators[w]["tuples_out"] for w in windows] == [col.tuples_measured]
    fed.clear()
    hb.measure_point(loaded, plan, placements[:1], 500.0, o)
    assert fed[0][0] == untimed + 3 * 2 * 500
