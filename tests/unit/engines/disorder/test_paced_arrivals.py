"""kslack.paced: arrivals cut at multiples of the pace of the stream's progress, losing and
reordering nothing, whatever the batch sizes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.disorder.kslack import paced


@settings(max_examples=60, deadline=None)
@given(
    ts=st.lists(st.integers(0, 500), min_size=1, max_size=200),
    sizes=st.lists(st.integers(1, 50), min_size=1, max_size=10),
    pace=st.integers(1, 40),
)
def test_paced_slices_keep_every_row_in_order(ts: list[int], sizes: list[int], pace: int) -> None:
    col = np.array(ts, dtype=np.int64)
    batches, i, j = [], 0, 0
    while i < len(col):
        n = sizes[j % len(sizes)]
        batches.append(
            pa.record_batch(
                [pa.array(col[i : i + n]), pa.array(np.arange(i, i + n)[: len(col[i : i + n])])],
                names=["ts", "row"],
            )
        )
        i, j = i + n, j + 1
    out = list(paced(iter(batches), 0, pace))
    rows = np.concatenate([b.column(1).to_numpy() for b in out])
    assert rows.tolist() == list(range(len(col)))  # nothing lost, nothing reordered
    top = np.maximum.accumulate(col)
    for b in out:  # the stream's progress stays within one step of the pace in a slice
        r = b.column(1).to_numpy()
        assert b.num_rows > 0
        assert len(set((top[r] // pace).tolist())) == 1
