"""The Parquet reader: the file's schema checked against the target, batches streamed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from engines.sources.files.columns import ReaderState
from optimizer.ir.errors import DataError


class ParquetSource(ReaderState):
    """Opens a Parquet file as the reader's source of raw batches."""

    def _open_parquet(self) -> None:
        pf = pq.ParquetFile(self.path)
        schema = pf.schema_arrow
        found = self._map_columns(list(schema.names))
        for field in self.schema:
            have = schema.field(found[field.name]).type
            want = field.type
            if pa.types.is_integer(want):
                ok, what = pa.types.is_integer(have), "an integer"
            elif pa.types.is_floating(want):
                ok = (
                    pa.types.is_integer(have)
                    or pa.types.is_floating(have)
                    or pa.types.is_decimal(have)
                )
                what = "a number"
            elif pa.types.is_boolean(want):
                ok, what = pa.types.is_boolean(have), "a boolean"
            else:
                ok = pa.types.is_string(have) or pa.types.is_large_string(have)
                what = "a string"
            if not ok:
                raise DataError(
                    f"{self.path}: column '{found[field.name]}' has type {have}, "
                    f"expected {what} ({want})",
                    hint=self.profile.type_hints.get(field.name) or self._columns_hint(),
                )
        self._columns = [found[n] for n in self.schema.names]
        self._file_names = list(schema.names)
        self._source = pf.iter_batches(batch_size=self.batch_rows, columns=self._columns)
