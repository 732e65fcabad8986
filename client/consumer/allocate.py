"""Queue allocation strategies (Java's ``AllocateMessageQueueStrategy``): which of a topic's queues one consumer of a
group takes, given every consumer id of the group.

Both strategies sort the queues and the consumer ids first, so every member of a group (whatever its language, as
long as it sorts the same way: Java compares ``MessageQueue`` by topic, broker name, queue id and ids as strings)
computes the same split without talking to the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from remoting.codec.bodies import MessageQueue

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def _prepare(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> tuple[list[MessageQueue], list[str]] | None:
    if not current_cid or not mq_all or not cid_all:
        return None
    cids = sorted(set(cid_all))
    if current_cid not in cids:
        return None
    return sorted(mq_all), cids


def allocate_average(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Contiguous blocks: with 8 queues and 3 consumers the split is 3/3/2 (``AllocateMessageQueueAveragely``)."""
    prepared = _prepare(current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    mqs, cids = prepared
    index = cids.index(current_cid)
    mod = len(mqs) % len(cids)
    if len(mqs) <= len(cids):
        average = 1
    elif mod > 0 and index < mod:
        average = len(mqs) // len(cids) + 1
    else:
        average = len(mqs) // len(cids)
    start = index * average if mod > 0 and index < mod else index * average + mod
    size = min(average, len(mqs) - start)
    return [mqs[(start + i) % len(mqs)] for i in range(max(0, size))]


def allocate_average_by_circle(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Round robin: consumer ``i`` takes queues ``i, i+n, i+2n...`` (``AllocateMessageQueueAveragelyByCircle``)."""
    prepared = _prepare(current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    mqs, cids = prepared
    index = cids.index(current_cid)
    return mqs[index :: len(cids)]
