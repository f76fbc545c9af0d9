"""Deterministic synthetic DEBS 2014 smart-plug readings, calibrated on the real samples.

The stream has the raw DEBS 2014 Grand Challenge layout (``SCHEMA``): every plug, identified
by ``(house_id, household_id, plug_id)``, has two sensors, *work* (``property`` 0, cumulative
kWh) and *load* (``property`` 1, instant W). The constants below were measured on the real
samples in ``../shared/data``; ``docs/data.md`` gives the measurements and the model.

Model, per plug:

* a class drawn once: always off, always on or intermittent (off most of the time, switching
  on for a while now and then); an off plug reports load 0 and its work stays constant;
* when on, a *level* in W that is redrawn now and then around a per-plug typical level, so that
  across plugs the non-zero loads follow the measured distribution (an empirical quantile table
  used through a Gaussian copula), a minute-scale wander factor on the level, and a small
  multiplicative noise (per-plug sd) on every reading;
* work integrates the noise-free load: ``kWh += W * 1 s / 3.6e6`` each event-second.

Emission: sensors are ordered by (house, household, plug), work before load, and a global
round-robin cursor visits them. Event-second ``t`` (``ts = start + t``) emits
``floor(rate * (t + 1)) - floor(rate * t)`` tuples, i.e. exactly ``rate`` when it is an integer
and a long-run average of exactly ``rate`` otherwise. At the natural rate (2 tuples per plug
per second) every sensor reports once per second; above it, sensors report several times within
a second (a faster sensor, as the dissertation's replay tool simulated); below it, less often.
With a ``rate_profile`` (optimizer.ir.profile: steps and linear ramps over event time, e.g.
``0:1000,60:40000,120:5000``) event-second ``t`` emits ``floor(C(t + 1)) - floor(C(t))``
tuples, ``C`` the integral of the profile: a drifting rate, second by second.

Determinism: the topology comes from ``PCG64(seed)``; the time-varying draws come from three
jumped copies of it (state switches, level changes, reading noise), each consumed in event-time
order, so the output does not depend on ``batch_seconds``. Uniforms are built from the raw
64-bit PCG64 output (not from numpy's distribution code), normals by ``scipy.special.ndtri``.

Example:
    >>> gen = SmartPlugGenerator(houses=2, seed=7, households_per_house=1, plugs_per_household=3)
    >>> gen.plugs, gen.natural_rate
    (6, 12)
    >>> t = gen.table(2)
    >>> t.num_rows, t.column("ts").to_pylist()[::12]
    (24, [1377986401, 1377986402])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from scipy import special

from engines.output_files import OutputFile
from engines.sources.delays import DelaySpec, delay_rng
from optimizer.ir import limits
from optimizer.ir.errors import OptionError
from optimizer.ir.profile import Profile

#: The smart-plug stream schema (names and types in this order).
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.int64()),
        pa.field("value", pa.float64()),
        pa.field("property", pa.int32()),
        pa.field("plug_id", pa.int32()),
        pa.field("household_id", pa.int32()),
        pa.field("house_id", pa.int32()),
    ]
)

#: Column names of the raw DEBS CSV (no header in the files; ``timestamp`` is ``ts``).
DEBS_COLUMNS = ("id", "timestamp", "value", "property", "plug_id", "household_id", "house_id")

WORK = 0  #: ``property`` of a work reading (kWh, cumulative)
LOAD = 1  #: ``property`` of a load reading (W)

#: First timestamp of the real data (2013-09-01 00:00:01 CEST), epoch seconds.
DEFAULT_START = 1377986401

# ---------------------------------------------------------------------------------------------
# Measured on the real samples (docs/data.md has the method and more numbers).
# ---------------------------------------------------------------------------------------------

#: Houses in the DEBS 2014 data.
REAL_HOUSES = 40
#: Plugs per house in the real data (1,677 plugs in 40 houses; the generator's default draw).
REAL_PLUGS_PER_HOUSE = 1677 / 40
#: Most plugs a generator may have (its per-plug state is a few arrays of this length), and
#: most houses (optimizer/ir/limits.py).
MAX_PLUGS = limits.MAX_PLUGS
MAX_HOUSES = limits.MAX_HOUSES
#: Households per house -> number of houses, first-2s sample (40 houses, 285 households).
HOUSEHOLDS_PER_HOUSE: dict[int, int] = {
    1: 2, 2: 3, 3: 2, 4: 9, 5: 3, 6: 5, 7: 1, 8: 2, 9: 1, 10: 2, 11: 2, 12: 1, 13: 2, 14: 3, 18: 2,
}  # fmt: skip
#: Plugs per household -> number of households, first-2s sample (285 households, 1677 plugs).
PLUGS_PER_HOUSEHOLD: dict[int, int] = {
    1: 15, 2: 30, 3: 36, 4: 42, 5: 28, 6: 21, 7: 32, 8: 12, 9: 15, 10: 17, 11: 19, 12: 10,
    13: 6, 14: 2,
}  # fmt: skip

#: Fraction of load readings that are exactly 0 (first-2s sample: 1690 of 2500).
ZERO_LOAD_FRACTION = 0.676
#: Plug classes (1-minute house-0 sample, 16.7 h: 31 of 107 plugs always 0, 40 never 0,
#: 36 mixed). The intermittent share and its on-fraction are taken as measured; always-off vs
#: always-on is split so that the zero fraction is ZERO_LOAD_FRACTION (all 40 houses).
P_INTERMITTENT = 0.336
INTERMITTENT_ON_FRACTION = 0.079  # mean on-fraction of the 36 mixed plugs
P_ALWAYS_OFF = ZERO_LOAD_FRACTION - P_INTERMITTENT * (1.0 - INTERMITTENT_ON_FRACTION)  # 0.367
P_ALWAYS_ON = 1.0 - P_ALWAYS_OFF - P_INTERMITTENT  # 0.297
#: An intermittent plug redraws its on/off state at this rate (per second); mixed plugs switch
#: 0.0143 times per minute = rate * 2 * on * (1 - on) * 60.
STATE_REDRAW_RATE = (
    0.0143 / 60.0 / (2.0 * INTERMITTENT_ON_FRACTION * (1.0 - INTERMITTENT_ON_FRACTION))
)  # 1.64e-3
#: Load dynamics, fitted by simulating the 1-minute sample (a generator at rate plugs*2/60
#: reports every sensor once a minute) against the real 107-plug house-0 minute readings:
#: per-plug autocorrelation of load, median over mostly-on plugs, at 1 / 5 / 30 / 120 min:
#: real 0.986 / 0.954 / 0.768 / 0.179, generated 0.975 / 0.925 / 0.698 / 0.204; median
#: within-plug sd of log(load): real 0.676, generated 0.683; minute-to-minute |log ratio| of
#: non-zero loads above 0.05 / 0.1 / 0.2 / 0.3 / 0.5 / 1: real 52.4 / 26.7 / 8.0 / 2.35 / 0.36
#: / 0.25 %, generated 52.2 / 25.9 / 7.4 / 2.55 / 0.60 / 0.27 %.
#:
#: A plug redraws its level around its typical one at this rate (per second; ~2.5 h).
LEVEL_REDRAW_RATE = 1.0 / 9000.0
#: Share of the (normal-score) variance of the non-zero loads that is within a plug over time.
LEVEL_WITHIN_SHARE = 0.5
#: Minute-scale wander: a plug redraws a factor exp(N(0, WANDER_LOG_SD)) on its level at
#: WANDER_RATE per second (about every 10 minutes).
WANDER_RATE = 0.1 / 60.0
WANDER_LOG_SD = 0.12
#: Per-reading multiplicative noise: median over plugs of the sd of log(load). Minute-to-minute
#: per-plug median |log ratio| at the 10 / 50 / 90% plug is 0.030 / 0.051 / 0.096, i.e.
#: noise sd 0.031 / 0.054 / 0.101 (Gaussian: median |x - y| = 0.954 sd); second-to-second
#: (first-2s sample) the median |log ratio| is 0.047, consistent with sd 0.054.
LOAD_NOISE_LOG_SD = 0.054
#: Spread of the per-plug noise sd (sd of its log): log(0.101 / 0.031) / (2 * 1.2816).
LOAD_NOISE_SPREAD = 0.456
#: Quantiles of the non-zero loads (W): every 2.5% of the first-2s sample (810 values) up to
#: 97.5%, its 99% point, then the 99.9% point and the maximum of the 1-minute sample (whose
#: 41,788 non-zero values reach 2903.7 W; the first-2s maximum is 603.3 W).
LOAD_QUANTILE_PROBS = (*(i / 40 for i in range(40)), 0.99, 0.999, 1.0)
LOAD_QUANTILES_W = (
    3.019, 4.568, 5.943, 6.946, 7.944, 8.44, 9.561, 10.485, 11.736, 12.337,
    13.346, 14.894, 16.144, 17.714, 18.684, 19.774, 21.233, 22.655, 24.947, 26.801,
    28.568, 30.638, 32.462, 34.858, 38.215, 41.395, 46.099, 50.779, 58.883, 69.897,
    88.34, 127.756, 162.56, 186.613, 217.492, 241.884, 277.126, 314.785, 374.851, 468.682,
    516.516, 745.416, 2903.738,
)  # fmt: skip
#: Initial work (kWh) per plug is lognormal with these log-mean / log-sd (first-2s sample: one
#: value per plug, 0.161 .. 173.86 kWh; the sample only has 11 distinct work values).
WORK_LOG_MEAN = 1.267
WORK_LOG_SD = 1.946
#: Arrival rate of the real merged stream (slope of id over ts in the 1-minute samples).
REAL_STREAM_RATE = 1664.0

_KWH_PER_WATT_SECOND = 1.0 / 3.6e6
_Q_PROBS = np.asarray(LOAD_QUANTILE_PROBS, dtype=np.float64)
_Q_LOGS = np.log(np.asarray(LOAD_QUANTILES_W, dtype=np.float64))
_ALWAYS_OFF, _INTERMITTENT, _ALWAYS_ON = 0, 1, 2
#: Cells (seconds x plugs) evolved at once; bounds memory for large batch_seconds.
_CHUNK_CELLS = 1 << 18
#: Largest timestamp the run-time accepts (engines.runtime.MAX_TIMESTAMP).
_MAX_TS = 2**62
#: Most rows in one emitted batch: bounds memory at any rate (``--rate 1e10`` included).
MAX_BATCH_ROWS = 1 << 17
#: Event-seconds per batch when writing a file (batches are still at most MAX_BATCH_ROWS).
_BATCH_SECONDS = 3600
_INV_2_53 = 1.0 / 9007199254740992.0


def _uniform(bits: np.random.BitGenerator, n: int) -> np.ndarray:
    """n uniforms in the open interval (0, 1) from the raw 64-bit PCG64 output."""
    raw = np.asarray(bits.random_raw(n), dtype=np.uint64)
    return ((raw >> np.uint64(11)).astype(np.float64) + 0.5) * _INV_2_53


def _stratified(bits: np.random.BitGenerator, n: int) -> np.ndarray:
    """n uniforms, one in each of the strata [i/n, (i+1)/n), in random order."""
    u = (np.arange(n) + _uniform(bits, n)) / n
    order = np.argsort(_uniform(bits, n), kind="stable")
    return u[order]


def _draw_counts(bits: np.random.BitGenerator, table: dict[int, int], n: int) -> np.ndarray:
    """n counts from an empirical distribution by stratified sampling.

    With n equal to the sample size the result is a permutation of the sample itself.
    """
    sample = np.repeat(np.array(list(table), dtype=np.int64), list(table.values()))
    sample.sort()
    idx = np.minimum((_stratified(bits, n) * len(sample)).astype(np.int64), len(sample) - 1)
    return sample[idx]


def _local_ids(counts: np.ndarray) -> np.ndarray:
    """0..counts[i]-1 for every group i, concatenated."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def _level_from_score(z: np.ndarray) -> np.ndarray:
    """Load level (W) of a standard-normal score through the measured quantile table."""
    return np.exp(np.interp(special.ndtr(z), _Q_PROBS, _Q_LOGS))


