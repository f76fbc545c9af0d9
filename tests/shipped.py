"""The shipped queries (queries/*/*.sql), grouped by the data they read.

Most differential tests feed smart-plug ``readings`` data; the keyed multi-stream queries
(queries/keyed, streams ``r``, ``s``, ``t``, ``m``) have their own tests
(tests/differential/test_multi_stream.py), and so do the drifting workloads' queries
(queries/drift: tests/differential/test_drift_queries.py), and so do the out-of-order join
workloads (queries/qddh: tests/differential/test_qddh_queries.py), and so do the multiway join
workloads (queries/multiway: tests/differential/test_join_impls.py).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Every shipped query.
ALL = sorted((ROOT / "queries").glob("*/*.sql"))
#: The keyed multi-stream queries.
KEYED = [p for p in ALL if p.parent.name == "keyed"]
#: The drifting workloads' queries (keyed streams with profiles, n-stream joins).
DRIFT = [p for p in ALL if p.parent.name == "drift"]
#: Ji's out-of-order join workloads x3 and x4 (queries/qddh, file sources).
QDDH = [p for p in ALL if p.parent.name == "qddh"]
#: The multiway join workloads (queries/multiway: A-Caching's Q3, JIT's clique, a star;
#: tests/differential/test_join_impls.py).
MULTIWAY = [p for p in ALL if p.parent.name == "multiway"]
#: The queries over the smart-plug stream ``readings`` (smartplug/, joins/).
READINGS = [p for p in ALL if p not in KEYED + DRIFT + QDDH + MULTIWAY]
