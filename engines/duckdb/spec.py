"""DuckDB's registration (engines/registry.py): the embedded default columnar engine."""

from __future__ import annotations

from typing import Any

from engines.registry import Calibration, EngineSpec, Setting
from optimizer.ir.limits import MAX_THREADS
from optimizer.ir.placement import SQL_CAPABILITIES

NS = 1e-9


def _make(threads: int | None = None) -> Any:
    from engines.duckdb.engine import DuckDBEngine

    return DuckDBEngine(threads)


def _version() -> str:
    import duckdb

    return str(duckdb.__version__)


ENGINE = EngineSpec(
    name="duckdb",
    description="DuckDB, embedded (the default columnar engine)",
    capabilities=SQL_CAPABILITIES,  # the IR's semantics are DuckDB's
    colours=("#fde4c9", "#b85c0c"),
    factory=_make,
    dialect="duckdb",
    settings=(
        Setting(
            "--duckdb-threads",
            "threads",
            "int",
            f"DuckDB worker threads (default: all cores; at most {MAX_THREADS})",
            maximum=MAX_THREADS,
        ),
    ),
    # Per-row SQL costs: the medians of six `hycq calibrate --engines duckdb` runs on the
    # 2-core reference machine (windows of 20k to 1.8M rows, 1,677 and 50,000 plugs;
    # docs/placement-study.md, "DuckDB's constants at scale"), split at issue 20's fifth stop
    # into 1.1 ms per re-evaluated SQL operator and 0.75x the per-row costs. Q1-Q6's group
    # SQL over windows of 0.6 M to 12 M rows on 800 and 50,000 plugs
    # (experiments/duckdb_sql_at_scale.py) costs 1.1 ms per operator plus 0.75x the
    # calibrated per-row terms (median error 7%); the calibrated constants alone absorb
    # the per-operator cost into the rows and over-price 12 M-row windows by 1.2-1.5x
    # (Q1 on 800 plugs at 40k chose a hybrid at 0.5x of all-DuckDB). Down to 30k-row
    # windows the split stays within -14% to +29% of the standalone queries. The fit
    # cannot separate join_output from the scans; 2 ns (1.5 ns after the split) is what
    # materialising 0.6 M join rows over a 12 M-row window took.
    costs={
        "select": 1.65 * NS,
        "project": 0.4 * NS,
        "aggregate": 4.1 * NS,
        # An exact SUM/AVG of DOUBLE (engines/duckdb/exact_sums.py: values scaled to 128-bit
        # integers), per value on top of ``aggregate``: 16-21 ns at 0.1 M rows, 5-8 ns at 1 M and
        # 4.5-6.4 ns at 4 M rows of 1,677 plugs on a quiet machine (experiments/exact_sum_cost.py;
        # 2.0-2.5x a plain SUM). The windows the model prices are large, so the large-window figure.
        "exact_sum": 7 * NS,
        "aggregate_large": 3.75 * NS,
        "join_input": 6 * NS,
        "join_output": 1.5 * NS,
        "op_fixed": 1.1e-3,
        "fixed": 2.6e-3,
        # Incremental aggregates (engines/mig/kept_aggregates.py): per merge, fitted (NNLS) to Q5's
        # 5-minute SUM on five data shapes, 800 to 50,000 plugs (docs/performance.md,
        # "Incremental aggregates", refitted at issue 20's fifth stop: the merges measured
        # 0.55-0.65x of the first fit's 6 ms + 130 ns/row + 250 ns/group). Inside running
        # MIGs at steady state (issue 20, tenth stop) 11 kept AVGs measured 1.36-1.82x these
        # (a fit: 8.1 ms + 25 ns/row + 210 ns/group); with that fit the re-scored placement
        # studies ranked worse (145 of 152 hits against 151), so it is not adopted: the
        # re-evaluated SQL terms it competes with are off in the other direction at 40k.
        "inc_fixed": 4.8e-3,
        "inc_row": 50 * NS,
        "inc_group": 160 * NS,
        # Pane partials (engines/mig/kept_aggregates.py, PanedState): per slide. First measured on
        # Q3's two MAX+AVG aggregates wholly on DuckDB at 40k tuples/s (7.5 ms + 28 ns per
        # partial row; docs/placement-study.md, "MIN/MAX from pane partials"). Refitted at
        # issue 20's eleventh stop on the kept seconds of 20 running MIGs (Q1 and Q3 wholly
        # on DuckDB, 800 to 20,000 plugs, 10k and 40k): one paned MAX costs 4.3-7.1 ms per
        # slide whatever the plugs, which the old constants priced at 8.5-17 ms
        # (experiments/component_fits.py pane). The overprice made Q1 on 800 plugs at 10k
        # keep its MAX on the row engine, measured 0.80-0.87x of the best in three studies.
        "pane_fixed": 6.3e-3,
        "pane_row": 4.1 * NS,
        # A correlated count recounted in Arrow (engines/mig/count_scan.py), per slide:
        # fitted (NNLS) to Q2's scans inside running MIGs on five data shapes at 10k and
        # 40k (800 to 50,000 plugs, 0.6 M to 10.8 M rows reaching the join;
        # experiments/correlated_paths.py): within 14% at all 10 points. With the window's
        # encoded chunks merged into blocks of 16 (issue 20, thirteenth stop) the fixed part
        # fell from 8.6 ms (300 chunks through Acero and take) to 1.5.
        "scan_fixed": 1.5e-3,
        "scan_row": 5.29 * NS,
        "scan_key": 141 * NS,
        # Its encoding of each chunk as it enters (a one-event-second batch) and, every 16,
        # a block's merge: fitted (NNLS) to ScanCounter on the same ten files, with the
        # selects in the scan and before it (experiments/scan_arrivals.py): 0.2-3 ms a
        # chunk. Unpriced before, it made the selects free inside the MIG, where they cost
        # the row engine 0.1-0.25 us per arrival as Arrow filters.
        "scan_chunk": 147e-6,
        "scan_filter": 22.6 * NS,
        "scan_encode": 39.8 * NS,
    },
    calibration=Calibration(seconds=90, quick_seconds=25, version=_version),
)
