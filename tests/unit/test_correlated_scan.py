"""Key ids of the correlated scan (``engines.correlated_scan``): packing and lookup."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engines.correlated_scan import KeyIds, ScanUnavailable, pack


def test_packing_keeps_keys_apart_and_marks_nulls() -> None:
    a = pa.array([0, -1, 5, None, -(2**20), 2**20 - 1], pa.int32())
    b = pa.array([1, 1, 1, 1, 0, 0], pa.int64())
    packed, valid = pack([a, b, pa.array([7] * 6, pa.int32())])
    assert valid.tolist() == [True, True, True, False, True, True]
    assert len(set(packed[valid].tolist())) == 5
    one = [pa.array([5], pa.int32()), pa.array([1], pa.int64()), pa.array([7], pa.int32())]
    same, _ = pack(one)
    assert same[0] == packed[2]


@pytest.mark.parametrize("value", [2**20, -(2**20) - 1])
def test_a_key_outside_its_bits_is_refused(value: int) -> None:
    cols = [pa.array([value], pa.int64()), pa.array([0], pa.int32()), pa.array([0], pa.int32())]
    with pytest.raises(ScanUnavailable, match="2\\^20"):
        pack(cols)


def test_one_key_gets_63_bits_and_floats_are_refused() -> None:
    packed, _ = pack([pa.array([-(2**62), 2**62 - 1], pa.int64())])
    assert packed[0] != packed[1]
    with pytest.raises(ScanUnavailable):
        pack([pa.array([2**62], pa.int64())])
    with pytest.raises(ScanUnavailable, match="double"):
        pack([pa.array([1.0])])


def test_ids_are_stable_dense_and_unknown_keys_get_zero() -> None:
    ids = KeyIds()
    first = ids.lookup(np.array([50, 10, 50, 30], np.int64), add=True)
    assert first.tolist() == [ids.lookup(np.array([k]), add=False)[0] for k in (50, 10, 50, 30)]
    assert sorted(set(first.tolist())) == [1, 2, 3] and len(ids) == 4
    again = ids.lookup(np.array([20, 50, 10, 40], np.int64), add=True)
    assert again[1:3].tolist() == [first[0], first[1]]
    assert sorted({*first.tolist(), *again.tolist()}) == [1, 2, 3, 4, 5]
    assert ids.lookup(np.array([99, 30], np.int64), add=False).tolist() == [0, first[3]]
