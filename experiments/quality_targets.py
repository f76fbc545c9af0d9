"""Quality targets of ``--disorder quality`` on every placement and late policy (issue 48,
section 2), measured against our own truth.

Data (``hycq data generate --generator keyed``, millisecond timestamps, docs/disorder-quality.md):

* join: two streams ``r``, ``s`` (``--rate`` tuples/s each, ``--keys`` join keys), Zipf delays
  up to 10 s (``r: zipf:10s,SKEW_R``, ``s: zipf:10s,SKEW_S``), and their ISTREAM equi-join over
  10 s windows sliding by 1 s (every result once; ``--min-recall``);
* aggregate: one stream ``s`` (``--agg-rate`` tuples/s, ``--agg-keys`` groups), Zipf delays up
  to 10 s, and its per-key SUM over 20 s sliding by 1 s (``--max-error 0.01 --confidence
  0.95``, Phi(0.01) >= 0.95).

The truth is the same query with ``--disorder kslack:10s`` (the largest delay drawn) on the
row engine. Per configuration (the rows of the issue's table, plus DataFusion, mixed
placements, PD on a columnar placement and, with ``--spark``, Spark): the measured quality
(hycq.quality.measure_quality; joins with ``any_instant``: a result counts at whatever
instant it came) overall and after the first period ``P`` (60 s, ``--period``): for joins
the recall of every tumbling period and the worst after the first, for aggregates Phi(0.01)
over the results after the first period; the K the policy ended with, the event-time
latency p50, the policy's own estimate of the recall (joins) and the late tuples dropped and
inserted. A combination the run refuses (exit 2) is recorded with its ``error:`` line.

``--before REV`` runs every configuration a second time with the code of git revision REV
(``git archive`` into a temporary folder): the "before" column of one result file.

Usage (the full table: about 6 minutes with ``--before`` on a loaded 2-core machine;
``--spark`` adds about 18, each Spark run starting a JVM)::

    python experiments/quality_targets.py --spark --before e8c9de8 \\
        --json experiments/results/quality_targets.json

Short runs while developing: ``--seconds 120 --only join-am-row-0.90,sum-am-duckdb``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hycq.quality import QualitySpec, measure_quality  # noqa: E402

JOIN = (
    "SELECT ISTREAM r.ts AS t1, s.ts AS t2, r.k FROM r [RANGE 10 SECONDS SLIDE 1 SECOND] AS r, "
    "s [RANGE 10 SECONDS SLIDE 1 SECOND] AS s WHERE r.k = s.k{extra}\n"
)
SUM = "SELECT k, SUM(v) AS total FROM s [RANGE 20 SECONDS SLIDE 1 SECOND]{where} GROUP BY k\n"
#: Mixed placements: one operator on DuckDB, the rest on the row engine. The join's filter
#: on r (always true) runs on DuckDB, so r's window feeds a MIG (late tuples dropped) and
#: s's is a row window (inserted); the aggregate's filter likewise, the SUM on the row engine.
MIXED = {"select1": "duckdb"}


@dataclass(frozen=True)
class Config:
    """One row of the table: a query kind, method, placement, late policy and target."""

    name: str
    kind: str  # join | sum
    method: str  # am | pd
    placement: str  # row | duckdb | datafusion | spark | mixed
    late: str  # insert | drop
    target: float  # min recall, or the Phi(0.01) to reach


CONFIGS = (
    # The table, in its order.
    Config("join-am-row-0.90", "join", "am", "row", "insert", 0.90),
    Config("join-am-duckdb-0.90", "join", "am", "duckdb", "insert", 0.90),
    Config("join-am-row-drop-0.95", "join", "am", "row", "drop", 0.95),
    Config("join-am-row-0.99", "join", "am", "row", "insert", 0.99),
    Config("join-pd-row-0.95", "join", "pd", "row", "insert", 0.95),
    Config("sum-am-row", "sum", "am", "row", "insert", 0.95),
    Config("sum-am-duckdb", "sum", "am", "duckdb", "insert", 0.95),
    Config("sum-pd-row", "sum", "pd", "row", "insert", 0.95),
    Config("sum-pd-duckdb", "sum", "pd", "duckdb", "insert", 0.95),
    # Beyond the table: DataFusion, mixed placements, PD for joins on a column placement,
    # the aggregate with --late drop.
    Config("join-am-datafusion-0.90", "join", "am", "datafusion", "insert", 0.90),
    Config("join-am-mixed-0.90", "join", "am", "mixed", "insert", 0.90),
    Config("join-pd-duckdb-0.95", "join", "pd", "duckdb", "insert", 0.95),
    Config("sum-am-row-drop", "sum", "am", "row", "drop", 0.95),
    Config("sum-am-datafusion", "sum", "am", "datafusion", "insert", 0.95),
    Config("sum-am-mixed", "sum", "am", "mixed", "insert", 0.95),
)
SPARK = (
    Config("join-am-spark-0.90", "join", "am", "spark", "insert", 0.90),
    Config("sum-am-spark", "sum", "am", "spark", "insert", 0.95),
)


def hycq(code: Path, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``hycq`` from the source tree ``code``, in a child process."""
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
    )
    if check and r.returncode != 0:
        raise SystemExit(f"hycq {' '.join(map(str, args))} failed:\n{r.stderr}")
    return r


