"""Writing reports: the output path checked before any work, the page rendered and written
atomically, and the report of a finished ``hycq run`` (its plan re-optimized with the
run's options, the placement that ran measured against its prediction)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from engines.output_files import check_writable, write_bytes
from hycq.planning import OptimizerOptions, optimize
from hycq.query import LoadedQuery
from hycq.reporting.alternatives import off_row
from hycq.reporting.build import Report, build_report
from hycq.reporting.page import render
from optimizer.ir.errors import OptionError


def check_out_path(path: Path, option: str = "--out") -> None:
    """Refuse an output path the report cannot be written to, before any work is done."""
    if path.suffix.lower() not in (".html", ".htm"):
        raise OptionError(
            f"{option} must end in .html, got '{path}'", hint=f"e.g. {option} report.html"
        )
    check_writable(path, option)


def write_report(report: Report, path: Path, option: str = "--out") -> None:
    """Render ``report`` to one self-contained HTML file."""
    write_bytes(path, render(report), option)


def report_after_run(
    q: LoadedQuery,
    optimizer: OptimizerOptions,
    run_options: Any,
    metrics: dict[str, Any],
    placement_request: str,
    out: Path,
) -> Report:
    """Write the report of a finished ``hycq run`` to ``out``, and return it.

    The run's plan is re-optimized with the options ``api.run`` used (same rate, data sample
    and cost model, so the same Phase-One plan and ids); the shown placement is the one that
    ran (``metrics["placement"]``), measured against its prediction. After migrations it is
    the final plan's (its join order from ``metrics["plans"]``).
    """
    options = dataclasses.replace(optimizer, rate=run_options.rate, data=dict(run_options.data))
    plans = metrics.get("plans") or []
    if len(plans) > 1:  # migrated: the final plan ran last (metrics["placement"] is its)
        order = plans[-1].get("join_order")
        if order and isinstance(order[0], str):
            order = [order]
        options = dataclasses.replace(
            options, join_order=tuple(tuple(a.lower() for a in c) for c in order or []) or None
        )
    opt = optimize(q, options)
    ran = {k: str(v) for k, v in (metrics.get("placement") or {}).items()}
    label = f"the run's placement (--placement {placement_request})"
    if off_row(ran) == off_row(opt.placement):
        label = f"the run's placement (--placement {placement_request}: the optimizer's choice)"
    if len(plans) > 1:
        label = f"the run's final plan, after {len(plans) - 1} migration(s)"
    report = build_report(opt, placement=ran or None, shown_label=label, run_metrics=metrics)
    write_report(report, out, "--report")
    return report
