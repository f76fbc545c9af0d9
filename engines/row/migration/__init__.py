"""Live plan migration inside the row engine: state transfer between two RowExecutors.

* :mod:`.signature`: what relation each node holds, comparable across plans;
* :func:`move_states` (MS) and :func:`jisc_transfer` (JISC): make a freshly built executor
  for the new plan continue the running one (:mod:`.transfer`, :mod:`.jisc`);
* :class:`ParallelTrack` (PT): both plans run until the old one holds no old tuple
  (:mod:`.parallel_track`);
* :class:`HybridMigration` (HybMig): both plans run on shared leaf states, the old one
  restricted to the results with both leaves of the new plan's lowest join old
  (:mod:`.hybmig`).
"""

from engines.row.migration.hybmig import HybridMigration
from engines.row.migration.parallel_track import ParallelTrack
from engines.row.migration.transfer import (
    JiscProgress,
    TransferStats,
    jisc_progress,
    jisc_transfer,
    move_states,
)

__all__ = [
    "HybridMigration",
    "JiscProgress",
    "ParallelTrack",
    "TransferStats",
    "jisc_progress",
    "jisc_transfer",
    "move_states",
]
