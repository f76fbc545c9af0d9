"""How stream data files hold the smart-plug data: the format profile the file readers
(``engines.sources.files``) use when the target schema is the smart-plug ``SCHEMA``.

A raw DEBS 2014 file has no header and names its time column ``timestamp``; a file with a
header may call it ``ts`` or ``timestamp``. The hints say what such files look like.
"""

from __future__ import annotations

from engines.sources.files.profiles import FormatProfile
from engines.sources.smartplug import DEBS_COLUMNS, SCHEMA

SMARTPLUG_FORMAT = FormatProfile(
    schema=SCHEMA,
    raw_columns=DEBS_COLUMNS,
    aliases={"timestamp": "ts"},
    columns_hint=(
        "expected columns id, ts (or timestamp), value, property, plug_id, household_id, house_id"
    ),
    type_hints={"ts": "ts must be integer epoch seconds"},
    headerless_hint=(
        "a raw DEBS file has no header and 7 numeric columns per row: "
        "id,timestamp,value,property,plug_id,household_id,house_id"
    ),
    csv_values_hint="values must be numbers (ids and ts integers)",
)
