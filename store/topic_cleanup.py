"""Deleting a topic's ConsumeQueues (RocketMQ's ``DefaultMessageStore.cleanUnusedTopic`` /
``deleteTopics``): DELETE_TOPIC_IN_BROKER calls :func:`delete_topic_queues` so that a topic created again under the
same name starts empty (offsets from 0, no old messages).

What goes: every ConsumeQueue of the topic (unmapped, its segment files unlinked, ``consumequeue/<topic>/<queue>``
and ``consumequeue/<topic>`` removed) and the topic's next-offset entries. What stays, as in Java: the CommitLog
records (retention deletes them with their segment) and their index entries. After a crash, records of the deleted
topic stored after the last checkpoint can be dispatched again by recovery (Java's recovery does the same).

Concurrency: runs on the Trio thread under the store's ``disk_lock``, so no flush is writing back a segment while it
is unmapped; between taking the lock and returning nothing awaits, so an append or pull to the topic sees either the
old queues or none (a later append creates fresh, empty ones). Errors: none raised for files already gone; other
``OSError`` from removing the directories propagates.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.message_store import MessageStore

__all__ = ["delete_topic_queues"]


async def delete_topic_queues(store: MessageStore, topic: str) -> int:
    """Destroy ``topic``'s ConsumeQueues; returns how many queues were deleted (0 for an unknown topic)."""
    async with store.disk_lock:
        keys = [key for key in store.consume_queues if key[0] == topic]
        for key in keys:
            cq = store.consume_queues.pop(key)
            for mf in cq.queue.files:
                mf.destroy()
            cq.queue.files.clear()
            if cq.queue.spare is not None:
                cq.queue.spare.destroy()
                cq.queue.spare = None
        for key in [key for key in store.queue_offsets if key[0] == topic]:
            del store.queue_offsets[key]
        topic_dir = store.config.consume_queue_dir / topic
        if topic_dir.is_dir():
            for queue_dir in topic_dir.iterdir():
                _remove_queue_dir(queue_dir)
            with contextlib.suppress(FileNotFoundError):
                topic_dir.rmdir()
        return len(keys)


def _remove_queue_dir(queue_dir: Path) -> None:
    if not queue_dir.is_dir():
        with contextlib.suppress(FileNotFoundError):
            queue_dir.unlink()
        return
    for leftover in queue_dir.iterdir():
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    with contextlib.suppress(FileNotFoundError):
        queue_dir.rmdir()
