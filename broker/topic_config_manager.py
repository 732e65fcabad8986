"""``TopicConfigManager``: the broker's topic table, its DataVersion and ``config/topics.json``
(docs/protocol.md#72-system-topics, docs/protocol.md#73-topic-auto-creation).

Life cycle: construct, :meth:`TopicConfigManager.load` (blocking: reads ``topics.json``; system topics are added first
and the file's entries override them, as Java does), then run :meth:`TopicConfigManager.run` in the broker's nursery:
it saves the file in a worker thread after every change and once more at shutdown.

Every mutation is synchronous and never awaits (processors call it on the send hot path): it updates the table, moves
the DataVersion on, schedules a save and calls ``on_changed`` (the broker re-registers with every name server at once).
Topics the send paths create are also written through before the method returns, as Java persists them.

Errors: :meth:`load` raises :class:`~store.metadata_files.ConfigFileError` when ``topics.json`` and its backup are both
unreadable (the broker must not start with an empty table then).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from pathlib import Path

import attrs
import trio

from broker.broker_config import BrokerConfig
from broker.persistence import ConfigPersister
from remoting.codec.bodies import TopicConfigSerializeWrapper
from remoting.codec.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_QUEUE_NUMS,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    dlq_topic,
    reply_topic,
    retry_topic,
)
from store.metadata_files import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicConfigTable,
    topics_file,
)
from store.multi_dispatch import LMQ_PREFIX

log = logging.getLogger(__name__)

PERM_RW = PERM_READ | PERM_WRITE
#: Queues of a ``%DLQ%group`` topic (Java's ``DLQ_NUMS_PER_GROUP``).
DLQ_NUMS_PER_GROUP = 1


def system_topics(config: BrokerConfig) -> list[TopicConfig]:
    """The topics a broker creates at start (docs/protocol.md#72-system-topics), in Java's order."""
    cluster_perm = PERM_INHERIT | (PERM_RW if config.cluster_topic_enable else 0)
    broker_perm = PERM_INHERIT | (PERM_RW if config.broker_topic_enable else 0)
    topics = [TopicConfig(SELF_TEST_TOPIC, 1, 1, PERM_RW)]
    if config.auto_create_topic_enable:
        n = config.default_topic_queue_nums
        topics.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_RW | PERM_INHERIT))
    topics += [
        TopicConfig(BENCHMARK_TOPIC, 1024, 1024, PERM_RW),
        TopicConfig(config.broker_cluster_name, 16, 16, cluster_perm),
        TopicConfig(config.broker_name, 1, 1, broker_perm),
        TopicConfig(OFFSET_MOVED_EVENT, 1, 1, PERM_RW),
        TopicConfig(SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS, SCHEDULE_QUEUE_NUMS, PERM_RW),
    ]
    if config.trace_topic_enable:
        topics.append(TopicConfig(config.msg_trace_topic_name, 1, 1, PERM_RW))
    topics.append(TopicConfig(reply_topic(config.broker_cluster_name), 1, 1, PERM_RW))
    return topics


