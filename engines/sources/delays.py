"""Induced disorder: delayed event timestamps in arrival order (Ji's synthetic method).

The dissertation makes out-of-order streams from in-order ones (section 4.3): a stream's
*arrival* schedule is its ordinary, evenly spaced one (``^iT``, the i-th arrival instant), and
each tuple's *event* timestamp is ``ts = ^iT - delay`` with ``delay`` drawn independently from
a Zipf distribution over the whole ticks ``0 .. MAX`` with exponent ``SKEW``:

    P(delay = d) = (d + 1) ** -SKEW / H,    H = sum_{d=0}^{MAX} (d + 1) ** -SKEW

(``d = 0`` is the most likely: most tuples arrive in order, a few very late). The file keeps
the tuples in arrival order, so reading it front to back replays the disorder. A tick is the
stream's time unit (seconds or milliseconds), so ``MAX`` must be a whole number of ticks.

The delays come from their own random stream (``delay_rng``), so a workload with delays has
the same tuples (keys, values, arrival instants) as without, only the timestamps differ, and
the draws do not depend on how batches are cut (``Generator.random`` consumes in order).

Example:
    >>> spec = parse_delay("zipf:20s,2", "--delay")
    >>> spec.max_s, spec.skew, spec.text()
    (20.0, 2.0, 'zipf:20s,2')
    >>> spec.max_ticks(1000)
    20000
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

import numpy as np

from optimizer.ir.errors import OptionError
from optimizer.ir.limits import MAX_SKEW

_SPEC = re.compile(r"^\s*zipf\s*:\s*([0-9.]+(?:e[+-]?\d+)?)\s*(ms|s)?\s*,\s*([0-9.]+)\s*$", re.I)
#: Salt that separates a stream's delay draws from its other draws.
_DELAY_SALT = 0xDE1A7


@dataclass(frozen=True)
class DelaySpec:
    """Zipf delays over ``[0, max_s]`` seconds (whole ticks) with exponent ``skew``."""

    max_s: float
    skew: float

    def text(self) -> str:
        """The ``--delay`` spelling (``zipf:20s,2``)."""
        if self.max_s < 1 and self.max_s * 1000 == round(self.max_s * 1000):
            return f"zipf:{self.max_s * 1000:g}ms,{self.skew:g}"
        return f"zipf:{self.max_s:g}s,{self.skew:g}"

    def max_ticks(self, ticks_per_second: int) -> int:
        """MAX in ticks; an error when it is not a whole number of ticks."""
        ticks = self.max_s * ticks_per_second
        if abs(ticks - round(ticks)) > 1e-9 * max(1.0, ticks):
            unit = "s" if ticks_per_second == 1 else f"1/{ticks_per_second} s"
            raise OptionError(
                f"delay maximum {self.max_s:g} s is not a whole number of ticks ({unit})",
                hint="give a maximum in the stream's time unit, e.g. zipf:20s,2",
            )
        return round(ticks)

    def pmf(self, ticks_per_second: int) -> np.ndarray:
        """P(delay = d) for d = 0 .. MAX ticks."""
        weights = 1.0 / np.arange(1, self.max_ticks(ticks_per_second) + 2, dtype=np.float64) ** (
            self.skew
        )
        return weights / weights.sum()

    def draw(self, rng: np.random.Generator, n: int, ticks_per_second: int) -> np.ndarray:
        """``n`` delays (int64 ticks), one uniform each (inverse CDF)."""
        cdf = np.cumsum(self.pmf(ticks_per_second))
        u = rng.random(n)
        d = np.searchsorted(cdf, u, side="right")
        return np.minimum(d, len(cdf) - 1).astype(np.int64)


def parse_delay(text: str, what: str) -> DelaySpec:
    """``zipf:MAX,SKEW``: MAX a duration (``20s``, ``500ms``, or seconds without unit), SKEW
    the Zipf exponent (>= 0; 0 is uniform over 0..MAX)."""
    m = _SPEC.match(text)
    if m is None:
        raise OptionError(
            f"{what}: expected zipf:MAX,SKEW, got '{text}'",
            hint="e.g. zipf:20s,2 (delays up to 20 s, Zipf exponent 2) or zipf:500ms,3",
        )
    try:
        value = float(m.group(1))
        skew = float(m.group(3))
    except ValueError:
        raise OptionError(f"{what}: bad number in '{text}'", hint="e.g. zipf:20s,2") from None
    max_s = value / 1000.0 if (m.group(2) or "s").lower() == "ms" else value
    if not (math.isfinite(max_s) and max_s >= 0):
        raise OptionError(f"{what}: MAX must be >= 0, got '{text}'", hint="e.g. zipf:20s,2")
    if not (math.isfinite(skew) and 0 <= skew <= MAX_SKEW):
        raise OptionError(
            f"{what}: SKEW must be in [0, {MAX_SKEW:g}], got '{text}'", hint="e.g. zipf:20s,2"
        )
    if max_s > 86400:
        raise OptionError(f"{what}: MAX above a day ('{text}')", hint="e.g. zipf:20s,2")
    return DelaySpec(max_s, skew)


def delay_rng(seed: int, name: str) -> np.random.Generator:
    """The random stream of ``name``'s delays (independent of its other draws)."""
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode()), _DELAY_SALT]))
    )


def readme_text(data: str, delays: dict[str, DelaySpec], time_unit: str, seed: int) -> str:
    """A note recording how ``data``'s disorder was made (written beside the data)."""
    lines = [
        f"# {data}: induced disorder\n\n",
        "Rows are in arrival order; each row's timestamp is its arrival instant minus a delay\n",
        "drawn from Zipf over 0..MAX ticks (P(d) ~ (d+1)^-SKEW; engines/sources/delays.py),\n",
        f"time unit {time_unit}, seed {seed}.\n\n",
        "| stream | delay | MAX (s) | SKEW |\n|---|---|---|---|\n",
    ]
    lines += [f"| {n} | {d.text()} | {d.max_s:g} | {d.skew:g} |\n" for n, d in delays.items()]
    return "".join(lines)
