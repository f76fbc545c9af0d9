"""Result quality against the true result stream: recall, relative error, coverage, Phi.

A run with a small disorder buffer (``--disorder``) trades result quality for latency. This
module measures that quality by comparing its result file (``hycq run --output``) with the
*truth*: the result stream of the same query over the event-time-sorted input (or with a
buffer large enough for every delay). Both are result files: the query's columns plus ``_ts``,
the slide instant. The measures are those of Ji's dissertation (section 4.3):

* **Recall** (Eq. 4.3), for window joins: of the true result rows with ``_ts`` in a period,
  the share the run produced (rows matched as multisets per instant, on every column;
  floating-point values compared to 30 significant bits, about 9 digits). ``gamma(P)`` is
  measured at every true instant ``T`` over ``(T - P, T]``; **Phi(Gamma)** (Eq. 4.11) is the
  share of those
  measurements with ``gamma >= Gamma``, leaving out those of the first ``P`` (the
  dissertation's warm-up). Recall per tumbling period ``[kP, (k+1)P)`` is listed as well,
  and the least of them after the first (``worst_period_after_first``).
* **Relative error** (section 4.1), for windowed aggregates: for every true result (an instant
  and a group key) and every value column, ``eps = |A - A^| / |A|`` (``A`` true, ``A^``
  produced; ``eps = 0`` when both are 0, infinite when only ``A`` is 0). A group the run did
  not produce counts as ``A^ = 0`` (what a SUM or COUNT over no received tuple gives), so its
  ``eps`` is 1. A result row's ``eps`` is the largest over its value columns. **Phi(eps)**
  (Eq. 4.10) is the share of true results with ``eps <= eps_thr``. Rows the run produced for a
  group without a true result are counted as ``extra``.
* **Window coverage** (Eq. 3.3, ``|w| / |w|_true``), where computable: from a COUNT column
  (``count``), the produced count over the true count per true result.

Which columns are the group key and which the aggregate values: ``keys`` and ``values``, by
default the floating-point columns (in either file) are the values and the others the key (so
give ``values=["n"]`` for an integer COUNT, and name the values of CSV files, which read
whole-number doubles back as integers). ``_ts`` is always part of the match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from optimizer.ir.errors import DataError, OptionError

#: Significant bits to which floating-point values are compared in the recall match (30
#: bits: about 9 decimal digits).
MATCH_BITS = 30
#: The instant column of a result file.
TS = "_ts"


@dataclass(frozen=True)
class QualitySpec:
    """What to measure. ``recall_period``: P in ticks of ``_ts``; ``max_error``: eps_thr of
    Phi(eps); ``min_recall``: Gamma of Phi(Gamma) (Phi(0.99 Gamma) is reported too);
    ``keys`` / ``values`` / ``count``: column roles (module docstring); ``any_instant``:
    recall matches a true row with a produced copy at any instant (module docstring)."""

    recall_period: int
    max_error: float | None = None
    min_recall: float | None = None
    keys: tuple[str, ...] | None = None
    values: tuple[str, ...] | None = None
    count: str | None = None
    any_instant: bool = False


def read_result_file(path: Path | str, what: str) -> pa.Table:
    """A result file (``.parquet``, ``.csv`` with a header row, ``.jsonl``) as a table; a
    ``DataError`` naming ``what`` when it is missing, unreadable or has no ``_ts``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv", ".jsonl"):
        raise DataError(
            f"{what} {path}: a result file must end in .parquet, .csv or .jsonl",
            hint="give a file written by 'hycq run --output'",
        )
    if not path.is_file():
        raise DataError(f"{what} {path}: no such file")
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        elif suffix == ".csv":
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(path)
        else:
            import pyarrow.json as pajson

            if not path.stat().st_size:
                raise DataError(f"{what} {path}: empty file (no columns to compare)")
            table = pajson.read_json(path)
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as err:
        raise DataError(f"{what} {path}: cannot read it: {err}") from None
    if TS not in table.column_names:
        raise DataError(
            f"{what} {path}: no '{TS}' column (columns: {', '.join(table.column_names)})",
            hint="give a file written by 'hycq run --output'",
        )
    if not pa.types.is_integer(table.schema.field(TS).type):
        raise DataError(f"{what} {path}: '{TS}' must hold integer instants")
    if table.column(TS).null_count:
        raise DataError(f"{what} {path}: '{TS}' has empty values")
    return table