class TopicConfigManager:
    """The topic table. Reads are plain dict lookups; see the module docstring for mutations and persistence."""

    def __init__(self, config: BrokerConfig, config_dir: Path, on_changed: Callable[[], None] | None = None) -> None:
        self.config = config
        self.on_changed = on_changed
        self._table: dict[str, TopicConfig] = {tc.topic_name: tc for tc in system_topics(config)}
        #: TopicValidator's fixed set plus every topic created at start, as Java's constructor adds each with
        #: ``TopicValidator.addSystemTopic``; fixed for the broker's life (a later config change does not move it).
        self.system_topic_names: frozenset[str] = SYSTEM_TOPICS.union(self._table)
        self.data_version = DataVersion()
        self.persister = ConfigPersister(topics_file(config_dir), self._snapshot)
        #: ``enableLmq`` at start: ``%LMQ%`` topics need no creation (:meth:`get`).
        self._lmq = config.enable_lmq

    def _snapshot(self) -> TopicConfigTable:
        return TopicConfigTable(dict(self._table), self.data_version)

    def load(self) -> None:
        """Overlay ``topics.json`` (or its backup) on the system topics. Blocking; raises ConfigFileError."""
        loaded = self.persister.load()
        if loaded is None:
            self.persister.mark_dirty()  # a fresh broker writes its file at once, as Java's does
        else:
            self._table.update(loaded.topic_config_table)
            self.data_version = loaded.data_version

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Save after each change until cancelled, then once more. Start with ``nursery.start``."""
        await self.persister.run(task_status=task_status)

    async def persist(self) -> None:
        await self.persister.persist()

    def write_through(self) -> None:
        """Write the file now, before an admin request is answered (:meth:`ConfigPersister.write_through`: a failed
        write is logged and left to the background save)."""
        self.persister.write_through()

    # ---- reads -------------------------------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        """The topic's config; with ``enableLmq`` an unknown ``%LMQ%`` topic's is made up (1 queue, read and write),
        never stored (RocketMQ 4.9.8's LmqTopicConfigManager.selectTopicConfig)."""
        found = self._table.get(topic)
        if found is None and self._lmq and topic.startswith(LMQ_PREFIX):
            return TopicConfig(topic, 1, 1, PERM_RW)
        return found

    def __contains__(self, topic: object) -> bool:
        return topic in self._table

    def is_system_topic(self, topic: str) -> bool:
        """Whether admin requests must refuse ``topic`` (Java's ``TopicValidator.isSystemTopic`` in the broker)."""
        return topic in self.system_topic_names or topic.startswith(SYSTEM_TOPIC_PREFIX)

    @property
    def topics(self) -> dict[str, TopicConfig]:
        """A copy of the table."""
        return dict(self._table)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """The table and DataVersion as REGISTER_BROKER and GET_ALL_TOPIC_CONFIG carry them."""
        return TopicConfigSerializeWrapper(dict(self._table), self.data_version)

    # ---- mutations ---------------------------------------------------------------------------------------------

    def _changed(self, register: bool = True) -> None:
        self.data_version = self.data_version.next_version()
        self.persister.mark_dirty()
        if register and self.on_changed is not None:
            self.on_changed()

    def replace_all(self, table: TopicConfigTable) -> bool:
        """A slave adopts its master's table (SlaveSynchronize): when the data versions differ, the whole table and
        version are replaced and saved. Returns whether anything changed. No re-registration: a slave's topics
        are not routed."""
        if table.data_version == self.data_version:
            return False
        self._table = dict(table.topic_config_table)
        self.data_version = table.data_version
        self.persister.mark_dirty()
        return True

    def update_topic(self, config: TopicConfig, *, register: bool = True) -> TopicConfig:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC). Returns the stored config; with ``enableLmq`` an
        ``%LMQ%`` topic is not stored (LmqTopicConfigManager.updateTopicConfig). ``register=False`` leaves the
        name servers to the caller (no ``on_changed``: UPDATE_AND_CREATE_TOPIC registers the topic alone)."""
        if self._lmq and config.topic_name.startswith(LMQ_PREFIX):
            return config
        old = self._table.get(config.topic_name)
        self._table[config.topic_name] = config
        log.info("topic %s %s: %s", config.topic_name, "updated" if old else "created", config)
        self._changed(register)
        return config

    def delete_topic(self, topic: str) -> TopicConfig | None:
        """Remove a topic; returns what was removed (``None`` when unknown: nothing changes then)."""
        old = self._table.pop(topic, None)
        if old is not None:
            log.info("topic %s deleted", topic)
            self._changed()
        return old

    def create_topic_in_send_process(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """The TBW102 mechanism (docs/protocol.md#73-topic-auto-creation): the topic's config, creating it from
        ``default_topic``.

        Creation needs ``default_topic`` to exist with the inherit bit; then the new topic gets
        ``min(queue_nums, default's write queues)`` queues and the default's perm without inherit. When
        ``autoCreateTopicEnable`` is off, TBW102 counts as not inheritable. Returns ``None`` if the topic cannot be
        created (the sender answers TOPIC_NOT_EXIST).
        """
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        default = self._table.get(default_topic)
        if default is None:
            log.warning("cannot create topic %s: default topic %s does not exist", topic, default_topic)
            return None
        perm = default.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.config.auto_create_topic_enable:
            perm = PERM_RW
        if not perm & PERM_INHERIT:
            log.warning("cannot create topic %s: default topic %s has no inherit permission", topic, default_topic)
            return None
        nums = max(0, min(queue_nums, default.write_queue_nums))
        created = TopicConfig(
            topic_name=topic,
            read_queue_nums=nums,
            write_queue_nums=nums,
            perm=perm & ~PERM_INHERIT,
            topic_filter_type=default.topic_filter_type,
            topic_sys_flag=topic_sys_flag,
        )
        return self._create_persisted(created)

    def create_topic_in_send_back_process(
        self, topic: str, queue_nums: int, perm: int = PERM_RW, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """The topic's config, created with exactly these settings when missing (retry and DLQ topics)."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        return self._create_persisted(TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag))

    def _create_persisted(self, config: TopicConfig) -> TopicConfig:
        """Store a topic a send (or a send-back, a heartbeat) creates, in ``topics.json`` before the caller goes on,
        as 4.9.8's createTopicInSendMessageMethod and createTopicInSendMessageBackMethod ``persist()`` (broker/src/
        main/java/org/apache/rocketmq/broker/topic/TopicConfigManager.java): a broker killed right after the send
        keeps the topic its message was stored under."""
        created = self.update_topic(config)
        if created.topic_name in self._table:  # an ``%LMQ%`` topic is never stored: nothing to write
            self.write_through()
        return created

    def create_retry_topic(self, group: str, queue_nums: int = 1) -> TopicConfig:
        """``%RETRY%group`` with ``queue_nums`` queues, perm RW (docs/protocol.md#74-client-registry-and-heartbeats);
        existing configs are kept."""
        return self.create_topic_in_send_back_process(retry_topic(group), queue_nums)

    def create_dlq_topic(self, group: str) -> TopicConfig:
        """``%DLQ%group`` with one queue, perm RW."""
        return self.create_topic_in_send_back_process(dlq_topic(group), DLQ_NUMS_PER_GROUP)

    def next_version(self) -> None:
        """Move the DataVersion on without a table change (a new ``brokerPermission``; AdminBrokerProcessor.java
        ``updateBrokerConfig``), so name servers take the next registration as a change."""
        self.data_version = self.data_version.next_version()
        self.persister.mark_dirty()

    def update_order_topic_config(self, order_topics: Collection[str]) -> bool:
        """Apply a name server's ORDER_TOPIC_CONFIG keys: the listed topics become ``order``, every other order
        topic stops being one (broker/.../topic/TopicConfigManager.java ``updateOrderTopicConfig``). A change moves
        the DataVersion on and saves, without re-registering. Returns whether anything changed."""
        changed = {
            topic: attrs.evolve(tc, order=not tc.order)
            for topic, tc in self._table.items()
            if tc.order != (topic in order_topics)
        }
        if not changed:
            return False
        log.info("order topic config updated: %s", {t: tc.order for t, tc in changed.items()})
        self._table.update(changed)
        self.next_version()
        return True

    def update_order(self, topic: str, order: bool) -> None:
        """Set a topic's ``order`` flag (ORDER_TOPIC_CONFIG); unknown topics are ignored."""
        tc = self._table.get(topic)
        if tc is not None and tc.order != order:
            self.update_topic(attrs.evolve(tc, order=order))
