"""Drifting workloads: the generated data has the profile it claims.

Rates per second measured from the output (steps and ramps, keyed and smart-plug), the
fraction passing ``v < 10`` before and after a selectivity shift, the key skew and the hot
key before and after a skew shift, the n-stream join workload's rare keys moving from the
first stream to the last, determinism by seed and batch size, and bad profiles exiting 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from engines.sources.joins import COMMON_KEYS, RARE_KEYS, join_stream_names, join_workload
from engines.sources.keyed import KeyedGenerator, KeyedStream, parse_stream_spec
from engines.sources.smartplug import SmartPlugGenerator
from optimizer.ir.errors import OptionError
from optimizer.ir.profile import parse_profile

ROOT = Path(__file__).resolve().parents[4]


def _per_second(table: pa.Table, tps: int, origin_ticks: int) -> np.ndarray:
    ts = np.asarray(table.column("ts").to_numpy()) - origin_ticks
    return np.bincount(ts // tps)


@pytest.mark.parametrize("unit", ["s", "ms"])
def test_keyed_rate_steps_and_ramps(unit: str) -> None:
    profile = parse_profile("0:100,10:2000,20:300~30:1300", "rate")
    gen = KeyedGenerator(KeyedStream("a", rate_profile=profile, time_unit=unit), seed=3)
    tps = 1 if unit == "s" else 1000
    counts = _per_second(gen.table(35), tps, gen.origin * tps)
    assert len(counts) == 35
    assert list(counts[:10]) == [100] * 10
    assert list(counts[10:20]) == [2000] * 10
    # The ramp from 300 to 1300 over 20..30 s: second t holds the mean rate over it.
    expected = [300 + 100 * (t + 0.5) for t in range(10)]
    assert np.allclose(counts[20:30], expected, atol=1)
    assert list(counts[30:]) == [1300] * 5
    assert gen.rows(35) == int(counts.sum())


def test_keyed_profile_is_deterministic_and_batch_independent() -> None:
    s = KeyedStream(
        "a",
        rate_profile=parse_profile("0:50,3:500", "rate"),
        keys_profile=parse_profile("0:10,4:30", "keys", steps_only=True),
        selectivity=parse_profile("0:0.2~5:0.7", "sel"),
        time_unit="ms",
    )
    one = KeyedGenerator(s, seed=9).table(6)
    many = pa.Table.from_batches(list(KeyedGenerator(s, seed=9).batches(6, 1)))
    big = pa.Table.from_batches(list(KeyedGenerator(s, seed=9).batches(6, 4)))
    assert one.equals(many) and one.equals(big)
    assert not one.equals(KeyedGenerator(s, seed=10).table(6))
    # Each batch spans about one event-second whatever the rate.
    sizes = [b.num_rows for b in KeyedGenerator(s, seed=9).batches(6, 1)]
    assert sizes[:3] == [50, 50, 50] and sizes[3:] == [500, 500, 500]


def test_smartplug_rate_profile_per_second() -> None:
    profile = parse_profile("0:40,5:400~10:100", "rate")
    gen = SmartPlugGenerator(houses=2, seed=4, rate_profile=profile)
    t = gen.table(12)
    counts = _per_second(t, 1, gen.start)
    assert list(counts[:5]) == [40] * 5
    assert np.allclose(counts[5:10], [400 - 60 * (k + 0.5) for k in range(5)], atol=1)
    assert list(counts[10:]) == [100, 100]
    assert t.column("id").to_pylist() == list(range(1, t.num_rows + 1))
    assert gen.rows(12) == t.num_rows


def test_selectivity_shift() -> None:
    s = parse_stream_spec("p:rate=2000,sel=0:0.1,5:0.85", KeyedStream("x"))
    t = KeyedGenerator(s, seed=1).table(10)
    v = np.asarray(t.column("v").to_numpy())
    before, after = v[:10000], v[10000:]
    assert abs((before < 10).mean() - 0.1) < 0.02
    assert abs((after < 10).mean() - 0.85) < 0.02
    assert v.min() >= 0 and v.max() < 100
    # On either side of 10 the values stay uniform (the predicate's only effect is the share).
    assert abs(np.median(after[after >= 10]) - 55) < 3


def test_skew_and_hot_key_shift() -> None:
    s = parse_stream_spec(
        "h:rate=4000,keys=50,skew=0:0,4:1.2,hot=0:0,8:7", KeyedStream("x", time_unit="s")
    )
    t = KeyedGenerator(s, seed=2).table(12)
    k = np.asarray(t.column("k").to_numpy())
    uniform, zipf, moved = k[:16000], k[16000:32000], k[32000:]
    assert np.bincount(uniform, minlength=50).max() / len(uniform) < 2.0 / 50
    weights = 1.0 / np.arange(1, 51) ** 1.2
    share = weights[0] / weights.sum()
    assert abs((zipf == 0).mean() - share) < 0.02
    assert abs((moved == 7).mean() - share) < 0.02 and (moved == 0).mean() < 0.05
    assert k.min() >= 0 and k.max() < 50


@pytest.mark.parametrize("n", [3, 6, 8])
def test_join_workload_moves_the_rare_keys(n: int) -> None:
    streams = join_workload(n, rate=200, shift_at=5)
    assert [s.name for s in streams] == join_stream_names(n)
    assert streams[-1].name == "z"
    keys = {
        s.name: np.asarray(KeyedGenerator(s, seed=7).table(10).column("k").to_numpy())
        for s in streams
    }
    first, last = keys["a"], keys["z"]
    assert first[:1000].max() >= COMMON_KEYS and first[1000:].max() < COMMON_KEYS
    assert last[:1000].max() < COMMON_KEYS and last[1000:].max() >= COMMON_KEYS
    assert last[1000:].max() < RARE_KEYS
    # Join selectivity with a common stream: about 1/20 for common keys, 1/400 for rare.
    b = keys["b"]
    sel = lambda x, y: np.mean(x[:, None] == y[None, :])  # noqa: E731
    assert abs(sel(first[:1000], b[:1000]) - 1 / RARE_KEYS) < 0.001
    assert abs(sel(first[1000:], b[1000:]) - 1 / COMMON_KEYS) < 0.01
    uniform = join_workload(n, rate=50, uniform=True)
    assert all(s.keys_profile is None and s.keys == COMMON_KEYS for s in uniform)


@pytest.mark.parametrize(
    "text",
    ["", "5:10", "0:10,0:20", "0:10,3:x", "0:-5", "0:0", "0:10;3:20", "0:10,3", "0:nan"],
)
def test_bad_rate_profiles_are_refused(text: str) -> None:
    with pytest.raises(OptionError, match="rate"):
        parse_profile(text, "rate", positive_somewhere=True)


@pytest.mark.parametrize(
    "args",
    [
        ["--generator", "keyed", "--rate-profile", "0:10,5:"],
        ["--generator", "keyed", "--rate-profile", "0:10", "--rate", "5"],
        ["--generator", "keyed", "--stream", "s:sel=0:0.1,5:1.5"],
        ["--generator", "keyed", "--stream", "s:keys=0:5~9:10"],
        ["--generator", "keyed", "--stream", "s:hot=0:0.5"],
        ["--generator", "keyed", "--join-streams", "2"],
        ["--generator", "keyed", "--shift-at", "5"],
        ["--rate-profile", "3:100"],
    ],
)
def test_bad_specs_exit_2(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / ("x.csv" if "keyed" not in args else "w")
    proc = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "data", "generate", "--out", str(out), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    assert not out.exists()
