"""hycq's optimizer: the plan IR (``optimizer.ir``), the CQL front end (``optimizer.sql``).

Kept free of heavy imports: engines import ``optimizer.ir`` through this package.
"""
