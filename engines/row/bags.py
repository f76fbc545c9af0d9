"""Bag differences of result relations for ISTREAM and DSTREAM (docs/semantics.md).

Engines may differ in the last bits of a float aggregate (summation order), and NaN compares
unequal to itself in Python. So ISTREAM/DSTREAM do not compare rows exactly: a row of R(T)
and a row of R(T') are *the same row* when every non-float value is equal (NULL equal to
NULL) and every float value is close: both NaN, or equal (infinities included), or finite
with ``|a - b| <= max(1e-9 * max(|a|, |b|), 1e-9)`` (the tolerance result streams are
compared with). The pairing is fixed so that engines and the oracle agree:

1. identical rows pair off first (a plain bag difference);
2. the rest pair within each *class* of rows that agree on every non-float value: both
   sides sorted by their float values (NaN last), each new row in turn takes the first
   still unpaired old row it is close to.

ISTREAM emits the unpaired rows of R(T), DSTREAM those of R(T'), in their original order.
Step 1 is linear and in C; step 2 sees only rows that changed, typically a group whose
aggregate moved, where a class holds one row on each side.

Example:
    >>> bag_difference([(1, 0.6000000000000001), (2, 5.0)], [(1, 0.6), (2, 4.0)])
    ([(2, 5.0)], [(2, 4.0)])
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

Row = tuple[Any, ...]

#: Floats within this relative (or, near zero, absolute) distance are the same value.
REL_TOL = 1e-9
ABS_TOL = 1e-9

_FLOAT = object()  # stands for a float value in a row's class key


def close(a: float, b: float) -> bool:
    """Whether two floats are the same value for ISTREAM/DSTREAM."""
    if a == b:
        return True
    if a != a or b != b:
        return a != a and b != b
    if math.isinf(a) or math.isinf(b):
        return False
    return abs(a - b) <= max(REL_TOL * max(abs(a), abs(b)), ABS_TOL)


def bag_difference(new: Sequence[Row], old: Sequence[Row]) -> tuple[list[Row], list[Row]]:
    """(rows of ``new`` without a partner in ``old``, rows of ``old`` without one in ``new``)."""
    if not new or not old:
        return list(new), list(old)
    common = Counter(new) & Counter(old)
    new_rest = _without(new, common)
    old_rest = _without(old, common)
    if not new_rest or not old_rest:
        return new_rest, old_rest
    return _pair_close(new_rest, old_rest)


def _without(rows: Sequence[Row], budget: Counter[Row]) -> list[Row]:
    """``rows`` minus up to ``budget[r]`` occurrences of each ``r``, order kept."""
    if not budget:
        return list(rows)
    left = dict(budget)
    out: list[Row] = []
    for r in rows:
        n = left.get(r)
        if n:
            left[r] = n - 1
        else:
            out.append(r)
    return out


def _class(row: Row) -> tuple[Any, ...]:
    return tuple(_FLOAT if isinstance(v, float) else v for v in row)


def _floats(row: Row) -> list[tuple[bool, float]]:
    """The row's float values as sort keys, NaN last."""
    return [(v != v, 0.0 if v != v else v) for v in row if isinstance(v, float)]


def _close_rows(a: Row, b: Row) -> bool:
    return all(
        close(x, y) for x, y in zip(a, b, strict=True) if isinstance(x, float)
    )  # same class: the floats sit in the same columns


def _pair_close(new: list[Row], old: list[Row]) -> tuple[list[Row], list[Row]]:
    """Step 2: pair close rows class by class, in sorted order (see the module docstring)."""
    by_class: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(old):
        by_class.setdefault(_class(r), []).append(i)
    for idx in by_class.values():
        idx.sort(key=lambda i: _floats(old[i]))
    paired_old: set[int] = set()
    paired_new: set[int] = set()
    order = sorted(range(len(new)), key=lambda i: _floats(new[i]))
    for i in order:
        for j in by_class.get(_class(new[i]), ()):
            if j not in paired_old and _close_rows(new[i], old[j]):
                paired_old.add(j)
                paired_new.add(i)
                break
    return (
        [r for i, r in enumerate(new) if i not in paired_new],
        [r for j, r in enumerate(old) if j not in paired_old],
    )
