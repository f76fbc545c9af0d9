"""One input stream of a run as the run-time sees it: its catalog entry, its batches in
arrival order, and what is known of where they come from (rate, rereadable, live).

Opened by ``engines.runtime.inputs``; read by the loop, the dead-letter checks and the
checkpoints (a leaf of the run-time, so they need not import each other)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from optimizer.ir.catalog import StreamDef


@dataclass
class StreamInput:
    """One input stream of a run: its catalog entry and its batches in arrival order."""

    stream: StreamDef
    batches: Iterator[pa.RecordBatch]
    rate: float  # tuples per event-second (density of the data)
    description: str
    expected_rows: int | None = None
    #: ``rate`` is only the catalog's: report the density the data actually had
    measured: bool = False
    #: A live source (engines.sources.mqtt.MqttFeed): closed when the run ends, its
    #: ``metrics()`` reported under ``live_sources``.
    live: Any = None
    #: a resumed run (``--resume``) can read it again from its start and skip what the
    #: checkpoint holds: a file or generator, not a pipe, stdin or MQTT
    rereadable: bool = True
    #: a data file, FIFO or stdin: one without any row (valid or bad) is an error, since a
    #: run over nothing has nothing to say (``check_rejections``)
    data_file: bool = False
