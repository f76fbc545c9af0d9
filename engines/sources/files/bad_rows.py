"""Bad-row validation: raw columns cast to the target types, the cells that do not convert
located (a regular-expression prefilter, then bisection), and each bad row described and
reported in file order (to ``on_bad``, or as a DataError)."""

from __future__ import annotations

import bisect
import contextlib
import csv
import io
import json
import math
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines.sources.files.columns import ReaderState
from optimizer.ir.errors import DataError

#: SQL names of the supported column types (the catalog's vocabulary), for messages.
TYPE_NAMES = {
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.string(): "VARCHAR",
}


#: Per (wide) type, a superset of the texts Arrow's cast accepts once surrounding whitespace
#: (and, for integers, a leading '+') is removed: cells that fail it are unparsable without a
#: cast. Integers are decimal or 0x-hexadecimal, as Arrow parses them.
_PREFILTER = {
    pa.int64(): r"^\s*([+-]?[0-9]+|0[xX][0-9a-fA-F]+)\s*$",
    pa.float64(): r"(?i)^\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|nan|inf|infinity)\s*$",
    pa.bool_(): r"(?i)^\s*(true|false|1|0)\s*$",
}


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+|0[xX][0-9a-fA-F]+")


_INT32_RANGE = (-(2**31), 2**31 - 1)


def _type_name(t: pa.DataType) -> str:
    return TYPE_NAMES.get(t, str(t))


def _or(a: pa.Array | None, b: pa.Array | None) -> pa.Array | None:
    if a is None:
        return b
    if b is None:
        return a
    return pc.or_(a, b)


def _mask_of(indices: list[int], n: int) -> pa.Array:
    mask = np.zeros(n, dtype=bool)
    mask[indices] = True
    return pa.array(mask)


def _cast_locate(arr: pa.Array, target: pa.DataType, offset: int = 0) -> tuple[pa.Array, list[int]]:
    """Cast ``arr``; cells whose cast fails become null and their indices are returned.

    One cast when every cell converts; otherwise bisection, so a few bad cells among many cost
    O(bad * log n) casts of shrinking slices.
    """
    try:
        if target == pa.string():
            arr.validate(full=True)  # UTF-8 (the CSV reader does not check it)
            return arr, []
        return pc.cast(arr, target), []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        if len(arr) == 1:
            return pa.nulls(1, target), [offset]
    mid = len(arr) // 2
    left, bad_left = _cast_locate(arr.slice(0, mid), target, offset)
    right, bad_right = _cast_locate(arr.slice(mid), target, offset + mid)
    return pa.concat_arrays([left, right]), bad_left + bad_right


