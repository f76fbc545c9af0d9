"""Measurements a report sets against the prediction: ``hycq bench --json`` records and the
metrics of ``hycq run``.

A bench file is the list ``hycq bench --json`` writes (CONTRACT "hycq bench"), or an object
with that list under ``records`` (the experiments' result files). Only the records of the
report's query are used; a file without any is a user error, as is a malformed one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimizer.ir.errors import DataError

_HINT = "write one with 'hycq bench QUERY --json PATH.json'"


@dataclass(frozen=True)
class BenchSwitch:
    """The ``auto`` plan's placement differs between two consecutive measured rates."""

    rate_before: float
    rate_after: float
    before: dict[str, str]
    after: dict[str, str]


@dataclass(frozen=True)
class BenchData:
    path: str
    records: list[dict[str, Any]]
    """This query's records, sorted by plan then rate."""
    switches: list[BenchSwitch]

    @property
    def plans(self) -> list[str]:
        return list(dict.fromkeys(r["plan"] for r in self.records))


def load_bench(path: Path, query_name: str) -> BenchData:
    """Read and check a bench file; keep the records of ``query_name`` (see module doc)."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise DataError(f"bench file not found: {path}", hint=_HINT) from None
    except IsADirectoryError:
        raise DataError(f"bench path is a directory: {path}", hint=_HINT) from None
    except UnicodeDecodeError:
        raise DataError(f"bench file is not UTF-8 text: {path}", hint=_HINT) from None
    except OSError as err:
        raise DataError(f"cannot read bench file {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise DataError(
            f"bench file {path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}", hint=_HINT
        ) from None
    records = obj.get("records") if isinstance(obj, dict) else obj
    if not isinstance(records, list):
        raise DataError(
            f"bench file {path} must hold a list of records (or an object with 'records')",
            hint=_HINT,
        )
    for k, r in enumerate(records):
        problem = _problem(r)
        if problem:
            raise DataError(f"bench file {path}: record {k}: {problem}", hint=_HINT)
    mine = [r for r in records if _same_query(r["query"], query_name)]
    if not mine:
        names = sorted({str(r["query"]) for r in records})
        raise DataError(
            f"bench file {path} has no records for {query_name}",
            hint=f"it measures {', '.join(names)}" if names else _HINT,
        )
    mine.sort(key=lambda r: (r["plan"], r["rate"]))
    return BenchData(str(path), mine, _switches(mine))


def _problem(r: object) -> str | None:
    """What is wrong with one record, or None."""
    if not isinstance(r, dict):
        return "not an object"
    for key, kind in (("query", str), ("plan", str), ("predicted", dict), ("measured", dict)):
        if not isinstance(r.get(key), kind):
            return f"'{key}' is missing or not a {kind.__name__}"
    if not _number(r.get("rate")) or r["rate"] <= 0:
        return "'rate' must be a positive number"
    if not _number(r["measured"].get("throughput")):
        return "'measured.throughput' must be a number"
    pred = r["predicted"]
    if not (_number(pred.get("bottleneck")) and _number(pred.get("utilization"))):
        return "'predicted' needs numbers 'bottleneck' and 'utilization'"
    placement = r.get("placement", {})
    if not isinstance(placement, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in placement.items()
    ):
        return "'placement' must map operator ids to engines"
    return None


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _same_query(recorded: str, name: str) -> bool:
    """Whether a record's ``query`` names the report's query (same file, else same stem)."""
    if recorded == name:
        return True
    a, b = Path(recorded), Path(name)
    try:
        if a.exists() and b.exists():
            return a.resolve() == b.resolve()
    except OSError:
        pass
    return a.name == b.name


def _switches(records: list[dict[str, Any]]) -> list[BenchSwitch]:
    auto = sorted((r for r in records if r["plan"] == "auto"), key=lambda r: r["rate"])
    out = []
    for a, b in itertools.pairwise(auto):
        pa, pb = _off_row(a), _off_row(b)
        if pa != pb:
            out.append(BenchSwitch(a["rate"], b["rate"], pa, pb))
    return out


def _off_row(record: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in record.get("placement", {}).items() if v != "row"}


# -- one run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitRow:
    """One unit of the run (a row operator, or a columnar group run by a MIG operator):
    its measured busy time and utilization against the predicted u."""

    name: str
    engine: str
    operators: list[str]
    busy_s: float | None
    measured_u: float | None
    predicted_u: float | None


def run_units(
    metrics: dict[str, Any],
    rows: list[dict[str, Any]],
    groups: list[tuple[str, list[str]]],
    shared_core: bool = False,
) -> list[UnitRow]:
    """Measured (``metrics["operators"]``) against predicted (``rows``) u per unit.

    ``groups`` are ``(group id, operator ids)``; a group's MIG is reported by the runtime
    under ``mig[<top>]`` with its ``operators``. With ``shared_core`` a last row adds up the
    row operators: the one unit the shared row-core model charges them to.
    """
    by_id = {r["id"]: r for r in rows}
    group_of = {tuple(ops): gid for gid, ops in groups}
    out = []
    for name, m in (metrics.get("operators") or {}).items():
        if not isinstance(m, dict):
            continue
        ops = [str(o) for o in m.get("operators") or [name]]
        label = group_of.get(tuple(ops), name)
        first = by_id.get(ops[0], {})
        out.append(
            UnitRow(
                label if label == name else f"{label} ({name})",
                str(m.get("engine", first.get("engine", "row"))),
                ops,
                _float(m.get("busy_s")),
                _float(m.get("u")),
                _float(first.get("u")),
            )
        )
    on_row = [u for u in out if u.engine == "row"]
    if shared_core and on_row:
        out.append(
            UnitRow(
                "row-core (all row operators)",
                "row",
                [o for u in on_row for o in u.operators],
                _sum(u.busy_s for u in on_row),
                _sum(u.measured_u for u in on_row),
                _sum(u.predicted_u for u in on_row),
            )
        )
    return out


def _sum(xs: Iterable[float | None]) -> float | None:
    vals = list(xs)
    return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)


def _float(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None
