"""JSON as hycq writes it: NaN and infinities become null (they are not JSON)."""

from __future__ import annotations

import json
import math
from typing import Any


def json_line(obj: dict[str, Any]) -> str:
    """One JSON line; NaN and infinities become null (they are not JSON)."""
    try:
        return json.dumps(obj, default=str, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(_finite(obj), default=str, allow_nan=False) + "\n"


def json_text(obj: Any) -> str:
    """Indented JSON with NaN and infinities as null."""
    return json.dumps(_finite(obj), indent=2, default=str, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
