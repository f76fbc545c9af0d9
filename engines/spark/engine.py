"""Spark SQL through PySpark: one long-lived session per run, Arrow in and out.

PySpark is imported lazily, when the first Spark MIG is built, so everything else runs without
a JVM. Settings for a small machine (defaults, each overridable through ``conf``):

* ``spark.master = local[*]``; ``spark.sql.shuffle.partitions = 2`` (the default 200 tasks per
  shuffle dominate small per-slide queries on 2 cores); ``spark.ui.enabled = false``;
* ``spark.sql.execution.arrow.pyspark.enabled = true`` (``createDataFrame(pyarrow.Table)``
  and ``DataFrame.toArrow()`` move Arrow buffers, not pickled rows);
* ``spark.sql.ansi.enabled = false`` (the generated SQL spells out hycq's semantics anyway);
* the environment variable ``SPARK_LOCAL_IP`` defaults to 127.0.0.1.

For a cluster pass ``spark.master`` (e.g. ``spark://host:7077``) and any other Spark conf in
the run configuration; nothing else changes (see docs/engines.md).

Window upkeep: each Arrow chunk of a MIG input becomes one Spark DataFrame, created once and
kept while the chunk is in the window; the input's view is the union of its live chunks.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Sequence
from functools import reduce
from typing import Any

import pyarrow as pa

from engines import stop
from engines.columnar import ColumnarEngine, EngineFault

#: Spark settings for this 2-core machine; ``conf`` entries override them.
DEFAULT_CONF: dict[str, str] = {
    "spark.master": "local[*]",
    "spark.app.name": "hycq",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
}


def _errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean 'Spark failed' (imported lazily with PySpark)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException, ConnectionError, EOFError, OSError)


def _stop(spark: Any) -> None:
    with contextlib.suppress(Exception):
        spark.stop()


class SparkEngine(ColumnarEngine):
    """A local or cluster Spark session driven through PySpark."""

    name = "spark"
    dialect = "spark"

    def __init__(self, conf: dict[str, str] | None = None) -> None:
        self.conf = {**DEFAULT_CONF, **(conf or {})}
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
        self.restarts = 0
        self._frames: dict[str, dict[int, Any]] = {}  # table -> chunk id -> DataFrame
        self._chunks: dict[str, tuple[list[tuple[int, pa.Table]], pa.Schema]] = {}
        self.spark = self._session()

    def _session(self, stoppable: bool = False) -> Any:
        """A Spark session (PySpark's one per process). With ``stoppable`` (a restart), the
        wait for the JVM gives up as soon as the run is asked to stop (engines.stop)."""
        try:
            from pyspark.sql import SparkSession
        except ImportError as err:  # pragma: no cover - pyspark is a dependency
            raise EngineFault(
                "PySpark is not installed: pip install pyspark (Java 17 is needed too)"
            ) from err
        builder = SparkSession.builder
        for key, value in self.conf.items():
            builder = builder.config(key, value)
        # A SparkContext created on the main thread installs its own SIGINT handler (cancel
        # jobs, raise KeyboardInterrupt), replacing hycq's stop-between-batches handling for
        # the rest of the process. Created on a helper thread, it installs none.
        box: dict[str, Any] = {}

        def start() -> None:
            try:
                box["spark"] = builder.getOrCreate()
            except Exception as err:  # noqa: BLE001 - re-raised on the caller's thread
                box["error"] = err

        thread = threading.Thread(target=start, name="hycq-spark-start", daemon=True)
        thread.start()
        if stoppable:
            stop.join(thread, "restarting Spark")
        else:
            thread.join()
        if "error" in box:
            raise EngineFault(f"cannot start Spark: {box['error']}") from box["error"]
        spark = box["spark"]
        spark.sparkContext.setLogLevel("ERROR")
        atexit.register(_stop, spark)
        return spark

    @property
    def jvm_pid(self) -> int | None:
        """The process id of the Spark JVM (local mode), for fault-injection tests."""
        gateway = getattr(self.spark.sparkContext, "_gateway", None)
        proc = getattr(gateway, "proc", None)
        return getattr(proc, "pid", None)

    def set_input(
        self, table: str, chunks: Sequence[tuple[int, pa.Table]], schema: pa.Schema
    ) -> None:
        self._chunks[table] = (list(chunks), schema)
        frames = self._frames.setdefault(table, {})
        try:
            live = {cid for cid, _ in chunks}
            for cid in list(frames):
                if cid not in live:
                    del frames[cid]
            for cid, chunk in chunks:
                if cid not in frames:
                    frames[cid] = self.spark.createDataFrame(chunk)
            parts = [frames[cid] for cid, _ in chunks]
            if parts:
                view = reduce(lambda a, b: a.unionAll(b), parts)
            else:
                view = self.spark.createDataFrame(schema.empty_table())
            view.createOrReplaceTempView(table)
        except _errors() as err:
            raise EngineFault(f"spark could not register {table}: {err}") from err

    def query(self, sql: str) -> pa.Table:
        try:
            return self.spark.sql(sql).toArrow()
        except _errors() as err:
            raise EngineFault(f"spark query failed: {err}") from err

    def restart(self) -> None:
        """Start a new session (and JVM, if the old one died) and re-create every input.

        A stop request (SIGINT/SIGTERM) ends the restart at once with
        ``engines.stop.StopRequested``, also while the new JVM is starting: the run then
        ends as interrupted instead of finishing the restart and the instants after it.
        """
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        stop.check("restarting Spark")
        with contextlib.suppress(Exception):
            self.spark.stop()
        # The old session is stopped: its exit hook would only wait for PySpark's lock, which
        # a JVM start abandoned by a stop request may still hold.
        atexit.unregister(_stop)
        # A dead JVM leaves PySpark's singletons pointing at it: clear them.
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        self.restarts += 1
        self.spark = self._session(stoppable=True)
        self._frames = {}
        for table, (chunks, schema) in self._chunks.items():
            stop.check("restarting Spark")
            self.set_input(table, chunks, schema)

    def close(self) -> None:
        """Drop this run's views but keep the session: starting a JVM costs ~10 s, so one
        session serves every run of a process (it stops at interpreter exit)."""
        with contextlib.suppress(Exception):
            for table in self._frames:
                self.spark.catalog.dropTempView(table)
        self._frames = {}
        self._chunks = {}

    def shutdown(self) -> None:
        """Stop the Spark session (and its JVM in local mode)."""
        with contextlib.suppress(Exception):
            self.spark.stop()

    def info(self) -> dict[str, Any]:
        return {"engine": self.name, "master": self.conf["spark.master"], "restarts": self.restarts}
