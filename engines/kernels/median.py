"""MEDIAN of doubles with DuckDB's bits, for the engines whose own MEDIAN rounds otherwise.

docs/semantics.md ("Floating-point sums", MEDIAN): the MEDIAN of an odd count is the middle
value; of an even count it is DuckDB's interpolation of the two middle values ``lo <= hi``,
``lo * (1 - d) + hi * d`` with ``d = 0.5``, which DuckDB's build (2.0.1, x86-64) evaluates as
the fused ``fma(lo, 0.5, hi * 0.5)`` (measured bit for bit on subnormal pairs). ``lo * 0.5``
is exact unless ``lo`` is subnormal with its last bit set, so the fused and the plain
``lo * 0.5 + hi * 0.5`` differ only there; ``midpoint`` rounds the exact value once in that
case. DataFusion computes ``(lo + hi) / 2`` (which overflows for two large values) and Spark
``0.5 * lo + 0.5 * hi`` unfused: both run ``hycq_median(ARRAY_AGG(x))`` instead
(``list_medians``, a vectorized UDF; ``engines.sqlgen.dialects``). NaN sorts above every
number and ``-0.0`` is ``+0.0`` (DuckDB's order, the signed-zero rule); NULLs are skipped.

This module needs numpy and pyarrow only: Spark ships it to its executors by value.

Example:
    >>> import pyarrow as pa
    >>> list_medians(pa.array([[0.2, 0.1], [3.0, None, 1.0, 2.0], None, [None]])).to_pylist()
    [0.15000000000000002, 2.0, None, None]
    >>> midpoint(-5e-324, 5e-324)  # fused: -2.5e-324 rounds to -0.0
    -0.0
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Below this magnitude half a double may not be a double (the subnormals and the smallest
#: normal binade, whose halves are subnormal).
_HALF_EXACT = 2.0**-1021


def midpoint(lo: float, hi: float) -> float:
    """DuckDB's MEDIAN of the two middle values ``lo <= hi``: ``fma(lo, 0.5, hi * 0.5)``."""
    if -_HALF_EXACT < lo < _HALF_EXACT and lo and math.isfinite(hi):
        exact = Fraction(lo) / 2 + Fraction(hi * 0.5)  # never exactly zero: lo / 2 is odd
        # int / int rounds once, ties to even; a result that rounds to zero keeps the exact
        # value's sign, as the fused operation's does
        return math.copysign(exact.numerator / exact.denominator, exact)
    return lo * 0.5 + hi * 0.5


def list_medians(lists: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The MEDIAN of every list of doubles (NULL for a NULL list or one without a non-NULL
    value): the SQL engines' ``hycq_median(list(x))``."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    n = len(lists)
    flat = lists.flatten()
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    present = flat.is_valid().to_numpy(zero_copy_only=False)
    values = flat.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)[present]
    parents = parents[present]
    values = values + 0.0  # -0.0 is +0.0 (numpy keeps every NaN, sorted last)
    order = np.lexsort((values, parents))
    values = values[order]
    counts = np.bincount(parents, minlength=n)
    starts = np.cumsum(counts) - counts
    has = counts > 0
    lo_at = (starts + (counts - 1) // 2)[has]
    hi_at = (starts + counts // 2)[has]
    lo, hi = values[lo_at], values[hi_at]
    with np.errstate(invalid="ignore"):  # -inf and inf: NaN, as IEEE adds them
        mid = np.where(lo_at == hi_at, lo, lo * 0.5 + hi * 0.5)
    fused = (lo_at != hi_at) & (np.abs(lo) < _HALF_EXACT) & (lo != 0) & np.isfinite(hi)
    for k in np.flatnonzero(fused):
        mid[k] = midpoint(float(lo[k]), float(hi[k]))
    out = np.zeros(n, np.float64)
    out[has] = mid
    return pa.array(out, pa.float64(), mask=~has)
