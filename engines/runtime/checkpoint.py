"""Checkpoints: a long-running query that survives a crash (``--checkpoint DIR``,
``--resume``; docs/checkpoints.md).

What a checkpoint holds
-----------------------
The state of every operator (row windows, panes, aggregates, join stores, R2S relations, the
MIGs' Arrow windows) is a deterministic function of the tuples the engine took, in their
order. A checkpoint therefore persists that state's *source*, not each engine's Python
structures: the **log** of what the engine was given (every ``ingest`` batch as Arrow, every
``advance_stream`` and ``end_stream``), cut down to the part that can still matter, plus
where the run stood:

* the last instant emitted (``last_instant``, L): the resumed run emits only instants after it;
* per stream, the rows delivered to the engine, so the resumed run re-reads its file or
  generator and skips them (a live source, MQTT or stdin, is not re-read), and a digest of
  those rows (:class:`RowDigest`), which the skipped rows must match;
* the committed sizes of the output and dead-letter files, which are written into
  ``DIR/output.partial`` and ``DIR/dead_letter.partial`` and cut back to these sizes on
  resume (exactly once), then moved into place when the run ends;
* the dead-letter counts, so the bad rows of the re-read prefix are not written twice.

Resuming replays the log into fresh engines with the output of instants <= L suppressed:
their state is then the state of the uninterrupted run at the checkpoint (results do not
depend on batch boundaries; the differential tests check it), and the run continues.

What is kept of the log
-----------------------
A tuple with timestamp ``ts`` lies in a time window of size S at instant T when
``T - S < ts <= T``. Every instant after L, and the relation at L that an R2S operator
compares the next one with, sees only tuples with ``ts > L - S``; one slide (and a tick) more
is kept for safety. Tuples before that are cut; a batch that loses every tuple becomes an
``advance_stream`` to its largest timestamp, so the stream's event-time progress (what lets
instants fire, and what makes a later tuple late) is the same in the replay. A tuple that
was late when it arrived is kept if it is new enough and is late again in the replay: the
tuples that made it late have larger timestamps and are kept too. Streams under a ROWS,
UNBOUNDED or row-sliding window (whose contents do not depend on time) keep their whole log.

The parts
---------
This module records the log (:class:`Recorder`), re-reads a resumed run's inputs
(:class:`Reread`) and writes the checkpoints (:class:`Checkpointer`);
``engines.runtime.checkpoint_fingerprint`` says whether a resumed run is the same run (the
fingerprint, the digest of the rows delivered), and ``engines.runtime.checkpoint_store``
holds the files: the manifest, its validation and loading (:func:`load`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engines.runtime.checkpoint_fingerprint import RowDigest, fingerprint
from engines.runtime.checkpoint_store import (
    _SEGMENT,
    DEAD_LETTER_PARTIAL,
    FINISHED,
    FORMAT,
    OUTPUT_PARTIAL,
    Loaded,
    _checksum,
    _file_entry,
    _fsync_dir,
    _manifests,
    _write_atomic,
    load,
)
from optimizer.ir.catalog import TIME_UNITS_MS, Catalog
from optimizer.ir.errors import CheckpointError, OptionError
from optimizer.ir.plan import LogicalPlan, WindowKind
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.plan import Window as WindowOp

#: ``--checkpoint-every`` when none is given (a resumed run keeps its run's interval)
DEFAULT_EVERY_S = 10.0
#: manifests kept: the newest, and the one before in case the newest is damaged
KEEP = 2

#: one log event: ("i", stream, batch index), ("a", stream, ts) or ("e", stream, 0)
Event = tuple[str, str, int]


@dataclass(frozen=True)
class CheckpointOptions:
    """``--checkpoint DIR``, ``--checkpoint-every S`` and ``--resume DIR``."""

    directory: Path
    #: wall seconds between checkpoints (one is also written when a run is interrupted);
    #: None: DEFAULT_EVERY_S, or for a resumed run the interval its run was started with
    every_s: float | None = None
    #: continue the run checkpointed in ``directory`` (else start a new one there)
    resume: bool = False
    #: a checkpoint after every this many loop steps instead of by the clock (tests: the
    #: points are then deterministic)
    every_batches: int | None = None


def history_ticks(plan: LogicalPlan, base_unit: str) -> dict[str, int | None]:
    """Per stream, the ticks (of the query's time base) before the last emitted instant
    from which tuples can still matter; None: every tuple (module docstring)."""
    need: dict[str, int | None] = {}
    windowed: set[str] = set()
    for op in plan.operators():
        if not isinstance(op, SourceOp):
            continue
        need.setdefault(op.stream, 0)
        for consumer in plan.consumers(op.id):
            w = plan.op(consumer)
            if not isinstance(w, WindowOp):
                need[op.stream] = None  # read without a window: keep everything
                continue
            windowed.add(op.stream)
            if w.window in (WindowKind.ROWS, WindowKind.UNBOUNDED) or w.slide_rows:
                need[op.stream] = None
                continue
            factor = TIME_UNITS_MS[w.time_unit] // TIME_UNITS_MS[base_unit]
            ticks = ((w.size or 1) + w.slide) * factor + 1
            current = need[op.stream]
            if current is not None:
                need[op.stream] = max(current, ticks)
    for stream in need:
        if stream not in windowed:
            need[stream] = None
    return need


class Recorder:
    """The engine as the run loop sees it while checkpointing: every call is forwarded and
    appended to the log (not while ``replaying`` a loaded log: that one is on disk)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.events: list[Event] = []
        self.batches: dict[str, list[pa.RecordBatch]] = {}
        self.time_columns: dict[str, int] = {}
        #: rows delivered per stream since the run (not the resume) started
        self.delivered: dict[str, int] = {}
        #: per stream read again on resume (a file or generator), the digest of every row
        #: delivered since the run started (a resumed run's Reread feeds it the skipped rows)
        self.digests: dict[str, RowDigest] = {}
        self.replaying = False
        #: streams told ended (a resumed run re-reads a file to its end and would tell again)
        self.ended: set[str] = set()

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int:
        if not self.replaying:
            kept = self.batches.setdefault(stream, [])
            self.events.append(("i", stream, len(kept)))
            kept.append(batch)
            self.time_columns[stream] = time_column
            self.delivered[stream] = self.delivered.get(stream, 0) + batch.num_rows
            digest = self.digests.get(stream)
            if digest is not None:
                digest.update(batch)
        return self.engine.ingest(stream, batch, time_column)

    def digest(self, streams: list[str]) -> None:
        """Keep a digest of the rows delivered to each of ``streams`` (those a resumed run
        reads again)."""
        for stream in streams:
            self.digests.setdefault(stream, RowDigest())

    def advance_stream(self, stream: str, ts: int) -> None:
        if not self.replaying:
            self.events.append(("a", stream, int(ts)))
        self.engine.advance_stream(stream, ts)

    def end_stream(self, stream: str) -> None:
        if stream in self.ended:
            return
        self.ended.add(stream)
        if not self.replaying:
            self.events.append(("e", stream, 0))
        self.engine.end_stream(stream)

    def finish(self) -> None:
        self.engine.finish()

    @property
    def pending(self) -> bool:
        """Whether anything was recorded since the last checkpoint."""
        return bool(self.events)

    def take(self) -> tuple[list[Event], dict[str, list[pa.RecordBatch]]]:
        """The events recorded since the last call, taken away."""
        taken = (self.events, self.batches)
        self.events, self.batches = [], {}
        return taken

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


class Reread:
    """A resumed run's re-read of its files and generators: per stream, the rows the
    checkpoint's log already holds are skipped, and they must be the rows the checkpointed
    run took (their digest, engines/runtime/checkpoint_fingerprint.py), else the resume is
    refused (a changed input).

    The skipped rows feed the recorder's digest, which then goes on with the rows delivered
    after them, as in an uninterrupted run.
    """

    def __init__(self, loaded: Loaded, recorder: Recorder, described: dict[str, str]) -> None:
        m = loaded.manifest
        #: per stream read again: its input's description (for messages)
        self.described = described
        self.left = {s: int(m["delivered"].get(s, 0)) for s in described}
        self.expected: dict[str, str] = dict(m["digests"])
        self.recorder = recorder
        recorder.digests.update({s: RowDigest() for s in described})

    def take(self, stream: str, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """The part of ``batch`` after the rows still to skip (None: it is skipped whole);
        CheckpointError when the skipped rows are not those of the checkpoint."""
        left = self.left.get(stream, 0)
        if not left:
            return batch
        n = min(left, batch.num_rows)
        self.recorder.digests[stream].update(batch if n == batch.num_rows else batch.slice(0, n))
        self.left[stream] = left - n
        if self.left[stream] == 0:
            self._verify(stream)
        return None if n == batch.num_rows else batch.slice(n)

    def skipping(self, stream: str) -> bool:
        """Whether rows of ``stream`` are still to be skipped."""
        return self.left.get(stream, 0) > 0

    def digests(self) -> dict[str, str]:
        """Per stream, the digest a checkpoint written now records: the checkpoint's own
        while its rows are still being skipped (no new row was delivered yet)."""
        return {
            s: self.expected[s] if self.skipping(s) and s in self.expected else d.hexdigest()
            for s, d in self.recorder.digests.items()
        }

    def finish(self) -> None:
        """At the end of the input: a stream that ended before its skipped rows did holds
        fewer rows than the checkpointed run had taken."""
        for stream, left in sorted(self.left.items()):
            if left:
                taken = self.recorder.digests[stream].rows + left
                raise CheckpointError(
                    f"--resume: the input of stream '{stream}' changed since the checkpoint: "
                    f"{self.described[stream]} holds {taken - left:,} valid rows, the "
                    f"checkpointed run had already taken {taken:,}",
                    hint="resume with the input the run was started with, or start a new "
                    "run (without --resume, with an empty --checkpoint folder)",
                )

    def _verify(self, stream: str) -> None:
        digest = self.recorder.digests[stream]
        if digest.hexdigest() != self.expected.get(stream, RowDigest().hexdigest()):
            raise CheckpointError(
                f"--resume: the input of stream '{stream}' changed since the checkpoint: "
                f"the first {digest.rows:,} rows of {self.described[stream]}, which the "
                "checkpointed run had already taken, are not the same any more; resuming "
                "would mix its old and new rows",
                hint="resume with the input the run was started with, or start a new run "
                "(without --resume, with an empty --checkpoint folder)",
            )


class Checkpointer:
    """Writes a run's checkpoints into one folder (module docstring)."""

    def __init__(
        self,
        options: CheckpointOptions,
        plan: LogicalPlan,
        placement: dict[str, str],
        run_options: Any,
        base_unit: str,
        catalog: Catalog | None = None,
    ) -> None:
        self.options = options
        self.directory = options.directory
        self.print = fingerprint(plan, placement, run_options, catalog)
        self.history = history_ticks(plan, base_unit)
        self.segments: list[dict[str, Any]] = []
        self.prefix: dict[str, Any] = {"progress": {}, "ended": []}
        self.number = 0
        self.delivered_before: dict[str, int] = {}
        self.loaded: Loaded | None = None
        #: per checkpoint written: (milliseconds, bytes written, bytes the checkpoint needs)
        self.writes: list[tuple[float, int, int]] = []
        self._last = time.perf_counter()
        self._steps = 0
        #: wall seconds between checkpoints (set below for a resumed run)
        self.every_s = DEFAULT_EVERY_S if options.every_s is None else options.every_s
        #: instants emitted before this process (a resumed run's), and the last instant
        #: and output size the newest checkpoint recorded (to skip writing an unchanged one)
        self.instants_before = 0
        self._written: tuple[Any, ...] | None = None
        if options.resume and _nothing_yet(self.directory):
            # killed before its first checkpoint (the folder made, nothing in it): nothing
            # was committed, so the run starts from the beginning
            warnings.warn(
                f"--resume: {self.directory} holds no checkpoint yet; starting from the beginning",
                RuntimeWarning,
                stacklevel=2,
            )
            _check_fresh(self.directory)
        elif options.resume:
            self.loaded = load(self.directory, self.print)
            m = self.loaded.manifest
            self.segments = list(m["segments"])
            self.prefix = m["prefix"]
            self.number = self.loaded.number
            self.delivered_before = {k: int(v) for k, v in m["delivered"].items()}
            self.instants_before = int(m["instants"])
            if options.every_s is None:  # the run's own interval unless a new one is given
                self.every_s = self.loaded.every_s
        else:
            _check_fresh(self.directory)

    @property
    def partial_output(self) -> Path:
        return self.directory / OUTPUT_PARTIAL

    @property
    def partial_dead_letter(self) -> Path:
        return self.directory / DEAD_LETTER_PARTIAL

    def due(self, step: bool = True) -> bool:
        """Whether a checkpoint is due after this loop step (``step`` False: while the loop
        waits, for input or for the wall clock; only the clock counts then)."""
        if step:
            self._steps += 1
            if self.options.every_batches is not None:
                return self._steps % self.options.every_batches == 0
        elif self.options.every_batches is not None:
            return False
        return time.perf_counter() - self._last >= self.every_s

    @property
    def next_due(self) -> float:
        """When (``perf_counter``) the next checkpoint is due by the clock."""
        return self._last + self.every_s

    def unchanged(self, recorder: Recorder, state: tuple[Any, ...]) -> bool:
        """Whether a checkpoint now would record what the newest one does: nothing was
        delivered since, and ``state`` (last instant, file sizes, dead letters) is the
        same. It is then not written again."""
        return not recorder.pending and self._written == state

    def skip(self) -> None:
        """Count an unchanged checkpoint as written (the clock starts again)."""
        self._last = time.perf_counter()

    def write(
        self,
        recorder: Recorder,
        last_instant: int | None,
        sizes: dict[str, int | None],
        dead: Any,
        results: int,
        instants: int = 0,
        digests: dict[str, str] | None = None,
    ) -> None:
        """Write a checkpoint of the run as it stands between two batches: the log since the
        previous one as a new segment, then the manifest. ``instants``: emitted by this
        process; ``digests``: per stream read again on resume, of its delivered rows."""
        start = time.perf_counter()
        self.directory.mkdir(parents=True, exist_ok=True)
        number = self.number + 1
        events, batches = recorder.take()
        written = 0
        if events:
            seg, written = self._write_segment(number, events, batches, recorder.time_columns)
            self.segments.append(seg)
        keep_after = {
            s: (last_instant - h if last_instant is not None and h is not None else None)
            for s, h in self.history.items()
        }
        self._drop_old_segments(keep_after)
        delivered = dict(self.delivered_before)
        for s, n in recorder.delivered.items():
            delivered[s] = delivered.get(s, 0) + n
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "number": number,
            "written_at": time.time(),
            "fingerprint": self.print,
            "last_instant": last_instant,
            "keep_after": keep_after,
            "prefix": self.prefix,
            "segments": self.segments,
            "delivered": delivered,
            "digests": dict(sorted((digests or {}).items())),
            "every_s": self.every_s,
            "instants": self.instants_before + instants,
            "sizes": sizes,
            "results": results,
            "dead": {
                "count": dead.count,
                "by_kind": dict(dead.by_kind),
                "by_stream": dict(dead.by_stream),
                "first_reason": dict(dead.first_reason),
            },
        }
        manifest["checksum"] = _checksum(manifest)
        data = json.dumps(manifest, sort_keys=True).encode()
        _write_atomic(self.directory / f"ckpt-{number:06d}.json", data)
        written += len(data)
        _fsync_dir(self.directory)
        self.number = number
        self._collect_garbage()
        needed = len(data) + sum(f["size"] for s in self.segments for f in s["files"].values())
        self.writes.append(((time.perf_counter() - start) * 1e3, written, needed))
        self._last = time.perf_counter()
        self._written = (last_instant, dict(sizes), dead.count)

    def finished(self) -> None:
        """Mark the run as finished: ``--resume`` refuses it."""
        _write_atomic(self.directory / FINISHED, json.dumps({"number": self.number}).encode())

    def metrics(self) -> dict[str, Any]:
        ms = sorted(w[0] for w in self.writes)
        out: dict[str, Any] = {
            "dir": str(self.directory),
            "every_s": self.every_s,
            "written": len(self.writes),
            "write_ms": {
                "p50": ms[len(ms) // 2] if ms else None,
                "max": ms[-1] if ms else None,
            },
            "bytes_written": sum(w[1] for w in self.writes),
            "last_bytes": self.writes[-1][2] if self.writes else None,
        }
        return out

    # -- files -------------------------------------------------------------------------

    def _write_segment(
        self,
        number: int,
        events: list[Event],
        batches: dict[str, list[pa.RecordBatch]],
        time_columns: dict[str, int],
    ) -> tuple[dict[str, Any], int]:
        files: dict[str, dict[str, Any]] = {}
        keys: dict[str, int] = {}
        max_ts: dict[str, int] = {}
        for k, (stream, kept) in enumerate(sorted(batches.items())):
            keys[stream] = k
            schema = kept[0].schema
            sink = pa.BufferOutputStream()
            with pa.ipc.new_file(sink, schema) as writer:
                for b in kept:
                    writer.write_batch(b if b.schema.equals(schema) else b.cast(schema))
                    if b.num_rows:
                        top = int(pc.max(b.column(time_columns[stream])).as_py())
                        max_ts[stream] = max(top, max_ts.get(stream, top))
            data = sink.getvalue().to_pybytes()
            name = f"seg-{number:06d}-{k}.arrow"
            _write_atomic(self.directory / name, data)
            files[name] = _file_entry(data)
        ended = []
        for kind, stream, value in events:
            if kind == "a":
                max_ts[stream] = max(value, max_ts.get(stream, value))
            elif kind == "e":
                ended.append(stream)
        meta = {
            "events": events,
            "files": keys,
            "time_columns": {s: time_columns[s] for s in keys},
        }
        data = json.dumps(meta).encode()
        name = f"seg-{number:06d}.json"
        _write_atomic(self.directory / name, data)
        files[name] = _file_entry(data)
        written = sum(f["size"] for f in files.values())
        return {"number": number, "files": files, "max_ts": max_ts, "ended": ended}, written

    def _drop_old_segments(self, keep_after: dict[str, int | None]) -> None:
        """Drop the leading segments every tuple and progress of which is before its
        stream's horizon; what they told of progress and ends moves to the prefix."""
        while self.segments:
            seg = self.segments[0]
            old = all(
                keep_after.get(s) is not None and ts <= keep_after[s]
                for s, ts in seg["max_ts"].items()
            )
            if not old:
                return
            progress = dict(self.prefix["progress"])
            for s, ts in seg["max_ts"].items():
                progress[s] = max(ts, progress.get(s, ts))
            ended = list(self.prefix["ended"]) + [
                s for s in seg["ended"] if s not in self.prefix["ended"]
            ]
            self.prefix = {"progress": progress, "ended": ended}
            self.segments.pop(0)

    def _collect_garbage(self) -> None:
        """Keep the newest KEEP manifests and the files they name; remove the rest."""
        manifests = sorted(_manifests(self.directory), reverse=True)
        needed: set[str] = set()
        for _n, path in manifests[:KEEP]:
            try:
                m = json.loads(path.read_text())
                needed.update(f for seg in m["segments"] for f in seg["files"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        for _n, path in manifests[KEEP:]:
            with contextlib.suppress(OSError):
                path.unlink()
        for entry in os.listdir(self.directory):
            if (_SEGMENT.match(entry) and entry not in needed) or entry.endswith(".tmp"):
                seg = _SEGMENT.match(entry)
                if seg is not None and int(seg.group(1)) > self.number:
                    continue  # never: segments are numbered below their manifest
                with contextlib.suppress(OSError):
                    (self.directory / entry).unlink()


def check_output(output: str | None) -> None:
    """Checkpointed runs write their output as they go: a Parquet file is only readable
    once its footer is written, so it cannot be resumed."""
    if output is not None and output.lower().endswith(".parquet"):
        raise OptionError(
            "--checkpoint cannot write a Parquet --output (it cannot be continued after a crash)",
            hint="write .jsonl or .csv (or -, or mqtt://...) and convert afterwards",
        )


def _nothing_yet(directory: Path) -> bool:
    """A folder a run made for its checkpoints but wrote none to (and did not finish)."""
    return (
        directory.is_dir()
        and not any(_manifests(directory))
        and not (directory / FINISHED).exists()
    )


def _check_fresh(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"--checkpoint: {directory} is not a folder")
    if directory.is_dir() and (any(_manifests(directory)) or (directory / FINISHED).exists()):
        raise CheckpointError(
            f"--checkpoint: {directory} already holds the checkpoints of a run",
            hint=f"continue it with --resume {directory}, or choose an empty folder",
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name in (OUTPUT_PARTIAL, DEAD_LETTER_PARTIAL):
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
    except OSError as err:
        raise CheckpointError(
            f"--checkpoint: cannot use {directory}: {err.strerror or err}"
        ) from None
