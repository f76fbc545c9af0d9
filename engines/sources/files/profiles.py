"""Format profiles: what the file readers know about one kind of data beyond its schema
(its raw column names, the aliases a header may use, the hints messages give). The
smart-plug profile is ``engines.sources.smartplug_format.SMARTPLUG_FORMAT``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa


@dataclass(frozen=True)
class FormatProfile:
    """What the readers know about one kind of data beyond its schema.

    ``raw_columns``: the names of a headerless (``debs``) file's columns, in file order;
    ``aliases``: other names a file with a header may give a column (``{alias: column}``);
    the rest are hints for messages: ``columns_hint`` (which columns a file needs),
    ``type_hints`` (per column, when its Parquet type is wrong), ``headerless_hint`` (what a
    headerless row looks like) and ``csv_values_hint`` (what values a CSV row holds).
    """

    schema: pa.Schema
    raw_columns: tuple[str, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)
    columns_hint: str | None = None
    type_hints: Mapping[str, str] = field(default_factory=dict)
    headerless_hint: str | None = None
    csv_values_hint: str | None = None
