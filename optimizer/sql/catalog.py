"""Catalog TOML loading and validation.

A catalog names the streams a query may read::

    [streams.readings]
    timestamp = "ts"          # the event-time column
    time_unit = "s"           # "s" (epoch seconds) or "ms"
    rate = 2000               # default arrival rate, tuples per event-second

    [streams.readings.columns]  # in order; types BIGINT, INTEGER, DOUBLE, BOOLEAN, VARCHAR
    id = "BIGINT"
    ts = "BIGINT"

    [streams.readings.source]   # used when `hycq run` gets no --data for the stream
    kind = "generator"          # or "file" with path = "...", format = "debs"|"csv"|"parquet"
    generator = "smartplug"     # or "keyed" (columns ts, k, v; engines/sources/keyed.py), or
                                # "multiway" (ts plus INTEGER/DOUBLE columns: seed, origin, keys,
                                # start, end; engines/sources/multiway.py), or
                                # "x3"/"x4" (Ji's out-of-order join workloads: seed, origin)
    houses = 40                 # keyed: seed, origin, keys, skew, start, end, silent
                                # smartplug also: plugs (instead of houses), load_share
    seed = 42                   # drift (strings, optimizer/ir/profile.py): rate_profile
                                # (both); keyed also keys_profile, skew_profile, hot, selectivity

    [streams.readings.statistics]   # optional, for the optimizer
    distinct = { plug_id = 1677 }
    selectivity = { "property = 1" = 0.5 }

Unknown keys and wrong types are errors naming the key path, with the closest valid key.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from optimizer.ir.catalog import TIME_UNITS_MS, Catalog, SourceSpec, StreamDef
from optimizer.ir.errors import CatalogError, OptionError, did_you_mean
from optimizer.ir.limits import MAX_KEYS, MAX_RATE, MAX_SKEW
from optimizer.ir.profile import SYNTAX, parse_profile
from optimizer.ir.schema import Field
from optimizer.ir.types import TYPE_NAMES, DataType

_STREAM_KEYS = {"timestamp", "time_unit", "rate", "columns", "source", "statistics", "doc"}
_SOURCE_KEYS = {"kind", "generator", "path", "format"}
#: Settings of each built-in generator (``[streams.X.source]`` keys besides kind/generator).
_GENERATOR_OPTIONS = {
    "smartplug": {
        "houses",
        "seed",
        "households_per_house",
        "plugs_per_household",
        "start",
        "rate_profile",
        "plugs",
        "load_share",
    },
    "keyed": {
        "seed",
        "origin",
        "keys",
        "skew",
        "start",
        "end",
        "silent",
        "rate_profile",
        "keys_profile",
        "skew_profile",
        "hot",
        "selectivity",
    },
    "x3": {"seed", "origin"},
    "x4": {"seed", "origin"},
    "multiway": {"seed", "origin", "keys", "start", "end"},
}
#: The streams of the out-of-order join workloads (engines.sources.qddh_joins.WORKLOADS; a test
#: checks they agree): stream -> its join attributes, INTEGER columns beside ``ts`` BIGINT
#: in milliseconds.
QDDH_STREAMS: dict[str, dict[str, tuple[str, ...]]] = {
    "x3": {"s1": ("a1",), "s2": ("a1",), "s3": ("a1",)},
    "x4": {"t1": ("a1", "a2", "a3"), "t2": ("a1",), "t3": ("a2",), "t4": ("a3",)},
}
#: Generator settings that are profiles (optimizer.ir.profile), with their bounds.
_PROFILES: dict[str, dict[str, Any]] = {
    "rate_profile": {"high": MAX_RATE, "positive_somewhere": True},
    "keys_profile": {"low": 1, "high": MAX_KEYS, "integer": True, "steps_only": True},
    "skew_profile": {"high": MAX_SKEW, "steps_only": True},
    "hot": {"integer": True, "steps_only": True},
    "selectivity": {"high": 1.0},
}
#: The columns of a keyed-generator stream (engines.sources.keyed.SCHEMA).
_KEYED_COLUMNS = (("ts", DataType.BIGINT), ("k", DataType.INTEGER), ("v", DataType.DOUBLE))
#: Keyed-generator settings that are numbers (seconds, exponent) rather than integers.
_KEYED_NUMBERS = {"skew", "start", "end"}
_FILE_FORMATS = ("debs", "csv", "parquet")
#: What each built-in generator produces (lower-case name -> type); a test checks this
#: against engines.sources.smartplug.SCHEMA.
GENERATOR_COLUMNS: dict[str, dict[str, DataType]] = {
    "smartplug": {
        "id": DataType.BIGINT,
        "ts": DataType.BIGINT,
        "value": DataType.DOUBLE,
        "property": DataType.INTEGER,
        "plug_id": DataType.INTEGER,
        "household_id": DataType.INTEGER,
        "house_id": DataType.INTEGER,
    }
}
_STAT_KEYS = {"distinct", "selectivity"}
_TIME_UNIT_NAMES = {
    "s": "s",
    "second": "s",
    "seconds": "s",
    "ms": "ms",
    "millisecond": "ms",
    "milliseconds": "ms",
}


def load_catalog(path: Path) -> Catalog:
    """Read and validate a catalog file."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise CatalogError(
            f"catalog file not found: {path}",
            hint="put catalog.toml next to the query or pass --catalog PATH",
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise CatalogError(f"cannot read catalog {path}: {err}") from None
    return parse_catalog_text(text, str(path), base=path.parent)


