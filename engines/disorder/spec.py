"""``--disorder`` as text and as a value: ``none``, ``kslack:K`` (K with a unit), ``max``,
``quality``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.ir.errors import OptionError
from optimizer.ir.limits import check_number

#: Units a K may carry, in milliseconds.
K_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "m": 60_000}
#: The ``--disorder`` kinds (``quality`` needs a policy registered under that name).
KINDS = ("none", "kslack", "max", "quality")
_K = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)\s*$")


@dataclass(frozen=True)
class DisorderSpec:
    """How a run handles disorder: ``kind`` one of :data:`KINDS`; ``k_ms`` the fixed K of
    ``kslack`` in milliseconds (None otherwise)."""

    kind: str = "none"
    k_ms: float | None = None

    @property
    def buffered(self) -> bool:
        """Whether the run puts K-slack buffers in front of the windows."""
        return self.kind != "none"

    def text(self) -> str:
        if self.kind == "kslack" and self.k_ms is not None:
            return f"kslack:{self.k_ms:g}ms"
        return self.kind

    def k_ticks(self, tps: int) -> int:
        """The fixed K in ticks of a time base with ``tps`` ticks per second (rounded up:
        a K of 1500 ms in seconds holds back 2 s)."""
        assert self.k_ms is not None
        return int(-(-round(self.k_ms * tps) // 1000))


def parse_disorder(text: str, option: str = "--disorder") -> DisorderSpec:
    """``none``, ``kslack:K`` (``kslack:2s``, ``kslack:500ms``, ``kslack:1.5min``), ``max``
    or ``quality``; anything else is an OptionError saying what is accepted."""
    raw = text.strip().lower()
    accepted = "none, kslack:K (K with a unit: 500ms, 2s, 1min), max or quality"
    if raw in ("none", "max", "quality"):
        return DisorderSpec(raw)
    if raw.startswith("kslack"):
        _, sep, k = raw.partition(":")
        m = _K.match(k) if sep else None
        if m is None or m.group(2) not in K_UNITS_MS:
            raise OptionError(
                f"{option} {text!r}: K needs a non-negative number and a unit",
                hint=f"e.g. {option} kslack:2s or kslack:500ms (units: ms, s, min)",
            )
        k_ms = float(m.group(1)) * K_UNITS_MS[m.group(2)]
        check_number(k_ms / 1000, f"{option} {text!r}: K in seconds")
        return DisorderSpec("kslack", k_ms)
    raise OptionError(f"{option} {text!r} is not a disorder policy", hint=f"use {accepted}")
