"""PySpark data source ``rocketmq`` (batch and streaming reads and writes); see :mod:`spark.source`.

Importing this package does not import pyspark; :func:`register` does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``rocketmq`` format with the SparkSession ``spark``."""
    from spark.source import register as _register

    _register(spark)
