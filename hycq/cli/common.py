"""What several commands do with their arguments: load the query, read ``--data``, list the
files a command reads so no output overwrites one, print JSON.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optimizer.ir.errors import OptionError

if TYPE_CHECKING:
    from engines.sources.mqtt import MqttUrl


def load_query(query: str | Path, catalog: Path | None) -> Any:
    """``hycq.api.load_query``, its binder's notes (a renamed result column) on stderr."""
    from hycq import api

    q = api.load_query(query, catalog)
    for note in q.notes:
        sys.stderr.write(f"note: {note}\n")
    return q


def parse_data(specs: list[str]) -> dict[str, Path | MqttUrl]:
    from engines.sources.mqtt import MqttUrl, is_mqtt

    data: dict[str, Path | MqttUrl] = {}
    for spec in specs:
        stream, sep, path = spec.partition("=")
        if not sep or not stream or not path:
            raise OptionError(
                f"--data expects STREAM=PATH, got '{spec}'",
                hint="e.g. --data readings=readings.parquet",
            )
        if stream in data:
            raise OptionError(f"--data given twice for stream '{stream}'")
        if path == "-":  # standard input: read once, as lines arrive (a pipe or a terminal)
            if STDIN in data.values():
                raise OptionError(
                    f"--data {stream}=- : standard input is already read by another stream",
                    hint="only one stream can read stdin; give the others a file",
                )
            data[stream] = STDIN
        elif is_mqtt(path):
            data[stream] = MqttUrl.parse(path, f"--data {stream}=")
        else:
            data[stream] = Path(path)
    return data


#: ``--data STREAM=-``: the stream's raw CSV lines from standard input.
STDIN = Path("/dev/stdin")


def check_data_flags(queries: list[Any], data: dict[str, Path | MqttUrl]) -> None:
    """``--data`` names: a stream the catalog does not have is exit 2; one that no query
    reads is ignored, with one warning line each (at once: a live run may be long)."""
    from engines.runtime.inputs import check_data_streams, unread_data

    plans = [q.plan for q in queries]
    for q in queries:
        check_data_streams(q.catalog, plans, data, "--data")
    for name in unread_data(plans, data):
        sys.stderr.write(
            f"warning: --data names stream '{name}', which the query does not read: ignored\n"
        )
        sys.stderr.flush()


def join_order_of(args: argparse.Namespace) -> tuple[tuple[str, ...], ...] | None:
    from optimizer.phase_one import parse_join_order

    return parse_join_order(args.join_order) if args.join_order is not None else None


def input_files(
    query: str, catalog_arg: Path | None, catalog: Any, data: Any, cost_model: str | None
) -> list[tuple[str, Path | str | None]]:
    """Every file a command reads: no output may be written over one of them."""
    from cost_models.registry import files_read
    from hycq.api import find_catalog

    found: list[tuple[str, Path | str | None]] = [("query file", query)]
    found.append(("catalog", find_catalog(query, catalog_arg)))
    found += [("--data", p) for p in data if isinstance(p, Path)]  # not MQTT
    found += [
        (f"the catalog's source of '{s.name}'", s.source.path)
        for s in catalog.streams.values()
        if s.source.path is not None
    ]
    found += [("cost model file", p) for p in files_read(cost_model)]
    return found


def check_outputs(
    inputs: Sequence[tuple[str, Path | str | None]],
    outputs: Sequence[tuple[str, Path | str | None]],
) -> None:
    from engines.output_files import check_distinct

    check_distinct(inputs, outputs)


def print_json(obj: Any) -> None:
    from engines.runtime import json_text

    sys.stdout.write(json_text(obj))  # strict JSON: NaN and infinities as null


def check_folder_files(folder: Path, streams: list[str], *others: str) -> None:
    """A generator's files in its --out folder (the streams, catalog.toml and ``others``) are
    distinct files: a symlink or hard link between two of them would make one overwrite the
    other."""
    names = [*streams, "catalog.toml", *others]
    check_outputs([], [(f"--out file {name}", folder / name) for name in names])
