"""engines/time_merge.py: streams merged by event time, batch sizes notwithstanding."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.time_merge import TimeMerge


def _batches(ts: list[int], size: int) -> list[pa.RecordBatch]:
    table = pa.table({"ts": pa.array(ts, pa.int64()), "i": pa.array(range(len(ts)), pa.int64())})
    return table.to_batches(max_chunksize=size)


def _merge(streams: list[list[int]], sizes: list[int], **kw: object) -> list[tuple[int, list]]:
    inputs = [(iter(_batches(ts, n)), 0) for ts, n in zip(streams, sizes, strict=True)]
    merge = TimeMerge(inputs, **kw)  # type: ignore[arg-type]
    return [(k, b.column(0).to_pylist()) for k, b in merge]


def test_tuples_interleave_by_time_whatever_the_batch_sizes() -> None:
    a = [1, 2, 3, 10, 11, 12]
    b = [4, 5, 6, 7, 13]
    for sizes in ([100, 100], [1, 1], [4, 2], [3, 100]):
        out = _merge([a, b], sizes)
        flat = [t for _, ts in out for t in ts]
        assert flat == sorted(a + b), sizes
        # Slices of one stream: each stream's own order is kept.
        assert [t for k, ts in out if k == 0 for t in ts] == a


def test_ties_take_whole_runs() -> None:
    # Equal keys: the first stream starts; a slice takes every key up to the other's next.
    assert _merge([[5, 5, 6], [5, 6]], [10, 10]) == [(0, [5, 5]), (1, [5, 6]), (0, [6])]


def test_an_out_of_order_tuple_travels_with_its_streams_running_maximum() -> None:
    # a: 1, 9, 3 -- 3 is behind a's maximum 9, so it comes right after 9, before b's 10.
    out = _merge([[1, 9, 3, 12], [2, 10]], [10, 10])
    assert out == [(0, [1]), (1, [2]), (0, [9, 3]), (1, [10]), (0, [12])]


def test_slices_snap_to_slide_boundaries() -> None:
    # Grid 5: a runs up to the next multiple of 5 at or after b's next key (2 -> 5), then b up
    # to the one after a's next key (6 -> 10): no instant lies inside a slice.
    out = _merge([[1, 2, 3, 4, 6], [2, 7]], [10, 10], grid=[5])
    assert out == [(0, [1, 2, 3, 4]), (1, [2, 7]), (0, [6])]
    # Without a grid, exact tuple order.
    out = _merge([[1, 2, 3, 4, 6], [2, 7]], [10, 10])
    assert out == [(0, [1, 2]), (1, [2]), (0, [3, 4, 6]), (1, [7])]


def test_progress_and_end_reports_come_before_the_next_slice() -> None:
    events: list[tuple[str, int, int | None]] = []
    merge = TimeMerge(
        [(iter(_batches([1, 5], 1)), 0), (iter(_batches([3], 1)), 0)],
        on_progress=lambda k, key: events.append(("progress", k, key)),
        on_end=lambda k: events.append(("end", k, None)),
    )
    for k, b in merge:
        events.append(("slice", k, b.column(0)[0].as_py()))
    assert events == [
        ("progress", 0, 1),
        ("progress", 1, 3),
        ("slice", 0, 1),
        ("progress", 0, 5),  # a's next batch, read once its first was emitted
        ("slice", 1, 3),
        ("end", 1, None),
        ("slice", 0, 5),
        ("end", 0, None),
    ]


def test_a_stream_is_read_one_batch_ahead() -> None:
    read = [0, 0]
    emitted = [0, 0]

    def counted(k: int, ts: list[int], size: int) -> Iterator[pa.RecordBatch]:
        for b in _batches(ts, size):
            read[k] += b.num_rows
            yield b

    dense = list(range(0, 10_000))
    sparse = list(range(0, 10_000, 100))
    merge = TimeMerge([(counted(0, dense, 64), 0), (counted(1, sparse, 64), 0)])
    for k, b in merge:
        emitted[k] += b.num_rows
        assert read[0] - emitted[0] <= 64 and read[1] - emitted[1] <= 64
        assert merge.pending_rows(0) <= 64
    assert emitted == [10_000, 100]


def test_span_cuts_all_streams_at_the_first_timestamp_of_any() -> None:
    out = _merge([[10, 11, 12, 13, 14], [12, 13, 20]], [2, 2], span=3)  # ts < 10 + 3
    assert sorted(t for _, ts in out for t in ts) == [10, 11, 12, 12]


def test_prepare_may_drop_rows() -> None:
    def even(_k: int, b: pa.RecordBatch) -> pa.RecordBatch:
        return b.filter(pa.array([t % 2 == 0 for t in b.column(0).to_pylist()]))

    out = _merge([[1, 2, 3, 4], [1, 3, 5]], [1, 1], prepare=even)
    assert [t for _, ts in out for t in ts] == [2, 4]


@settings(max_examples=100, deadline=None, database=None)
@given(
    streams=st.lists(st.lists(st.integers(0, 50), max_size=30), min_size=1, max_size=4),
    sizes=st.lists(st.integers(1, 8), min_size=4, max_size=4),
    grid=st.sampled_from([[], [1], [3], [2, 5]]),
)
def test_merged_order_follows_each_streams_running_maximum(
    streams: list[list[int]], sizes: list[int], grid: list[int]
) -> None:
    sizes = sizes[: len(streams)]
    out = TimeMerge(
        [(iter(_batches(ts, n)), 0) for ts, n in zip(streams, sizes, strict=True)], grid=grid
    )
    seen: list[list[int]] = [[] for _ in streams]
    keys: list[int] = []
    for k, b in out:
        seen[k].extend(b.column(1).to_pylist())
        keys.extend(max(streams[k][: i + 1]) for i in b.column(1).to_pylist())
    # Every tuple exactly once, in its stream's order.
    assert seen == [list(range(len(ts))) for ts in streams]
    # The progress keys never go down across a slide boundary (without a grid: never).
    for x, y in itertools.pairwise(keys):
        if y < x:
            assert grid and all(-(-y // g) * g >= x for g in grid), (x, y)
