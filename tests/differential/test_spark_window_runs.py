"""The Spark engine's window upkeep (engines/spark/window_runs.py): after every slide of a
random sliding window (chunks of random sizes added, the oldest dropped, sometimes several
at once), the registered view holds exactly the live chunks' rows, while the runs stay at
most ``max_runs`` and merges happen."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

pytestmark = pytest.mark.spark


def _rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(zip(*(c.to_pylist() for c in table.columns), strict=True))


@pytest.mark.parametrize("seed", [1, 2])
def test_view_holds_exactly_the_live_chunks(seed: int) -> None:
    from engines.spark.engine import SparkEngine
    from engines.spark.window_runs import WindowRuns

    engine = SparkEngine()
    rng = random.Random(seed)
    schema = pa.schema([("k", pa.int32()), ("v", pa.float64())])
    chunks: list[tuple[int, pa.Table]] = []
    runs = WindowRuns(engine.spark, max_runs=3)
    engine._frames["w"] = runs  # the engine's own upkeep, with few runs to force merges
    try:
        for cid in range(40):
            n = rng.choice([0, 1, 5, 30])
            chunk = pa.table(
                {"k": [rng.randrange(5) for _ in range(n)], "v": [rng.random() for _ in range(n)]},
                schema=schema,
            )
            chunks.append((cid, chunk))
            while len(chunks) > rng.choice([4, 8, 12]):
                chunks.pop(0)
            engine.set_input("w", chunks, schema)
            got = engine.query("SELECT k, v FROM w")
            want = pa.concat_tables([c for _, c in chunks]) if chunks else schema.empty_table()
            assert _rows(got) == _rows(want), cid
            assert len(runs.runs) <= 3
        assert runs.merges > 10
    finally:
        engine.close()