def parse_catalog_text(text: str, name: str = "<catalog>", base: Path | None = None) -> Catalog:
    """Validate catalog TOML text; ``base`` resolves relative file paths of file sources."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise CatalogError(f"{name}: invalid TOML: {err}") from None
    _check_keys(data, {"streams", "doc"}, name, "")
    if "doc" in data:
        _expect(data["doc"], str, name, "doc")
    streams_raw = data.get("streams")
    if streams_raw is None:
        raise CatalogError(f"{name}: no [streams.NAME] table", hint="define at least one stream")
    _expect(streams_raw, dict, name, "streams")
    streams: dict[str, StreamDef] = {}
    for sname, body in streams_raw.items():
        stream = _parse_stream(sname, body, name, base)
        if sname.lower() in streams:
            raise CatalogError(f"{name}: stream '{sname}' defined twice (names ignore case)")
        streams[sname.lower()] = stream
    if not streams:
        raise CatalogError(f"{name}: no streams defined", hint="add a [streams.NAME] table")
    return Catalog(streams, Path(name) if base is not None else None)


def _parse_stream(sname: str, body: Any, name: str, base: Path | None) -> StreamDef:
    where = f"streams.{sname}"
    _expect(body, dict, name, where)
    if not sname.isidentifier():
        raise CatalogError(f"{name}: stream name '{sname}' is not a valid identifier")
    _check_keys(body, _STREAM_KEYS, name, where)
    if "doc" in body:
        _expect(body["doc"], str, name, f"{where}.doc")
    for required in ("columns", "timestamp"):
        if required not in body:
            raise CatalogError(
                f"{name}: {where} is missing '{required}'",
                hint=f'add [{where}.columns] with name = "TYPE" lines'
                if required == "columns"
                else 'name the event-time column: timestamp = "ts"',
            )
    cols_raw = body["columns"]
    _expect(cols_raw, dict, name, f"{where}.columns")
    if not cols_raw:
        raise CatalogError(f"{name}: {where}.columns is empty")
    columns = []
    for cname, tname in cols_raw.items():
        _expect(tname, str, name, f"{where}.columns.{cname}")
        dtype = TYPE_NAMES.get(tname.upper())
        if dtype is None:
            raise CatalogError(
                f"{name}: {where}.columns.{cname}: unknown type '{tname}'",
                hint=did_you_mean(tname.upper(), TYPE_NAMES)
                or "use BIGINT, INTEGER, DOUBLE, BOOLEAN or VARCHAR",
            )
        if not cname.isidentifier():
            raise CatalogError(f"{name}: column name '{cname}' is not a valid identifier")
        columns.append(Field(cname, dtype))
    seen: dict[str, str] = {}
    for c in columns:
        if c.name.lower() in seen:
            raise CatalogError(
                f"{name}: {where}.columns has '{seen[c.name.lower()]}' and '{c.name}' "
                "(column names ignore case)"
            )
        seen[c.name.lower()] = c.name

    ts = body["timestamp"]
    _expect(ts, str, name, f"{where}.timestamp")
    if ts not in [c.name for c in columns]:
        raise CatalogError(
            f"{name}: {where}.timestamp names unknown column '{ts}'",
            hint=did_you_mean(ts, [c.name for c in columns])
            or f"columns: {', '.join(c.name for c in columns)}",
        )
    ts_type = next(c.dtype for c in columns if c.name == ts)
    if ts_type not in (DataType.BIGINT, DataType.INTEGER):
        raise CatalogError(f"{name}: {where}.timestamp column '{ts}' must be BIGINT or INTEGER")

    unit_raw = body.get("time_unit", "s")
    _expect(unit_raw, str, name, f"{where}.time_unit")
    unit = _TIME_UNIT_NAMES.get(unit_raw.lower())
    if unit is None or unit not in TIME_UNITS_MS:
        raise CatalogError(
            f"{name}: {where}.time_unit must be 's' or 'ms', got '{unit_raw}'",
            hint="'s' for epoch seconds, 'ms' for epoch milliseconds",
        )

    rate = body.get("rate", 1000)
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise CatalogError(f"{name}: {where}.rate must be a number, got {type(rate).__name__}")
    if not math.isfinite(rate) or rate <= 0:
        raise CatalogError(
            f"{name}: {where}.rate must be a positive number, got {rate}",
            hint="tuples per event-second, e.g. rate = 2000",
        )

    source = _parse_source(body.get("source"), name, f"{where}.source", base)
    if source.generator == "keyed":
        layout = [(c.name, c.dtype) for c in columns]
        if layout != list(_KEYED_COLUMNS) or ts != "ts":
            raise CatalogError(
                f"{name}: {where}: the keyed generator writes columns ts BIGINT, k INTEGER, "
                "v DOUBLE (timestamp ts)",
                hint='[streams.X.columns] ts = "BIGINT", k = "INTEGER", v = "DOUBLE"',
            )
    elif source.generator in QDDH_STREAMS:
        _check_qddh(sname, columns, ts, unit, source.generator, name, where)
    elif source.generator == "multiway":
        _check_multiway(columns, ts, name, where)
    elif source.kind == "generator":
        _check_generated(columns, ts, unit, source.generator or "smartplug", name, where)
    distinct, selectivity = _parse_stats(body.get("statistics"), name, f"{where}.statistics")
    for col, _ in distinct:
        if col not in [c.name for c in columns]:
            raise CatalogError(
                f"{name}: {where}.statistics.distinct names unknown column '{col}'",
                hint=did_you_mean(col, [c.name for c in columns])
                or f"columns: {', '.join(c.name for c in columns)}",
            )
    return StreamDef(sname, tuple(columns), ts, unit, float(rate), source, distinct, selectivity)


def _parse_source(raw: Any, name: str, where: str, base: Path | None) -> SourceSpec:
    if raw is None:
        return SourceSpec(kind="none")
    _expect(raw, dict, name, where)
    kind = raw.get("kind")
    if kind is None:
        raise CatalogError(
            f"{name}: {where} is missing 'kind'", hint='kind = "generator" or kind = "file"'
        )
    if kind not in ("generator", "file"):
        raise CatalogError(
            f"{name}: {where}.kind must be 'generator' or 'file', got {kind!r}",
            hint=did_you_mean(kind, ("generator", "file")) if isinstance(kind, str) else None,
        )
    if kind == "generator":
        gen = raw.get("generator", "smartplug")
        _expect(gen, str, name, f"{where}.generator")
        if gen not in _GENERATOR_OPTIONS:
            raise CatalogError(
                f"{name}: {where}.generator: unknown generator '{gen}'",
                hint=did_you_mean(gen, sorted(_GENERATOR_OPTIONS))
                or "the built-in generators are 'smartplug', 'keyed', 'multiway', 'x3' and 'x4'",
            )
        allowed = _GENERATOR_OPTIONS[gen]
        _check_keys(raw, {"kind", "generator"} | allowed, name, where)
        options: list[tuple[str, object]] = []
        for key in sorted(allowed & set(raw)):
            value = raw[key]
            if key in _PROFILES:
                if not isinstance(value, str):
                    raise CatalogError(
                        f"{name}: {where}.{key} must be a profile string",
                        hint=f'{SYNTAX}, e.g. {key} = "0:1000,60:40000"',
                    )
                try:
                    parse_profile(value, f"{name}: {where}.{key}", **_PROFILES[key])
                except OptionError as err:
                    raise CatalogError(err.message, hint=err.hint) from None
                options.append((key, value))
                continue
            if gen == "keyed" and key == "silent":
                options.append((key, _silent_periods(value, name, f"{where}.silent")))
                continue
            if gen in ("keyed", "multiway") and key in _KEYED_NUMBERS:
                ok = isinstance(value, int | float) and not isinstance(value, bool)
                if not ok or not math.isfinite(value) or value < 0:
                    raise CatalogError(f"{name}: {where}.{key} must be a number >= 0")
                options.append((key, float(value)))
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise CatalogError(f"{name}: {where}.{key} must be an integer")
            if value < 0 or (key not in ("start", "seed", "origin") and value == 0):
                raise CatalogError(f"{name}: {where}.{key} must be positive, got {value}")
            if value >= 2**63:
                raise CatalogError(f"{name}: {where}.{key} is too large: {value}")
            options.append((key, value))
        if (
            gen in ("keyed", "multiway")
            and "end" in raw
            and float(raw["end"]) <= float(raw.get("start", 0))
        ):
            raise CatalogError(f"{name}: {where}.end must be after start")
        return SourceSpec(kind="generator", generator=gen, options=tuple(options))
    _check_keys(raw, {"kind", "path", "format"}, name, where)
    path_raw = raw.get("path")
    if not isinstance(path_raw, str) or not path_raw:
        raise CatalogError(f"{name}: {where}.path must be a file path string")
    fmt = raw.get("format")
    if fmt is not None and fmt not in _FILE_FORMATS:
        raise CatalogError(
            f"{name}: {where}.format must be one of {', '.join(_FILE_FORMATS)}, got {fmt!r}"
        )
    path = Path(path_raw)
    if base is not None and not path.is_absolute():
        path = base / path
    return SourceSpec(kind="file", path=path, format=fmt)


def _silent_periods(raw: Any, name: str, where: str) -> tuple[tuple[float, float], ...]:
    """``silent = [[from, to], ...]``: offsets in seconds, 0 <= from < to."""
    if not isinstance(raw, list):
        raise CatalogError(f"{name}: {where} must be a list of [from, to] pairs")
    out = []
    for pair in raw:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or any(isinstance(x, bool) or not isinstance(x, int | float) for x in pair)
            or not all(math.isfinite(x) for x in pair)
            or not 0 <= pair[0] < pair[1]
        ):
            raise CatalogError(
                f"{name}: {where}: {pair!r} is not a [from, to] pair with 0 <= from < to",
                hint="e.g. silent = [[30, 60]] (seconds after the origin)",
            )
        out.append((float(pair[0]), float(pair[1])))
    return tuple(out)


def _check_qddh(
    sname: str, columns: list[Field], ts: str, unit: str, workload: str, name: str, where: str
) -> None:
    """An x3/x4 generator stream is one of the workload's streams, declared as it is made."""
    streams = QDDH_STREAMS[workload]
    attrs = streams.get(sname.lower())
    if attrs is None:
        raise CatalogError(
            f"{name}: {where}: the {workload} generator has no stream '{sname}'",
            hint=f"its streams are {', '.join(streams)} (the stream's name picks it)",
        )
    want = [("ts", DataType.BIGINT)] + [(a, DataType.INTEGER) for a in attrs]
    if [(c.name.lower(), c.dtype) for c in columns] != want or ts.lower() != "ts" or unit != "ms":
        layout = ", ".join(f"{n} {t.value}" for n, t in want)
        declared = ", ".join(f'{n} = "{t.value}"' for n, t in want)
        raise CatalogError(
            f"{name}: {where}: the {workload} generator's stream {sname} has columns "
            f"{layout} (timestamp ts, time_unit ms)",
            hint=f'timestamp = "ts", time_unit = "ms", [streams.{sname}.columns] {declared}',
        )


