"""Exact per-group sums of doubles under inserts and deletes, correctly rounded on demand.

docs/semantics.md ("Floating-point sums"): the SUM of DOUBLE values is the exact sum of the
values in the window, rounded once to the nearest double (ties to even); an AVG is that SUM
divided by the count (one IEEE division). A result then depends only on the multiset of
values, never on the order they were added in, the batch sizes, the engine or a resumed
run: every path of every engine computes it here (columnar groups) or with the same rule in
Python integers (the row engine, ``engines.row.aggregate``), so the bits agree.

How it is exact. Every finite double is ``M * 2**E`` with ``M`` an integer, ``|M| < 2**53``,
and ``-1126 <= E <= 971`` (``numpy.frexp``: the smallest subnormal is ``2**52 * 2**-1126``).
The sum of a group is kept as a number written in base ``2**32`` from ``2**-1126``: *limb*
``j`` weighs ``2**(32*j - 1126)``, ``0 <= j < 70``. ``M * 2**E`` shifted into place touches
three consecutive limbs; it is cut into three signed *pieces* below ``2**33`` in magnitude,
which are added to their limbs with ``numpy.add.at`` on int64 (no float arithmetic, so
nothing is rounded). A limb can take ``2**29`` pieces before it could overflow; the state is
carry-normalised before that (``_LOAD_LIMIT``). Only the limbs some value touched are stored
(one int64 row per limb over all groups): the smart-plug readings use about six.

How it is rounded (``sums``). The limbs of the asked groups are carry-normalised into digits
in ``[0, 2**32)`` (negative sums are negated first), the top 64 bits below the leading one
are read as a uint64, and the rest (the bits below, any nonzero lower limb) is a sticky bit.
Rounding those 64 bits to 53 (fewer in the subnormal range) to nearest, ties to even, with
the sticky bit breaking ties, is the correctly rounded value; ``numpy.ldexp`` scales it
(overflowing to an infinity exactly when IEEE rounding does). An exact zero is ``+0.0``, as
DuckDB's SUM of ``-0.0`` values is.

Non-finite values are counted per group (+inf, -inf, NaN) and decide the result as IEEE
addition would: NaN when there is a NaN or both infinities, else the infinity.

Example:
    >>> import numpy as np
    >>> s = ExactSums()
    >>> s.add(np.array([0, 0, 0, 1]), np.array([1e16, 1.0, -1e16, 0.1]))
    >>> s.sums(np.array([0, 1])).tolist()
    [1.0, 0.1]
    >>> s.add(np.array([0]), np.array([1.0]), sign=-1)  # the 1.0 leaves group 0
    >>> s.sums(np.array([0])).tolist(), s.count[:2].tolist()
    ([0.0], [2, 1])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Bits per limb.
LIMB_BITS = 32
_MASK = (1 << LIMB_BITS) - 1
#: ``E + _BIAS >= 0`` for every finite double's ``M * 2**E``.
_BIAS = 1126
#: Limbs of the whole double range, with room for the pieces and carries above the top one.
LIMBS = 70
#: Values decomposed at a time: the temporaries stay in the cache and the allocator's free
#: lists (whole-batch temporaries of millions of values cost page faults: 3-4x slower).
_CHUNK = 1 << 16
#: Pieces a limb may have taken since the last normalisation before one is due (each is
#: below ``2**33`` in magnitude, so a limb stays below ``2**62``).
_LOAD_LIMIT = 1 << 29


def decompose(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The limb of the lowest piece of every finite value, and its three pieces (int64).

    ``values[i] == (p0[i] + p1[i] * 2**32 + p2[i] * 2**64) * 2**(32 * j[i] - 1126)`` exactly,
    with ``|p0|, |p1| < 2**32`` and ``|p2| < 2**21``, all of the value's sign. Float
    operations only, each exact: scaling by a power of two (the scaled magnitude ``y`` is an
    integer below ``2**85``), ``floor``, and subtracting a value's own leading bits.
    """
    e = np.frexp(values)[1].astype(np.int64)  # values = m * 2**e, 0.5 <= |m| < 1
    limb = (e + (_BIAS - 53)) >> 5
    y = np.ldexp(np.abs(values), (_BIAS - 32 * limb).astype(np.int32))  # |M| * 2**off
    top = np.floor(y * _2_64)
    rest = y - top * _TWO_64  # the bits of y below 2**64
    mid = np.floor(rest * _2_32)
    low = rest - mid * _TWO_32
    sign = np.where(values < 0, -1, 1)
    p0, p1, p2 = (sign * part.astype(np.int64) for part in (low, mid, top))
    return limb, p0, p1, p2