def generate(d: Path, a: argparse.Namespace) -> dict[str, Path]:
    """The two data sets, their queries (plain and with the mixed placement's filter) and
    truths."""
    code = ROOT
    j, s = d / "join", d / "sum"
    hycq(code, "data", "generate", "--generator", "keyed", "--out", j, "--seconds",
         str(a.seconds), "--rate", str(a.rate), "--time-unit", "ms", "--keys", str(a.keys),
         "--stream", f"r:delay=zipf:10s,{a.skew_r}", "--stream", f"s:delay=zipf:10s,{a.skew_s}",
         "--seed", str(a.seed))  # fmt: skip
    hycq(code, "data", "generate", "--generator", "keyed", "--out", s, "--seconds",
         str(a.seconds), "--rate", str(a.agg_rate), "--time-unit", "ms", "--keys",
         str(a.agg_keys), "--stream", f"s:delay=zipf:10s,{a.skew_r}", "--seed",
         str(a.seed + 1))  # fmt: skip
    paths = {"join_catalog": j / "catalog.toml", "sum_catalog": s / "catalog.toml"}
    for name, text in (
        ("join", JOIN.format(extra="")),
        ("join_mixed", JOIN.format(extra=" AND r.v >= 0")),
        ("sum", SUM.format(where="")),
        ("sum_mixed", SUM.format(where=" WHERE v >= 0")),
    ):
        paths[name] = d / f"{name}.sql"
        paths[name].write_text(text)
    paths["mixed"] = d / "mixed.json"
    paths["mixed"].write_text(json.dumps(MIXED))
    for kind in ("join", "sum"):
        paths[f"{kind}_truth"] = d / f"{kind}_truth.parquet"
        hycq(code, "run", paths[kind], "--catalog", paths[f"{kind}_catalog"], "--placement",
             "row", "--disorder", "kslack:10s", "--output", paths[f"{kind}_truth"],
             "--no-progress")  # fmt: skip
    return paths


def placement_flags(c: Config, paths: dict[str, Path]) -> tuple[Path, list[str]]:
    """The query file and the placement flags of a configuration."""
    if c.placement == "mixed":
        return paths[f"{c.kind}_mixed"], ["--placement", str(paths["mixed"])]
    if c.placement == "row":
        return paths[c.kind], ["--placement", "row"]
    return paths[c.kind], ["--placement", "column", "--column-engine", c.placement]


