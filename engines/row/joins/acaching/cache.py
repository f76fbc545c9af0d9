"""A-Caching's cache storage: the direct-mapped subresult cache and its sizing.

Storage (section 3.3): direct-mapped, a fixed number of buckets; creating a key's entry
evicts whatever key held its bucket, which is always safe (a miss recomputes). The entries
themselves live in a dict (``SubresultCache``), so Lookups and Updates are one ``get``.
Entries are exact (Def. 3.1): ``v = sigma_{K=u}(segment)``, empty ones included. Each
Lookup runs before the segment: a hit emits ``q + s`` for every ``s`` of the
entry and jumps past the segment; misses of one batch are grouped by key, the segment runs
once per distinct key from one representative partial, and the result creates the entry.

The package docstring (``engines.row.joins.acaching``) lists the other parts.
"""

from __future__ import annotations

import math
from typing import Any

from engines.row.base import Row, Rows

#: Bytes per cached tuple reference and per entry (CPython list slot, entry list and key).
TUPLE_BYTES = 8
ENTRY_BYTES = 120


#: An empty slot of ``SubresultCache.slots``.
_EMPTY: Any = object()


class SubresultCache:
    """Direct-mapped storage of one (possibly shared) cache: ``buckets`` slots; a key ``u``
    lives in slot ``hash(u) % buckets`` and creating it evicts the slot's previous key. Tuples
    are the segment's, in the layout of ``layout`` (global columns).

    The slots hold only keys; the entries live in a dict ``u -> tuples``, so a Lookup or an
    Update is one ``dict.get`` (the hot loops) while which keys are present is exactly the
    direct-mapped table's (``slots`` is kept in step by ``create`` and ``drop``)."""

    __slots__ = ("buckets", "entries", "hits", "inconsistent", "layout", "misses", "slots")

    def __init__(self, buckets: int, layout: tuple[int, ...]) -> None:
        self.buckets = max(1, buckets)
        self.slots: list[Any] = [_EMPTY] * self.buckets
        self.entries: dict[Any, Rows] = {}
        self.hits = 0
        self.misses = 0
        self.inconsistent = 0
        self.layout = layout

    def probe(self, u: Any) -> Rows | None:
        return self.entries.get(u)

    def create(self, u: Any, v: Rows) -> None:
        h = hash(u) % self.buckets
        old = self.slots[h]
        if old is not _EMPTY and old is not u and old != u:
            del self.entries[old]  # the direct-mapped eviction
        self.slots[h] = u
        self.entries[u] = v

    def drop(self, u: Any) -> None:
        if self.entries.pop(u, None) is not None:
            self.slots[hash(u) % self.buckets] = _EMPTY

    def insert(self, u: Any, s: Row) -> None:
        e = self.entries.get(u)
        if e is not None:
            e.append(s)

    def delete(self, u: Any, s: Row) -> None:
        e = self.entries.get(u)
        if e is not None:
            try:
                e.remove(s)
            except ValueError:  # cannot happen while Def. 3.1 holds: drop the entry (safe)
                self.drop(u)
                self.inconsistent += 1

    def tuples(self) -> int:
        return sum(len(v) for v in self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)


def buckets_for(keys: float) -> int:
    """Direct-mapped buckets for ``keys`` expected keys: a power of two >= 8 x keys (about 12%
    of the keys then share a bucket with another), at least 64."""
    return max(64, 1 << max(0, math.ceil(math.log2(8 * keys + 1))))
