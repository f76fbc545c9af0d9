"""Statistics measured while a query runs: the seam between the run-time monitor and the
optimizer.

The run-time monitor (``engines.migration.monitor.RuntimeMonitor``) builds one from what the
running executor reports; the estimator (``optimizer.estimate.estimate(measured=...)``) lets
it win over everything else, because it describes the stream as it is *now*: the catalog's
declared rates and statistics and a sample taken before the run describe it as it was.

* ``rates``: stream name -> tuples per event-second (smoothed arrivals);
* ``selectivities``: predicate display text -> fraction (a Select's tuples out / in; the
  single conjunct of an equi- or theta-join: pairs produced / pairs probed). Keyed by text,
  like the catalog's ``selectivity`` table, so they mean the same in every join order;
* ``distinct``: ``(stream, sorted column names)`` -> distinct values seen in the running
  windows (a join store's key count, an aggregate's group count), traced to the stream the
  columns come from unchanged. Keyed by stream and columns, like sample statistics, so a
  join order that groups or joins on the same columns elsewhere in the plan uses them too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MeasuredStatistics:
    """Run-time statistics (see the module docstring); every value is finite and >= 0."""

    rates: dict[str, float] = field(default_factory=dict)
    selectivities: dict[str, float] = field(default_factory=dict)
    distinct: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)
    seconds: float = 0.0
    """Event-seconds the figures were measured over (0: nothing measured yet)."""

    def distinct_of(self, stream: str, columns: tuple[str, ...]) -> float | None:
        return self.distinct.get((stream, tuple(sorted(columns))))

    def to_json(self) -> dict[str, object]:
        """A JSON-safe rendering (distinct keys as ``stream.col+col``)."""
        return {
            "seconds": self.seconds,
            "rates": {k: _num(v) for k, v in self.rates.items()},
            "selectivities": {k: _num(v) for k, v in self.selectivities.items()},
            "distinct": {f"{s}.{'+'.join(c)}": _num(d) for (s, c), d in self.distinct.items()},
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)
