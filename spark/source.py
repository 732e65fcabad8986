"""The PySpark data source ``rocketmq``: batch and streaming reads and writes of rocketrio (RocketMQ 4.x) topics.

Register it once per session, then use it like Spark's Kafka source::

    from spark import register
    register(spark)
    df = spark.read.format("rocketmq").option("nameServer", "127.0.0.1:9876").option("topic", "orders").load()
    stream = (spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", "orders")
              .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", "10000").load())
    stream.writeStream.format("rocketmq").option("nameServer", ns).option("topic", "copy")
          .option("checkpointLocation", "/tmp/ck").start()

Options (:mod:`spark.options`): ``nameServer`` (required), ``topic`` (one, or a comma list for reads),
``startingOffsets`` / ``endingOffsets``, ``tags``, ``maxRecordsPerTrigger``, ``pullBatchSize``, ``pullTimeoutMs``,
``consumerGroup`` (streaming reads mirror their progress into it), ``commitTopic`` and ``producerGroup`` (writes).
Options are parsed when the source is created, so a bad value fails the query at planning with
:class:`~spark.options.OptionError`.

Reads have the fixed schema of :mod:`spark.schema` (``.schema(...)`` is refused: :func:`check_read_schema`); writes
take the columns described in :mod:`spark.writer`.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark.options import OptionError, SourceOptions
from spark.reader import RocketMQBatchReader
from spark.schema import spark_schema
from spark.stream_reader import RocketMQStreamReader
from spark.stream_writer import RocketMQStreamWriter
from spark.writer import RocketMQBatchWriter, check_columns

__all__ = [
    "RocketMQDataSource",
    "SpeculatingRocketMQDataSource",
    "check_no_speculation",
    "check_read_schema",
    "register",
]


class RocketMQDataSource(DataSource):
    """See the module docstring."""

    #: Whether the session runs speculative task attempts (``spark.speculation``): :func:`register` tells.
    speculation = False

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(options)
        self.starting_given = any(str(k).lower() == "startingoffsets" for k in options)

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return spark_schema()

    def reader(self, schema: Any) -> DataSourceReader:
        check_read_schema(schema)
        return RocketMQBatchReader(self.parsed)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        check_read_schema(schema)
        return RocketMQStreamReader(self.parsed, self.starting_given)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        """A batch write appends: a topic cannot be truncated, so ``mode("overwrite")`` fails at planning, as in
        rocketmq-spark (``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQSourceProvider.scala``
        ``createRelation``: "Save mode Overwrite not allowed") and Kafka's sink."""
        if overwrite:
            raise OptionError('a rocketmq write cannot overwrite: a topic cannot be truncated; use mode("append")')
        check_columns(schema, self.parsed)
        return RocketMQBatchWriter(self.parsed)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        """The exactly-once sink keeps its markers in ``commitTopic``: a stream writing its rows there is refused, and
        so is any stream write in a session with ``spark.speculation`` on (:func:`check_no_speculation`)."""
        check_no_speculation(self.speculation)
        check_columns(schema, self.parsed)
        if self.parsed.topics and self.parsed.topics[0] == self.parsed.commit_topic:
            raise OptionError(
                f"option topic={self.parsed.commit_topic!r} is the commitTopic, where a stream's markers go: "
                "write to another topic or set another commitTopic"
            )
        return RocketMQStreamWriter(self.parsed)


def check_read_schema(schema: Any) -> None:
    """Refuse a read whose schema is not :func:`~spark.schema.spark_schema` (one given with ``.schema(...)``: PySpark
    hands it to ``reader`` / ``streamReader`` instead of asking :meth:`RocketMQDataSource.schema`, and every task's
    rows would then fail to match it). rocketmq-spark refuses it so
    (``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQSourceProvider.scala`` ``sourceSchema``),
    as Spark's Kafka source does. Raises OptionError."""
    if schema != spark_schema():
        raise OptionError(
            "the rocketmq source has a fixed schema and cannot be set with a custom one: drop .schema(...) and "
            "select or cast its columns after load()"
        )


class SpeculatingRocketMQDataSource(RocketMQDataSource):
    """The ``rocketmq`` format of a session with ``spark.speculation`` on: reads and batch writes as usual, stream
    writes refused."""

    speculation = True


def check_no_speculation(speculation: bool) -> None:
    """Refuse the exactly-once stream sink when Spark may run two attempts of one task at once (speculation): both
    would find no marker of the other, or the first's start marker while it still sends, and both publish the rows,
    which RocketMQ cannot take back (Kafka's sink is at least once, so speculation costs it nothing new; ours would
    break its promise silently). Raises OptionError."""
    if speculation:
        raise OptionError(
            "a rocketmq stream write is exactly once only without speculative tasks: spark.speculation=true would let "
            "two attempts of one task publish its rows twice; set spark.speculation=false for this application, or "
            "write each micro-batch with foreachBatch and a batch write (at least once)"
        )


def register(spark: Any) -> None:
    """Register the ``rocketmq`` format with ``spark`` (a SparkSession); in a session with ``spark.speculation`` on,
    as :class:`SpeculatingRocketMQDataSource`, whose stream writes are refused."""
    speculation = str(spark.conf.get("spark.speculation", "false")).strip().lower() == "true"
    spark.dataSource.register(SpeculatingRocketMQDataSource if speculation else RocketMQDataSource)
