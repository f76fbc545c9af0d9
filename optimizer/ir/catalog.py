"""The catalog model: streams, their schemas, time columns, rates, sources and statistics.

Loading and validating catalog TOML lives in ``optimizer.sql.catalog``; this module is the
plain data the binder, the estimator and the engines share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from optimizer.ir.schema import Field, Schema
from optimizer.ir.types import DataType

#: Milliseconds per tick of a stream time unit.
TIME_UNITS_MS = {"s": 1000, "ms": 1}


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """Where a stream's tuples come from when no ``--data`` is given.

    ``kind`` is ``generator`` (``generator`` names it; ``options`` are its settings) or
    ``file`` (``path``, resolved against the catalog's folder, and ``format``).
    """

    kind: str
    generator: str | None = None
    options: tuple[tuple[str, object], ...] = ()
    path: Path | None = None
    format: str | None = None

    def option(self, name: str, default: object = None) -> object:
        return dict(self.options).get(name, default)


@dataclass(frozen=True, slots=True)
class StreamDef:
    """One input stream of the catalog."""

    name: str
    columns: tuple[Field, ...]
    timestamp: str
    time_unit: str  # "s" or "ms"
    rate: float  # default arrival rate, tuples per event-second
    source: SourceSpec
    distinct: tuple[tuple[str, int], ...] = ()  # known distinct counts per column
    selectivity: tuple[tuple[str, float], ...] = ()  # known predicate selectivities by SQL text

    @property
    def schema(self) -> Schema:
        return Schema(self.columns)

    @property
    def time_index(self) -> int:
        return [c.name for c in self.columns].index(self.timestamp)

    def column_type(self, name: str) -> DataType:
        return next(c.dtype for c in self.columns if c.name == name)


@dataclass(frozen=True, slots=True)
class Catalog:
    """All streams a query may reference, keyed by lower-cased name."""

    streams: dict[str, StreamDef] = field(default_factory=dict)
    path: Path | None = None

    def get(self, name: str) -> StreamDef | None:
        return self.streams.get(name.lower())
