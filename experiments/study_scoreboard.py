"""One table of the placement studies against issue 20's targets.

Reads the JSON files that ``experiments/placement_study.py`` wrote and groups their points by
data shape and rate (and, with ``--by-set``, by the query set: the shipped Q1-Q6 against the
queries the model was not tuned on). Per group and in total it prints:

* **hits**: points where the chosen plan is within 5% of the measured best or tied with it
  (their 95% intervals overlap), the issue's criterion (``hycq.bench_stats.hit``);
* **strict**: points within 5% of the best whatever the intervals say, so a reader sees how
  many hits rest on a tie;
* the median Spearman correlation of predicted C_b against measured 1/throughput;
* the worst chosen/best ratio.

Only pass studies measured with the model under judgment: the scoreboard does not re-predict
(``rescore_study.py`` does that, in-sample).

    python experiments/study_scoreboard.py \\
        experiments/results/placement_study_{calib,few,mid,unseen_few}_10k.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from hycq.bench_stats import hit

SHIPPED = {f"q{i}" for i in range(1, 7)}


def load_points(paths: list[Path]) -> list[dict[str, Any]]:
    """Every point of every study, tagged with the file it came from."""
    points: list[dict[str, Any]] = []
    for path in paths:
        doc = json.loads(path.read_text())
        points.extend({**p, "study": path.name} for p in doc["points"])
    return points


def score(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Hits, strict hits, median Spearman and worst ratio of a group of points."""
    rhos = [p["spearman"] for p in points if p["spearman"] is not None]
    return {
        "points": len(points),
        "hits": sum(hit(p["vs_best"], p["tied_with_best"]) for p in points),
        "strict": sum(p["vs_best"] >= 0.95 for p in points),
        "median_spearman": statistics.median(rhos) if rhos else None,
        "worst_vs_best": min(p["vs_best"] for p in points),
        "misses": [
            f"{p['query']}@{p['shape']}/{p['rate']:.0f}"
            for p in points
            if not hit(p["vs_best"], p["tied_with_best"])
        ],
    }


def group_key(p: dict[str, Any], by_set: bool) -> tuple[str, ...]:
    key: tuple[str, ...] = (p["shape"], f"{p['rate']:.0f}")
    if by_set:
        key += ("Q1-Q6" if p["query"] in SHIPPED else "other",)
    return key


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("studies", type=Path, nargs="+", help="placement_study.py JSON files")
    ap.add_argument("--by-set", action="store_true", help="split Q1-Q6 from the other queries")
    ap.add_argument("--json", type=Path, help="write the groups and the total here")
    args = ap.parse_args()
    points = load_points(args.studies)
    if not points:
        print("no points in the given studies", file=sys.stderr)
        return 2
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for p in points:
        groups.setdefault(group_key(p, args.by_set), []).append(p)
    rows = [(" ".join(k), score(v)) for k, v in sorted(groups.items())]
    rows.append(("total", score(points)))
    print("| group | points | hits | strict (>= 0.95x) | median Spearman | worst ratio |")
    print("|---|---|---|---|---|---|")
    for name, s in rows:
        rho = "-" if s["median_spearman"] is None else f"{s['median_spearman']:.2f}"
        print(
            f"| {name} | {s['points']} | {s['hits']} | {s['strict']} | {rho} "
            f"| {s['worst_vs_best']:.2f}x |"
        )
    misses = score(points)["misses"]
    print(f"\nmisses: {', '.join(misses) if misses else 'none'}")
    if args.json:
        out = {"studies": [str(p) for p in args.studies], "groups": dict(rows)}
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
