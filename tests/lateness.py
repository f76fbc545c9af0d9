"""Which tuples an engine may drop as *late*: the expectation tests check engines against.

The oracle (tests/oracle.py) states the result from event time alone and drops nothing for
being late. An engine processes tuples in arrival order and may drop a tuple that arrives
after an instant it can no longer change has fired (docs/semantics.md, "Late tuples"). This
module computes exactly those tuples, separately from the oracle, so a test can (1) give the
oracle the input without them and (2) expect the engine's ``dead_letter`` to count them.

The rule checked (:func:`late_in_own_stream`), with timestamps in the query's time base:

* A stream's *progress* at a tuple is the largest timestamp of its stream up to and
  including that tuple (its running maximum). The engine sees the streams merged in order
  of progress (ties in any order; the order within a stream is kept).
* Instant ``T`` has fired when a tuple arrives if ``T`` is a plan instant (a multiple of a
  window's slide, not before the first instant) lower than the largest timestamp accepted
  before the tuple. The first instant of slide ``s`` is ``ceil(m / s) * s``, ``m`` the
  smallest timestamp accepted before any instant fired.
* A tuple whose timestamp is not after a fired instant is late. Because the merge follows
  progress, this happens only to a tuple out of order in its own stream: one whose own
  stream had already delivered a timestamp after that instant. A tuple in order in its own
  stream is never late, however the streams interleave.
* A count-sliding query (``[ROWS n SLIDE m]``) has no slide instants: nothing is late.
* Malformed rows (NULL, NaN, infinity) are rejected before and do not take part.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import pyarrow as pa

from optimizer.ir.catalog import TIME_UNITS_MS, Catalog
from optimizer.ir.errors import Source
from optimizer.sql.parse import parse_select
from tests.oracle import parse_windows, row_is_well_formed, time_base

__all__ = ["dead_letter_count", "late_in_own_stream", "late_instants", "without_late"]


def _ceil_to(x: int, s: int) -> int:
    return -(-x // s) * s


def _late_in_sequence(ts: Sequence[int], slides: Sequence[int]) -> list[bool]:
    """Lateness along one arrival sequence already in progress order (see the module
    docstring): a tuple is late when its timestamp is not after a plan instant below the
    largest timestamp accepted before it."""
    return [f is not None for f in _fired_at_late(ts, slides)]


def _fired_at_late(ts: Sequence[int], slides: Sequence[int]) -> list[int | None]:
    """Per tuple of the sequence: None when it is on time, else the last instant that had
    fired when it arrived. (A late tuple kept for late insertion changes neither the
    smallest nor the largest timestamp accepted before the first instant fires, so this
    holds whether late tuples are dropped or inserted.)"""
    late: list[int | None] = []
    lo: int | None = None
    hi: int | None = None
    for t in ts:
        fired = None
        if lo is not None and hi is not None:
            below = [last for s in slides if (last := ((hi - 1) // s) * s) >= _ceil_to(lo, s)]
            fired = max(below) if below else None
        if fired is not None and t <= fired:
            late.append(fired)
            continue
        late.append(None)
        if fired is None:
            lo = t if lo is None else min(lo, t)  # the first instant follows the minimum
        hi = t if hi is None else max(hi, t)
    return late


def late_in_own_stream(
    query_text: str, catalog: Catalog, inputs: dict[str, pa.Table]
) -> dict[str, list[bool]]:
    """Per stream the query reads, per input row (arrival order): is it dropped as late?
    Malformed rows are False here (they are rejected as invalid, not as late)."""
    fired = late_instants(query_text, catalog, inputs)
    return {name: [f is not None for f in v] for name, v in fired.items()}


def late_instants(
    query_text: str, catalog: Catalog, inputs: dict[str, pa.Table]
) -> dict[str, list[int | None]]:
    """As :func:`late_in_own_stream`, but per late row the last instant that had fired when
    it arrived (query time base), None for a row on time."""
    tree = parse_select(Source(query_text))
    windows = parse_windows(tree, catalog)
    base = time_base(tree, catalog)
    by_name = {k.lower(): v for k, v in inputs.items()}
    streams = sorted({w.stream for w in windows})
    out: dict[str, list[int | None]] = {}
    # (progress, stream number, position, timestamp) of every well-formed tuple.
    merged: list[list[tuple[int, int, int, int]]] = []
    for k, name in enumerate(streams):
        stream = catalog.get(name)
        assert stream is not None
        table = by_name.get(name)
        n = table.num_rows if table is not None else 0
        out[name] = [None] * n
        if table is None:
            merged.append([])
            continue
        cols = [c.name for c in stream.columns]
        rows = list(zip(*(table.column(c).to_pylist() for c in cols), strict=True))
        factor = TIME_UNITS_MS[stream.time_unit] // TIME_UNITS_MS[base]
        t_index = cols.index(stream.timestamp)
        seq: list[tuple[int, int, int, int]] = []
        top: int | None = None
        for i, row in enumerate(rows):
            if not row_is_well_formed(row):
                continue
            t = row[t_index] * factor
            top = t if top is None else max(top, t)
            seq.append((top, k, i, t))
        merged.append(seq)
    if any(w.count_slide for w in windows):
        return out
    order = list(heapq.merge(*merged))
    late = _fired_at_late([t for _, _, _, t in order], sorted({w.slide for w in windows}))
    for (_, k, i, _), fired in zip(order, late, strict=True):
        out[streams[k]][i] = fired
    return out


def without_late(
    query_text: str, catalog: Catalog, inputs: dict[str, pa.Table]
) -> dict[str, pa.Table]:
    """``inputs`` without the tuples :func:`late_in_own_stream` marks: the oracle's input for
    a run whose engine drops them."""
    late = late_in_own_stream(query_text, catalog, inputs)
    out = dict(inputs)
    for name, table in inputs.items():
        mask = late.get(name.lower())
        if mask and any(mask):
            out[name] = table.filter(pa.array([not x for x in mask], pa.bool_()))
    return out


def dead_letter_count(query_text: str, catalog: Catalog, inputs: dict[str, pa.Table]) -> int:
    """The rows an engine dead-letters: malformed ones plus late ones (streams the query
    reads; catalog columns only)."""
    late = late_in_own_stream(query_text, catalog, inputs)
    count = 0
    for name, table in inputs.items():
        stream = catalog.get(name)
        if stream is None or name.lower() not in late:
            continue
        cols = [c.name for c in stream.columns]
        rows = zip(*(table.column(c).to_pylist() for c in cols), strict=True)
        count += sum(not row_is_well_formed(r) for r in rows)
        count += sum(late[name.lower()])
    return count