def run_config(c: Config, code: Path, paths: dict[str, Path], d: Path, period: int) -> dict:
    """Run one configuration with the code at ``code``; its measured quality."""
    query, flags = placement_flags(c, paths)
    res, met = d / f"{c.name}.parquet", d / f"{c.name}.json"
    target = (
        ["--min-recall", str(c.target)]
        if c.kind == "join"
        else ["--max-error", "0.01", "--confidence", "0.95"]
    )
    start = time.perf_counter()
    r = hycq(code, "run", query, "--catalog", paths[f"{c.kind}_catalog"], *flags, "--late",
             c.late, "--disorder", "quality", *target, "--adapt-method", c.method, "--output",
             res, "--metrics", met, "--no-progress", check=False)  # fmt: skip
    wall = time.perf_counter() - start
    out: dict[str, Any] = {"wall_s": round(wall, 1)}
    if r.returncode != 0:
        out["exit"] = r.returncode
        out["refused"] = next(
            (ln for ln in r.stderr.splitlines() if ln.startswith("error:")), r.stderr[-400:]
        )
        return out
    metrics = json.loads(met.read_text())
    dis = metrics["disorder"]
    q = dis.get("quality") or {}
    streams = dis.get("streams") or {}
    out.update(
        k_s={s: v["k_s"] for s, v in streams.items()},
        k_mean_s={s: _mean_k(v["k_timeline"]) for s, v in streams.items()},
        event_latency_s_p50=(dis.get("event_latency_s") or {}).get("p50"),
        late_dropped={s: v["late_dropped"] for s, v in streams.items()},
        late_inserted=dis.get("late_inserted"),
        late=q.get("late"),
        adapt_us_mean=q.get("adapt_us_mean"),
    )
    result, truth = pq.read_table(res), pq.read_table(paths[f"{c.kind}_truth"])
    if c.kind == "join":
        spec = QualitySpec(period, min_recall=c.target, any_instant=True)
        rec = measure_quality(result, truth, spec)["recall"]
        periods = [float(p["recall"]) for p in rec["periods"] if p["recall"] is not None]
        out.update(
            overall=rec["overall"],
            periods=periods,
            worst_after_first=min(periods[1:]) if len(periods) > 1 else None,
            estimated_recall=q.get("estimated_recall"),
        )
        out["met"] = bool(
            out["worst_after_first"] is not None and out["worst_after_first"] >= c.target
        )
    else:
        spec = QualitySpec(period, values=("total",), max_error=0.01)
        lo = pc.min(truth["_ts"]).as_py() + period
        after = measure_quality(_from(result, lo), _from(truth, lo), spec)["error"]["phi_eps"]
        out.update(
            overall=measure_quality(result, truth, spec)["error"]["phi_eps"],
            after_first=after,
            coverage_threshold=q.get("coverage_threshold"),
        )
        out["met"] = bool(after is not None and after >= c.target)
    return out


def _from(table: Any, lo: int) -> Any:
    return table.filter(pc.greater_equal(table["_ts"], lo))


def _mean_k(timeline: list[list[float]]) -> float | None:
    """The mean of a K timeline ([event-second, K s] samples)."""
    return round(sum(k for _, k in timeline) / len(timeline), 3) if timeline else None


def archive(rev: str, into: Path) -> Path:
    """The source tree of git revision ``rev`` (``git archive``) under ``into``."""
    into.mkdir(parents=True)
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--rate", type=float, default=20, help="join: tuples/s per stream")
    ap.add_argument("--keys", type=int, default=20, help="join: distinct keys")
    ap.add_argument("--agg-rate", type=float, default=100, help="aggregate: tuples/s")
    ap.add_argument("--agg-keys", type=int, default=5, help="aggregate: groups")
    ap.add_argument("--skew-r", type=float, default=1.0, help="Zipf skew of r's delays")
    ap.add_argument("--skew-s", type=float, default=1.5, help="Zipf skew of s's delays")
    ap.add_argument("--period", type=float, default=60, help="recall period P, seconds")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--spark", action="store_true", help="also Spark (starts a JVM)")
    ap.add_argument("--only", help="comma-separated configuration names")
    ap.add_argument("--before", help="git revision to measure as 'before'")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    configs = [*CONFIGS, *(SPARK if a.spark else ())]
    if a.only:
        wanted = set(a.only.split(","))
        configs = [c for c in configs if c.name in wanted]
    period = round(a.period * 1000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        paths = generate(d, a)
        old = archive(a.before, d / "before") if a.before else None
        for c in configs:
            row: dict[str, Any] = {**c.__dict__, "after": run_config(c, ROOT, paths, d, period)}
            if old is not None:
                (d / "b").mkdir(exist_ok=True)
                row["before"] = run_config(c, old, paths, d / "b", period)
            rows.append(row)
            print(_line(row), flush=True)
    out = {
        "params": {k: v for k, v in vars(a).items() if k != "json"} | {"json": str(a.json)},
        "rows": rows,
    }
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1) + "\n")


def _line(row: dict[str, Any]) -> str:
    """One printed line per configuration: target, before, after."""

    def q(m: dict[str, Any] | None) -> str:
        if m is None:
            return "-"
        if "refused" in m:
            return "refused"
        if row["kind"] == "join":
            return f"{m['overall']:.3f} (worst period {m['worst_after_first']:.3f})"
        return f"{m['overall']:.3f} (after the first period {m['after_first']:.3f})"

    return f"{row['name']:26} target {row['target']:.2f}  before {q(row.get('before'))}  " + (
        f"after {q(row['after'])}  K {row['after'].get('k_s')}"
    )


if __name__ == "__main__":
    main()
