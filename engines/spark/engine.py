"""Spark SQL through PySpark: one long-lived session per run, Arrow in and out.

PySpark is imported lazily, when the first Spark MIG is built, so everything else runs without
a JVM. Settings for a small machine (defaults, each overridable through ``conf``):

* ``spark.master = local[*]``; ``spark.sql.shuffle.partitions = 2`` (the default 200 tasks per
  shuffle dominate small per-slide queries on 2 cores); ``spark.ui.enabled = false``;
* ``spark.sql.execution.arrow.pyspark.enabled = true`` (``createDataFrame(pyarrow.Table)``
  and ``DataFrame.toArrow()`` move Arrow buffers, not pickled rows);
* ``spark.sql.ansi.enabled = true``: integer overflow and impossible casts raise, as in DuckDB
  and the row engine (docs/semantics.md), instead of wrapping around silently; the generated
  SQL spells out the rest of hycq's semantics (division by zero, modulo, rounding);
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
import re
import tempfile
import threading
import warnings
from collections.abc import Sequence
from functools import reduce
from typing import IO, Any

import pyarrow as pa

from engines import interrupts
from engines.columnar import ColumnarEngine, EngineFault, query_data_error
from engines.sqlgen.dialects import EXACT_SUM_UDF, MEDIAN_UDF
from optimizer.ir.errors import ConfigError

#: Seconds a Spark session may take to start before the run gives up (--spark-connect-timeout):
#: a local JVM starts in 5-20 s on a busy 2-core machine; a cluster master that does not
#: answer is retried by Spark for about a minute.
START_TIMEOUT_S = 90.0

#: Starts of a session tried when the JVM dies during start-up for no reason it states (a
#: crash, a kill): as many as the restarts after a fault mid-run (engines/mig/operator.py),
#: plus one.
START_ATTEMPTS = 3

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
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    # Catalyst walks expression trees recursively; a long AND/OR chain of different
    # predicates is a tree as deep as it is long. With the default 1 MB thread stack a
    # StackOverflowError in the thread serving Arrow results kills that thread and the
    # collect then waits forever; 64 MB (reserved, not committed) lets thousands of levels
    # through. A --spark-conf spark.driver.extraJavaOptions replaces this: keep -Xss in it.
    "spark.driver.extraJavaOptions": "-Xss64m",
}


def _errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean 'Spark failed' (imported lazily with PySpark)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException, ConnectionError, EOFError, OSError)


def _stop(spark: Any) -> None:
    """Stop ``spark``, whatever state its JVM is in. Stopping a session whose JVM was killed
    (the case a restart exists for) makes PySpark warn "Unable to cleanly shutdown Spark JVM
    process"; the MIG has already said the engine failed and is being restarted, so that
    warning is silenced here, and any error is ignored: the JVM is reaped afterwards."""
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Unable to cleanly shutdown Spark JVM", category=RuntimeWarning
        )
        spark.stop()


def _register_udfs(spark: Any) -> None:
    """hycq's SQL functions in ``spark``: the correctly rounded SUM of DOUBLE
    (``engines.sqlgen.dialects.EXACT_SUM_UDF``) and DuckDB's MEDIAN (``MEDIAN_UDF``),
    vectorized Arrow UDFs. Their modules are pickled by value, so executors on a cluster
    need pyarrow and numpy (PySpark's own requirements), not hycq."""
    from pyspark import cloudpickle
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.types import DoubleType

    from engines.kernels import exact_sum, median

    cloudpickle.register_pickle_by_value(exact_sum)
    cloudpickle.register_pickle_by_value(median)

    def exact_sum_udf(lists: pa.Array) -> pa.Array:  # the hints tell Spark it is Arrow's
        return exact_sum.list_sums(lists)

    def median_udf(lists: pa.Array) -> pa.Array:
        return median.list_medians(lists)

    spark.udf.register(EXACT_SUM_UDF, arrow_udf(exact_sum_udf, DoubleType()))  # type: ignore[call-overload]
    spark.udf.register(MEDIAN_UDF, arrow_udf(median_udf, DoubleType()))  # type: ignore[call-overload]


def _reap(proc: Any) -> None:
    """Kill PySpark's launcher process ``proc`` (a ``subprocess.Popen``) if it still runs,
    wait for it and close its pipes."""
    if proc is None:
        return
    with contextlib.suppress(Exception):
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(Exception):
                pipe.close()


def _abandon(box: dict[str, Any]) -> None:
    """Give up a start: kill the JVM it launched and forget PySpark's pointers to it."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = box.get("gateway") or SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.kill()
    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


#: A line of a JVM's console output that says why it failed.
_JVM_REASON = re.compile(r"Invalid (initial|maximum) heap size.*|Error: .*|.*Exception: .*")


class _JvmDied(EngineFault):
    """The JVM went away during start-up without saying why (killed, crashed): a fault of
    the moment, not of the settings, so the start is tried again."""


def _jvm_detail(log: IO[bytes]) -> str:
    """The first line of the JVM's console output that says why it failed ('' if none)."""
    with contextlib.suppress(OSError):
        log.seek(0)
        output = log.read().decode("utf-8", "replace").splitlines()
        found = [ln.strip() for ln in output if _JVM_REASON.fullmatch(ln.strip())]
        return found[0] if found else ""
    return ""


def _text(err: BaseException) -> str:
    """``str(err)``, which for a Java exception asks the JVM for its message: when the JVM is
    gone, that raises (Py4JNetworkError), so fall back to the exception's type."""
    try:
        return str(err).strip()
    except Exception:  # noqa: BLE001 - any failure to describe it: name its type
        return type(err).__name__


def _jvm_gone(box: dict[str, Any], err: BaseException) -> bool:
    """Whether the JVM this start launched has exited: its launcher is gone, or it exited
    before it sent its gateway's port (PySpark's JAVA_GATEWAY_EXITED)."""
    from pyspark import SparkContext

    gateway = box.get("gateway") or SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return "JAVA_GATEWAY_EXITED" in _text(err)
    try:
        return proc.poll() is not None
    except Exception:  # noqa: BLE001 - a launcher we cannot ask counts as gone
        return True


def _reason(err: BaseException, log: IO[bytes]) -> str:
    """One line saying why Spark failed: from the exception, else from the JVM's output."""
    text = _text(err)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    detail = _jvm_detail(log)
    for line in lines:  # a Java exception: its first line says it
        m = re.search(r"(\w+(\.\w+)*(Exception|Error)): (.*)", line)
        if m and "Py4J" not in m.group(1):
            return f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(4)}"[:300]
    first = lines[0] if lines else type(err).__name__
    return (f"{first} ({detail})" if detail else first)[:300]


