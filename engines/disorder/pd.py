"""The PD controller of quality-driven buffer sizing (Ji's dissertation, Eq. 3.7).

The controller acts on a fraction ``alpha`` of the largest delay seen so far: ``K = alpha *
MaxD``. At each adaptation step ``j`` it compares the measured quality (the process variable:
a window's coverage, or the recall over the last P_meas) with the setpoint (the coverage
threshold, or the recall target) and moves ``alpha`` by

    u(j) = U_p * err(j) + U_d * (err(j) - err(j - 1)),    err(j) = setpoint - measured(j)

    alpha(j) = max(0, min(alpha(j - 1) + u(j), 1))

There is no integral term (no wind-up); the clamp keeps K between 0 and MaxD.

Example: too little coverage (0.9 against 0.99) raises alpha a little (no derivative at the
first step: 0.2 * 0.09); coverage falling further raises it by the derivative too (0.2 * 0.19 +
4 * 0.1 = 0.438); a met target brings it down again (0.2 * 0 + 4 * -0.19, clamped at 0):
    >>> pd = PDController(up=0.2, ud=4.0)
    >>> round(pd.step(0.99, 0.90), 3), round(pd.step(0.99, 0.80), 3), pd.step(0.99, 0.99)
    (0.018, 0.456, 0.0)
"""

from __future__ import annotations


class PDController:
    """``alpha`` in [0, 1] driven by Eq. 3.7 (module docstring); starts at ``alpha0``."""

    def __init__(self, up: float, ud: float, alpha0: float = 0.0) -> None:
        self.up = up
        self.ud = ud
        self.alpha = min(1.0, max(0.0, alpha0))
        self._last_err: float | None = None

    def step(self, setpoint: float, measured: float) -> float:
        """One adaptation: the new alpha."""
        err = setpoint - measured
        derr = 0.0 if self._last_err is None else err - self._last_err
        self._last_err = err
        self.alpha = max(0.0, min(self.alpha + self.up * err + self.ud * derr, 1.0))
        return self.alpha

    def slack(self, max_delay: int, granularity: int = 1) -> int:
        """K = alpha * MaxD, rounded up to the granularity (ticks)."""
        k = self.alpha * max(0, max_delay)
        return int(-(-round(k) // granularity) * granularity)
