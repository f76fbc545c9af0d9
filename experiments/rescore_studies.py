"""Re-score many placement studies with the working tree's cost model, in one table.

``rescore_study.py`` re-predicts one study over one data file; a model change has to be
judged on every study on record (shapes, rates, query sets) at once, and a study over
several rates read a file per rate. This script takes the studies, finds each point's
data file in ``--data-dir`` by the study's naming (``SHAPE_RATE_SECONDS.parquet``: the
seconds ``placement_study.py`` generated, ``_data_file``), predicts C_b again for every
measured placement and prints, per point, whether the model's choice now is a hit (within
5% of the measured best or tied with it, ``hycq.bench_stats.hit``) and the Spearman
correlation of predicted C_b against measured 1/throughput, then a summary per shape and
rate. Nothing is measured again: this is in-sample (the placements were measured, the
model is judged on them after the fact), so a model change should then be measured
out-of-sample by running the studies again. ``--cost-model`` re-scores a candidate set of
constants (a TOML file over ``analytical``) without touching the code.

    python experiments/rescore_studies.py experiments/results/placement_study_few_40k.json \\
        experiments/results/placement_study_many_10k.json --data-dir /tmp/study --json rescored.json

(experiments/README.md gives the full command over every study on record, oldest first.)

Points whose data file is missing are skipped (and counted).

A point (query, shape, rate) measured by several studies counts once per study in the
totals. The newest view (printed last, ``newest`` in the JSON) keeps one per point: that
of the newest study (the latest on the command line: list the studies oldest first)
among those that measured the model's choice. Old studies ran older code and
an older bench: the newest view is what the working tree's model is judged by.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from scipy import stats


def _data_file(folder: Path, study: Path, query: str, shape: str, rate: float) -> Path:
    """The point's data file: ``placement_study.py`` generated 325 seconds for Q1-Q6 and
    629 for the unseen queries' longer windows, 13 more since the bench's untimed
    adapting seconds (``hycq.bench.ADAPT_S``, issue 20's twelfth stop); the first that
    exists."""
    long = "unseen" in study.name or "/unseen/" in query
    for seconds in (629, 642) if long else (325, 338):
        path = folder / f"{shape}_{int(rate)}_{seconds}.parquet"
        if path.exists():
            return path
    return path


def score_point(
    job: tuple[str, str, float, str, str, str, list[dict[str, Any]], str | None],
) -> dict[str, Any]:
    """One point re-predicted: the model's choice, whether it was measured and is a hit."""
    from hycq.api import load_query
    from hycq.bench_stats import hit
    from hycq.planning import OptimizerOptions, optimize
    from optimizer.ir.placement import complete_placement

    study, query, rate, shape, stream, data, records, model = job
    options = OptimizerOptions(rate=rate, data={stream: Path(data)}, cost_model=model)
    opt = optimize(load_query(Path(query)), options)
    distinct: dict[str, dict[str, Any]] = {}
    for r in records:
        distinct.setdefault(json.dumps(r["placement"], sort_keys=True), r)
    pred, meas = [], []
    for r in distinct.values():
        full = complete_placement(opt.plan, {**dict.fromkeys(opt.plan.topological(), "row"),
                                             **r["placement"]})  # fmt: skip
        pred.append(opt.cost_of(full).bottleneck)
        meas.append(1.0 / max(r["measured"]["throughput"], 1e-9))
    rho = float(stats.spearmanr(pred, meas).statistic) if len(pred) >= 3 else None
    chosen = {k: v for k, v in opt.placement.items() if v != "row"}
    rec = distinct.get(json.dumps(chosen, sort_keys=True))
    ordered = sorted(distinct.values(), key=lambda r: -r["measured"]["throughput"])
    out: dict[str, Any] = {"study": study, "query": Path(query).stem, "rate": rate,
                           "shape": shape, "spearman": rho, "chosen": sorted(chosen),
                           "measured": rec is not None}  # fmt: skip
    if rec is not None:
        m, best = rec["measured"], ordered[0]["measured"]
        tied = m["ci95"][1] >= best["ci95"][0] and best["ci95"][1] >= m["ci95"][0]
        out["ratio"] = m["throughput"] / best["throughput"]
        out["tied"] = tied
        out["hit"] = hit(out["ratio"], tied)
        out["rank"] = 1 + ordered.index(rec)
    return out


def newest(points: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """One point per (query, shape, rate): the newest study's that measured the model's
    choice, else the newest study's; ``order`` lists the studies oldest first (see the
    module docstring)."""
    rank = {name: i for i, name in enumerate(order)}

    def age(p: dict[str, Any]) -> tuple[bool, int]:
        return bool(p["measured"]), rank.get(p["study"], -1)

    best: dict[tuple[str, str, float], dict[str, Any]] = {}
    for p in points:
        key = (p["query"], p["shape"], p["rate"])
        if key not in best or age(p) > age(best[key]):
            best[key] = p
    return [best[k] for k in sorted(best)]


def _summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    rhos = [p["spearman"] for p in points if p["spearman"] is not None]
    return {"points": len(points), "hits": sum(bool(p.get("hit")) for p in points),
            "measured": sum(p["measured"] for p in points),
            "median_spearman": statistics.median(rhos) if rhos else None}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("studies", type=Path, nargs="+", help="placement_study.py JSON files")
    where = "where the studies' data files are (placement_study.py --data-dir)"
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/study"), help=where)
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    ap.add_argument(
        "--cost-model",
        help="re-score with this cost model (a name or a .toml file of constants, as "
        "'hycq explain --cost-model'; default: hycq's default model)",
    )
    ap.add_argument("--json", type=Path, help="write every point and the summary here")
    args = ap.parse_args()
    jobs, missing = [], 0
    for study in args.studies:
        by: dict[tuple[str, float, str], list[dict[str, Any]]] = {}
        for r in json.loads(study.read_text())["records"]:
            by.setdefault((r["query"], r["rate"], r.get("shape", "few")), []).append(r)
        for (query, rate, shape), records in by.items():
            recorded = records[0].get("data")  # placement_study.py records it since v14
            data = (
                Path(recorded) if recorded else _data_file(args.data_dir, study, query, shape, rate)
            )
            if not data.exists():
                missing += 1
                continue
            job = (study.name, query, rate, shape, "readings", str(data), records, args.cost_model)
            jobs.append(job)
    with ProcessPoolExecutor(max(1, args.workers)) as ex:
        points = list(ex.map(score_point, jobs))
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for p in points:
        verdict = ("HIT " if p["hit"] else "MISS") if p["measured"] else "not measured"
        rho = "-" if p["spearman"] is None else f"{p['spearman']:5.2f}"
        ratio = f"{p['ratio']:.2f}x{' tie' if p['tied'] else ''}" if p["measured"] else ""
        print(f"{p['study'][:44]:44s} {p['query'][:24]:24s} {p['shape']:10s} "
              f"{int(p['rate']):6d}  {verdict:4s} {ratio:9s} rho {rho}")  # fmt: skip
        groups.setdefault((p["shape"], p["rate"]), []).append(p)
    summary = []
    for (shape, rate), ps in sorted(groups.items()):
        rhos = [p["spearman"] for p in ps if p["spearman"] is not None]
        row = {"shape": shape, "rate": rate, "points": len(ps),
               "hits": sum(bool(p.get("hit")) for p in ps),
               "measured": sum(p["measured"] for p in ps),
               "median_spearman": statistics.median(rhos) if rhos else None}  # fmt: skip
        summary.append(row)
        rho = "-" if row["median_spearman"] is None else f"{row['median_spearman']:.2f}"
        print(f"  {shape:10s} {int(rate):6d}: {row['hits']}/{row['points']} hits "
              f"({row['measured']} measured), median Spearman {rho}")  # fmt: skip
    total = {**_summary(points), "skipped_no_data": missing}
    med = "-" if total["median_spearman"] is None else f"{total['median_spearman']:.3f}"
    print(f"TOTAL {total['hits']}/{total['points']} hits ({total['measured']} measured), "
          f"median Spearman {med}; {missing} points without data")  # fmt: skip
    latest = newest(points, [s.name for s in args.studies])
    by_shape: dict[str, list[dict[str, Any]]] = {}
    for p in latest:
        by_shape.setdefault(p["shape"], []).append(p)
    shapes = {s: _summary(ps) for s, ps in sorted(by_shape.items())}
    n = _summary(latest)
    fresh = {"total": n, "shapes": shapes, "misses": [p for p in latest if not p.get("hit")]}
    for shape, row in shapes.items():
        rho = "-" if row["median_spearman"] is None else f"{row['median_spearman']:.2f}"
        print(f"  newest {shape:10s}: {row['hits']}/{row['points']} hits "
              f"({row['measured']} measured), median Spearman {rho}")  # fmt: skip
    med = "-" if n["median_spearman"] is None else f"{n['median_spearman']:.3f}"
    print(f"NEWEST {n['hits']}/{n['points']} hits ({n['measured']} measured), "
          f"median Spearman {med}")  # fmt: skip
    if args.json:
        doc = {"command": " ".join(sys.argv), "total": total, "groups": summary,
               "newest": fresh, "points": points}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
