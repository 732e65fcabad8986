"""Operator-triggered store maintenance (``mqadmin cleanExpiredCQ`` and ``deleteExpiredCommitLog``), as RocketMQ
4.9.8's ``DefaultMessageStore.cleanExpiredConsumerQueue`` and ``executeDeleteFilesManually``
(``store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java``):

- :func:`clean_expired_consume_queues` destroys every ConsumeQueue (files, directory, next offset) whose last entry
  points below the CommitLog's first retained byte: all its messages are gone, so the queue only wastes space. The
  system topics' queues are kept (RocketMQ 5.3's ConsumeQueueStore.cleanExpired,
  ``store/src/main/java/org/apache/rocketmq/store/queue/ConsumeQueueStore.java``, skips every ``isSystemTopic``):
  the schedule's, the timer's (``rmq_sys_wheel_timer``), the transaction half and op queues, the pop revive queue
  (``rmq_sys_REVIVE_LOG_*``). Their readers keep their progress in ``delayOffset.json``, ``timerCheck.json`` or a
  system group's offset; a queue restarted at offset 0 would put every later record below that progress, where it
  is never read (a delayed or timer message never delivered, a half message never checked, a pop never revived).
  An empty queue is kept too.
  Each destroyed queue is reported to the store's ``queue_drop_listeners``.
- :func:`request_manual_delete` makes the retention service treat its next 20 passes as if it were ``deleteWhen``
  time, so CommitLog segments older than ``fileReservedTime`` go at the next pass without waiting for 4 a.m.

Both run on the Trio thread under the store's disk lock; the files are removed in the store's disk threads'
absence (the lock keeps the retention service and topic deletion out). Errors: ``OSError`` from the file system.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Final

from remoting.codec.topics import is_system_topic
from store.consume_queue import CQ_STORE_UNIT_SIZE, ENTRY, FILLER_SIZE
from store.topic_cleanup import destroy_files

if TYPE_CHECKING:
    from store.consume_queue import ConsumeQueue
    from store.message_store import MessageStore

__all__ = ["MAX_MANUAL_DELETE_FILE_TIMES", "clean_expired_consume_queues", "request_manual_delete"]

log = logging.getLogger(__name__)

#: Passes of the retention service that delete as if at ``deleteWhen`` time after a manual request (Java's
#: ``MAX_MANUAL_DELETE_FILE_TIMES``).
MAX_MANUAL_DELETE_FILE_TIMES: Final = 20


def last_physical_end(cq: ConsumeQueue) -> int:
    """Where the queue's last message ends in the CommitLog (Java's ``ConsumeQueue.getLastOffset``), -1 when the
    queue has no entry."""
    if cq.max_offset <= 0:
        return -1
    # Read past the min offset on purpose: once every entry points below the CommitLog, the min offset has moved
    # to the end, yet the last entry is still in the newest segment.
    pos = (cq.max_offset - 1) * CQ_STORE_UNIT_SIZE
    mf = cq.queue.find(pos)
    if mf is None:
        return -1
    phy, size, _ = ENTRY.unpack_from(mf.view, pos - mf.file_from_offset)
    return -1 if size <= 0 or size == FILLER_SIZE else phy + size


async def clean_expired_consume_queues(store: MessageStore) -> list[tuple[str, int]]:
    """Destroy the ConsumeQueues whose messages are all deleted; returns their ``(topic, queue_id)``, sorted."""
    destroyed: list[tuple[str, int]] = []
    async with store.disk_lock:
        min_phy = store.commitlog.min_offset
        for key, cq in sorted(store.consume_queues.items()):
            if is_system_topic(key[0]):  # never destroyed (module docstring)
                continue
            end = last_physical_end(cq)
            if end == -1 or end >= min_phy:
                continue
            log.info("cleanExpiredConsumerQueue: %s %d destroyed, min CommitLog offset %d, queue end %d", *key,
                     min_phy, end)  # fmt: skip
            _destroy(store, cq)
            destroyed.append(key)
    return destroyed


def _destroy(store: MessageStore, cq: ConsumeQueue) -> None:
    del store.consume_queues[cq.key]
    store.queue_offsets.pop(cq.key, None)
    destroy_files(cq)
    store.notify_queue_dropped(*cq.key)
    queue_dir = store.config.consume_queue_dir / cq.topic / str(cq.queue_id)
    for path in (queue_dir, queue_dir.parent):
        with contextlib.suppress(FileNotFoundError, OSError):
            path.rmdir()


def request_manual_delete(store: MessageStore) -> None:
    """DELETE_EXPIRED_COMMITLOG: the next passes of the retention service delete expired segments whatever the
    hour. No pass runs sooner for it (the first still a minute after the start), as 4.9.8's
    ``executeDeleteFilesManually`` only sets the count."""
    store.retention.manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES
    log.info("executeDeleteFilesManually was invoked")
