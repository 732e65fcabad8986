"""Half messages per real topic: RocketMQ 5.3.3's TransactionMetrics (broker/src/main/java/org/apache/rocketmq/
broker/transaction/TransactionMetrics.java), read by the ``rocketmq_half_messages`` gauge.

One more per half message whose put is PUT_OK (SendMessageProcessor), one less per commit or rollback
(EndTransactionProcessor) and per half discarded after its last check (DefaultTransactionalMessageCheckListener
``resolveDiscardMsg``).
Kept in ``<storePathRootDir>/config/transactionMetrics`` in Java's JSON (``transactionCount``: topic ->
``{"count", "timeStamp"}``, and ``dataVersion``), loaded at start, so pending transactions are still counted after a
restart. Saved as Java saves them, every ``transactionMetricFlushInterval`` (3 s) at most while they change, and when
the broker stops, through the broker's config persister. A topic's entry stays when it drops to 0, as
Java's. Trio thread only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import orjson

from broker.persistence import ConfigPersister
from remoting.codec.bodies.broker_metadata import DataVersion
from store.metadata_files import ConfigFile, dump_json

#: TransactionMetricsFlushService's period: BrokerConfig ``transactionMetricFlushInterval`` (3,000 ms).
FLUSH_INTERVAL_S: Final = 3.0
#: topic -> (count, ms of the last change)
HalfTable = dict[str, tuple[int, int]]


def _encode(table: HalfTable) -> bytes:
    counts = {topic: {"count": count, "timeStamp": stamp} for topic, (count, stamp) in table.items()}
    return dump_json({"dataVersion": DataVersion().to_json(), "transactionCount": counts})


def _decode(raw: bytes) -> HalfTable:
    data: dict[str, Any] = orjson.loads(raw) if raw.strip() else {}
    counts = data.get("transactionCount") or {}
    return {str(topic): (int(m.get("count", 0)), int(m.get("timeStamp", 0))) for topic, m in counts.items()}


def half_messages_file(config_dir: Path) -> ConfigFile[HalfTable]:
    return ConfigFile(config_dir / "transactionMetrics", _encode, _decode)


class HalfMessages:
    """The count per real topic, and its persister (run it with the broker's other config persisters)."""

    def __init__(self, config_dir: Path) -> None:
        self.counts: HalfTable = {}
        self.persister = ConfigPersister(
            half_messages_file(config_dir), lambda: dict(self.counts), min_interval=FLUSH_INTERVAL_S
        )

    def load(self) -> None:
        """Read the file (blocking), as TransactionalMessageServiceImpl's constructor ``transactionMetrics.load``."""
        self.counts = self.persister.load() or {}

    def add(self, topic: str, delta: int, now_ms: int) -> None:
        """TransactionMetrics ``addAndGet``: ``delta`` to ``topic``'s count, stamped ``now_ms``."""
        count = self.counts.get(topic, (0, 0))[0]
        self.counts[topic] = (count + delta, now_ms)
        self.persister.mark_dirty()
