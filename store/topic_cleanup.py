"""Deleting a topic's ConsumeQueues (RocketMQ's ``DefaultMessageStore.cleanUnusedTopic`` /
``deleteTopics``): DELETE_TOPIC_IN_BROKER calls :func:`delete_topic_queues` so that a topic created again under the
same name starts empty (offsets from 0, no old messages).

What goes: every ConsumeQueue of the topic (unmapped, its segment files unlinked, ``consumequeue/<topic>/<queue>``
and ``consumequeue/<topic>`` removed) and the topic's next-offset entries. What stays, as in Java: the CommitLog
records (retention deletes them with their segment) and their index entries. Each destroyed queue is reported to
the store's ``queue_drop_listeners`` (the pop service forgets its orderly state of the queue).

Recovery re-dispatches CommitLog records into ConsumeQueues, which would bring the deleted topic's records back. So
each deletion leaves a tombstone, ``{topic: CommitLog end at deletion}`` in ``<storePathRootDir>/deletedTopics.json``
(ours; Java avoids it by re-dispatching only past the queues' end), and :func:`is_deleted_record` makes recovery
skip records of a tombstoned topic below that offset. A tombstone is dropped once retention has deleted every
record it covers.

Concurrency: runs on the Trio thread under the store's ``disk_lock``, so no flush is writing back a segment while it
is unmapped; between taking the lock and returning nothing awaits, so an append or pull to the topic sees either the
old queues or none (a later append creates fresh, empty ones). Whether the topic is still unused is asked once the
lock is held: one created again while the caller waited for it keeps its queues. Errors: none raised for files
already gone; other ``OSError`` (removing the directories, writing the tombstone) propagates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import orjson
import trio

from store.metadata_files import replace_atomically
from store.multi_dispatch import is_lmq

if TYPE_CHECKING:
    from remoting.codec.message import RecordMeta
    from store.consume_queue import ConsumeQueue
    from store.message_store import MessageStore

__all__ = [
    "TOMBSTONE_FILE",
    "clean_unused_topics",
    "delete_topic_queues",
    "destroy_files",
    "is_deleted_record",
    "load_tombstones",
]

TOMBSTONE_FILE: Final = "deletedTopics.json"

#: topic -> CommitLog offset below which its records belong to a deleted incarnation.
Tombstones = dict[str, int]


def load_tombstones(root: Path) -> Tombstones:
    """The tombstones under store root ``root`` (empty when none or unreadable: then nothing is skipped)."""
    try:
        table = orjson.loads((root / TOMBSTONE_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {str(k): v for k, v in table.items() if isinstance(v, int)}


def is_deleted_record(tombstones: Tombstones, meta: RecordMeta) -> bool:
    """Whether recovery must not dispatch ``meta``: its topic was deleted after it was stored."""
    return meta.phy_offset < tombstones.get(meta.topic, -1)


def _save_tombstones(root: Path, tombstones: Tombstones) -> None:
    data = orjson.dumps(tombstones, option=orjson.OPT_SORT_KEYS)
    replace_atomically(root / TOMBSTONE_FILE, data, root / (TOMBSTONE_FILE + ".tmp"))


async def delete_topic_queues(store: MessageStore, topic: str, in_use: Callable[[str], bool] | None = None) -> int:
    """Destroy ``topic``'s ConsumeQueues; returns how many queues were deleted (0 for an unknown topic, or one that
    ``in_use`` finds in use once the disk lock is held: created again meanwhile, by a send from TBW102 or an admin,
    it keeps its queues and what was sent to it, as cleanUnusedTopic checks the topic table's live key set queue by
    queue, store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java)."""
    async with store.disk_lock:
        if in_use is not None and in_use(topic):
            return 0
        keys = [key for key in store.consume_queues if key[0] == topic]
        for key in keys:
            destroy_files(store.consume_queues.pop(key))
            store.notify_queue_dropped(*key)
        for key in [key for key in store.queue_offsets if key[0] == topic]:
            del store.queue_offsets[key]
        topic_dir = store.config.consume_queue_dir / topic
        # The callers validate names; a path of several parts ("../commitlog") must never reach the unlinks anyway.
        if topic not in (".", "..") and topic_dir.parent == store.config.consume_queue_dir and topic_dir.is_dir():
            for queue_dir in topic_dir.iterdir():
                _remove_queue_dir(queue_dir)
            with contextlib.suppress(FileNotFoundError):
                topic_dir.rmdir()
        low = store.commitlog.min_offset
        tombstones = {t: end for t, end in load_tombstones(store.root).items() if end > low}
        tombstones[topic] = store.commitlog.write_end
        await trio.to_thread.run_sync(_save_tombstones, store.root, tombstones, limiter=store.disk_limiter)
        return len(keys)


def destroy_files(cq: ConsumeQueue) -> None:
    """Unmap and delete a ConsumeQueue's segments (and its preallocated spare). The caller forgets the queue."""
    cq.close_retired()
    for mf in cq.queue.files:
        mf.destroy()
    cq.queue.files.clear()
    if cq.queue.spare is not None:
        cq.queue.spare.destroy()
        cq.queue.spare = None


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


async def clean_unused_topics(store: MessageStore, in_use: Callable[[str], bool]) -> list[str]:
    """Java's ``cleanUnusedTopic`` (CLEAN_UNUSED_TOPIC): :func:`delete_topic_queues` for every topic with
    ConsumeQueues that ``in_use`` refuses, asked again as each one's turn comes, never an ``%LMQ%`` queue (they have
    no topic config: DefaultMessageStore.cleanUnusedTopic skips ``MixAll.isLmq``). Returns those deleted, sorted."""
    unused = sorted({topic for topic, _ in store.consume_queues if not in_use(topic) and not is_lmq(topic)})
    return [topic for topic in unused if await delete_topic_queues(store, topic, in_use)]
