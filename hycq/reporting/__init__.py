"""Placement reports: one self-contained HTML file showing where each operator runs and why.

``hycq report`` and ``hycq run --report`` (CONTRACT) write it. Modules:

    build         gather the content from one ``Optimized`` plan (no HTML)
    alternatives  pure row/column and next best placements; the placement over rates
    compare       Definition 6.1 verdicts: which condition an alternative lost on
    measured      ``hycq bench --json`` records and run metrics against the prediction
    svg           the inline SVG plan graph, throughput chart and run timeline
    page          the HTML page (inline CSS, no script, nothing fetched)
    html          the page's building blocks (tables, cells, sections)
    timeline_html the run-over-time section of the page
    output        the report written to its file (and the report after ``hycq run``)
    text          explain's engine tags for the one plan printer

Example:
    >>> from hycq import api
    >>> from hycq.planning import OptimizerOptions, optimize
    >>> q = api.load_query(api.QUERIES / "smartplug" / "q5.sql")
    >>> report = build_report(optimize(q, OptimizerOptions(sample=False)))
    >>> html = render(report)
    >>> html.startswith("<!DOCTYPE html>") and "aggregate1" in html and "<script" not in html
    True
"""

from __future__ import annotations

from hycq.reporting.build import Report, build_report
from hycq.reporting.output import check_out_path, report_after_run, write_report
from hycq.reporting.page import render

__all__ = [
    "Report",
    "build_report",
    "check_out_path",
    "render",
    "report_after_run",
    "write_report",
]
