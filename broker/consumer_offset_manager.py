"""``ConsumerOffsetManager``: committed consume offsets per (group, topic, queue) and ``config/consumerOffset.json``.

The table is keyed like Java's: ``"topic@group"`` -> ``{queueId: next offset to consume}``. Commits are synchronous
dict writes (UPDATE_CONSUMER_OFFSET and the pull's commit flag run on the hot path). :meth:`run` persists the whole
table every ``flushConsumerOffsetInterval`` (5 s) in a worker thread and once more when cancelled (shutdown), as Java's
broker does; nothing is saved per commit, so a crash loses at most one interval of commits (clients then re-consume,
which is RocketMQ's at-least-once contract).

With ``enableLmq`` (RocketMQ 4.9.8's LmqConsumerOffsetManager) the offsets of a group named ``%LMQ%...`` are one per
``topic@group``, whatever the queue, kept apart and saved to ``config/lmqConsumerOffset.json`` (``lmqOffsetTable``,
next to a copy of the ordinary table as ``offsetTable``, so a Java broker started on the store finds both);
``consumerOffset.json`` keeps the ordinary table.

Errors: the constructor raises ``ValueError`` for a ``flushConsumerOffsetInterval`` of 0 or less (Java's
``scheduleAtFixedRate`` refuses such a period and the broker does not start); :meth:`load` raises
:class:`~store.metadata_files.ConfigFileError` for an unreadable file and backup. A periodic save that fails with
``OSError`` is logged and retried at the next interval.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from broker.persistence import ConfigPersister
from store.metadata_files import ConsumerOffsetTable, LmqOffsets, consumer_offset_file, lmq_consumer_offset_file
from store.multi_dispatch import LMQ_PREFIX
from store.services import check_period

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


def offset_key(group: str, topic: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


class ConsumerOffsetManager:
    """Consume progress of every group; see the module docstring."""

    def __init__(self, config_dir: Path, flush_interval_ms: int = 5000, lmq: bool = False) -> None:
        check_period("flushConsumerOffsetInterval", flush_interval_ms)
        self.flush_interval = flush_interval_ms / 1000
        self._table: ConsumerOffsetTable = {}
        self.persister = ConfigPersister(consumer_offset_file(config_dir), self._snapshot)
        #: ``enableLmq``: the LMQ groups' offsets (``topic@group`` -> offset) and their file, else ``None``.
        self._lmq: dict[str, int] = {}
        self.lmq_persister = ConfigPersister(lmq_consumer_offset_file(config_dir), self._lmq_snapshot) if lmq else None
        #: admin resets the group's next pull or pop of the queue has yet to take, by (group, topic, queue id): 5.3.3's
        #: ``resetOffsetTable``, in memory only as Java's (the reset is committed too, and that is saved)
        self._resets: dict[tuple[str, str, int], int] = {}

    def _snapshot(self) -> ConsumerOffsetTable:
        return {key: dict(queues) for key, queues in self._table.items()}

    def _lmq_snapshot(self) -> LmqOffsets:
        return self._snapshot(), dict(self._lmq)

    def _persisters(self) -> list[ConfigPersister]:  # type: ignore[type-arg]
        return [self.persister] if self.lmq_persister is None else [self.persister, self.lmq_persister]

    def load(self) -> None:
        """Read ``consumerOffset.json`` (or its backup), with ``enableLmq`` also ``lmqConsumerOffset.json`` (whose
        ordinary table is taken when ``consumerOffset.json`` has none: a store a Java broker wrote with
        ``enableLmq``). Blocking; raises ConfigFileError."""
        loaded = self.persister.load()
        if loaded is not None:
            self._table = loaded
        if self.lmq_persister is not None:
            lmq_loaded = self.lmq_persister.load()
            if lmq_loaded is not None:
                table, self._lmq = lmq_loaded
                if loaded is None:
                    self._table = table

    def _lmq_key(self, group: str, topic: str) -> str | None:
        """The LMQ table's key for an LMQ group with ``enableLmq``, else ``None``."""
        if self.lmq_persister is not None and group.startswith(LMQ_PREFIX):
            return offset_key(group, topic)
        return None

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record ``offset`` (the next message the group will consume) for one queue (for an LMQ group: whatever
        the queue). Only a change is saved: clients commit every queue they hold every 5 s, moved or not."""
        if self.lmq_persister is not None and (lmq_key := self._lmq_key(group, topic)) is not None:
            if self._lmq.get(lmq_key) != offset:
                self._lmq[lmq_key] = offset
                self.lmq_persister.mark_dirty()
            return
        key = offset_key(group, topic)
        queues = self._table.get(key)
        if queues is None:
            queues = self._table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.persister.mark_dirty()

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """An admin's reset of one queue: committed, and kept for the group's next pull or pop of the queue to take
        (:meth:`take_reset`), client commits ignored meanwhile (:meth:`has_reset`), as 5.3.3's
        ``ConsumerOffsetManager.assignResetOffset``; a negative queue id or offset is ignored, as there."""
        if queue_id < 0 or offset < 0:
            log.warning("reset of %s@%s queue %d to %d ignored", topic, group, queue_id, offset)
            return
        self._resets[(group, topic, queue_id)] = offset
        self.commit(group, topic, queue_id, offset)

    def has_reset(self, group: str, topic: str, queue_id: int) -> bool:
        """Whether a reset of the queue waits for the group's next pull or pop (``hasOffsetReset``)."""
        return bool(self._resets) and (group, topic, queue_id) in self._resets

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The reset waiting for the group's next pull or pop of the queue, forgotten (``queryThenEraseResetOffset``).
        Every pull asks: nothing pending costs one truthiness test."""
        if not self._resets:
            return None
        return self._resets.pop((group, topic, queue_id), None)

    def merge(self, table: ConsumerOffsetTable) -> bool:
        """A slave takes its master's offsets (SlaveSynchronize): each ``topic@group`` of ``table`` replaces its own,
        keys only the slave has are kept (RocketMQ's ``putAll``). Returns whether any offset changed."""
        changed = False
        for key, queues in table.items():
            if self._table.get(key) != queues:
                self._table[key] = dict(queues)
                changed = True
        if changed:
            self.persister.mark_dirty()
        return changed

    def clone(self, src_group: str, dest_group: str, topic: str) -> None:
        """``dest_group``'s offsets on ``topic`` become a copy of ``src_group``'s, replacing its whole table for the
        topic (queues only the destination had are dropped), as Java's ``cloneOffset``; nothing when the source has
        no table for the topic."""
        queues = self._table.get(offset_key(src_group, topic))
        if queues is not None:
            self._table[offset_key(dest_group, topic)] = dict(queues)
            self.persister.mark_dirty()

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        if self.lmq_persister is not None and (lmq_key := self._lmq_key(group, topic)) is not None:
            return self._lmq.get(lmq_key, -1)
        queues = self._table.get(offset_key(group, topic))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        """A copy of ``{queueId: offset}`` for the group on the topic (empty when none; an LMQ group's at queue 0)."""
        if self.lmq_persister is not None and (lmq_key := self._lmq_key(group, topic)) is not None:
            return {0: self._lmq[lmq_key]} if lmq_key in self._lmq else {}
        return dict(self._table.get(offset_key(group, topic), {}))

    def offset_keys(self) -> list[str]:
        """Every ``topic@group`` key with committed offsets, sorted."""
        return sorted(self._table)

    def topics_of_group(self, group: str) -> set[str]:
        """Topics the group has committed offsets for."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        return {key[: -len(suffix)] for key in self._table if key.endswith(suffix)}

    def groups_of_topic(self, topic: str) -> set[str]:
        """Groups that have committed offsets on the topic."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return {key[len(prefix) :] for key in self._table if key.startswith(prefix)}

    def remove_group(self, group: str) -> None:
        """Forget every offset of the group (DELETE_SUBSCRIPTIONGROUP with cleanOffset)."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        for key in [k for k in self._table if k.endswith(suffix)]:
            del self._table[key]
        self._resets = {key: offset for key, offset in self._resets.items() if key[0] != group}
        self.persister.mark_dirty()

    def remove_topic(self, topic: str) -> None:
        """Forget every group's offsets on the topic (DELETE_TOPIC_IN_BROKER)."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        for key in [k for k in self._table if k.startswith(prefix)]:
            del self._table[key]
        self._resets = {key: offset for key, offset in self._resets.items() if key[1] != topic}
        self.persister.mark_dirty()

    async def persist(self) -> None:
        """Save the table now (worker thread), with ``enableLmq`` ``lmqConsumerOffset.json`` too. Raises ``OSError``."""
        for persister in self._persisters():
            await persister.persist()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Persist every ``flush_interval`` seconds until cancelled, then once more (shielded)."""
        task_status.started()
        try:
            while True:
                await trio.sleep(self.flush_interval)
                if not any(p.dirty for p in self._persisters()):
                    continue
                try:
                    await self.persist()
                except OSError:
                    log.exception("persisting consumer offsets failed; retrying in %.1f s", self.flush_interval)
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await self.persist()
                except OSError:
                    log.exception("final save of consumer offsets failed")
