"""Tests of the PySpark data source ``rocketmq`` (spark/)."""