class SparkEngine(ColumnarEngine):
    """A local or cluster Spark session driven through PySpark."""

    name = "spark"
    dialect = "spark"

    def __init__(
        self, conf: dict[str, str] | None = None, start_timeout: float = START_TIMEOUT_S
    ) -> None:
        self.conf = {**DEFAULT_CONF, **(conf or {})}
        #: the settings the user gave (``--spark-conf``): what a start-up failure names
        self.given = dict(conf or {})
        self.start_timeout = start_timeout
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
        self.restarts = 0
        self._frames: dict[str, dict[int, Any]] = {}  # table -> chunk id -> DataFrame
        self._chunks: dict[str, tuple[list[tuple[int, pa.Table]], pa.Schema]] = {}
        try:
            self.spark = self._start()
        except EngineFault as err:  # at start-up it is the settings' fault (--spark-conf)
            raise ConfigError(
                str(err),
                hint="check --spark-conf (spark.master, spark.driver.memory, ...) and that "
                "Java 17 is installed; --spark-connect-timeout S bounds the wait",
            ) from None

    def _settings(self) -> str:
        """The master and the user's other settings, for messages."""
        given = [f"{k}={v}" for k, v in self.given.items() if k != "spark.master"]
        return ", ".join([f"spark.master={self.conf.get('spark.master')}", *given])

    def _start(self) -> Any:
        """:meth:`_session`, tried again (up to START_ATTEMPTS in all) when the JVM died
        during start-up without a reason: a JVM killed or crashed then is restarted as one
        that dies mid-run is (engines/mig/operator.py); a failure the JVM or Spark explains (a bad
        master, a bad memory setting) or a timeout is not retried."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._session()
            except _JvmDied as err:
                if attempt == START_ATTEMPTS:
                    raise EngineFault(f"{err} ({attempt} attempts)") from None
                warnings.warn(
                    f"spark: {err}; starting it again ({attempt} of {START_ATTEMPTS - 1} restarts)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self.restarts += 1
        raise AssertionError("unreachable")  # pragma: no cover

    def _session(self) -> Any:
        """A session on a fresh or running JVM, within ``start_timeout`` seconds.

        The JVM's console output (start-up warnings, a failure's stack trace) goes to a log
        file that is unlinked at once (the JVM keeps writing to it; it disappears with the
        JVM): a failure is reported as one line taken from it. The wait gives way to a stop
        request (engines.interrupts.StopRequested), and on failure or timeout the JVM is
        stopped.
        """
        try:
            from pyspark import SparkConf, SparkContext
            from pyspark.java_gateway import launch_gateway
            from pyspark.sql import SparkSession
        except ImportError as err:  # pragma: no cover - pyspark is a dependency
            raise EngineFault(
                "PySpark is not installed: pip install pyspark (Java 17 is needed too)"
            ) from err
        builder = SparkSession.builder
        for key, value in self.conf.items():
            builder = builder.config(key, value)
        # Unlinked already (no file is left behind); the JVM inherits it as stdout/stderr.
        log = tempfile.TemporaryFile(prefix="hycq-spark-", suffix=".log")  # noqa: SIM115
        # A SparkContext created on the main thread installs its own SIGINT handler (cancel
        # jobs, raise KeyboardInterrupt), replacing hycq's stop-between-batches handling for
        # the rest of the process. Created on a helper thread, it installs none.
        box: dict[str, Any] = {}

        def start() -> None:
            try:
                if SparkContext._gateway is None:
                    conf = SparkConf(loadDefaults=False).setAll(list(self.conf.items()))
                    gateway = launch_gateway(conf, {"stdout": log, "stderr": log})
                    box["gateway"] = gateway
                    SparkContext._gateway = gateway
                    SparkContext._jvm = gateway.jvm
                box["spark"] = builder.getOrCreate()
            except BaseException as err:  # noqa: BLE001 - re-raised on the caller's thread
                box["error"] = err

        thread = threading.Thread(target=start, name="hycq-spark-start", daemon=True)
        thread.start()
        try:
            finished = interrupts.wait(thread, self.start_timeout)
        except BaseException:  # a stop request or a signal: the start is given up
            _abandon(box)  # the thread may still be blocked in the JVM: stop that JVM
            log.close()
            raise
        if not finished:
            _abandon(box)
            log.close()
            raise EngineFault(
                f"Spark did not start within {self.start_timeout:g} s ({self._settings()})"
            )
        if "error" in box:
            # Describe the failure while the JVM may still answer (a Java exception's
            # message comes from it), then stop that JVM.
            reason = _reason(box["error"], log)
            died = _jvm_gone(box, box["error"]) and not _jvm_detail(log)
            _abandon(box)
            log.close()
            if died:
                raise _JvmDied(
                    f"the JVM died while Spark was starting ({self._settings()}): {reason}"
                ) from None
            raise EngineFault(f"cannot start Spark ({self._settings()}): {reason}") from None
        log.close()  # the JVM keeps its own descriptor
        spark = box["spark"]
        spark.sparkContext.setLogLevel("ERROR")
        _register_udfs(spark)
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
        # Py4J calls are not cut by a stop (a half-read answer would break the connection);
        # a stop request cancels the jobs instead.
        try:
            with interrupts.native(self._cancel_jobs):
                self._register(table, chunks, schema, frames)
        except _errors() as err:
            raise EngineFault(f"spark could not register {table}: {err}") from err

    def _register(
        self,
        table: str,
        chunks: Sequence[tuple[int, pa.Table]],
        schema: pa.Schema,
        frames: dict[int, Any],
    ) -> None:
        """Create the frames of new chunks and the table's view over all of them."""
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

    def drop_input(self, table: str) -> None:
        self._chunks.pop(table, None)
        self._frames.pop(table, None)
        with contextlib.suppress(Exception), interrupts.held():
            self.spark.catalog.dropTempView(table)

    def query(self, sql: str) -> pa.Table:
        from pyspark.errors import ArithmeticException, NumberFormatException

        try:
            with interrupts.native(self._cancel_jobs):  # a stop request cancels the job
                return self.spark.sql(sql).toArrow()
        except (ArithmeticException, NumberFormatException) as err:  # ANSI: the data's fault
            raise query_data_error(self.name, err) from None
        except _errors() as err:
            raise EngineFault(f"spark query failed: {err}") from err

    def _cancel_jobs(self) -> None:
        """Cancel the running Spark jobs, from a helper thread: called by a signal handler
        while this thread waits inside a Py4J call, whose connection it must not reuse."""
        context = self.spark.sparkContext
        threading.Thread(
            target=context.cancelAllJobs, name="hycq-spark-cancel", daemon=True
        ).start()

    def restart(self) -> None:
        """Start a new session (and JVM, if the old one died) and re-create every input.

        A stop request (SIGINT/SIGTERM) ends the restart at once with
        ``engines.interrupts.StopRequested``, also while the new JVM is starting: the run then
        ends as interrupted instead of finishing the restart and the instants after it.
        """
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        interrupts.check_stop()
        _stop(self.spark)
        # The old session is stopped: its exit hook would only wait for PySpark's lock, which
        # a JVM start abandoned by a stop request may still hold.
        atexit.unregister(_stop)
        # The old JVM's launcher process: end it and reap it (a JVM that merely failed a
        # query would otherwise live on beside the new one; a dead one leaves a zombie).
        _reap(getattr(SparkContext._gateway, "proc", None))
        # A dead JVM leaves PySpark's singletons pointing at it: clear them.
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        self.restarts += 1
        self.spark = self._start()
        self._frames = {}
        for table, (chunks, schema) in self._chunks.items():
            interrupts.check_stop()
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
        _stop(self.spark)

    def info(self) -> dict[str, Any]:
        return {"engine": self.name, "master": self.conf["spark.master"], "restarts": self.restarts}
