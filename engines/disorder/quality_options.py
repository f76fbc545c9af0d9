"""The user's result-quality target for ``--disorder quality`` (the ``hycq run`` flags
``--max-error``, ``--confidence``, ``--min-recall``, ``--recall-period``, ``--adapt-method``,
``--quality-param``), checked when built. A light module (no numpy or scipy): RunOptions
carries it; engines/disorder/quality_policy.py turns it into a policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from engines.disorder.params import QualityParams
from optimizer.ir.errors import OptionError

#: ``--adapt-method`` values: the analytical model or the PD controller.
METHODS = ("am", "pd")


@dataclass(frozen=True)
class QualityOptions:
    """The user's quality target (the ``hycq run`` flags). Exactly one of ``max_error``
    (with ``confidence``, default 0.95) and ``min_recall`` is given."""

    max_error: float | None = None
    confidence: float | None = None
    min_recall: float | None = None
    recall_period: float | None = None  # seconds; None: params.p_meas
    method: str = "am"
    params: QualityParams = field(default_factory=QualityParams)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise OptionError(f"--adapt-method must be am or pd, got '{self.method}'")
        if self.max_error is not None and not (
            math.isfinite(self.max_error) and self.max_error > 0
        ):
            raise OptionError(f"--max-error must be > 0, got {self.max_error}", hint="e.g. 0.01")
        if self.confidence is not None and not 0 < self.confidence < 1:
            raise OptionError(
                f"--confidence must be in (0, 1), got {self.confidence}", hint="e.g. 0.95"
            )
        if self.min_recall is not None and not 0 < self.min_recall <= 1:
            raise OptionError(
                f"--min-recall must be in (0, 1], got {self.min_recall}", hint="e.g. 0.95"
            )
        if self.recall_period is not None and not (
            math.isfinite(self.recall_period) and self.recall_period > 0
        ):
            raise OptionError(f"--recall-period must be > 0 seconds, got {self.recall_period}")
        if self.max_error is not None and self.min_recall is not None:
            raise OptionError(
                "--max-error and --min-recall exclude each other",
                hint="--max-error for a windowed aggregate, --min-recall for a window join",
            )
        if self.confidence is not None and self.max_error is None:
            raise OptionError("--confidence goes with --max-error", hint="add --max-error EPS")
        if self.recall_period is not None and self.min_recall is None:
            raise OptionError("--recall-period goes with --min-recall", hint="add --min-recall")

    @property
    def target(self) -> str | None:
        """``error``, ``recall`` or None (no target given)."""
        if self.max_error is not None:
            return "error"
        return "recall" if self.min_recall is not None else None

    @property
    def delta(self) -> float:
        return 1.0 - (self.confidence if self.confidence is not None else 1.0 - 0.05)
