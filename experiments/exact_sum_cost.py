"""What a correctly rounded SUM of DOUBLE costs a columnar engine's re-evaluated SQL.

DataFusion and Spark sum DOUBLEs through ``hycq_exact_sum(ARRAY_AGG(x))`` (the values of a
group gathered and summed exactly by engines.kernels.exact_sum); DuckDB through its macro
``hycq_scaled_sum(x)`` (values scaled to 128-bit integers, engines/duckdb/exact_sums.py),
where a plain ``SUM(x)`` would add them in an order of the engine's choosing. This times,
side by side and interleaved in one process, a per-plug ``SUM(value)`` and the exact forms
over windows of several sizes on each engine: the extra cost per value is the cost model's
``exact_sum`` constant (engines/<name>/spec.py).

    python experiments/exact_sum_cost.py --engines duckdb,datafusion,spark \
        --rows 100000,1000000,4000000 --repeat 7 --json experiments/results/exact_sum_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from engines import registry

PLAIN = "SELECT c0, SUM(c1) AS s FROM t GROUP BY c0"
#: What every engine can run: the values gathered and summed by hycq's kernel.
GATHERED = "SELECT c0, hycq_exact_sum(ARRAY_AGG(c1)) AS s FROM t GROUP BY c0"
#: DuckDB's one pass: the values scaled to 128-bit integers (engines/duckdb/exact_sums.py).
SCALED = "SELECT c0, hycq_scaled_sum(c1) AS s FROM t GROUP BY c0"


def window(rows: int, plugs: int, seed: int = 7) -> pa.Table:
    """Smart-plug-like readings: a plug id and a load with three decimals."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "c0": pa.array(rng.integers(0, plugs, rows), pa.int32()),
            "c1": pa.array(np.round(rng.gamma(2.0, 100.0, rows), 3), pa.float64()),
        }
    )


def sql(engine: str, text: str) -> str:
    return text.replace("ARRAY_AGG", "COLLECT_LIST") if engine == "spark" else text


def measure(engine_name: str, rows: int, plugs: int, repeat: int) -> dict[str, float]:
    factory = registry.get_columnar(engine_name).factory
    if factory is None:
        raise SystemExit(f"error: engine {engine_name!r} has no factory")
    engine = factory()
    table = window(rows, plugs)
    # one-second chunks of a 40k tuples/s stream, as a MIG input holds them
    chunks = [(i, table.slice(i, 40_000)) for i in range(0, rows, 40_000)]
    engine.set_input("t", chunks, table.schema)
    variants = {"plain": PLAIN, "gathered": GATHERED}
    if engine_name == "duckdb":
        variants["scaled"] = SCALED
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(2):  # warm every variant
        for text in variants.values():
            engine.query(sql(engine_name, text))
    for _ in range(repeat):
        for name, text in variants.items():
            t0 = time.perf_counter()
            engine.query(sql(engine_name, text))
            times[name].append(time.perf_counter() - t0)
    engine.drop_input("t")
    med = {k: statistics.median(v) for k, v in times.items()}
    out: dict[str, float] = {"rows": rows, "plain_ms": 1e3 * med["plain"]}
    for k in variants:
        if k != "plain":
            out[f"{k}_ms"] = 1e3 * med[k]
            out[f"{k}_ratio"] = med[k] / med["plain"]
            out[f"{k}_extra_ns_per_row"] = 1e9 * (med[k] - med["plain"]) / rows
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="duckdb,datafusion")
    p.add_argument("--rows", default="100000,1000000,4000000")
    p.add_argument("--plugs", type=int, default=1677)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    out: dict[str, list[dict[str, float]]] = {}
    for engine in a.engines.split(","):
        out[engine] = []
        for rows in map(int, a.rows.split(",")):
            r = measure(engine, rows, a.plugs, a.repeat)
            out[engine].append(r)
            parts = [
                f"{k} {r[f'{k}_ms']:7.1f} ms ({r[f'{k}_ratio']:.2f}x, "
                f"+{r[f'{k}_extra_ns_per_row']:.1f} ns/row)"
                for k in ("scaled", "gathered")
                if f"{k}_ms" in r
            ]
            print(f"{engine:10s} {rows:>9,} rows: SUM {r['plain_ms']:7.1f} ms; " + "; ".join(parts))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