class BadRows(ReaderState):
    """Converts raw batches to the target schema and reports the rows that do not fit."""

    def _conform(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        """A raw batch with the file's columns -> a batch with the schema, bad rows removed."""
        arrays = []
        masks = []
        bad = None
        for field, name in zip(self.schema, self._columns, strict=True):
            values, mask = self._convert(raw.column(name), field.type)
            arrays.append(values)
            masks.append(mask)
            bad = _or(bad, mask)
        first = self.rows_read
        self.rows_read += raw.num_rows
        problems: list[tuple[int, str, str]] = []
        if bad is not None and pc.any(bad).as_py():
            problems = self._describe(raw, masks, pc.indices_nonzero(bad), first)
            keep = pc.invert(bad)
            arrays = [pc.filter(a, keep) for a in arrays]
        if self.text:
            self._report_invalid(self._line(self.rows_read - 1), problems)
        else:
            self._report(problems)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _convert(self, col: pa.Array, target: pa.DataType) -> tuple[pa.Array, pa.Array | None]:
        """One column cast to ``target``: (values, mask of bad cells or None).

        The fast path is one Arrow cast (plus a finiteness check for floats and a range check
        for int32, which is parsed as int64 so that too large values are out of range rather
        than unparsable); only when it fails are the bad cells located.
        """
        bad = col.is_null() if col.null_count else None
        if col.type == target and target != pa.string():
            values = col
        elif target == pa.string():
            try:
                if self.text:
                    col.validate(full=True)  # UTF-8, which the CSV reader does not check
                values = col if col.type == target else pc.cast(col, target)
            except pa.ArrowInvalid:
                values, failed = _cast_locate(col, target)
                bad = _or(bad, _mask_of(failed, len(col)))
        else:
            wide = pa.int64() if pa.types.is_integer(target) else target
            try:
                values = col if col.type == wide else pc.cast(col, wide)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                values, failed_mask = self._convert_slow(col, wide)
                bad = _or(bad, failed_mask)
            if wide != target:
                low, high = _INT32_RANGE
                lo_hi = pc.min_max(values)
                lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
                if lo is not None and (lo < low or hi > high):
                    out = pc.fill_null(
                        pc.or_(pc.less(values, low), pc.greater(values, high)), False
                    )
                    bad = _or(bad, out)
                    values = pc.if_else(out, pa.scalar(None, wide), values)
                values = pc.cast(values, target)
        if pa.types.is_floating(target):
            finite = pc.is_finite(values)
            if not pc.all(finite).as_py():
                bad = _or(bad, pc.invert(pc.fill_null(finite, True)))
        return values, bad

    def _convert_slow(self, col: pa.Array, wide: pa.DataType) -> tuple[pa.Array, pa.Array]:
        """Locate the cells that do not cast: (values with those cells null, their mask)."""
        n = len(col)
        if not self.text:
            values, failed = _cast_locate(col, wide)
            return values, _mask_of(failed, n)
        ok = pc.fill_null(pc.match_substring_regex(col, _PREFILTER[wide]), True)
        text = pc.if_else(ok, col, pa.scalar(None, pa.string()))
        try:
            values, failed = pc.cast(text, wide), []
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            text = pc.ascii_trim_whitespace(text)
            if pa.types.is_integer(wide):
                text = pc.replace_substring_regex(text, r"^\+", "")
            values, failed = _cast_locate(text, wide)
        unparsable = pc.invert(ok)
        if failed:
            unparsable = pc.or_(unparsable, _mask_of(failed, n))
        return values, unparsable

    def _describe(
        self, raw: pa.RecordBatch, masks: list[pa.Array | None], rows: pa.Array, first: int
    ) -> list[tuple[int, str, str]]:
        """(number, raw text, reason) of the bad ``rows`` of a raw batch (Python objects for
        those rows only)."""
        flags = [None if m is None else pc.take(m, rows).to_pylist() for m in masks]
        cells: dict[str, list[Any]] = {}
        for name in self._columns:
            col = pc.take(raw.column(name), rows)
            if self.text:  # bytes, so that invalid UTF-8 shows as replacement characters
                cells[name] = [
                    None if b is None else bytes(b).decode("utf-8", "replace")
                    for b in col.cast(pa.binary()).to_pylist()
                ]
            else:
                cells[name] = col.to_pylist()
        out = []
        for r, i in enumerate(rows.to_pylist()):
            reasons = [
                self._cell_reason(name, field.type, cells[name][r])
                for field, name, flag in zip(self.schema, self._columns, flags, strict=True)
                if flag is not None and flag[r]
            ]
            if self.text:
                fields = [cells[self._columns[c]][r] for c in self._raw_order]
                line = io.StringIO()
                csv.writer(line, lineterminator="").writerow(
                    ["" if f is None else f for f in fields]
                )
                text = line.getvalue()
            else:
                text = json.dumps({n: cells[n][r] for n in self._columns}, default=str)
            out.append((self._line(first + i), text, "; ".join(reasons)))
        return out

    def _cell_reason(self, name: str, target: pa.DataType, value: Any) -> str:
        """Why one cell (text for CSV, a typed value for Parquet) was rejected."""
        if value is None:
            return f"missing value in column '{name}'"
        if not self.text:
            if isinstance(value, float) and not math.isfinite(value):
                return f"non-finite value {value} in column '{name}'"
            return f"value {value} out of range for {_type_name(target)} in column '{name}'"
        if target == pa.string():
            return f"invalid UTF-8 in value {value!r} of column '{name}'"
        text = value.strip()
        if pa.types.is_floating(target):
            with contextlib.suppress(ValueError):
                if not math.isfinite(float(text)):
                    return f"non-finite value {value!r} in column '{name}'"
        elif pa.types.is_integer(target) and _INTEGER_TEXT.fullmatch(text):
            return f"value {value!r} out of range for {_type_name(target)} in column '{name}'"
        return f"unparsable value {value!r} in column '{name}' (expected {_type_name(target)})"

    def _report_invalid(self, last: int | None, problems: list[tuple[int, str, str]]) -> None:
        """Report a batch's value problems with the skipped rows before its ``last`` line (None:
        all the rest, at the end of the file), in line order."""
        upto = (
            len(self._invalid_lines)
            if last is None
            else bisect.bisect_left(self._invalid_lines, last)
        )
        if upto:
            problems = sorted(problems + self._invalid[:upto])
            del self._invalid[:upto]
            del self._invalid_lines[:upto]
            self._invalid_done += upto
        self._report(problems)

    def _report(self, problems: list[tuple[int, str, str]]) -> None:
        if not problems:
            return
        if self.on_bad is None:
            number, _, reason = problems[0]
            m = re.fullmatch(r"missing value in (column '.*')", reason)
            if m:  # in a file, a missing value is an empty cell
                reason = f"{m.group(1)} is empty" if self.text else f"{m.group(1)} is null"
            raise DataError(f"{self.path}: row {number}: {reason}", hint=self._hint())
        for number, text, reason in problems:
            self.on_bad(number, text, reason)
