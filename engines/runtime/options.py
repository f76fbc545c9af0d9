"""The options of one run, and how messages name them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.disorder.quality_options import QualityOptions
from engines.disorder.spec import DisorderSpec
from engines.runtime.checkpoint import CheckpointOptions
from engines.sources.mqtt import MqttUrl


@dataclass(frozen=True)
class OptionNames:
    """How the run-time's messages name the run's options.

    The defaults are ``RunOptions``' own field names (what an API caller wrote); the command
    line passes its flag spellings (``hycq.flags.CLI_OPTION_NAMES``).
    """

    output: str = "output"
    metrics: str = "metrics"
    dead_letter: str = "dead_letter"
    data: str = "data"
    rate: str = "rate"
    duration: str = "duration"
    memory_limit: str = "memory_limit_mb"


@dataclass
class RunOptions:
    """Options of one run (the ``hycq run`` flags)."""

    #: How messages name these options (the command line passes its flag spellings).
    names: OptionNames = field(default_factory=OptionNames)

    rate: float | None = None
    duration: float | None = None
    pace: str = "max"
    #: per stream, a file (or pipe) path or an MQTT subscription (engines.sources.mqtt)
    data: dict[str, Path | MqttUrl] = field(default_factory=dict)
    output: str | None = None  # path, "-" for stdout, or mqtt://HOST:PORT/TOPIC
    keep_results: bool = False  # without output: keep the result table in memory (API, tests)
    metrics: Path | None = None
    dead_letter: Path | None = None
    progress: bool | None = None  # None: when stderr is a terminal
    batch_seconds: int = 1
    #: Rows per batch read from a data file (internal: tests vary it to show that results do
    #: not depend on batch sizes).
    read_batch_rows: int = 65536
    #: SIGINT/SIGTERM stop the run gracefully (the CLI): the loop stops between batches, the
    #: instants emitted so far are committed to the output, metrics say ``interrupted``. A
    #: second signal stops at once without committing. Off for API callers (and tests).
    stop_on_signal: bool = False
    #: RSS in MB above which the run stops with an error (a window of rate x range tuples
    #: that does not fit); None: 90% of the memory available when the run starts.
    memory_limit_mb: float | None = None
    #: ``--disorder``: K-slack buffers in front of the windows (docs/disorder.md); the
    #: default ``none`` buffers nothing (tuples out of order follow the late rule alone).
    disorder: DisorderSpec = field(default_factory=DisorderSpec)
    #: Parameters of a registered policy (e.g. a quality target); the fixed ones take none.
    disorder_params: dict[str, Any] = field(default_factory=dict)
    #: ``--idle-timeout``: event-seconds a silent stream may hold the clock back while the
    #: others progress (docs/disorder.md, "Idle streams"); None: wait for it forever.
    idle_timeout: float | None = None
    #: ``--late``: ``insert`` (a late tuple that still falls into a row window with results
    #: to come enters it), ``drop`` (every late tuple is dead-lettered), or None: ``insert``
    #: when ``disorder`` buffers, ``drop`` without (docs/disorder.md).
    late: str | None = None
    #: The result-quality target of ``--disorder quality`` (``--max-error``/``--confidence``
    #: or ``--min-recall``/``--recall-period``, ``--adapt-method``, ``--quality-param``);
    #: None when none was given.
    quality: QualityOptions | None = None
    #: ``--join-impl``: how the row engine runs each join chain: ``tree`` (binary symmetric
    #: hash joins), ``mjoin``, ``acaching``, ``jit``, or ``auto`` (the cost model's choice per
    #: chain, optimizer/join_impl.py); docs/joins.md.
    join_impl: str = "tree"
    #: ``--join-memory``: MB for A-Caching's caches (None: unlimited).
    join_memory_mb: float | None = None
    #: ``--checkpoint DIR``/``--checkpoint-every``/``--resume DIR`` (docs/checkpoints.md).
    checkpoint: CheckpointOptions | None = None

    @property
    def late_insert(self) -> bool:
        """Whether late tuples may enter open windows in this run."""
        return self.late == "insert" or (self.late is None and self.disorder.buffered)