def _check_multiway(columns: list[Field], ts: str, name: str, where: str) -> None:
    """A multiway generator stream: timestamp ``ts`` BIGINT, then INTEGER join columns
    (uniform over ``keys``) and DOUBLE columns (uniform in [0, 100)), any names."""
    for c in columns:
        want = (DataType.BIGINT,) if c.name.lower() == "ts" else (DataType.INTEGER, DataType.DOUBLE)
        if c.dtype not in want:
            raise CatalogError(
                f"{name}: {where}.columns.{c.name} is {c.dtype.value}; the multiway generator "
                "writes ts BIGINT and INTEGER or DOUBLE columns",
                hint=f'declare {c.name} = "{want[0].value}"',
            )
    if ts.lower() != "ts" or "ts" not in [c.name.lower() for c in columns]:
        raise CatalogError(
            f"{name}: {where}: the multiway generator's event time is column 'ts'",
            hint='timestamp = "ts", [streams.X.columns] ts = "BIGINT"',
        )


def _check_generated(
    columns: list[Field], ts: str, unit: str, generator: str, name: str, where: str
) -> None:
    """A generator stream may only declare columns its generator produces, with their types
    (checked here, so that a run fails at once instead of producing nothing)."""
    produced = GENERATOR_COLUMNS[generator]
    for c in columns:
        have = produced.get(c.name.lower())
        if have is None:
            raise CatalogError(
                f"{name}: {where}.columns.{c.name}: the {generator} generator does not produce "
                f"a column '{c.name}'",
                hint=f"it produces {', '.join(f'{k} {v.value}' for k, v in produced.items())}; "
                "remove the column, or give the stream a file source (or --data)",
            )
        if have is not c.dtype:
            raise CatalogError(
                f"{name}: {where}.columns.{c.name} is {c.dtype.value}, but the {generator} "
                f"generator produces it as {have.value}",
                hint=f'declare {c.name} = "{have.value}"',
            )
    if ts.lower() != "ts" or unit != "s":
        raise CatalogError(
            f"{name}: {where}: the {generator} generator's event time is column 'ts' in "
            f"seconds, not '{ts}' in '{unit}'",
            hint='timestamp = "ts" and time_unit = "s"',
        )


