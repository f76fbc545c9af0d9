"""The parameters of quality-driven disorder handling, with the dissertation's defaults.

Table 4.2 of Ji's dissertation (docs/disorder-quality.md): basic-window size ``b`` = 10 ms,
K-search granularity ``g`` = 10 ms, retrospect quantile ``q`` = 0.99, PD gains ``U_p = 0.2,
U_d = 4`` for windowed aggregates and ``U_p = 0.6, U_d = 0.8`` for window joins, recall period
``P_meas`` = 1 min, adaptation interval ``L_adt`` = 1 s. Times are in seconds here and turned
into ticks of the query's time base by :meth:`QualityParams.ticks` (never below one tick: on
a stream in whole seconds, ``b = g = 1 s``).

Every parameter can be overridden (``--quality-param NAME=VALUE``, :func:`parse_overrides`).

Example:
    >>> p = parse_overrides(["g=0.02", "up=0.5"])
    >>> p.g, p.up, p.ud, p.ticks(p.g, 1000)
    (0.02, 0.5, None, 20)
    >>> p.gains("aggregate"), p.gains("join")
    ((0.5, 4.0), (0.5, 0.8))
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from optimizer.ir.errors import OptionError
from optimizer.ir.limits import LIMIT

#: PD gains (U_p, U_d) per query kind (Table 4.2, tuned with Ziegler-Nichols there).
PD_GAINS = {"aggregate": (0.2, 4.0), "join": (0.6, 0.8)}


@dataclass(frozen=True)
class QualityParams:
    """Model parameters (seconds where a time). ``up`` / ``ud`` None: the kind's default
    gains (``PD_GAINS``)."""

    b: float = 0.010
    """Basic-window size of the window-size model (Eq. 3.5)."""
    g: float = 0.010
    """K-search granularity (coarse delays, Eq. 3.4; AM steps K by g)."""
    q: float = 0.99
    """Retrospect quantile of late delays for measuring coverage (Alg. 4.3)."""
    up: float | None = None
    """PD proportional gain."""
    ud: float | None = None
    """PD derivative gain."""
    p_meas: float = 60.0
    """Recall period P_meas (Eq. 4.3)."""
    l_adt: float = 1.0
    """Adaptation interval L_adt (joins; aggregates adapt at the same pace)."""
    stat_window: int = 20000
    """Delays kept per stream for the delay distribution f_D (the dissertation sizes this
    window with ADWIN; a fixed count of the latest delays here)."""
    warmup: float = 1.0
    """Stream time before the first adaptation (L_warmup of Alg. 4.1)."""
    recalc: float = 1.0
    """Recompute the coverage threshold at most this often (I_recalc of Alg. 4.2)."""

    def ticks(self, seconds: float, ticks_per_second: int) -> int:
        """A time of these parameters in ticks, at least 1."""
        return max(1, round(seconds * ticks_per_second))

    def gains(self, kind: str) -> tuple[float, float]:
        """(U_p, U_d) for ``aggregate`` or ``join`` queries."""
        up, ud = PD_GAINS[kind]
        return (self.up if self.up is not None else up, self.ud if self.ud is not None else ud)


#: name -> (kind, lower bound exclusive?, upper bound) for overrides.
_BOUNDS: dict[str, tuple[type, float, float | None]] = {
    "b": (float, 0.0, None),
    "g": (float, 0.0, None),
    "q": (float, 0.0, 1.0),
    "up": (float, -1.0, None),
    "ud": (float, -1.0, None),
    "p_meas": (float, 0.0, None),
    "l_adt": (float, 0.0, None),
    "stat_window": (int, 0.0, None),
    "warmup": (float, -1.0, None),
    "recalc": (float, 0.0, None),
}


def parse_overrides(items: Sequence[str], base: QualityParams | None = None) -> QualityParams:
    """``NAME=VALUE`` overrides of the defaults (names: the fields of QualityParams)."""
    params = base or QualityParams()
    changes: dict[str, float | int] = {}
    for item in items:
        name, eq, text = item.partition("=")
        name = name.strip().lower()
        if not eq or name not in _BOUNDS:
            raise OptionError(
                f"--quality-param {item}: expected NAME=VALUE with NAME one of "
                f"{', '.join(_BOUNDS)}",
                hint="e.g. --quality-param g=0.02",
            )
        kind, low, high = _BOUNDS[name]
        try:
            value = kind(text)
        except ValueError:
            raise OptionError(f"--quality-param {item}: '{text}' is not a number") from None
        top = high if high is not None else LIMIT
        ok = math.isfinite(value) and (value > low if low >= 0 else value >= 0) and value <= top
        if not ok:
            bound = f"in (0, {top:g}]" if low >= 0 else f"in [0, {top:g}]"
            raise OptionError(f"--quality-param {item}: {name} must be {bound}")
        changes[name] = value
    return dataclasses.replace(params, **changes)  # type: ignore[arg-type]
