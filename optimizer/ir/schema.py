"""Relation schemas: ordered, typed fields with the qualifier they were bound under."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from optimizer.ir.types import DataType


@dataclass(frozen=True, slots=True)
class Field:
    """One column of a relation. ``qualifier`` is the table alias it is visible under."""

    name: str
    dtype: DataType
    qualifier: str | None = None

    def display(self) -> str:
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


@dataclass(frozen=True, slots=True)
class Schema:
    """An ordered tuple of fields. Names may repeat across qualifiers (after a self-join)."""

    fields: tuple[Field, ...]

    def __len__(self) -> int:
        return len(self.fields)

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields)

    def __getitem__(self, i: int) -> Field:
        return self.fields[i]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def index_of(self, name: str) -> int:
        """Index of the unique field called ``name``; ValueError when absent or ambiguous."""
        hits = [i for i, f in enumerate(self.fields) if f.name == name]
        if len(hits) != 1:
            raise ValueError(f"{len(hits)} fields named {name!r}")
        return hits[0]

    def concat(self, other: Schema) -> Schema:
        return Schema(self.fields + other.fields)

    def requalify(self, qualifier: str | None) -> Schema:
        return Schema(tuple(Field(f.name, f.dtype, qualifier) for f in self.fields))

    def display(self) -> str:
        """``(name TYPE, ...)``; qualifiers shown only where they tell columns apart."""
        qualifiers = {f.qualifier for f in self.fields}
        names = [f.name.lower() for f in self.fields]
        show = len(qualifiers) > 1 or len(set(names)) < len(names)
        return (
            "("
            + ", ".join(f"{f.display() if show else f.name} {f.dtype}" for f in self.fields)
            + ")"
        )
