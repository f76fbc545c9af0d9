"""What correctly rounded sums cost: hycq bench, before and after, side by side.

Issue 48 made every SUM/AVG of DOUBLE the correctly rounded sum on every engine and path
(engines/kernels/exact_sum.py, engines/duckdb/exact_sums.py, engines/row/aggregate.py). This
runs ``hycq bench`` on Q1-Q6 at 40k tuples/s from two checkouts of the project, the one
before (``--before``, a git worktree of an earlier commit) and this one, alternately, round
by round, and reports each plan's median sustained throughput and the ratio after/before.

    git worktree add /tmp/hycq-before <commit-before-exact-sums>
    python experiments/exact_sums_overhead.py --before /tmp/hycq-before --rounds 3 \
        --json experiments/results/exact_sums_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERIES = [ROOT / "queries" / "smartplug" / f"q{i}.sql" for i in range(1, 7)]


def bench(checkout: Path, query: Path, rate: int, plans: str, measure: int) -> list[dict]:
    """One ``hycq bench`` of ``query`` run from ``checkout``'s code: its JSON records."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        env = dict(os.environ, PYTHONPATH=str(checkout))
        subprocess.run(
            [
                sys.executable, "-m", "hycq.cli", "bench", str(query),
                "--rates", str(rate), "--plans", plans, "--measure", str(measure),
                "--json", str(out),
            ],
            cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        records: list[dict] = json.loads(out.read_text())
        return records


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, required=True, help="checkout of the earlier code")
    p.add_argument("--rate", type=int, default=40_000)
    p.add_argument("--plans", default="auto,column")
    p.add_argument("--measure", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--queries", default="1,2,3,4,5,6")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    queries = [QUERIES[int(i) - 1] for i in a.queries.split(",")]
    seen: dict[tuple[str, str, str], list[float]] = {}
    placements: dict[tuple[str, str, str], object] = {}
    for r in range(a.rounds):
        for q in queries:
            for side, checkout in (("before", a.before), ("after", ROOT)):
                for rec in bench(checkout, q, a.rate, a.plans, a.measure):
                    key = (q.stem, str(rec["plan"]), side)
                    seen.setdefault(key, []).append(float(rec["measured"]["throughput"]))
                    placements[key] = rec.get("placement")
            print(f"round {r + 1}: {q.stem} done", flush=True)
    rows = []
    for q in queries:
        for plan in a.plans.split(","):
            before = seen.get((q.stem, plan, "before"), [])
            after = seen.get((q.stem, plan, "after"), [])
            if not before or not after:
                continue
            b, f = statistics.median(before), statistics.median(after)
            same = placements[(q.stem, plan, "before")] == placements[(q.stem, plan, "after")]
            rows.append(
                {
                    "query": q.stem,
                    "plan": plan,
                    "before": b,
                    "after": f,
                    "ratio": f / b,
                    "same_placement": same,
                    "runs": {"before": before, "after": after},
                }
            )
            print(
                f"{q.stem} {plan:6s}: before {b:>11,.0f}/s  after {f:>11,.0f}/s  "
                f"{f / b:5.2f}x{'' if same else '  (placement differs)'}"
            )
    if a.json:
        a.json.write_text(json.dumps({"rate": a.rate, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
