"""The one schema of a ``rocketmq`` read, and the conversion of pulled messages into Arrow record batches for it.

``SCHEMA`` is declared once here; the Arrow schema is derived from the same field list, so a read's batches match
Spark's schema exactly (names, order, types, nullability). Timestamps are RocketMQ's milliseconds since the epoch,
surfaced as Spark ``timestamp`` (UTC). ``broker_name`` is the master the row was read from: a topic's queue ids repeat
on every master, so (``topic``, ``broker_name``, ``queue_id``, ``queue_offset``) names one message, and
``brokerName:queueId`` is its queue's key in the offsets JSON. ``msg_id`` is the producer's unique id (UNIQ_KEY) when
the message has one, else the broker's offset msgId, as Java's ``MessageClientExt.getMsgId``. ``keys`` is RocketMQ's
KEYS property (space-separated keys). ``properties`` holds every property stored with the message. ``flag`` is the
int the producer set on the message (Java's ``Message.getFlag``), a column of rocketmq-spark's schema
(``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQSource.scala`` ``schema``); columns are only
ever appended, so the earlier ones keep their positions.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client.message import uniq_msg_id
from remoting.codec.message import MessageExt
from remoting.codec.message_properties import PROPERTY_KEYS, PROPERTY_TAGS

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FIELDS", "SCHEMA_DDL", "arrow_schema", "messages_to_batch", "spark_schema"]

#: (name, Spark DDL type, nullable) of every column, in order.
FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("topic", "string", False),
    ("broker_name", "string", False),
    ("queue_id", "int", False),
    ("queue_offset", "bigint", False),
    ("msg_id", "string", False),
    ("keys", "string", True),
    ("tags", "string", True),
    ("body", "binary", False),
    ("properties", "map<string,string>", False),
    ("born_timestamp", "timestamp", False),
    ("store_timestamp", "timestamp", False),
    ("born_host", "string", False),
    ("store_host", "string", False),
    ("reconsume_times", "int", False),
    ("flag", "int", False),
)

SCHEMA_DDL = ", ".join(f"{name} {kind}{'' if nullable else ' NOT NULL'}" for name, kind, nullable in FIELDS)


@functools.cache
def spark_schema() -> StructType:
    """The read schema as a ``StructType``, built from :data:`FIELDS` without a running JVM."""
    kinds = {
        "string": StringType(),
        "int": IntegerType(),
        "bigint": LongType(),
        "binary": BinaryType(),
        "map<string,string>": MapType(StringType(), StringType(), True),
        "timestamp": TimestampType(),
    }
    return StructType([StructField(name, kinds[kind], nullable) for name, kind, nullable in FIELDS])


@functools.cache
def arrow_schema() -> pa.Schema:
    """The Arrow schema Spark expects of a read's record batches (Spark's own conversion of :func:`spark_schema`)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema: pa.Schema = to_arrow_schema(spark_schema(), timezone="UTC")
    return schema


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def messages_to_batch(msgs: Sequence[MessageExt], broker_name: str) -> pa.RecordBatch:
    """One record batch of ``msgs``, read from the master ``broker_name``, in :data:`FIELDS` order."""
    import pyarrow as pa

    props = [m.properties for m in msgs]
    columns = [
        [m.topic for m in msgs],
        [broker_name] * len(msgs),
        [m.queue_id for m in msgs],
        [m.queue_offset for m in msgs],
        [uniq_msg_id(m) for m in msgs],
        [p.get(PROPERTY_KEYS) for p in props],
        [p.get(PROPERTY_TAGS) for p in props],
        [m.body for m in msgs],
        [list(p.items()) for p in props],
        [m.born_timestamp * 1000 for m in msgs],  # Spark's timestamps are microseconds
        [m.store_timestamp * 1000 for m in msgs],
        [_host(m.born_host) for m in msgs],
        [_host(m.store_host) for m in msgs],
        [m.reconsume_times for m in msgs],
        [m.flag for m in msgs],
    ]
    schema = arrow_schema()
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
