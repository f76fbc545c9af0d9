"""Re-score a placement study's measurements with the current cost model (issue 20).

A study (experiments/placement_study.py) records, per point, every measured placement's
throughput and the C_b predicted when it ran. After a model change, this script predicts C_b
again for the same placements (statistics sampled from the same data file) and recomputes
each point's Spearman correlation and the model's new choice: whether it is among the
measured placements, and if so its rank and whether it is a hit against the measured best
(within 5% or tied; ``hycq.bench_stats.hit``). Nothing is measured again.

    python experiments/rescore_study.py experiments/results/placement_study_many_10k.json \\
        --data readings=/tmp/study/many_10000_325.parquet
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from experiments.rescore_studies import score_point

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study", type=Path)
    ap.add_argument("--data", required=True, help="STREAM=FILE the study read")
    ap.add_argument("--json", type=Path, help="write the re-scored points here")
    args = ap.parse_args()
    stream, _, file = args.data.partition("=")
    doc = json.loads(args.study.read_text())
    by_point: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in doc["records"]:
        by_point.setdefault((r["query"], r["rate"]), []).append(r)
    out = []
    for (query, rate), records in by_point.items():
        path = ROOT / query if not Path(query).is_absolute() else Path(query)
        shape = records[0].get("shape", "")
        point = score_point((args.study.name, str(path), rate, shape, stream, file, records, None))
        out.append(point)
        verdict = (
            f"measured, rank {point['rank']} {'HIT' if point['hit'] else 'MISS'}"
            if point["measured"]
            else "not measured"
        )
        rho = point["spearman"]
        shown = "-" if rho is None else f"{rho:5.2f}"
        print(f"{point['query']:28s} rho {shown}  chosen {verdict}", file=sys.stderr)
    rhos = [p["spearman"] for p in out if p["spearman"] is not None]
    summary = {"points": len(out), "median_spearman": statistics.median(rhos) if rhos else None,
               "chosen_measured": sum(p["measured"] for p in out),
               "hits": sum(bool(p.get("hit")) for p in out)}  # fmt: skip
    print(json.dumps(summary), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "points": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
