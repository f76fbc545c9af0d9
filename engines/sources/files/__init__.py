"""Streaming readers of stream data files: headerless CSV, CSV with a header, Parquet.

Every reader yields ``pyarrow.RecordBatch`` es with exactly a target Arrow schema (by default
the smart-plug ``SCHEMA``; the run-time passes the catalog stream's schema): the columns are
renamed, reordered and cast, streaming (CSV through ``pyarrow.csv.open_csv``, Parquet through
``ParquetFile.iter_batches``). Column types: int32, int64, float64, bool, string.

Formats (``detect_format``):

* ``debs``: CSV without a header whose columns are the schema's columns in order (for the
  smart-plug schema, the raw DEBS 2014 file
  ``id,timestamp,value,property,plug_id,household_id,house_id``);
* ``csv``: CSV whose first row names the columns, in any order; other columns are ignored
  (for the smart-plug schema the time column may be called ``ts`` or ``timestamp``);
* ``parquet``: a Parquet file with those columns (any integer width for integers, any number
  for float64).

Bad rows. A CSV row is one line. A row with the wrong number of fields, an empty cell, a
value that does not parse as its column's type (or is out of its range), or a non-finite
float (``nan``, ``inf``, ``1e999``) is *bad*; so is a line that leaves a quoted value open
at its end (``quotes``: it costs that line, not the lines after it) and a line longer than
``MAX_LINE_BYTES`` (1 MiB; ``lines``: skipped in linear time, its report keeps its start).
With ``on_bad`` the reader calls ``on_bad(number, raw, reason)`` for it and skips it:
``number`` is the 1-based line of the file for CSV (the header is line 1; blank lines,
which are skipped, are not counted) and the 1-based row for Parquet; ``raw`` is the row's
text (for CSV the line, or the schema's fields in file order joined by commas; for Parquet
the row as JSON); ``reason`` says which column holds what. Reports come in file order.
Without ``on_bad`` the first bad row raises :class:`DataError` (``row N``).

Performance: CSV input is cut into chunks of whole lines (about 48 bytes per
``batch_rows`` row; from a file at least 2 MiB) that Arrow's streaming CSV reader parses
from memory; a chunk is parsed a second time only when it holds a quote and lost rows to
it. Cells are read as strings and cast per column by Arrow; only when a cast fails does the
reader look for the bad cells (a regular-expression prefilter, then bisection for values
the prefilter lets through), and only the bad rows become Python objects. File-level
problems (missing file, missing column, wrong Parquet type, not a text file) raise
``DataError`` when the reader is opened.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from engines.sources.smartplug import generate_to_file
    >>> folder = Path(tempfile.mkdtemp())
    >>> generate_to_file(folder / "r.csv", seconds=2, houses=1, seed=1) > 0
    True
    >>> detect_format(folder / "r.csv")
    'debs'
    >>> next(read_batches(folder / "r.csv")).schema.names[:3]
    ['id', 'ts', 'value']
    >>> _ = (folder / "bad.csv").write_text("1,1377986401,2.5,1,0,0,0\\n2,1377986401,x,1,0,0,0\\n")
    >>> seen = []
    >>> [b.num_rows for b in read_batches(folder / "bad.csv", on_bad=lambda *a: seen.append(a))]
    [1]
    >>> seen
    [(2, '2,1377986401,x,1,0,0,0', "unparsable value 'x' in column 'value' (expected DOUBLE)")]

One module per part: ``formats`` (formats, sniffing, format profiles), ``csv_reader``,
``lines`` (chunks of whole lines from files and pipes, long lines), ``quotes`` (open
quotes), ``parquet_reader``, ``bad_rows`` (conversion and bad-row reports), ``columns``
(what the parts share), ``reader`` (``read_batches``). The smart-plug profile (``ts``
alias, the raw DEBS columns) is ``engines.sources.smartplug_format``.
"""

from engines.sources.files.formats import (
    FORMATS,
    FormatProfile,
    OnBad,
    detect_format,
    empty_reason,
    looks_like_header,
    profile_for,
)
from engines.sources.files.lines import MAX_LINE_BYTES
from engines.sources.files.reader import read_batches

__all__ = [
    "FORMATS",
    "MAX_LINE_BYTES",
    "FormatProfile",
    "OnBad",
    "detect_format",
    "empty_reason",
    "looks_like_header",
    "profile_for",
    "read_batches",
]
