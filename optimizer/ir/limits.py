"""The documented bounds of hycq's numeric inputs (docs/interface.md, "Numeric options").

Past them a number is a typo or an overflow, not a workload. Every numeric option, and
every number inside a compound value (``kslack:K``, ``zipf:MAX,SKEW``, rate profiles, the
settings of ``--stream``, ``--migrate AT=...``, ``--quality-param``), is checked against
them where it is parsed, so that a bad one is one ``error:`` naming the option (exit 2).
The bounds keep a span in microseconds inside the 2^62 range of timestamps and counts
(10^9 s x 10^6); a rate times a span beyond it (up to 10^12 x 10^9) is refused where the
generator forms it, naming the options.

Example:
    >>> check_number(5.0, "--rate")
    5.0
    >>> check_number(1e12, "--rate")
    Traceback (most recent call last):
    ...
    optimizer.ir.errors.OptionError: --rate: 1e+12 is above the largest value hycq accepts (1e+09)
"""

from __future__ import annotations

import math

from optimizer.ir.errors import OptionError

#: The largest span, offset, interval or timeout (seconds), size (MB), count (rows,
#: repeats, keys of a profile) or factor any option takes: 10^9 s is about 31.7 years.
LIMIT = 1e9
#: The largest rate, tuples per event-second (a generator streams bounded batches at any
#: rate: 10^10 runs; a rate times a span past 2^62 tuples is refused where it is formed).
MAX_RATE = 1e12
#: The most keys of a keyed stream's domain (a skewed one keeps a CDF of that many floats).
MAX_KEYS = 10**7
#: The most worker threads an engine may be given (DuckDB takes ~50 s for a trivial query
#: with 100,000: a typo, not a setting).
MAX_THREADS = 1024
#: The largest Zipf exponent (key skew, delay skew): past about 30 every draw is the first
#: value anyway, and 10^7 keys to that power still fit a float.
MAX_SKEW = 30.0
#: The most plugs of the smart-plug generator (its per-plug state is a few arrays of this
#: length), and the most houses (about 42 plugs each: 840,000 plugs).
MAX_PLUGS = 1_000_000
MAX_HOUSES = 20_000
#: The largest epoch second a generated stream may start at (``--origin``), year ~5138.
MAX_EPOCH_S = 10**11
#: The largest random seed (what NumPy and ``random`` take as one 64-bit word).
MAX_SEED = 2**63 - 1


def check_number(value: float, what: str, high: float = LIMIT) -> float:
    """``value`` if it is finite and at most ``high``; else an OptionError naming ``what``."""
    if not math.isfinite(value):
        raise OptionError(f"{what}: {value} is not a finite number")
    if value > high:
        raise OptionError(
            f"{what}: {value:g} is above the largest value hycq accepts ({high:g})",
            hint="see docs/interface.md, 'Numeric options', for the bounds",
        )
    return value
