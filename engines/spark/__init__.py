"""Spark SQL through PySpark (imported lazily: the rest of hycq runs without a JVM)."""

from engines.spark.engine import DEFAULT_CONF, SparkEngine

__all__ = ["DEFAULT_CONF", "SparkEngine"]
