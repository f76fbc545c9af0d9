"""The state every part of a file reader shares: the file, its format, the target schema
and profile, which file column gives which schema column, line numbering, and messages."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from engines.sources.files.formats import OnBad, looks_like_header
from engines.sources.files.profiles import FormatProfile
from optimizer.ir.errors import DataError, closest


class ReaderState:
    """One pass over one file (see ``engines.sources.files.reader.BatchReader``)."""

    path: Path
    fmt: str
    batch_rows: int
    schema: pa.Schema
    profile: FormatProfile
    on_bad: OnBad | None
    text: bool
    rows_read: int
    _line1: str | None
    _line_offset: int
    _columns: list[str]
    _file_names: list[str]
    _raw_order: list[int]
    _header_lines: int
    _invalid: list[tuple[int, str, str]]
    _invalid_lines: list[int]
    _invalid_done: int
    _source: Iterator[pa.RecordBatch]

    def _columns_hint(self) -> str:
        if self.profile.columns_hint:
            return self.profile.columns_hint
        return "expected columns " + ", ".join(self.schema.names)

    def _map_columns(self, names: list[str]) -> dict[str, str]:
        """Schema column -> file column, for files that name their columns."""
        aliases = self.profile.aliases
        wanted = {n.lower(): n for n in self.schema.names}
        found: dict[str, str] = {}
        for name in names:
            key = name.strip().lower()
            key = aliases.get(key, key)
            if key in wanted:
                key = wanted[key]
                if key in found:
                    raise DataError(
                        f"{self.path}: columns '{found[key]}' and '{name}' both give '{key}'",
                        hint="keep only one of them",
                    )
                found[key] = name
        for want in self.schema.names:
            if want not in found:
                taken = set(found.values())
                near = closest(want, [n for n in names if n not in taken])
                extra = f"; did you mean '{near}'?" if near else ""
                listed = ", ".join(names) if names else "none"
                raise DataError(
                    f"{self.path}: missing column '{want}' (columns found: {listed})",
                    hint=self._columns_hint() + extra,
                )
        return found

    def _line(self, k: int) -> int:
        """The line (CSV) or row (Parquet) number of the k-th row the parser delivered."""
        if not self.text:
            return k + 1
        first = self._header_lines + k + 1 + self._invalid_done
        j = 0  # skipped lines before the row's line, among those not yet passed
        while True:
            j2 = bisect.bisect_right(self._invalid_lines, first + j)
            if j2 == j:
                return first + j
            j = j2

    def _hint(self) -> str:
        if self.fmt == "debs":
            line = self._line1 or ""
            if line and looks_like_header(line, self.schema.names):
                return "the first row looks like a header: use format 'csv'"
            if self.profile.headerless_hint:
                return self.profile.headerless_hint
            return f"a headerless CSV file has {len(self.schema)} columns per row: " + ",".join(
                self.schema.names
            )
        if self.fmt == "csv":
            if self.profile.csv_values_hint:
                return f"{self._columns_hint()}; {self.profile.csv_values_hint}"
            return self._columns_hint() + " (with a value in every column)"
        return "give a valid Parquet file"

    def _error(self, exc: BaseException) -> DataError:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = ""
        m = re.search(r"CSV column #(\d+)", detail)
        if m and int(m.group(1)) < len(self._file_names):
            where = f"column '{self._file_names[int(m.group(1))]}': "
        return DataError(
            f"{self.path}: cannot read {self.fmt} data: {where}{detail}", hint=self._hint()
        )