def _parse_stats(
    raw: Any, name: str, where: str
) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, float], ...]]:
    if raw is None:
        return (), ()
    _expect(raw, dict, name, where)
    _check_keys(raw, _STAT_KEYS, name, where)
    distinct_raw = raw.get("distinct", {})
    _expect(distinct_raw, dict, name, f"{where}.distinct")
    distinct = []
    for col, n in distinct_raw.items():
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise CatalogError(f"{name}: {where}.distinct.{col} must be a positive integer")
        distinct.append((col, n))
    sel_raw = raw.get("selectivity", {})
    _expect(sel_raw, dict, name, f"{where}.selectivity")
    sel = []
    for pred, f in sel_raw.items():
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f <= 1:
            raise CatalogError(f"{name}: {where}.selectivity.{pred!r} must be in [0, 1]")
        sel.append((pred, float(f)))
    return tuple(distinct), tuple(sel)


def _check_keys(table: dict[str, Any], allowed: set[str], name: str, where: str) -> None:
    for key in table:
        if key not in allowed:
            path = f"{where}.{key}" if where else key
            raise CatalogError(
                f"{name}: unknown key '{path}'",
                hint=did_you_mean(key, allowed) or f"valid keys: {', '.join(sorted(allowed))}",
            )


def _expect(value: Any, typ: type, name: str, where: str) -> None:
    if not isinstance(value, typ):
        words: dict[type, str] = {dict: "a table", str: "a string", list: "an array"}
        wanted = words.get(typ, typ.__name__)
        raise CatalogError(f"{name}: {where} must be {wanted}, got {type(value).__name__}")