_TWO_32, _TWO_64 = 2.0**32, 2.0**64
_2_32, _2_64 = 2.0**-32, 2.0**-64


class ExactSums:
    """Exact sums and counts of doubles for groups ``0 .. capacity-1`` (see the module doc).

    ``add(ids, values, sign)`` inserts (``sign=1``) or deletes (``sign=-1``) values; the caller
    passes no NULLs (a NULL is not counted). ``count[g]`` is the number of values of group
    ``g``; ``sums(ids)`` the correctly rounded sums. A group whose values all left holds an
    exact zero again, so its id can be given to a new group.
    """

    def __init__(self, capacity: int = 0) -> None:
        self.capacity = 0
        self.count = np.zeros(0, np.int64)
        self._pinf = np.zeros(0, np.int64)
        self._ninf = np.zeros(0, np.int64)
        self._nan = np.zeros(0, np.int64)
        #: Stored limbs: ``_data[_slot[j]]`` is limb ``j`` of every group (-1: none stored).
        self._slot = np.full(LIMBS, -1, np.int64)
        self._data = np.zeros((0, 0), np.int64)
        self._load = 0
        self.reserve(capacity)

    # -- capacity and storage ------------------------------------------------------------

    def reserve(self, groups: int) -> None:
        """Room for ids below ``groups`` (grown geometrically)."""
        if groups <= self.capacity:
            return
        new = max(groups, 2 * self.capacity, 64)
        grow = new - self.capacity
        for name in ("count", "_pinf", "_ninf", "_nan"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(grow, np.int64)]))
        data = np.zeros((self._data.shape[0], new), np.int64)
        data[:, : self.capacity] = self._data
        self._data = data
        self.capacity = new

    def _ensure_limbs(self, limbs: np.ndarray) -> None:
        """Store the limbs ``limbs`` (absolute indices) if they are not yet."""
        missing = limbs[self._slot[limbs] < 0]
        if missing.size == 0:
            return
        first = self._data.shape[0]
        self._slot[missing] = np.arange(first, first + missing.size)
        self._data = np.concatenate([self._data, np.zeros((missing.size, self.capacity), np.int64)])

    # -- updates ---------------------------------------------------------------------------

    def add(self, ids: np.ndarray, values: np.ndarray, sign: int = 1) -> None:
        """Insert (``sign`` 1) or delete (-1) ``values[i]`` into group ``ids[i]``."""
        if len(ids) == 0:
            return
        ids = np.asarray(ids, np.int64)
        values = np.asarray(values, np.float64)
        self.reserve(int(ids.max()) + 1)
        np.add.at(self.count, ids, sign)
        finite = np.isfinite(values)
        if not finite.all():
            bad_ids, bad = ids[~finite], values[~finite]
            nan = np.isnan(bad)
            np.add.at(self._nan, bad_ids[nan], sign)
            np.add.at(self._pinf, bad_ids[bad > 0], sign)
            np.add.at(self._ninf, bad_ids[bad < 0], sign)
            ids, values = ids[finite], values[finite]
            if len(ids) == 0:
                return
        for start in range(0, len(ids), _CHUNK):
            self._add_finite(ids[start : start + _CHUNK], values[start : start + _CHUNK], sign)

    def _add_finite(self, ids: np.ndarray, values: np.ndarray, sign: int) -> None:
        if self._load + len(ids) > _LOAD_LIMIT:
            self.normalize()
        self._load += len(ids)
        limb, p0, p1, p2 = decompose(values)
        hit = np.bincount(limb, minlength=LIMBS) > 0
        hit[1:] |= hit[:-1]
        hit[1:] |= hit[:-1]  # a value of limb j also adds to limbs j + 1 and j + 2
        self._ensure_limbs(np.flatnonzero(hit))
        flat = self._data.reshape(-1)
        cap = self.capacity
        for k, piece in enumerate((p0, p1, p2)):
            where = self._slot[limb + k] * cap + ids
            np.add.at(flat, where, piece if sign > 0 else -piece)

    def merge(self, other: ExactSums, sign: int = 1) -> None:
        """Add (or subtract) every group of ``other`` into the same ids here."""
        self.reserve(other.capacity)
        n = other.capacity
        for name in ("count", "_pinf", "_ninf", "_nan"):
            getattr(self, name)[:n] += sign * getattr(other, name)
        stored = np.flatnonzero(other._slot >= 0)
        if stored.size:
            self._ensure_limbs(stored)
            if self._load + other._load > _LOAD_LIMIT:
                self.normalize()
            self._load += other._load
            for j in stored:
                self._data[self._slot[j], :n] += sign * other._data[other._slot[j]]

    def normalize(self) -> None:
        """Carry every limb into ``[0, 2**32)`` but the top one (the values are unchanged)."""
        stored = np.flatnonzero(self._slot >= 0)
        if stored.size == 0:
            self._load = 0
            return
        j = int(stored[0])
        while j < LIMBS - 1:
            slot = self._slot[j]
            if slot >= 0:
                row = self._data[slot]
                carry = row >> LIMB_BITS
                if carry.any():
                    row -= carry << LIMB_BITS
                    self._ensure_limbs(np.array([j + 1]))
                    self._data[self._slot[j + 1]] += carry
            j += 1
        self._load = 1

    # -- results ---------------------------------------------------------------------------

    def sums(self, ids: np.ndarray) -> np.ndarray:
        """The correctly rounded sums of groups ``ids`` (0.0 for a group with no values)."""
        ids = np.asarray(ids, np.int64)
        out = np.zeros(len(ids), np.float64)
        if len(ids) == 0:
            return out
        self.reserve(int(ids.max()) + 1)  # ids never added to are empty groups
        stored = np.flatnonzero(self._slot >= 0)
        if stored.size:
            lo, hi = int(stored[0]), int(stored[-1]) + 3  # two rows for carries
            digits = np.zeros((hi - lo, len(ids)), np.int64)
            for j in stored:
                digits[j - lo] = self._data[self._slot[j], ids]
            out = _round(digits, lo)
        pinf, ninf, nan = self._pinf[ids], self._ninf[ids], self._nan[ids]
        out = np.where(pinf > 0, np.inf, out)
        out = np.where(ninf > 0, -np.inf, out)
        return np.where((nan > 0) | ((pinf > 0) & (ninf > 0)), np.nan, out)

    # -- checkpoints -----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The state as plain arrays (a checkpoint stores it; ``restore`` reads it)."""
        return {
            "capacity": self.capacity,
            "count": self.count.copy(),
            "nonfinite": np.stack([self._pinf, self._ninf, self._nan]),
            "slot": self._slot.copy(),
            "data": self._data.copy(),
            "load": self._load,
        }

    @classmethod
    def restore(cls, snap: dict[str, Any]) -> ExactSums:
        s = cls()
        s.capacity = int(snap["capacity"])
        s.count = snap["count"].copy()
        s._pinf, s._ninf, s._nan = (a.copy() for a in snap["nonfinite"])
        s._slot = snap["slot"].copy()
        s._data = snap["data"].copy()
        s._load = int(snap["load"])
        return s


