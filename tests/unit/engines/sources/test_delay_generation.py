"""Induced disorder in generated data (``--delay zipf:MAX,SKEW``): the delays follow the stated
Zipf distribution, the rows are in arrival order, and nothing but the timestamps changes."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest
from scipy import stats

from engines.sources.delays import DelaySpec, parse_delay
from engines.sources.keyed import KeyedGenerator, KeyedStream, parse_stream_spec
from engines.sources.smartplug import SmartPlugGenerator, generate_to_file
from optimizer.ir.errors import OptionError
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[4]


def _zipf_pmf(max_ticks: int, skew: float) -> np.ndarray:
    """P(d) ~ (d + 1)^-skew on 0..max, written out independently of the module."""
    w = np.array([(d + 1) ** -skew for d in range(max_ticks + 1)])
    return w / w.sum()


@pytest.mark.parametrize(("max_s", "skew", "unit"), [(20, 2.0, "s"), (2, 3.0, "ms"), (5, 0.0, "s")])
def test_keyed_delays_follow_the_zipf_distribution(max_s: float, skew: float, unit: str) -> None:
    spec = DelaySpec(max_s, skew)
    plain = KeyedStream("r", rate=200, keys=10, time_unit=unit)
    late = dataclasses.replace(plain, delay=spec)
    a = KeyedGenerator(plain, seed=7).table(300)
    b = KeyedGenerator(late, seed=7).table(300)
    # Same tuples, same (arrival) order; only ts moved back.
    assert a.column("k").equals(b.column("k")) and a.column("v").equals(b.column("v"))
    arrival = a.column("ts").to_numpy()
    delays = arrival - b.column("ts").to_numpy()
    tps = 1 if unit == "s" else 1000
    top = round(max_s * tps)
    assert delays.min() >= 0 and delays.max() <= top
    assert np.all(np.diff(arrival) >= 0)  # the file order is the arrival order
    pmf = _zipf_pmf(top, skew)
    if top > 200:  # chi-square on the head, the tail pooled into one bin
        head = 30
        observed = np.append(np.bincount(delays, minlength=top + 1)[:head], (delays >= head).sum())
        expected = np.append(pmf[:head], pmf[head:].sum()) * len(delays)
    else:
        observed = np.bincount(delays, minlength=top + 1)
        expected = pmf * len(delays)
    keep = expected >= 5  # pool bins too small for the test
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    p = stats.chisquare(obs, exp).pvalue
    assert p > 0.001, (p, obs[:10], exp[:10])


def test_out_of_order_share_matches_the_distribution() -> None:
    """With skew 2 over 0..20 s, P(delay = 0) = 1 / H(21, 2) = 0.6307...; about that share
    of a 100/s stream has ts == its arrival instant."""
    late = KeyedStream("x", rate=100, time_unit="ms", delay=parse_delay("zipf:20s,2", "t"))
    plain = dataclasses.replace(late, delay=None)
    d = (
        KeyedGenerator(plain, 3).table(600).column("ts").to_numpy()
        - KeyedGenerator(late, 3).table(600).column("ts").to_numpy()
    )
    h = sum(1 / (i + 1) ** 2 for i in range(20001))
    assert abs(np.mean(d == 0) - 1 / h) < 0.01
    assert d.max() > 1000  # some tuples seconds late


def test_delays_do_not_depend_on_batching() -> None:
    s = KeyedStream("r", rate=50, time_unit="ms", delay=DelaySpec(1.0, 1.5))
    gen = KeyedGenerator(s, seed=1)
    one = np.concatenate([b.column("ts").to_numpy() for b in gen.batches(40, 1)])
    big = np.concatenate([b.column("ts").to_numpy() for b in gen.batches(40, 13)])
    assert np.array_equal(one, big)


def test_smartplug_delays_keep_everything_but_ts(tmp_path: Path) -> None:
    spec = DelaySpec(3, 2.0)
    path = tmp_path / "r.parquet"
    generate_to_file(path, seconds=30, houses=1, seed=5, delay=spec)
    import pyarrow.parquet as pq

    late = pq.read_table(path)
    plain = SmartPlugGenerator(houses=1, seed=5).table(30)
    assert late.drop(["ts"]).equals(plain.drop(["ts"]))
    d = plain.column("ts").to_numpy() - late.column("ts").to_numpy()
    assert d.min() >= 0 and d.max() <= 3 and (d > 0).any()
    observed = np.bincount(d, minlength=4)
    p = stats.chisquare(observed, _zipf_pmf(3, 2.0) * len(d)).pvalue
    assert p > 0.001


def test_stream_spec_takes_a_delay() -> None:
    s = parse_stream_spec("s:delay=zipf:20s,3,rate=100,unit=ms", KeyedStream("x"))
    assert s.delay == DelaySpec(20.0, 3.0) and s.rate == 100 and s.time_unit == "ms"
    assert parse_delay("zipf:500ms,2", "--delay") == DelaySpec(0.5, 2.0)


@pytest.mark.parametrize(
    "bad", ["zipf:20s", "uniform:3,1", "zipf:-1s,2", "zipf:3s,-1", "zipf:2d,1"]
)
def test_bad_delay_specs_are_option_errors(bad: str) -> None:
    with pytest.raises(OptionError):
        parse_delay(bad, "--delay")


def test_a_delay_below_the_time_unit_is_refused() -> None:
    with pytest.raises(OptionError, match="whole number of ticks"):
        KeyedStream("r", delay=DelaySpec(0.5, 2.0))  # seconds stream, 500 ms maximum


def _hycq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_cli_writes_per_stream_delays_and_records_them(tmp_path: Path) -> None:
    out = tmp_path / "w"
    proc = _hycq(
        "data", "generate", "--generator", "keyed", "--out", out, "--seconds", "20",
        "--rate", "50", "--time-unit", "ms", "--delay", "zipf:2s,2",
        "--stream", "r", "--stream", "s:delay=zipf:500ms,3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    catalog = (out / "catalog.toml").read_text()
    assert "zipf:2s,2" in catalog and "zipf:500ms,3" in catalog
    r = pacsv.read_csv(out / "r.csv").column("ts").to_numpy()
    s = pacsv.read_csv(out / "s.csv").column("ts").to_numpy()
    arrival = 1_400_000_000_000 + np.arange(len(s)) * 20
    assert (arrival - s).min() >= 0 and (arrival - s).max() <= 500
    assert (np.diff(r) < 0).any()  # out of order in ts


def test_cli_smartplug_delay_note_and_bad_delay(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    proc = _hycq("data", "generate", "--out", out, "--seconds", "5", "--houses", "1",
                 "--delay", "zipf:4s,2")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "zipf:4s,2" in (tmp_path / "r.csv.README.md").read_text()
    bad = _hycq("data", "generate", "--out", tmp_path / "x.csv", "--delay", "zipf:1.5s,2")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "ticks" in bad.stderr
    assert not (tmp_path / "x.csv").exists()


def test_skew_schedule_redraws_within_bounds() -> None:
    from engines.sources.qddh_joins import skew_schedule

    p = skew_schedule(42, "s1_a1", 6 * 3600.0)
    assert p.values[0] == 1.0 and p.times[0] == 0.0
    gaps = np.diff(p.times)
    assert len(gaps) > 10 and gaps.min() >= 60 and gaps.max() <= 600
    assert all(0 <= v <= 5 for v in p.values[1:])
    assert skew_schedule(42, "s1_a1", 3600.0).values == skew_schedule(42, "s1_a1", 3600.0).values


def test_cli_x4_workload(tmp_path: Path) -> None:
    from optimizer.sql.catalog import load_catalog

    out = tmp_path / "x4"
    proc = _hycq("data", "generate", "--generator", "x4", "--out", out, "--seconds", "30")
    assert proc.returncode == 0, proc.stderr
    cat = load_catalog(out / "catalog.toml")
    assert sorted(cat.streams) == ["t1", "t2", "t3", "t4"]
    t1 = pacsv.read_csv(out / "t1.csv")
    assert t1.column_names == ["ts", "a1", "a2", "a3"] and t1.num_rows == 3000
    for name in ("a1", "a2", "a3"):
        values = t1.column(name).to_numpy()
        assert values.min() >= 1 and values.max() <= 100
    arrival = 1_400_000_000_000 + np.arange(3000) * 10
    d = arrival - t1.column("ts").to_numpy()
    assert d.min() >= 0 and d.max() <= 20000
    readme = (out / "README.md").read_text()
    assert "zipf:20s,4" in readme and "t1.a3" in readme
    bad = _hycq("data", "generate", "--generator", "x3", "--out", tmp_path / "y", "--delay",
                "zipf:2s,2")  # fmt: skip
    assert bad.returncode == 2 and "--delay" in bad.stderr and not (tmp_path / "y").exists()
