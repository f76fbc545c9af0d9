"""Dead letters: input rows set aside with their reason (never silently dropped), and the
vectorised validation that finds them."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engines.output_files import OutputFile
from engines.runtime.safe_json import json_line
from optimizer.ir.errors import DataError

if TYPE_CHECKING:
    from engines.runtime.options import OptionNames
    from engines.runtime.stream_input import StreamInput


@dataclass
class DeadLetters:
    """Rejected input rows: counted always, written with their reason when a path is given."""

    path: Path | None
    #: How messages name the file's option (``OptionNames.dead_letter``).
    label: str = "dead_letter"
    count: int = 0
    by_kind: dict[str, int] = field(default_factory=lambda: {"invalid": 0, "late": 0})
    #: invalid rows per stream (the run checks that a stream kept some valid rows)
    by_stream: dict[str, int] = field(default_factory=dict)
    first_reason: dict[str, str] = field(default_factory=dict)
    _out: OutputFile | None = None
    #: a checkpointed run's file (engines/runtime/checkpoint.py) and whether it continues one
    partial: Path | None = None
    append: bool = False
    #: per stream, invalid rows a resumed run reads again that the file already holds
    mute: dict[str, int] = field(default_factory=dict)

    def add(
        self, stream: str, row: dict[str, Any] | str, reason: str, kind: str = "invalid"
    ) -> None:
        """Count a rejected row (``kind`` invalid or late) and write it when a path is set."""
        if kind == "invalid" and self.mute.get(stream):
            self.mute[stream] -= 1  # counted and written before the checkpoint
            return
        self.count += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if kind == "invalid":
            self.by_stream[stream] = self.by_stream.get(stream, 0) + 1
            self.first_reason.setdefault(stream, reason)
        if self.path is None:
            return
        out = self._open()
        with out.errors():
            fh = out.file("w")
            fh.write(json_line({"stream": stream, "reason": reason, "row": row}))

    def _open(self) -> OutputFile:
        if self._out is None:
            assert self.path is not None
            self._out = OutputFile(self.path, self.label, self.partial, self.append)
        return self._out

    def sync(self) -> int | None:
        """Flush the file and return its committed size (None without a path)."""
        if self.path is None:
            return None
        out = self._open()
        out.file("w")
        return out.sync()

    def restore(self, counts: dict[str, Any]) -> None:
        """Take the counts a checkpoint recorded (a resumed run continues them)."""
        self.count = int(counts["count"])
        self.by_kind = {k: int(v) for k, v in counts["by_kind"].items()}
        self.by_stream = {k: int(v) for k, v in counts["by_stream"].items()}
        self.first_reason = dict(counts["first_reason"])

    def close(self) -> None:
        """Commit the file (an empty one too, so that scripts can rely on it)."""
        if self.path is None:
            return
        out = self._open()
        out.file("w")
        out.commit()

    def abort(self) -> None:
        if self._out is not None:
            self._out.abort()


def validate(batch: pa.RecordBatch, stream: str, dead: DeadLetters) -> pa.RecordBatch:
    """Drop rows with NULLs or non-finite floats (vectorised), sending them to ``dead``."""
    bad = None
    for col in batch.columns:
        mask = col.is_null()
        if pa.types.is_floating(col.type):
            # is_finite(NULL) is NULL, and or_ of NULL is NULL, which no filter keeps or drops
            mask = pc.or_(mask, pc.invert(pc.fill_null(pc.is_finite(col), True)))
        if col.null_count or pa.types.is_floating(col.type):
            bad = mask if bad is None else pc.or_(bad, mask)
    if bad is None or not pc.any(bad).as_py():
        return batch
    bad_rows = batch.filter(bad).to_pylist()
    for row in bad_rows:
        reasons = []
        for name, value in row.items():
            if value is None:
                reasons.append(f"missing value in column '{name}'")
            elif isinstance(value, float) and not math.isfinite(value):
                reasons.append(f"non-finite value {value} in column '{name}'")
        dead.add(stream, row, "; ".join(reasons))
    return batch.filter(pc.invert(bad))


#: what to do about an input without rows (docs/data.md)
NO_ROWS_HINT = (
    "give a file with at least one row (a CSV header line is not a row); a run over an "
    "empty input has no results to give"
)


def check_rejections(
    inputs: list[StreamInput],
    valid: dict[str, int],
    accepted: int,
    dead: DeadLetters,
    names: OptionNames,
) -> None:
    """DataError when a data file (or pipe) had no row at all, or when an input that had
    rows kept none; a warning when more than half of all rows were set aside (a file in the
    wrong format would otherwise give an empty result and exit 0)."""
    for inp in inputs:
        name = inp.stream.name
        bad = dead.by_stream.get(name, 0)
        if inp.data_file and not bad and not valid.get(name):
            raise DataError(f"{inp.description} has no rows", hint=NO_ROWS_HINT)
        if bad and not valid.get(name):
            raise DataError(
                f"no valid row in {inp.description}: all {bad} rows were rejected "
                f"(first: {dead.first_reason.get(name, '?')})",
                hint=f"pass {names.dead_letter} PATH to see every rejected row and why; check the "
                "catalog's columns against the file",
            )
    read = accepted + dead.by_kind.get("invalid", 0)
    if dead.count and 2 * dead.count > read:
        warnings.warn(
            f"{dead.count} of {read} input rows were dead-lettered (more than half); the "
            "results cover only the rest",
            RuntimeWarning,
            stacklevel=3,
        )