def measure_quality(result: pa.Table, truth: pa.Table, spec: QualitySpec) -> dict[str, Any]:
    """The quality of ``result`` against ``truth`` (module docstring) as a JSON-able dict:
    ``results`` / ``truth_rows`` counts, ``recall`` (overall, per period, Phi), and, when
    there are value columns, ``error`` (per-result eps summary, Phi(eps)) and ``coverage``."""
    if spec.recall_period <= 0:
        raise OptionError(f"the recall period must be positive, got {spec.recall_period}")
    _check_columns(result, truth)
    keys, values = _roles(truth, result, spec)
    out: dict[str, Any] = {
        "results": result.num_rows,
        "truth_rows": truth.num_rows,
        "columns": {"keys": list(keys), "values": list(values)},
    }
    out["recall"] = _recall(result, truth, spec)
    if values:
        out["error"], out["coverage"] = _errors(result, truth, keys, values, spec)
    return out


def _check_columns(result: pa.Table, truth: pa.Table) -> None:
    if sorted(result.column_names) != sorted(truth.column_names):
        raise DataError(
            "the result and the truth have different columns: "
            f"{', '.join(result.column_names)} against {', '.join(truth.column_names)}",
            hint="compare two runs of the same query",
        )


def _roles(
    truth: pa.Table, result: pa.Table, spec: QualitySpec
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names = [n for n in truth.column_names if n != TS]
    for given, flag in ((spec.keys, "--key"), (spec.values, "--value")):
        for name in given or ():
            if name not in names:
                raise OptionError(
                    f"{flag} {name}: no such result column", hint=f"columns: {', '.join(names)}"
                )
    if spec.values is not None:
        values = spec.values
    else:  # a CSV file reads whole-number doubles back as integers: float in either file
        values = tuple(
            n
            for n in names
            if any(pa.types.is_floating(t.schema.field(n).type) for t in (truth, result))
        )
    for name in values:
        if not (
            pa.types.is_integer(truth.schema.field(name).type)
            or pa.types.is_floating(truth.schema.field(name).type)
        ):
            raise OptionError(f"--value {name}: not a numeric column")
    keys = spec.keys if spec.keys is not None else tuple(n for n in names if n not in values)
    if spec.count is not None and spec.count not in values:
        raise OptionError(f"--count {spec.count}: must be one of the value columns")
    return keys, values


def _normalized(column: pa.ChunkedArray) -> pa.Array:
    """The column as strings for matching: floats to ``MATCH_BITS`` significant bits,
    nulls as a marker (so they match each other)."""
    arr = column.combine_chunks()
    if pa.types.is_floating(arr.type):
        x = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        mantissa, exponent = np.frexp(np.where(np.isfinite(x), x, 0.0))
        r = np.where(
            np.isfinite(x), np.ldexp(np.round(mantissa * 2.0**MATCH_BITS), exponent - MATCH_BITS), x
        )
        arr = pa.array(r, pa.float64(), mask=np.asarray(arr.is_null()))
    return pc.fill_null(pc.cast(arr, pa.string()), "\x00null")


def _row_ids(tables: Sequence[pa.Table], columns: Sequence[str]) -> list[np.ndarray]:
    """One int per row, equal for rows equal on ``columns`` (across ``tables``)."""
    sizes = [t.num_rows for t in tables]
    if not columns:
        return [np.zeros(n, dtype=np.int64) for n in sizes]
    codes = []
    for name in columns:
        both = pa.chunked_array(
            [_normalized(t.column(name)) for t in tables], pa.string()
        ).combine_chunks()
        codes.append(np.asarray(pc.dictionary_encode(both).indices, dtype=np.int64))
    _, inverse = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    bounds = np.cumsum([0, *sizes])
    return [inverse[bounds[i] : bounds[i + 1]] for i in range(len(tables))]


def _recall(result: pa.Table, truth: pa.Table, spec: QualitySpec) -> dict[str, Any]:
    columns = [n for n in truth.column_names if n != TS]
    rid, tid = _row_ids([result, truth], columns)
    r_ts = result.column(TS).to_numpy().astype(np.int64)
    t_ts = truth.column(TS).to_numpy().astype(np.int64)
    if spec.any_instant:
        hit = _hits_any_instant(t_ts, tid, rid)
        instants, inv = np.unique(t_ts, return_inverse=True)
        true_n: np.ndarray = np.bincount(inv, minlength=len(instants)).astype(np.float64)
        got_n: np.ndarray = np.bincount(
            inv, weights=hit.astype(np.float64), minlength=len(instants)
        )
    else:
        # Multiset intersection per (instant, row): min of the two multiplicities.
        t_pairs, t_counts = _counts(t_ts, tid)
        r_pairs, r_counts = _counts(r_ts, rid)
        matched_per_pair = _matched(t_pairs, t_counts, r_pairs, r_counts)
        instants, inv = (
            np.unique(t_pairs[:, 0], return_inverse=True)
            if len(t_pairs)
            else (np.empty(0, np.int64), np.empty(0, np.int64))
        )
        true_n = np.bincount(inv, weights=t_counts, minlength=len(instants))
        got_n = np.bincount(inv, weights=matched_per_pair, minlength=len(instants))
    total_true = float(true_n.sum())
    total_got = float(got_n.sum())
    p = spec.recall_period
    out: dict[str, Any] = {
        "period": p,
        "overall": total_got / total_true if total_true else None,
        "matched": int(total_got),
        "missing": int(total_true - total_got),
        "extra": int(result.num_rows - total_got),
    }
    # Tumbling periods [kP, (k+1)P).
    periods = []
    if len(instants):
        k = np.floor_divide(instants, p)
        ks, kinv = np.unique(k, return_inverse=True)
        pt = np.bincount(kinv, weights=true_n)
        pg = np.bincount(kinv, weights=got_n)
        periods = [
            {
                "start": int(kk * p),
                "true": int(a),
                "matched": int(b),
                "recall": b / a if a else None,
            }
            for kk, a, b in zip(ks, pt, pg, strict=True)
        ]
    out["periods"] = periods
    # The target holds per period after the first (the warm-up's): the least of those.
    later = [q["recall"] for q in periods[1:] if q["recall"] is not None]
    out["worst_period_after_first"] = float(min(later)) if later else None
    # Sliding gamma(P) at every true instant T over (T - P, T] (Eq. 4.3), and Phi (Eq. 4.11).
    gammas = sliding_recall(instants, true_n, got_n, p)
    measured = instants >= (instants[0] + p) if len(instants) else np.zeros(0, bool)
    g = gammas[measured]
    out["measurements"] = len(g)
    ok = g[~np.isnan(g)]
    out["min_gamma"] = float(ok.min()) if len(ok) else None
    if spec.min_recall is not None:
        out["gamma"] = spec.min_recall
        out["phi_gamma"] = phi_recall(g, spec.min_recall)
        out["phi_099_gamma"] = phi_recall(g, 0.99 * spec.min_recall)
    return out


def _hits_any_instant(t_ts: np.ndarray, tid: np.ndarray, rid: np.ndarray) -> np.ndarray:
    """Per true row: produced, whatever the instant? Of each distinct row, the earliest true
    copies (by instant) count as produced, as many as the run has copies of it."""
    if not len(tid):
        return np.zeros(0, bool)
    size = int(max(tid.max(), rid.max(initial=-1))) + 1
    produced = np.bincount(rid, minlength=size)
    order = np.lexsort((t_ts, tid))
    sorted_ids = tid[order]
    rank = np.arange(len(order)) - np.searchsorted(sorted_ids, sorted_ids, side="left")
    hit = np.zeros(len(tid), bool)
    hit[order] = rank < produced[sorted_ids]
    return hit


def _counts(ts: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not len(ts):
        return np.empty((0, 2), np.int64), np.empty(0, np.int64)
    return np.unique(np.stack([ts, ids], axis=1), axis=0, return_counts=True)


def _matched(
    t_pairs: np.ndarray, t_counts: np.ndarray, r_pairs: np.ndarray, r_counts: np.ndarray
) -> np.ndarray:
    """Per true (instant, row) pair: min(true multiplicity, produced multiplicity)."""
    if not len(t_pairs) or not len(r_pairs):
        return np.zeros(len(t_pairs), dtype=np.int64)
    both = np.concatenate([t_pairs, r_pairs])
    _, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    produced = np.zeros(int(inv.max()) + 1, dtype=np.int64)
    produced[inv[len(t_pairs) :]] = r_counts
    return np.minimum(t_counts, produced[inv[: len(t_pairs)]])


def sliding_recall(
    instants: np.ndarray, true_n: np.ndarray, got_n: np.ndarray, period: int
) -> np.ndarray:
    """gamma(P) at each of ``instants`` (sorted): produced over true results with instants in
    ``(T - P, T]`` (Eq. 4.3); NaN where there is no true result in it."""
    if not len(instants):
        return np.zeros(0)
    ct = np.concatenate([[0.0], np.cumsum(true_n)])
    cg = np.concatenate([[0.0], np.cumsum(got_n)])
    lo = np.searchsorted(instants, instants - period, side="right")
    hi = np.arange(1, len(instants) + 1)
    t = ct[hi] - ct[lo]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, (cg[hi] - cg[lo]) / t, np.nan)


def phi_recall(gammas: np.ndarray, gamma_thr: float) -> float | None:
    """Phi(Gamma) (Eq. 4.11): the share of recall measurements ``>= Gamma`` (NaN ones, with
    no true result, left out); None without measurements."""
    g = gammas[~np.isnan(gammas)]
    return float(np.mean(g >= gamma_thr)) if len(g) else None


def relative_errors(true: np.ndarray, produced: np.ndarray) -> np.ndarray:
    """eps = |A - A^| / |A| elementwise; 0 where both are 0, inf where only A is."""
    true = true.astype(np.float64)
    produced = produced.astype(np.float64)
    diff = np.abs(true - produced)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        eps = diff / np.abs(true)
    return np.where(true == 0, np.where(diff == 0, 0.0, math.inf), eps)


def phi_error(eps: np.ndarray, eps_thr: float) -> float | None:
    """Phi(eps_thr) (Eq. 4.10): the share of results with ``eps <= eps_thr``."""
    return float(np.mean(eps <= eps_thr)) if len(eps) else None


def _errors(
    result: pa.Table,
    truth: pa.Table,
    keys: Sequence[str],
    values: Sequence[str],
    spec: QualitySpec,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    rid, tid = _row_ids([result, truth], [TS, *keys])
    for ids, what in ((tid, "truth"), (rid, "result")):
        if len(np.unique(ids)) != len(ids):
            raise DataError(
                f"the {what} has several rows for one instant and group key "
                f"({', '.join(keys) or 'no key columns'})",
                hint="name the group key with --key and the aggregates with --value",
            )
    # Position of each true result's produced row (-1: not produced).
    order = np.argsort(rid, kind="stable")
    pos = np.searchsorted(rid[order], tid)
    pos = np.minimum(pos, max(len(rid) - 1, 0))
    found = (len(rid) > 0) & (rid[order][pos] == tid) if len(rid) else np.zeros(len(tid), bool)
    at = np.where(found, order[pos] if len(rid) else 0, -1)
    eps = np.zeros(len(tid))
    per_column: dict[str, Any] = {}
    coverage: dict[str, Any] | None = None
    for name in values:
        a = _floats(truth.column(name))
        got = _floats(result.column(name))
        a_hat = np.where(found, got[np.maximum(at, 0)] if len(got) else 0.0, 0.0)
        a_hat = np.nan_to_num(a_hat, nan=0.0)
        e = relative_errors(np.nan_to_num(a, nan=0.0), a_hat)
        eps = np.maximum(eps, e)
        per_column[name] = _summary(e)
        if name == spec.count:
            with np.errstate(divide="ignore", invalid="ignore"):
                c = np.where(a > 0, a_hat / a, np.nan)
            c = c[~np.isnan(c)]
            coverage = {
                "column": name,
                "mean": float(c.mean()) if len(c) else None,
                "min": float(c.min()) if len(c) else None,
                "p05": float(np.quantile(c, 0.05)) if len(c) else None,
                "full": float(np.mean(c >= 1.0)) if len(c) else None,
            }
    out: dict[str, Any] = {
        "true_results": len(tid),
        "produced": int(found.sum()),
        "missing": int((~found).sum()),
        "extra": int(len(rid) - found.sum()),
        **_summary(eps),
        "per_column": per_column,
    }
    if spec.max_error is not None:
        out["max_error"] = spec.max_error
        out["phi_eps"] = phi_error(eps, spec.max_error)
    return out, coverage


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    arr = column.combine_chunks()
    return np.asarray(
        pc.fill_null(pc.cast(arr, pa.float64()), float("nan")).to_numpy(zero_copy_only=False),
        dtype=np.float64,
    )


def _summary(eps: np.ndarray) -> dict[str, Any]:
    if not len(eps):
        return {"mean": None, "p50": None, "p95": None, "max": None, "wrong": 0}
    finite = np.where(np.isfinite(eps), eps, np.nan)
    return {
        "mean": float(np.nanmean(finite)) if np.isfinite(eps).any() else None,
        "p50": _finite(np.quantile(eps, 0.5, method="higher")),
        "p95": _finite(np.quantile(eps, 0.95, method="higher")),
        "max": _finite(eps.max()),
        "wrong": int(np.count_nonzero(eps > 0)),
    }


def _finite(x: float) -> float | None:
    """JSON has no infinity: an infinite error (a true 0 estimated as non-zero) is null."""
    return float(x) if math.isfinite(x) else None