def _carry(digits: np.ndarray) -> None:
    """Carry-normalise ``digits`` (limbs x groups) in place: every row but the last in
    ``[0, 2**32)``; the last row takes the carries (and the sign)."""
    for r in range(digits.shape[0] - 1):
        carry = digits[r] >> LIMB_BITS
        digits[r] -= carry << LIMB_BITS
        digits[r + 1] += carry


def _round(digits: np.ndarray, lo: int) -> np.ndarray:
    """The correctly rounded values of the numbers in ``digits`` (row ``r`` is limb
    ``lo + r``; the top two rows are free for carries)."""
    _carry(digits)
    negative = digits[-1] < 0
    if negative.any():
        digits[:, negative] = -digits[:, negative]
        _carry(digits)
    k = digits.shape[1]
    # three zero rows below, so the top digit's two neighbours and the sticky range exist
    pad = 3
    d = np.concatenate([np.zeros((pad, k), np.int64), digits]).astype(np.uint64)
    nonzero = d != 0
    any_digit = nonzero.any(axis=0)
    top = d.shape[0] - 1 - np.argmax(nonzero[::-1], axis=0)  # highest nonzero row
    cols = np.arange(k)
    d_top, d_1, d_2 = d[top, cols], d[top - 1, cols], d[top - 2, cols]
    bits = np.frexp(d_top.astype(np.float64))[1].astype(np.uint64)  # bit length, 1..32
    word = (d_top << (np.uint64(64) - bits)) | (d_1 << (np.uint64(32) - bits)) | (d_2 >> bits)
    lost = d_2 & ((np.uint64(1) << bits) - np.uint64(1))
    below = np.argmax(nonzero, axis=0) < top - 2  # a nonzero digit under the three read
    sticky = (lost != 0) | below
    # exponent of the leading bit: digit row ``top`` is limb ``lo + top - pad``
    lead = 32 * (lo + top.astype(np.int64) - pad) + bits.astype(np.int64) - 1 - _BIAS
    keep = np.clip(np.where(lead >= -1022, 53, lead + 1075), 1, 53)  # fewer when subnormal
    shift = (64 - keep).astype(np.uint64)
    q = word >> shift
    rem = word & ((np.uint64(1) << shift) - np.uint64(1))
    half = np.uint64(1) << (shift - np.uint64(1))
    up = (rem > half) | ((rem == half) & (sticky | ((q & np.uint64(1)) == 1)))
    q = q + up.astype(np.uint64)
    with np.errstate(over="ignore"):
        value = np.ldexp(q.astype(np.float64), (lead - keep + 1).astype(np.int32))
    value = np.where(negative, -value, value)
    return np.where(any_digit, value, 0.0)


def list_sums(lists: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The correctly rounded sum of every list of doubles, NULL for a NULL list or one with
    no non-NULL value: the SQL engines' ``hycq_exact_sum(list(x))`` (a vectorized UDF
    registered by each engine, ``engines.sqlgen`` writes the calls).

    Example:
        >>> list_sums(pa.array([[1e16, 1.0, -1e16], None, [None], [0.1, 0.2]])).to_pylist()
        [1.0, None, None, 0.30000000000000004]
    """
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    n = len(lists)
    flat = lists.flatten()  # the values of non-NULL lists, NULL elements included
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    flat = flat.cast(pa.float64())
    if flat.null_count:
        present = flat.is_valid().to_numpy(zero_copy_only=False)
        values = flat.fill_null(0.0).to_numpy(zero_copy_only=False)
        parents, values = parents[present], values[present]
    else:
        values = flat.to_numpy(zero_copy_only=False)
    s = ExactSums(n)
    s.add(parents, values)
    out = s.sums(np.arange(n))
    return pa.array(out, pa.float64(), mask=s.count[:n] == 0)
