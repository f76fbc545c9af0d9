"""The run-time around an engine: sources, replay at a rate, pacing, sinks, dead letters, metrics.

``run_plan`` is what ``hycq run`` executes::

    sources (generator | CSV/Parquet replay, --rate rescales timestamps)
      -> validation (bad rows -> dead letter), conversion to the query's time base
      -> merge by event time across streams (engines.time_merge; --duration cuts)
      -> engine.ingest(stream, batch) / engine.advance_stream / engine.end_stream
      -> engine emits (T, rows) per slide instant  -> sink (+ `_ts`), latency per instant
    at the end: engine.finish(), sink committed atomically, metrics JSON

Everything stays Arrow until the engine: sources yield ``pyarrow.RecordBatch`` and validation
is vectorised. The row engine turns batches into tuples in its ``ingest``.

One module per part: ``engine`` (the engine protocol), ``options``, ``stream_input`` (one
input stream), ``inputs`` (sources, time base, the time-merged input), ``dead_letters``
(validation, rejected rows), ``sinks``, ``loop`` (``run_plan``), ``resources`` (RSS, memory
guard, progress), ``safe_json``.
"""

from engines.runtime.dead_letters import DeadLetters, validate
from engines.runtime.engine import OnLate, PlanExecutor, Rows
from engines.runtime.inputs import (
    MAX_TIMESTAMP,
    MergedInputs,
    open_inputs,
    plan_slides,
    plan_time_unit,
    to_time_base,
)
from engines.runtime.loop import RunResult, run_plan
from engines.runtime.options import OptionNames, RunOptions
from engines.runtime.safe_json import json_line, json_text
from engines.runtime.sinks import ResultSink, output_schema, overflow_error
from engines.runtime.stream_input import StreamInput

__all__ = [
    "MAX_TIMESTAMP",
    "DeadLetters",
    "MergedInputs",
    "OnLate",
    "OptionNames",
    "PlanExecutor",
    "ResultSink",
    "Rows",
    "RunOptions",
    "RunResult",
    "StreamInput",
    "json_line",
    "json_text",
    "open_inputs",
    "output_schema",
    "overflow_error",
    "plan_slides",
    "plan_time_unit",
    "run_plan",
    "to_time_base",
    "validate",
]
