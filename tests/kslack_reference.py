"""A reference K-slack buffer, tuple by tuple, straight from its definition (Ji, Eq. 3.1).

Written apart from engines/disorder/kslack.py and sharing nothing with it: the tests give
both the same arrivals and expect the same released order. Definition: the buffer keeps the
tuples sorted by timestamp; when a tuple arrives, ``T`` (the largest timestamp seen so far)
moves, and every held tuple with ``ts + K <= T`` is released, smallest timestamp first (ties:
first arrived first). With a K that changes (``ks``, one per arrival), the release bound
``T - K`` never moves back (a tuple once allowed out is not held again). At the end of the
stream every held tuple is released in the same order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def released_order(ts: Sequence[int], k: int | Sequence[int]) -> list[int]:
    """Arrival positions of ``ts`` in the order a K-slack buffer releases them."""
    return [i for i, _ in released_with_tops(ts, k)]


def released_with_tops(ts: Sequence[int], k: int | Sequence[int]) -> list[tuple[int, int]]:
    """As :func:`released_order`, each position with ``T`` when it was released."""
    heap: list[tuple[int, int]] = []
    out: list[tuple[int, int]] = []
    top: int | None = None
    bound: int | None = None
    for i, t in enumerate(ts):
        top = t if top is None else max(top, t)
        kk = k if isinstance(k, int) else k[i]
        bound = top - kk if bound is None else max(bound, top - kk)
        heapq.heappush(heap, (t, i))
        while heap and heap[0][0] <= bound:
            out.append((heapq.heappop(heap)[1], top))
    while heap:
        out.append((heapq.heappop(heap)[1], top if top is not None else 0))
    return out


def delays(ts: Sequence[int]) -> list[int]:
    """Each tuple's delay: the largest timestamp seen before it minus its own, at least 0."""
    out = []
    top: int | None = None
    for t in ts:
        out.append(0 if top is None else max(0, top - t))
        top = t if top is None else max(top, t)
    return out
