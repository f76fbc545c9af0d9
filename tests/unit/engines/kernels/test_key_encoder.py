"""KeyEncoder (engines/kernels/keys.py) against a dict of Python tuples: the same rows get
the same ids across calls, distinct tuples distinct ids, and the keys come back."""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.kernels import keys as keys_mod
from engines.kernels.keys import KeyEncoder


def canonical(v: object) -> object:
    """How SQL groups a key value: -0.0 is 0.0, NaN is one value."""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else v + 0.0
    return v


ints = st.one_of(st.none(), st.integers(-5, 5), st.integers(-(2**63), 2**63 - 1))
floats = st.one_of(st.none(), st.sampled_from([0.0, -0.0, math.nan, 1.5, -2.0, math.inf]))
texts = st.one_of(st.none(), st.sampled_from(["", "a", "b", "é"]))
COLUMNS = {"i": (pa.int64(), ints), "f": (pa.float64(), floats), "s": (pa.string(), texts)}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("ifs"), min_size=1, max_size=4),
    st.data(),
)
def test_ids_follow_a_dict_of_tuples(kinds: list[str], data: st.DataObject) -> None:
    enc = KeyEncoder([COLUMNS[k][0] for k in kinds])
    row = st.tuples(*[COLUMNS[k][1] for k in kinds])
    seen: dict[tuple[object, ...], int] = {}
    for _ in range(data.draw(st.integers(1, 4))):
        rows = data.draw(st.lists(row, max_size=12))
        if not rows:
            continue
        cols = [pa.array([r[i] for r in rows], COLUMNS[k][0]) for i, k in enumerate(kinds)]
        probe = enc.encode(cols, add=False)
        before = dict(seen)
        ids = enc.encode(cols)
        for r, g, p in zip(rows, ids.tolist(), probe.tolist(), strict=True):
            key = tuple(canonical(v) for v in r)
            assert p == before.get(key, -1)
            assert seen.setdefault(key, g) == g
        assert len(set(seen.values())) == len(seen) == enc.size
    if seen:
        back = enc.keys(list(seen.values()))
        got = list(zip(*(c.to_pylist() for c in back), strict=True))
        assert [tuple(canonical(v) for v in t) for t in got] == list(seen)


def test_wide_keys_fall_back_to_tuples(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(keys_mod, "_PACKED_BITS", 6)
    enc = KeyEncoder([pa.string(), pa.string()])
    a = pa.array([str(i) for i in range(40)])
    ids = enc.encode([a, a])
    assert ids.tolist() == list(range(40))
    assert enc.encode([a[::-1], a[::-1]]).tolist() == list(range(39, -1, -1))
