"""``hycq quality``: a result file's quality against the true result stream."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hycq.cli.arguments import (
    column_names,
    fraction,
    positive_float,
)
from hycq.cli.common import (
    print_json,
)
from optimizer.ir.errors import OptionError


def register(sub: Any) -> None:
    qp = sub.add_parser(
        "quality",
        help="measure a result file's quality against the true result stream",
        description="Compare RESULT (a 'hycq run --output' file of a run with a disorder "
        "buffer) with TRUTH (the same query's result stream over the in-order input, or with "
        "a buffer >= the largest delay): recall per period and Phi(Gamma) (joins; Eqs. 4.3, "
        "4.11), relative error per result and Phi(eps) (aggregates; Eq. 4.10), and window "
        "coverage from a COUNT column. Rows are matched by _ts and the group key. "
        "docs/disorder-quality.md has the definitions.",
    )
    qp.add_argument("result", type=Path, metavar="RESULT", help=".parquet, .csv or .jsonl")
    qp.add_argument("--truth", type=Path, required=True, metavar="TRUTH", help="the true results")
    qp.add_argument(
        "--recall-period",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="P_meas, seconds: recall is measured over the last P at every true instant, and "
        "per tumbling period of P (default 60, Table 4.2)",
    )
    qp.add_argument(
        "--time-unit",
        choices=("s", "ms", "us"),
        default="s",
        help="the unit of _ts (the query's time base; default s)",
    )
    qp.add_argument(
        "--max-error",
        type=positive_float,
        metavar="EPS",
        help="Phi(EPS): share of results with relative error <= EPS",
    )
    qp.add_argument(
        "--min-recall",
        type=fraction,
        metavar="GAMMA",
        help="Phi(GAMMA) and Phi(0.99 GAMMA): share of recall measurements >= the value",
    )
    qp.add_argument(
        "--key",
        type=column_names,
        metavar="COLS",
        help="group-key columns (default: the columns that are not --value)",
    )
    qp.add_argument(
        "--value",
        type=column_names,
        metavar="COLS",
        help="aggregate columns (default: the floating-point ones)",
    )
    qp.add_argument(
        "--count",
        metavar="COL",
        help="a COUNT column among the values: window coverage = produced / true count",
    )
    qp.add_argument(
        "--any-instant",
        action="store_true",
        help="recall: a true row counts as produced when RESULT has it at any instant (ISTREAM "
        "joins whose rows carry their tuples' timestamps: a result completed by a late tuple "
        "comes at a later instant)",
    )
    qp.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from hycq.quality import QualitySpec, measure_quality, read_result_file

    ticks = {"s": 1, "ms": 1000, "us": 1_000_000}[args.time_unit]
    period = round(args.recall_period * ticks)
    if period < 1:
        raise OptionError(
            f"--recall-period {args.recall_period:g} is below one tick ({args.time_unit})"
        )
    spec = QualitySpec(
        recall_period=period,
        max_error=args.max_error,
        min_recall=args.min_recall,
        keys=args.key,
        values=args.value,
        count=args.count,
        any_instant=args.any_instant,
    )
    result = read_result_file(args.result, "RESULT")
    truth = read_result_file(args.truth, "--truth")
    q = measure_quality(result, truth, spec)
    if args.json:
        print_json(q)
        return 0
    r = q["recall"]
    lines = [f"{q['results']} result rows, {q['truth_rows']} true rows"]
    overall = "n/a" if r["overall"] is None else f"{r['overall']:.6f}"
    lines.append(
        f"recall {overall} ({r['matched']} matched, {r['missing']} missing, {r['extra']} "
        f"extra); gamma over {args.recall_period:g} s: {r['measurements']} measurements, "
        f"min {_fmt(r['min_gamma'])}; periods after the first: least "
        f"{_fmt(r['worst_period_after_first'])}"
    )
    if "phi_gamma" in r:
        lines.append(
            f"Phi({r['gamma']:g}) = {_fmt(r['phi_gamma'])}, "
            f"Phi(0.99*{r['gamma']:g}) = {_fmt(r['phi_099_gamma'])}"
        )
    if "error" in q:
        e = q["error"]
        lines.append(
            f"relative error over {e['true_results']} true results "
            f"({', '.join(q['columns']['values'])}): "
            f"mean {_fmt(e['mean'])}, p95 {_fmt(e['p95'])}, max {_fmt(e['max'])}, "
            f"{e['wrong']} wrong, {e['missing']} missing, {e['extra']} extra"
        )
        if "phi_eps" in e:
            lines.append(f"Phi({e['max_error']:g}) = {_fmt(e['phi_eps'])}")
        c = q.get("coverage")
        if c is not None:
            lines.append(
                f"coverage ({c['column']}): mean {_fmt(c['mean'])}, min {_fmt(c['min'])}, "
                f"full in {_fmt(c['full'])} of results"
            )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.6g}"
