"""The seam between a K-slack buffer and what decides its K.

A K-slack buffer (one per input stream) holds arriving tuples and releases, in timestamp
order, those at least K ticks older than the largest timestamp the stream has shown. *What*
K is, and how it changes, is a :class:`SlackPolicy`: a fixed K (``--disorder kslack:K``),
Max-K-slack (K = the largest delay seen so far), or a quality-driven policy that adapts K
to a user's result-quality target (``--disorder quality``: the analytical model or the PD
controller). The buffer tells its policy what arrived (:meth:`SlackPolicy.observe`) and what
the engine measured (:meth:`SlackPolicy.feedback`), and asks for K (:meth:`SlackPolicy.k`).

All times are ticks of the query's time base (engines.runtime.inputs.to_time_base).
A tuple's *delay* is the stream's largest timestamp seen before it, minus its own
timestamp, floored at 0 (the dissertation's definition: how far behind the stream's
progress it arrives).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class SlackPolicy(Protocol):
    """Decides each stream's K (ticks); one instance serves all streams of one query."""

    name: str
    """How ``--disorder`` spelled it (``none``, ``kslack``, ``max``, ``quality``)."""

    def observe(self, stream: str, delays: np.ndarray, now: int) -> None:
        """Tuples arrived on ``stream``: their delays (int64 ticks, arrival order);
        ``now`` is the stream's largest timestamp after them."""
        ...

    def feedback(self, stream: str, figures: Mapping[str, Any]) -> None:
        """What the engine measured that a quality-driven policy needs (e.g. a window's
        coverage when its result was emitted, a join's produced and missed pairs); fixed
        policies ignore it. The keys are documented by the policy that reads them."""
        ...

    def k(self, stream: str) -> int:
        """The K (ticks, >= 0) the buffer of ``stream`` should hold back now."""
        ...
