"""Stopping a Spark session whose JVM is gone (``engines.spark.engine._stop``).

A restart after the JVM was killed stops the old session first; PySpark then warns "Unable
to cleanly shutdown Spark JVM process" (``SparkContext.stop`` on a Py4J error). The MIG has
already warned that it is restarting the engine, so hycq silences that one warning: with
warnings as errors it used to surface, depending on timing, as a failure of the killed-JVM
test (tests/differential/test_faults.py) after the run had recovered.
"""

from __future__ import annotations

import warnings

import pytest

from engines.spark.engine import _stop


class _DeadSession:
    """What ``SparkSession.stop`` does when its JVM was killed: PySpark's warning."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        warnings.warn(self.message, RuntimeWarning, stacklevel=2)


def test_the_dead_jvm_warning_is_silenced() -> None:
    session = _DeadSession(
        "Unable to cleanly shutdown Spark JVM process. It is possible that the process has "
        "crashed, been killed or may also be in a zombie state."
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _stop(session)
    assert session.stopped and seen == []


def test_other_warnings_of_a_stop_still_show() -> None:
    session = _DeadSession("something else went wrong")
    with pytest.warns(RuntimeWarning, match="something else"):
        _stop(session)
