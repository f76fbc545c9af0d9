"""Dense, stable integer ids for the distinct key tuples of Arrow key columns.

A kept aggregate (``engines.exact_state``) adds and removes rows group by group over many
slides; its numpy state is indexed by group id. ``KeyEncoder.encode`` maps each row's key
tuple to the id it had before, or to the next new id, with numpy and Arrow compute only:

1. each column becomes non-negative integer codes: an integer column by its value minus a
   fixed offset (no lookup at all), any other column by its position in a dictionary of the
   values seen (``pyarrow.compute.index_in``); NULL is code 0;
2. the codes are packed into one int64 (a fixed number of bits per column, widened, with
   every known key repacked, when a code outgrows its bits);
3. the packed keys are looked up in a sorted array of the packed keys seen so far
   (``numpy.searchsorted``); unseen ones get new ids in order of first appearance.

Keys are compared as SQL groups them: a DOUBLE ``-0.0`` is ``0.0`` and every NaN is one
value (DuckDB's GROUP BY), so rows the engine puts in one group get one id.

Example:
    >>> import pyarrow as pa
    >>> enc = KeyEncoder([pa.int32(), pa.string()])
    >>> enc.encode([pa.array([7, 7, 8, None]), pa.array(["a", "a", "a", "b"])]).tolist()
    [0, 0, 1, 2]
    >>> enc.encode([pa.array([8, 9]), pa.array(["a", "a"])], add=False).tolist()
    [1, -1]
    >>> [c.to_pylist() for c in enc.keys([2, 0])]
    [[None, 7], ['b', 'a']]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Bits of the packed key (codes of all columns together).
_PACKED_BITS = 62


class KeyEncoder:
    """Ids for key tuples of the given Arrow ``types`` (see the module docstring)."""

    def __init__(self, types: Sequence[pa.DataType]) -> None:
        self.types = list(types)
        k = len(self.types)
        #: Per column: integer values coded by offset (True) or a dictionary (False).
        self._by_offset = [pa.types.is_integer(t) for t in self.types]
        #: Per offset-coded column: the value coded 1 (codes are ``value - offset + 1``).
        self._offset: list[int | None] = [None] * k
        #: Per dictionary-coded column: the distinct canonical values (code ``i + 1``).
        self._dict: list[pa.Array] = [pa.array([], t) for t in self.types]
        self._bits = [max(1, _PACKED_BITS // max(k, 1))] * k
        #: Per column, the code of every id (to repack and to give keys back).
        self._codes: list[np.ndarray] = [np.zeros(0, np.int64) for _ in range(k)]
        self._sorted = np.zeros(0, np.int64)  # packed keys of the ids, sorted
        self._sorted_ids = np.zeros(0, np.int64)
        #: Keys too wide to pack (more than 62 bits of codes): a dict of code tuples.
        self._tuples: dict[tuple[int, ...], int] | None = None
        self.size = 0

    # -- codes per column ------------------------------------------------------------------

    def _canonical(self, col: pa.Array, i: int) -> pa.Array:
        col = col.cast(self.types[i])
        if pa.types.is_floating(self.types[i]):
            col = pc.add(col, pa.scalar(0.0, self.types[i]))  # -0.0 is 0.0
        return col

    def _column_codes(self, col: pa.Array, i: int, add: bool) -> np.ndarray:
        """Codes of one column: 0 for NULL, -1 for a value not seen (when not ``add``)."""
        col = self._canonical(col, i)
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        if self._by_offset[i]:
            codes = self._offset_codes(col, valid, i, add)
            if codes is not None:
                return codes
        d = self._dict[i]
        found = pc.index_in(col, value_set=d, skip_nulls=True)
        codes = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        unseen = (codes == 0) & valid
        if unseen.any():
            if not add:
                return np.where(unseen, -1, np.where(valid, codes, 0))
            rows = col.filter(pa.array(unseen))
            fresh = pc.unique(rows)
            self._dict[i] = pa.concat_arrays([d, fresh])
            again = pc.index_in(rows, value_set=fresh)
            codes[unseen] = again.to_numpy(zero_copy_only=False).astype(np.int64) + len(d) + 1
        return np.where(valid, codes, 0)

    def _offset_codes(
        self, col: pa.Array, valid: np.ndarray, i: int, add: bool
    ) -> np.ndarray | None:
        """``value - offset + 1`` codes of an integer column; None once its values span too
        wide a range (the column is then coded by a dictionary, every known code moved)."""
        if not valid.any():
            return np.zeros(len(col), np.int64)
        lo, hi = pc.min_max(col).values()
        lo_v, hi_v = int(lo.as_py()), int(hi.as_py())
        known = self._offset[i]
        offset: int = known if known is not None else lo_v
        top = max(hi_v, offset + int(self._codes[i].max(initial=1)) - 1)
        if max(top, hi_v) - min(lo_v, offset) >= 1 << 32:
            self._to_dictionary(i)
            return None
        if lo_v < offset:
            if not add:
                values = col.fill_null(offset).to_numpy(zero_copy_only=False).astype(np.int64)
                codes = values - offset + 1
                return np.where(valid, np.where(codes < 1, -1, codes), 0)
            shift = offset - lo_v
            self._codes[i] = np.where(self._codes[i] > 0, self._codes[i] + shift, 0)
            offset = lo_v
            self._offset[i] = offset
            self._repack()
        self._offset[i] = offset
        values = col.fill_null(offset).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(valid, values - offset + 1, 0)

    def _to_dictionary(self, i: int) -> None:
        """Code integer column ``i`` by a dictionary of the values its ids have."""
        self._by_offset[i] = False
        codes = self._codes[i]
        used, inverse = np.unique(codes[codes > 0], return_inverse=True)
        offset = self._offset[i] or 0
        self._dict[i] = pa.array(used - 1 + offset, pa.int64()).cast(self.types[i])
        new = np.zeros(len(codes), np.int64)
        new[codes > 0] = inverse + 1
        self._codes[i] = new
        self._repack()

    # -- packing -----------------------------------------------------------------------------

    def _pack(self, codes: list[np.ndarray]) -> np.ndarray:
        packed = np.zeros(len(codes[0]), np.int64)
        for c, bits in zip(codes, self._bits, strict=True):
            packed = (packed << bits) | c
        return packed

    def _fit(self, codes: list[np.ndarray]) -> None:
        """Widen the bits of columns whose codes outgrew them (repacking every known key);
        past 62 bits in all, keys are kept as tuples instead."""
        need = [
            max(b, int(c.max(initial=0)).bit_length())
            for c, b in zip(codes, self._bits, strict=True)
        ]
        if need == self._bits or self._tuples is not None:
            return
        self._bits = need
        if sum(need) > _PACKED_BITS:
            self._tuples = {tuple(int(c[g]) for c in self._codes): g for g in range(self.size)}
            return
        self._repack()

    def _repack(self) -> None:
        if self._tuples is not None:
            self._tuples = {tuple(int(c[g]) for c in self._codes): g for g in range(self.size)}
            return
        packed = self._pack(self._codes) if self.size else np.zeros(0, np.int64)
        order = np.argsort(packed, kind="stable")
        self._sorted, self._sorted_ids = packed[order], order.astype(np.int64)

    # -- public ------------------------------------------------------------------------------

    def encode(self, columns: Sequence[pa.Array | pa.ChunkedArray], add: bool = True) -> np.ndarray:
        """The id of every row's key tuple; new tuples get new ids (``add``) or -1."""
        cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
        if not cols:
            raise ValueError("KeyEncoder needs at least one key column")
        n = len(cols[0])
        codes = [self._column_codes(c, i, add) for i, c in enumerate(cols)]
        missing = np.zeros(n, bool)
        for c in codes:
            missing |= c < 0
        codes = [np.where(missing, 0, c) for c in codes]
        self._fit(codes)
        if self._tuples is not None:
            ids = self._encode_tuples(codes, add)
        else:
            ids = self._encode_packed(codes, add)
        ids[missing] = -1
        return ids

    def _encode_packed(self, codes: list[np.ndarray], add: bool) -> np.ndarray:
        packed = self._pack(codes)
        n = len(packed)
        if len(self._sorted):
            pos = np.minimum(np.searchsorted(self._sorted, packed), len(self._sorted) - 1)
            hit = self._sorted[pos] == packed
            ids = np.where(hit, self._sorted_ids[pos], -1)
        else:
            hit, ids = np.zeros(n, bool), np.full(n, -1, np.int64)
        if not add or hit.all():
            return ids
        rows = np.flatnonzero(~hit)
        fresh, first = np.unique(packed[rows], return_index=True)
        order = np.argsort(first, kind="stable")  # new ids in order of first appearance
        fresh, first_rows = fresh[order], rows[first[order]]
        self._add_ids([c[first_rows] for c in codes])
        merged = np.concatenate([self._sorted, fresh])
        merged_ids = np.concatenate(
            [self._sorted_ids, np.arange(self.size - len(fresh), self.size, dtype=np.int64)]
        )
        order = np.argsort(merged, kind="stable")
        self._sorted, self._sorted_ids = merged[order], merged_ids[order]
        pos = np.searchsorted(self._sorted, packed[rows])
        ids[rows] = self._sorted_ids[pos]
        return ids

    def _encode_tuples(self, codes: list[np.ndarray], add: bool) -> np.ndarray:
        table = self._tuples
        assert table is not None
        ids = np.empty(len(codes[0]), np.int64)
        fresh: list[tuple[int, ...]] = []
        for r, key in enumerate(zip(*(c.tolist() for c in codes), strict=True)):
            g = table.get(key)
            if g is None:
                if not add:
                    ids[r] = -1
                    continue
                g = table[key] = self.size + len(fresh)
                fresh.append(key)
            ids[r] = g
        if fresh:
            self._add_ids([np.array(col, np.int64) for col in zip(*fresh, strict=True)])
        return ids

    def _add_ids(self, codes: list[np.ndarray]) -> None:
        for i, c in enumerate(codes):
            self._codes[i] = np.concatenate([self._codes[i], c])
        self.size += len(codes[0])

    def keys(self, ids: Sequence[int] | np.ndarray) -> list[pa.Array]:
        """The key columns of ``ids`` (NULL where the key is NULL)."""
        ids = np.asarray(ids, np.int64)
        out = []
        for i, t in enumerate(self.types):
            codes = self._codes[i][ids]
            valid = codes > 0
            if self._by_offset[i]:
                values = pa.array(codes - 1 + (self._offset[i] or 0), pa.int64(), mask=~valid)
                out.append(values.cast(t))
            elif len(self._dict[i]) == 0:  # only NULLs so far
                out.append(pa.nulls(len(ids), t))
            else:
                taken = self._dict[i].take(pa.array(np.maximum(codes - 1, 0)))
                out.append(pc.if_else(pa.array(valid), taken, pa.nulls(len(ids), t)))
        return out
