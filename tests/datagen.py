"""Small `readings` tables for the oracle and the differential tests.

Everything here is deterministic for a given seed (plain functions) or drawn by Hypothesis
(strategies). The tables have the smart-plug schema (:data:`SCHEMA`) and are in *arrival*
order: row order is the order an engine sees the tuples.

The random tables are built to hit the cases where engines go wrong: several tuples with the
same timestamp, seconds without any tuple (gaps, hence empty windows), bursts, few plugs (so
joins and groups collide, and ``plug_id`` alone repeats across households), values with ties
and zeros (MAX / MEDIAN ties, SUM of zeros) and, optionally, a little disorder (a few tuples
arrive late; some of them so late that they are dropped as late tuples).

Example:
    >>> t = make_readings([(10, 1.5), (10, 2.0, 1), (12, 0.0, 2, 0)])
    >>> t.column("id").to_pylist(), t.column("plug_id").to_pylist()
    ([1, 2, 3], [0, 1, 2])
    >>> random_readings(seed=1, seconds=20).num_rows > 0
    True
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

#: The smart-plug stream schema (the catalog's `readings` columns, in order).
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

#: Values with deliberate ties and zeros.
VALUE_POOL = (0.0, 0.0, 0.0, 1.0, 2.5, 2.5, 7.25, 10.0, 10.0, 42.0, 100.0, 250.5, 999.9)

__all__ = [
    "SCHEMA",
    "VALUE_POOL",
    "make_readings",
    "random_readings",
    "readings_tables",
    "small_smartplug",
    "with_disorder",
]


def make_readings(rows: Iterable[Sequence[Any]], first_id: int = 1) -> pa.Table:
    """A readings table from ``(ts, value[, plug_id[, property[, household_id[, house_id]]]])``.

    Missing fields default to plug 0, property 1 (load), household 0, house 0; ids are
    ``first_id, first_id + 1, ...`` in row order.
    """
    cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for i, row in enumerate(rows):
        ts, value, *rest = row
        plug, prop, household, house = (*rest, *(0, 1, 0, 0)[len(rest) :])
        cols["id"].append(first_id + i)
        cols["ts"].append(ts)
        cols["value"].append(value)
        cols["plug_id"].append(plug)
        cols["property"].append(prop)
        cols["household_id"].append(household)
        cols["house_id"].append(house)
    return pa.table(cols, schema=SCHEMA)


def _plugs(rng: random.Random, n: int, houses: int) -> list[tuple[int, int, int]]:
    """``n`` distinct (house, household, plug) with small ids, so plug_id repeats across them."""
    universe = [(h, hh, p) for h in range(houses) for hh in range(2) for p in range(3)]
    rng.shuffle(universe)
    return sorted(universe[: max(1, min(n, len(universe)))])


def _value(rng: random.Random) -> float:
    if rng.random() < 0.7:
        return rng.choice(VALUE_POOL)
    return round(rng.uniform(0.0, 500.0), 1)


def random_readings(
    seed: int,
    seconds: int = 30,
    start: int = 1000,
    plugs: int = 3,
    houses: int = 1,
    rate: float = 3.0,
    p_gap: float = 0.15,
    p_burst: float = 0.1,
    burst: tuple[int, int] = (5, 12),
) -> pa.Table:
    """In-order random readings over ``seconds`` event-seconds from ``start``.

    Each second is a gap (no tuple) with probability ``p_gap``, a burst of ``burst`` tuples
    with probability ``p_burst``, otherwise 0 .. 2*rate tuples; all tuples of a second share
    its timestamp.
    """
    rng = random.Random(seed)
    ids = _plugs(rng, plugs, houses)
    rows = []
    for t in range(start, start + seconds):
        u = rng.random()
        if u < p_gap:
            continue
        n = rng.randint(*burst) if u < p_gap + p_burst else rng.randint(0, round(2 * rate))
        for _ in range(n):
            house, household, plug = rng.choice(ids)
            rows.append((t, _value(rng), plug, rng.choice((0, 1, 1)), household, house))
    return make_readings(rows)


def with_disorder(table: pa.Table, seed: int, moves: int = 3, max_shift: int = 12) -> pa.Table:
    """The table with ``moves`` tuples arriving up to ``max_shift`` positions later.

    A moved tuple that overtakes tuples of later seconds arrives after its instant may have been
    emitted, so some moved tuples are late (semantics.md) and others are merely out of order.
    """
    rng = random.Random(seed)
    order = list(range(table.num_rows))
    for _ in range(moves):
        if len(order) < 2:
            break
        i = rng.randrange(len(order) - 1)
        j = min(len(order) - 1, i + rng.randint(1, max_shift))
        order.insert(j, order.pop(i))
    return table.take(pa.array(order, pa.int64()))


@st.composite
def readings_tables(
    draw: st.DrawFn,
    min_seconds: int = 10,
    max_seconds: int = 40,
    max_rate: float = 4.0,
    disorder: bool = False,
) -> pa.Table:
    """Hypothesis strategy: a small random readings table (see :func:`random_readings`)."""
    seed = draw(st.integers(0, 2**32 - 1))
    table = random_readings(
        seed,
        seconds=draw(st.integers(min_seconds, max_seconds)),
        start=draw(st.integers(0, 9)) + 1000,
        plugs=draw(st.integers(1, 5)),
        houses=draw(st.integers(1, 2)),
        rate=draw(st.floats(0.5, max_rate)),
        p_gap=draw(st.sampled_from((0.0, 0.1, 0.3, 0.6))),
        p_burst=draw(st.sampled_from((0.0, 0.05, 0.2))),
    )
    if disorder and table.num_rows > 1:
        table = with_disorder(table, seed + 1, moves=draw(st.integers(1, 4)))
    return table


def small_smartplug(
    seconds: int,
    seed: int = 7,
    rate: float | None = 20.0,
    houses: int = 1,
    households_per_house: int = 2,
    plugs_per_household: int = 3,
) -> pa.Table:
    """Deterministic smart-plug data: the project's generator if present, else our own."""
    try:
        from engines.sources.smartplug import SmartPlugGenerator
    except ImportError:  # the generator is not there yet
        plugs = houses * households_per_house * plugs_per_household
        return random_readings(
            seed,
            seconds=seconds,
            start=1377986401,
            plugs=min(plugs, houses * 6),
            houses=houses,
            rate=rate or 2.0 * plugs,
            p_gap=0.0,
            p_burst=0.0,
        )
    gen = SmartPlugGenerator(
        houses=houses,
        seed=seed,
        rate=rate,
        households_per_house=households_per_house,
        plugs_per_household=plugs_per_household,
    )
    return gen.table(seconds)
