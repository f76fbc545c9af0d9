"""Quality-driven disorder handling for windowed aggregates (Ji, section 4.3, Figs. 4.9-4.11).

Smart-plug readings with induced Zipf delays (``hycq data generate --delay zipf:MAX,SKEW``),
a per-house SUM and a per-plug AVG of the load over windows of several sizes, run with

* No-K-slack (``--disorder none``: late tuples inserted into open windows, the rest dropped),
* Max-K-slack (``--disorder max``),
* AM (``--disorder quality --max-error EPS``) per error target (PD with ``--max-error`` is
  refused since issue 48: it does not hold the target, experiments/quality_targets.py),

and per configuration: event-time latency (``disorder.event_latency_s``: how far input had to
go before an instant could fire), wall-clock result latency p50/p99 (``disorder.latency_ms``),
the final K, the adaptation cost, and Phi(EPS) (hycq.quality.measure_quality: the share of
results with relative error <= EPS) against the truth (the same query with ``--disorder
kslack:<max delay>``), on the results after the first window plus 30 s (warm-up).

The seed's (the dissertation's) numbers, for comparison: AM cuts the latency of Max-K-slack
by 48%-99.98% while keeping Phi(eps) >= 92% (C++ engine, DEBS 2014 data, 30 min).

Usage (smoke scale: a few event-minutes; the lead runs it at scale on a quiet machine)::

    python experiments/qddh_aggregates.py --seconds 300 --houses 4 --windows 10,60 \\
        --errors 0.01,0.05 --json experiments/results/qddh_aggregates_smoke.json

Prints a table; writes JSON (and ``--plot PNG`` with matplotlib, if installed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hycq.quality import QualitySpec, measure_quality  # noqa: E402

CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"
QUERIES = {
    "sum_house": "SELECT house_id, SUM(value) AS v FROM readings "
    "[RANGE {w} SECONDS SLIDE 1 SECOND] WHERE property = 1 GROUP BY house_id\n",
    "avg_plug": "SELECT house_id, household_id, plug_id, AVG(value) AS v FROM readings "
    "[RANGE {w} SECONDS SLIDE 1 SECOND] WHERE property = 1 "
    "GROUP BY house_id, household_id, plug_id\n",
}


def hycq(*args: str | Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if r.returncode != 0:
        raise SystemExit(f"hycq {' '.join(map(str, args))} failed:\n{r.stderr}")


def run(query: Path, data: Path, out: Path, *flags: str) -> tuple[Any, dict[str, Any], float]:
    res, met = out.with_suffix(".parquet"), out.with_suffix(".json")
    start = time.perf_counter()
    hycq("run", query, "--catalog", CATALOG, "--data", f"readings={data}", "--placement", "row",
         *flags, "--output", res, "--metrics", met)  # fmt: skip
    wall = time.perf_counter() - start
    return pq.read_table(res), json.loads(met.read_text()).get("disorder") or {}, wall


def phi(result: Any, truth: Any, eps: float, skip_s: int) -> float | None:
    lo = pc.min(truth["_ts"]).as_py() + skip_s
    keep = lambda t: t.filter(pc.greater_equal(t["_ts"], lo))  # noqa: E731
    q = measure_quality(keep(result), keep(truth), QualitySpec(60, values=("v",), max_error=eps))
    return q["error"]["phi_eps"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--houses", type=int, default=4)
    ap.add_argument("--max-delay", type=int, default=30, help="Zipf delays up to this (s)")
    ap.add_argument("--skew", type=float, default=1.0)
    ap.add_argument("--windows", default="10,60", help="window sizes, seconds")
    ap.add_argument("--errors", default="0.01,0.05", help="--max-error targets")
    ap.add_argument("--queries", default="sum_house,avg_plug")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        data = d / "sp.csv"
        delay = f"zipf:{a.max_delay},{a.skew}"
        hycq("data", "generate", "--out", data, "--seconds", str(a.seconds), "--houses",
             str(a.houses), "--delay", delay, "--seed", str(a.seed))  # fmt: skip
        for qname in a.queries.split(","):
            for w in map(int, a.windows.split(",")):
                query = d / f"{qname}_{w}.sql"
                query.write_text(QUERIES[qname].format(w=w))
                truth, _, _ = run(query, data, d / f"{qname}_{w}_truth",
                                  "--disorder", f"kslack:{a.max_delay}s")  # fmt: skip
                skip = w + 30
                configs: list[tuple[str, float | None, list[str]]] = [
                    ("No-K-slack", None, ["--disorder", "none"]),
                    ("Max-K-slack", None, ["--disorder", "max"]),
                ]
                configs += [
                    ("AM", eps, ["--disorder", "quality", "--max-error", str(eps)])
                    for eps in map(float, a.errors.split(","))
                ]  # fmt: skip
                for name, eps, flags in configs:
                    tag = f"{qname}_{w}_{name}_{eps}".replace(".", "_")
                    res, dis, wall = run(query, data, d / tag, *flags)
                    quality = dis.get("quality") or {}
                    ev = dis.get("event_latency_s") or {}
                    lat = dis.get("latency_ms") or {}
                    streams = dis.get("streams") or {}
                    row = {
                        "query": qname,
                        "window_s": w,
                        "method": name,
                        "max_error": eps,
                        "event_latency_s_p50": ev.get("p50"),
                        "event_latency_s_p99": ev.get("p99"),
                        "latency_ms_p50": lat.get("p50"),
                        "latency_ms_p99": lat.get("p99"),
                        "k_s": streams.get("readings", {}).get("k_s"),
                        "adapt_us_mean": quality.get("adapt_us_mean"),
                        "adapt_us_max": quality.get("adapt_us_max"),
                        "wall_s": wall,
                    }
                    for e in sorted({float(x) for x in a.errors.split(",")}):
                        row[f"phi_{e:g}"] = phi(res, truth, e, skip)
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr)
    errs = sorted({float(x) for x in a.errors.split(",")})
    head = ["query", "W s", "method", "eps", "ev lat p50 s", "lat p50 ms", "lat p99 ms", "K s"]
    head += [f"Phi({e:g})" for e in errs]
    print(" | ".join(head))
    for r in rows:
        cells = [r["query"], r["window_s"], r["method"], r["max_error"], r["event_latency_s_p50"],
                 r["latency_ms_p50"], r["latency_ms_p99"], r["k_s"]]  # fmt: skip
        cells += [r[f"phi_{e:g}"] for e in errs]
        print(" | ".join(f"{c:.3g}" if isinstance(c, float) else str(c) for c in cells))
    meta = {"seconds": a.seconds, "houses": a.houses, "max_delay_s": a.max_delay,
            "skew": a.skew, "seed": a.seed, "note": "smoke scale unless stated"}  # fmt: skip
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if a.plot:
        plot(rows, a.plot)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in rows:
        ax.scatter(r["event_latency_s_p50"] or 0, r.get("phi_0.01") or 0, label=None)
        ax.annotate(f"{r['method']} W{r['window_s']}", (r["event_latency_s_p50"] or 0,
                    r.get("phi_0.01") or 0), fontsize=6)  # fmt: skip
    ax.set_xlabel("event-time latency p50 (s)")
    ax.set_ylabel("Phi(0.01)")
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
