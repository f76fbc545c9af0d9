"""Apache DataFusion, an embedded Arrow-native columnar engine (the optional extra
``hycq[datafusion]``; the ``datafusion`` package is imported when the first DataFusion MIG is
built, so everything else runs without it)."""

from engines.datafusion.engine import DataFusionEngine

__all__ = ["DataFusionEngine"]