def _ffill(event: np.ndarray, values: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """(B, P): values[t, p] at the last event at or before t, else carry[p]."""
    b, p = event.shape
    idx = np.where(event, np.arange(b)[:, None], -1)
    np.maximum.accumulate(idx, axis=0, out=idx)
    picked = values[np.maximum(idx, 0), np.arange(p)]
    return np.where(idx >= 0, picked, carry)


@dataclass
class _Run:
    """The mutable state of one pass over the stream."""

    on: np.ndarray  # (P,) bool
    level: np.ndarray  # (P,) float64, W when on
    wander: np.ndarray  # (P,) float64, factor on the level
    work: np.ndarray  # (P,) float64, kWh at the start of the next second
    state_bits: np.random.PCG64
    level_bits: np.random.PCG64
    noise_bits: np.random.PCG64


def _check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise OptionError(
            f"smart-plug generator: {name} must be an integer >= {minimum}, got {value!r}"
        )
    if maximum is not None and value > maximum:
        raise OptionError(f"smart-plug generator: at most {maximum:,} {name}, got {value:,}")
    return int(value)


class SmartPlugGenerator:
    """Deterministic synthetic smart-plug stream (see the module docstring for the model).

    Args:
        houses: number of houses (the real data has 40).
        seed: random seed; the same seed gives the same bytes on every run.
        rate: tuples per event-second; None = natural rate, 2 tuples per plug.
        start: epoch second of the first event-second.
        households_per_house: fixed fan-out instead of the measured distribution.
        plugs_per_household: fixed fan-out instead of the measured distribution.
        rate_profile: a rate that changes over event time (seconds after ``start``); it
            replaces ``rate``, and ``rate`` reports its first value.
        plugs: exactly this many plugs (another data shape than the real 1,677): the
            houses needed are drawn from the measured distributions and the topology is cut
            after the ``plugs``-th plug; ``houses`` is then derived, not given.
        load_share: the fraction of tuples that are load readings (``property`` 1); the
            rest are work readings. 0.5 (the real stream: both sensors report alike) keeps
            the round robin over sensors; otherwise the cursor visits plugs in turn and
            every tuple is a load reading where ``floor((g + 1) f) > floor(g f)``.
    """

    def __init__(
        self,
        houses: int = REAL_HOUSES,
        seed: int = 42,
        rate: float | None = None,
        start: int = DEFAULT_START,
        households_per_house: int | None = None,
        plugs_per_household: int | None = None,
        rate_profile: Profile | None = None,
        plugs: int | None = None,
        load_share: float = 0.5,
    ) -> None:
        self._profile = rate_profile
        if plugs is not None:
            plugs = _check_int("plugs", plugs, 1)
            if plugs > MAX_PLUGS:
                raise OptionError(
                    f"smart-plug generator: at most {MAX_PLUGS:,} plugs, got {plugs:,}"
                )
            # Enough houses for that many plugs at the measured fan-outs (about 42 plugs a
            # house), with room to spare; the topology is cut after the last plug.
            houses = max(1, math.ceil(plugs / REAL_PLUGS_PER_HOUSE * 1.25) + 2)
        if (
            isinstance(load_share, bool)
            or not isinstance(load_share, int | float)
            or not 0.0 <= load_share <= 1.0
        ):
            raise OptionError(
                f"smart-plug generator: load_share must be in [0, 1], got {load_share!r}"
            )
        self._load_share = Fraction(load_share).limit_denominator(10_000)
        if rate_profile is not None:
            rate = rate_profile.first if rate_profile.first > 0 else rate_profile.highest
        self._houses = _check_int("houses", houses, 1, MAX_HOUSES if plugs is None else None)
        self._seed = _check_int("seed", seed, 0)
        self._start = _check_int("start", start, 0)
        if households_per_house is not None:
            households_per_house = _check_int("households_per_house", households_per_house, 1)
        if plugs_per_household is not None:
            plugs_per_household = _check_int("plugs_per_household", plugs_per_household, 1)

        if rate is not None:
            if (
                isinstance(rate, bool)
                or not isinstance(rate, int | float | np.number)
                or not (math.isfinite(rate) and rate > 0)
            ):
                raise OptionError(
                    f"smart-plug generator: rate must be a positive number, got {rate!r}"
                )
            if Fraction(rate).limit_denominator(1_000_000) <= 0:
                raise OptionError(f"smart-plug generator: rate {rate!r} is too small")

        bits = np.random.Generator(np.random.PCG64(self._seed)).bit_generator
        # Topology: houses -> households -> plugs, ids contiguous from 0 at every level.
        if households_per_house is None:
            hh_counts = _draw_counts(bits, HOUSEHOLDS_PER_HOUSE, self._houses)
        else:
            hh_counts = np.full(self._houses, households_per_house, dtype=np.int64)
        if plugs_per_household is None:
            plug_counts = _draw_counts(bits, PLUGS_PER_HOUSEHOLD, int(hh_counts.sum()))
        else:
            plug_counts = np.full(int(hh_counts.sum()), plugs_per_household, dtype=np.int64)
        if plugs is not None:
            while int(plug_counts.sum()) < plugs:  # unlucky draws: another house's worth
                extra = _draw_counts(bits, HOUSEHOLDS_PER_HOUSE, 1)
                hh_counts = np.append(hh_counts, extra)
                plug_counts = np.append(
                    plug_counts, _draw_counts(bits, PLUGS_PER_HOUSEHOLD, int(extra[0]))
                )
                self._houses += 1
            # Cut after the plugs-th plug: its household keeps only the plugs before it.
            cum = np.cumsum(plug_counts)
            last = int(np.searchsorted(cum, plugs))
            plug_counts = plug_counts[: last + 1].copy()
            plug_counts[-1] -= int(cum[last]) - plugs
            hh_cum = np.cumsum(hh_counts)
            last_house = int(np.searchsorted(hh_cum, last + 1))
            hh_counts = hh_counts[: last_house + 1].copy()
            hh_counts[-1] -= int(hh_cum[last_house]) - (last + 1)
            self._houses = last_house + 1
        n_households = int(hh_counts.sum())
        hh_house = np.repeat(np.arange(self._houses, dtype=np.int64), hh_counts)
        hh_local = _local_ids(hh_counts)
        n_plugs = int(plug_counts.sum())
        plug_hh = np.repeat(np.arange(n_households), plug_counts)
        plug_local = _local_ids(plug_counts)
        self._house_id = hh_house[plug_hh].astype(np.int32)
        self._household_id = hh_local[plug_hh].astype(np.int32)
        self._plug_id = plug_local.astype(np.int32)
        self._households = n_households

        # Per-plug behaviour.
        u = _stratified(bits, n_plugs)
        klass = np.full(n_plugs, _ALWAYS_ON, dtype=np.int8)
        klass[u < P_ALWAYS_OFF + P_INTERMITTENT] = _INTERMITTENT
        klass[u < P_ALWAYS_OFF] = _ALWAYS_OFF
        self._intermittent = klass == _INTERMITTENT
        self._on0 = (klass == _ALWAYS_ON) | (
            self._intermittent & (_uniform(bits, n_plugs) < INTERMITTENT_ON_FRACTION)
        )
        # Typical level of each plug (normal score, stratified) and its starting level.
        self._score = special.ndtri(_stratified(bits, n_plugs)) * math.sqrt(1 - LEVEL_WITHIN_SHARE)
        self._level0 = _level_from_score(
            self._score + math.sqrt(LEVEL_WITHIN_SHARE) * special.ndtri(_uniform(bits, n_plugs))
        )
        self._work0 = np.exp(WORK_LOG_MEAN + WORK_LOG_SD * special.ndtri(_uniform(bits, n_plugs)))
        self._wander0 = np.exp(WANDER_LOG_SD * special.ndtri(_uniform(bits, n_plugs)))
        self._noise_sd = LOAD_NOISE_LOG_SD * np.exp(
            LOAD_NOISE_SPREAD * special.ndtri(_uniform(bits, n_plugs))
        )

        self._rate = (
            Fraction(2 * n_plugs) if rate is None else Fraction(rate).limit_denominator(1_000_000)
        )

    # -- description ---------------------------------------------------------------------------

    @property
    def houses(self) -> int:
        return self._houses

    @property
    def households(self) -> int:
        return self._households

    @property
    def plugs(self) -> int:
        return len(self._plug_id)

    @property
    def sensors(self) -> int:
        """Two per plug: work and load."""
        return 2 * self.plugs

    @property
    def natural_rate(self) -> int:
        """Tuples per event-second when every sensor reports once per second."""
        return self.sensors

    @property
    def rate(self) -> float:
        """Tuples per event-second actually emitted (long-run average)."""
        return float(self._rate)

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def start(self) -> int:
        return self._start

    @property
    def topology(self) -> pa.Table:
        """One row per plug (house_id, household_id, plug_id), in emission order."""
        return pa.table(
            {
                "house_id": self._house_id,
                "household_id": self._household_id,
                "plug_id": self._plug_id,
            }
        )

    def rows(self, seconds: float) -> int:
        """Number of tuples emitted for ``seconds`` event-seconds."""
        return self._end_index(self._check_seconds(seconds))

    # -- emission ------------------------------------------------------------------------------

    def batches(self, seconds: float, batch_seconds: int = 1) -> Iterator[pa.RecordBatch]:
        """The stream of the first ``seconds`` event-seconds, in event-time order.

        Yields record batches (``SCHEMA``) of at most ``MAX_BATCH_ROWS`` rows: for every
        ``k``, the tuples of event-seconds ``[k * batch_seconds, (k + 1) * batch_seconds)`` as
        one batch (empty at low rates), or as consecutive batches when there are more (at
        high rates one second is split, so memory stays bounded at any rate). A fractional
        ``seconds`` ends with the first part of the last second's tuples. The tuples do not
        depend on ``batch_seconds``.
        """
        seconds = self._check_seconds(seconds)
        batch_seconds = _check_int("batch_seconds", batch_seconds, 1)
        return self._emit(seconds, batch_seconds)

    def table(self, seconds: float) -> pa.Table:
        """The first ``seconds`` event-seconds as one table."""
        return pa.Table.from_batches(list(self.batches(seconds, _BATCH_SECONDS)), schema=SCHEMA)

    def _check_seconds(self, seconds: float) -> float:
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float | np.number)
            or not (math.isfinite(seconds) and seconds >= 0)
        ):
            raise OptionError(
                f"smart-plug generator: seconds must be a non-negative number, got {seconds!r}"
            )
        highest = self._rate.numerator
        if self._profile is not None:
            highest = math.ceil(self._profile.highest)
        if (math.ceil(seconds) + 1) * highest >= 2**62:
            raise OptionError(
                f"smart-plug generator: {seconds:g} s at up to {highest:,} tuples/s are more "
                "tuples than hycq numbers (2^62)",
                hint="lower the rate or the span",
            )
        if self._start + math.ceil(seconds) > _MAX_TS:
            raise OptionError(
                f"smart-plug generator: {seconds} s from start {self._start} passes the largest "
                f"timestamp hycq accepts ({_MAX_TS})"
            )
        return float(seconds)

    def _cum(self, t: np.ndarray) -> np.ndarray:
        """Tuples emitted before event-second t (int64 array in, int64 array out)."""
        if self._profile is not None:
            c = self._profile.cumulative(t.astype(np.float64))
            return np.floor(c + 1e-6).astype(np.int64)
        return (t * self._rate.numerator) // self._rate.denominator

    def _end_index(self, seconds: float) -> int:
        full = math.floor(seconds)
        c0, c1 = (int(x) for x in self._cum(np.array([full, full + 1], dtype=np.int64)))
        return c0 + math.floor((seconds - full) * (c1 - c0))

    def _new_run(self) -> _Run:
        root = np.random.PCG64(self._seed)
        return _Run(
            on=self._on0.copy(),
            level=self._level0.copy(),
            wander=self._wander0.copy(),
            work=self._work0.copy(),
            state_bits=root.jumped(1),
            level_bits=root.jumped(2),
            noise_bits=root.jumped(3),
        )

    def _emit(self, seconds: float, batch_seconds: int) -> Iterator[pa.RecordBatch]:
        run = self._new_run()
        limit = self._end_index(seconds)
        n_seconds = math.ceil(seconds)
        chunk = max(1, _CHUNK_CELLS // max(1, self.plugs))
        for b0 in range(0, n_seconds, batch_seconds):
            b1 = min(n_seconds, b0 + batch_seconds)
            parts: list[pa.RecordBatch] = []
            size = 0
            for c0 in range(b0, b1, chunk):
                for piece in self._chunk(run, c0, min(b1, c0 + chunk), limit):
                    if parts and size + piece.num_rows > MAX_BATCH_ROWS:
                        yield _concat(parts)
                        parts, size = [], 0
                    parts.append(piece)
                    size += piece.num_rows
            if parts:
                yield _concat(parts)

    def _evolve(self, run: _Run, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Advance the plugs by b seconds: load (b, P) in W and work (b + 1, P) in kWh.

        ``work[t]`` is the energy at the start of second t (``work[b]`` starts the next chunk).
        """
        p = self.plugs
        # On/off: an intermittent plug redraws its state; u < R is the event and, given it,
        # u / R is uniform, so u < R * on_fraction draws the new state from the same number.
        u = _uniform(run.state_bits, b * p).reshape(b, p)
        event = (u < STATE_REDRAW_RATE) & self._intermittent
        if event.any():
            new_on = u < STATE_REDRAW_RATE * INTERMITTENT_ON_FRACTION
            on = _ffill(event, new_on, run.on)
        else:
            on = np.broadcast_to(run.on, (b, p))
        run.on = on[-1].copy()
        # Level: every plug redraws its level around its typical one (u < R_level) or its
        # minute-scale wander factor (R_level <= u < R_level + R_wander), one uniform for both.
        u = _uniform(run.level_bits, b * p).reshape(b, p)
        event = u < LEVEL_REDRAW_RATE
        if event.any():
            rows, cols = np.nonzero(event)
            z = self._score[cols] + math.sqrt(LEVEL_WITHIN_SHARE) * special.ndtri(
                u[rows, cols] / LEVEL_REDRAW_RATE
            )
            values = np.zeros((b, p))
            values[rows, cols] = _level_from_score(z)
            level = _ffill(event, values, run.level)
        else:
            level = np.broadcast_to(run.level, (b, p))
        run.level = level[-1].copy()
        event = (u >= LEVEL_REDRAW_RATE) & (u < LEVEL_REDRAW_RATE + WANDER_RATE)
        if event.any():
            rows, cols = np.nonzero(event)
            values = np.zeros((b, p))
            values[rows, cols] = np.exp(
                WANDER_LOG_SD * special.ndtri((u[rows, cols] - LEVEL_REDRAW_RATE) / WANDER_RATE)
            )
            wander = _ffill(event, values, run.wander)
        else:
            wander = np.broadcast_to(run.wander, (b, p))
        run.wander = wander[-1].copy()
        load = np.where(on, level * wander, 0.0)
        work = np.empty((b + 1, p))
        work[0] = run.work
        np.cumsum(load * _KWH_PER_WATT_SECOND, axis=0, out=work[1:])
        work[1:] += run.work
        run.work = work[b].copy()
        return load, work

    def _chunk(self, run: _Run, c0: int, c1: int, limit: int) -> Iterator[pa.RecordBatch]:
        """The tuples of event-seconds [c0, c1), stopping before global index ``limit``, in
        batches of at most MAX_BATCH_ROWS (at least one, maybe empty)."""
        load, work = self._evolve(run, c1 - c0)
        bounds = self._cum(np.arange(c0, c1 + 1, dtype=np.int64))
        g0, g1 = int(bounds[0]), max(int(bounds[0]), min(int(bounds[-1]), limit))
        for a in range(g0, g1, MAX_BATCH_ROWS):
            yield self._tuples(run, c0, bounds, load, work, a, min(g1, a + MAX_BATCH_ROWS))
        if g1 == g0:
            yield self._tuples(run, c0, bounds, load, work, g0, g0)

    def _tuples(
        self,
        run: _Run,
        c0: int,
        bounds: np.ndarray,
        load: np.ndarray,
        work: np.ndarray,
        a: int,
        b: int,
    ) -> pa.RecordBatch:
        """Tuples with global indices [a, b) of the chunk starting at event-second ``c0``
        (``bounds``: first index of each of its seconds; ``load``/``work`` from _evolve)."""
        p = self.plugs
        counts = np.diff(bounds)
        g = np.arange(a, b, dtype=np.int64)
        second = np.searchsorted(bounds, g, side="right") - 1
        sensor = g % self.sensors
        plug = sensor >> 1
        if self._load_share == Fraction(1, 2):
            prop = (sensor & 1).astype(np.int32)
        else:  # a share f of load readings, spread evenly over the cursor
            f = self._load_share
            hits = ((g + 1) * f.numerator) // f.denominator - (g * f.numerator) // f.denominator
            prop = hits.astype(np.int32)
        cell = second * p + plug
        load_flat = load.ravel()
        value = np.empty(len(g), dtype=np.float64)

        li = np.flatnonzero(prop == LOAD)
        noise_sd = self._noise_sd[plug[li]]
        noise = np.exp(noise_sd * special.ndtri(_uniform(run.noise_bits, len(li))))
        value[li] = load_flat[cell[li]] * noise

        wi = np.flatnonzero(prop == WORK)
        cw, sw = cell[wi], second[wi]
        # A sensor reporting k times in a second reports the energy at k points of the second.
        frac = (g[wi] - bounds[sw]) / counts[sw]
        work_flat = work.ravel()
        x = work_flat[cw] + load_flat[cw] * (frac * _KWH_PER_WATT_SECOND)
        value[wi] = np.minimum(x, work_flat[cw + p])  # never past the next second's energy
        np.round(value, 3, out=value)

        return pa.RecordBatch.from_arrays(
            [
                pa.array(g + 1),
                pa.array(second + (self._start + c0)),
                pa.array(value),
                pa.array(prop),
                pa.array(self._plug_id[plug]),
                pa.array(self._household_id[plug]),
                pa.array(self._house_id[plug]),
            ],
            schema=SCHEMA,
        )


def _concat(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(parts) == 1:
        return parts[0]
    return pa.RecordBatch.from_arrays(
        [pa.concat_arrays([p.column(i) for p in parts]) for i in range(len(SCHEMA))],
        schema=SCHEMA,
    )


def generate_to_file(
    path: Path | str,
    seconds: float,
    rate: float | None = None,
    houses: int = REAL_HOUSES,
    seed: int = 42,
    *,
    start: int = DEFAULT_START,
    rate_profile: Profile | None = None,
    delay: DelaySpec | None = None,
    plugs: int | None = None,
    load_share: float = 0.5,
    before: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write ``seconds`` event-seconds of synthetic readings; returns the number of rows.
    ``before`` is called with the number of rows before anything is written (it may refuse
    them, engines/sources/budget.py), ``progress`` with the rows of every batch written.

    ``delay`` induces disorder (engines/sources/delays.py): the rows stay in the generator's
    order, which becomes the arrival order, and each row's ``ts`` becomes its event-second
    minus a Zipf delay of whole seconds (drawn from its own random stream, so everything else
    is the same as without).

    ``.csv`` gives the raw DEBS format (no header), ``.parquet`` / ``.pq`` Parquet with
    ``SCHEMA``. The file appears atomically: it is written to a temporary file in the same
    folder and renamed over ``path`` (engines.output_files: symlinks keep pointing at the
    new file, FIFOs and devices are written in place, the umask sets the mode).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise OptionError(
            f"cannot choose a format for '{path}': the name must end in .csv or .parquet",
            hint="e.g. readings.parquet",
        )
    gen = SmartPlugGenerator(
        houses=houses,
        seed=seed,
        rate=rate,
        start=start,
        rate_profile=rate_profile,
        plugs=plugs,
        load_share=load_share,
    )
    if delay is not None:
        delay.max_ticks(1)  # whole seconds: the stream's unit
    if before is not None:
        before(gen.rows(seconds))
    batches = gen.batches(seconds, _BATCH_SECONDS)
    if delay is not None:
        batches = _delayed(batches, delay, delay_rng(seed, "readings"))
    out = OutputFile(path, "--out")
    rows = 0
    with out, out.errors():
        if suffix == ".csv":
            options = pacsv.WriteOptions(include_header=False)
            with pacsv.CSVWriter(out.file("wb"), SCHEMA, write_options=options) as csv_writer:
                for batch in batches:
                    csv_writer.write_batch(batch)
                    rows += batch.num_rows
                    if progress is not None:
                        progress(batch.num_rows)
        else:
            with pq.ParquetWriter(out.file("wb"), SCHEMA) as pq_writer:
                for batch in batches:
                    if batch.num_rows:
                        pq_writer.write_batch(batch)
                    rows += batch.num_rows
                    if progress is not None:
                        progress(batch.num_rows)
    return rows


def _delayed(
    batches: Iterator[pa.RecordBatch], delay: DelaySpec, rng: np.random.Generator
) -> Iterator[pa.RecordBatch]:
    """The same rows, ``ts`` lowered by a Zipf delay each (whole seconds)."""
    ts_at = SCHEMA.get_field_index("ts")
    for batch in batches:
        ts = batch.column(ts_at).to_numpy() - delay.draw(rng, batch.num_rows, 1)
        yield batch.set_column(ts_at, SCHEMA.field("ts"), pa.array(ts, pa.int64()))
