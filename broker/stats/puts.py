"""Puts read from the store: how many messages and bytes each topic stored since the last look.

Sends cost nothing here: :class:`StorePuts` compares the store's next-queue-offset table with what it saw last time
and sums the record sizes of the new ConsumeQueue entries (:meth:`store.consume_queue.ConsumeQueue.sizes_total`).
So every stored message counts (sends, retries, delayed deliveries, transaction commits), as in Java's
``StoreStatsService``; messages recovered at start do not (:meth:`StorePuts.start` takes them as the baseline).
The entries multi-dispatch adds to the queues a message lists (LMQs) are no puts: a message counts once, under its
own topic, as 4.9.8's CommitLog.putMessage counts it (:meth:`store.multi_dispatch.MultiDispatch.take_dispatched`).
A queue's entries count once its ConsumeQueue holds them: a DLedger leader hands out queue offsets at the append but
dispatches at the commit, and 4.9.8's DLedgerCommitLog.asyncPutMessage counts a put only once the quorum acknowledged
it (store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java), so an entry never committed counts
nowhere and a committed one with its bytes. An entry whose quorum acknowledgement timed out (its send answered
SYSTEM_ERROR) stays in the leader's log and may commit later: it counts nowhere either
(:attr:`store.message_store.MessageStore.unacknowledged`).

A deleted topic's queues count from zero when they come back (:meth:`StorePuts.forget`, or an offset that went
down). Entries removed by
retention before they were looked at are counted as messages without bytes. Owned by
:class:`~broker.stats.manager.BrokerStatsManager` on the Trio thread; nothing here raises.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.consume_queue import ConsumeQueue
    from store.message_store import MessageStore

#: topic -> (messages, bytes, calls)
TopicPuts = dict[str, tuple[int, int, int]]
#: The :meth:`StorePuts.typed` kind of a put that is no incoming message at all (``/metrics``)
NOT_INCOMING = ""


class StorePuts:
    """``queue_topics``: the topics whose puts :meth:`collect` also reports per queue (:attr:`queue_puts`)."""

    def __init__(self, store: MessageStore, queue_topics: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.queue_topics = queue_topics
        #: What the last :meth:`collect` found per queue of ``queue_topics``: (messages, bytes, calls).
        self.queue_puts: dict[tuple[str, int], tuple[int, int, int]] = {}
        self._seen: dict[tuple[str, int], int] = {}
        #: queue key -> (end offset, calls taken back) of each batch appended and not counted yet (:meth:`batch`)
        self._batches: dict[tuple[str, int], list[tuple[int, int]]] = {}
        #: queue key -> runs ``(start, end, in_topic)`` of queue offsets ``[start, end)`` of the broker's own puts
        #: not counted yet, sorted, disjoint, neighbours of the same ``in_topic`` merged (:meth:`own`): a pop-heavy
        #: load marks thousands of checkpoints a second, mostly one after the other, which a run takes out at once
        self._own: dict[tuple[str, int], list[tuple[int, int, bool]]] = {}
        #: What the last :meth:`collect` found of the broker's own puts, per topic: (messages, bytes, calls) in no
        #: topic item, messages in no BROKER_PUT_NUMS.
        self.taken: dict[str, tuple[int, int, int, int]] = {}
        #: queue key -> runs ``(start, end, kind)`` of queue offsets of puts whose ``/metrics`` message type the
        #: broker fixed (:meth:`typed`), sorted, disjoint, neighbours of the same kind merged
        self._typed: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
        #: What the last :meth:`collect` found of those, per topic: kind -> (messages, bytes)
        self.typed_taken: dict[str, dict[str, tuple[int, int]]] = {}

    def start(self) -> None:
        """Take the store's current contents as the baseline."""
        queues = self.store.consume_queues
        self._seen = {key: _held(queues.get(key), offset) for key, offset in self.store.queue_offsets.items()}
        self.store.multi_dispatch.take_dispatched()  # recovery's re-dispatched entries are in the baseline

    def batch(self, key: tuple[str, int], end: int, count: int) -> None:
        """A batch of ``count`` messages was appended to queue ``key`` up to offset ``end``: once counted, its
        messages make one call (Java counts a send request once), taken back as the whole batch is counted, so a
        batch a DLedger quorum never acknowledged takes nothing back."""
        pending = self._batches.get(key)
        if pending is None:
            self._batches[key] = [(end, count - 1)]
        else:
            pending.append((end, count - 1))

    def own(self, key: tuple[str, int], offset: int, in_topic: bool) -> None:
        """The broker itself put the entry at ``offset`` of queue ``key`` (a send-back): when counted, it is in no
        BROKER_PUT_NUMS, and in its topic's items only if ``in_topic`` (see :meth:`collect`'s ``taken``)."""
        owned = self._own.get(key)
        if owned is None:
            self._own[key] = [(offset, offset + 1, in_topic)]
            return
        start, end, last_in_topic = owned[-1]
        if offset == end and in_topic == last_in_topic:
            owned[-1] = (start, end + 1, in_topic)
        elif offset >= end:
            owned.append((offset, offset + 1, in_topic))
        else:
            _mark(owned, offset, in_topic)

    def typed(self, key: tuple[str, int], offset: int, kind: str) -> None:
        """The broker put the entry at ``offset`` of queue ``key`` as a ``kind`` message (``/metrics``'
        ``message_type``; see :meth:`~broker.stats.manager.BrokerStatsManager.record_delay_delivery`): when counted,
        it is in :attr:`typed_taken`. Offsets come in order (each mark follows its append)."""
        runs = self._typed.get(key)
        if runs is None:
            self._typed[key] = [(offset, offset + 1, kind)]
            return
        start, end, last_kind = runs[-1]
        if offset == end and kind == last_kind:
            runs[-1] = (start, end + 1, kind)
        elif offset >= end:
            runs.append((offset, offset + 1, kind))
        else:  # out of order: a run of its own
            insort(runs, (offset, offset + 1, kind))

    def collect(self) -> TopicPuts:
        """Messages, bytes and calls (one per message, one per batch) stored per topic since the last call (topics
        without new messages are absent)."""
        store = self.store
        queues = store.consume_queues
        seen = self._seen
        dispatched = store.multi_dispatch.take_dispatched()
        batches = self._batches
        owned_table = self._own
        taken: dict[str, tuple[int, int, int, int]] = {}
        self.taken = taken
        typed_table = self._typed
        typed_taken: dict[str, dict[str, tuple[int, int]]] = {}
        self.typed_taken = typed_taken
        queue_topics = self.queue_topics
        queue_puts: dict[tuple[str, int], tuple[int, int, int]] = {}
        self.queue_puts = queue_puts
        added: TopicPuts = {}
        for key, offset in store.queue_offsets.items():
            before = seen.get(key, 0)
            if offset == before:
                continue
            cq = queues.get(key)
            if cq is not None and cq.max_offset < offset:
                offset = cq.max_offset
                if offset == before:
                    continue
            if offset < before:
                before = 0
                batches.pop(key, None)
                owned_table.pop(key, None)
                typed_table.pop(key, None)
            seen[key] = offset
            size = 0 if cq is None else cq.sizes_total(before, offset)
            new = offset - before
            if dispatched and key in dispatched:
                entries, entry_bytes = dispatched[key]
                new, size = max(0, new - entries), max(0, size - entry_bytes)
                if not new:
                    continue
            ranges = store.unacknowledged.get(key) if store.unacknowledged else None
            if ranges is not None:
                new, size = _take_unacknowledged(store.unacknowledged, key, ranges, cq, before, offset, new, size)
            calls = new
            pending = batches.get(key) if batches else None
            if pending is not None:
                calls -= sum(
                    extra for end, extra in pending if end <= offset and not _within(ranges, end)
                )  # a batch never acknowledged counts no call to take back
                left = [b for b in pending if b[0] > offset]
                if left:
                    batches[key] = left
                else:
                    del batches[key]
            owned = owned_table.get(key) if owned_table else None
            own_before = None
            if owned is not None:
                own_before = taken.get(key[0], _NO_OWN)
                _take_own(taken, key, owned, cq, before, offset, ranges)
                if not owned:
                    del owned_table[key]
            typed = typed_table.get(key) if typed_table else None
            if typed is not None:
                _take_typed(typed_taken, key, typed, cq, before, offset, ranges)
                if not typed:
                    del typed_table[key]
            if new <= 0:
                continue
            if queue_topics and key[0] in queue_topics:
                _queue_put(queue_puts, key, new, size, calls, own_before, taken)
            count, total, times = added.get(key[0], (0, 0, 0))
            added[key[0]] = (count + new, total + size, times + calls)
        return added

    def forget_batches(self) -> None:
        """The broker's role changed: no batch appended until now takes calls back, nor is any of the broker's own
        puts not counted yet taken out (see :meth:`~broker.stats.manager.BrokerStatsManager.set_replica`)."""
        self._batches.clear()
        self._own.clear()
        self._typed.clear()

    def forget(self, topic: str) -> None:
        """The topic was deleted: its queues count from zero when they come back."""
        for key in [k for k in self._seen if k[0] == topic]:
            del self._seen[key]
        for key in [k for k in self._batches if k[0] == topic]:
            del self._batches[key]
        for key in [k for k in self._own if k[0] == topic]:
            del self._own[key]
        for key in [k for k in self._typed if k[0] == topic]:
            del self._typed[key]
        unacknowledged = self.store.unacknowledged
        for key in [k for k in unacknowledged if k[0] == topic]:
            del unacknowledged[key]


_NO_OWN: tuple[int, int, int, int] = (0, 0, 0, 0)


def _queue_put(
    queue_puts: dict[tuple[str, int], tuple[int, int, int]],
    key: tuple[str, int],
    new: int,
    size: int,
    calls: int,
    own_before: tuple[int, int, int, int] | None,
    taken: dict[str, tuple[int, int, int, int]],
) -> None:
    """Report queue ``key``'s puts without the broker's own uncounted ones (``taken``'s growth for the queue since
    ``own_before``): 4.9.8 counts QUEUE_PUT_NUMS / QUEUE_PUT_SIZE on the send paths only
    (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java ``handlePutMessageResult``,
    ``asyncConsumerSendMsgBack``), never for a plain store put such as EndTransactionProcessor ``sendFinalMessage``
    parking a committed message in a delay level's queue."""
    if own_before is not None:
        own_after = taken.get(key[0], _NO_OWN)
        new -= own_after[0] - own_before[0]
        size = max(0, size - (own_after[1] - own_before[1]))
        calls -= own_after[2] - own_before[2]
    if new > 0:
        queue_puts[key] = (new, size, calls)


def _held(cq: ConsumeQueue | None, offset: int) -> int:
    """The queue's next offset as far as its ConsumeQueue holds entries (see :meth:`StorePuts.collect`)."""
    return offset if cq is None else min(offset, cq.max_offset)


def _take_unacknowledged(
    unacknowledged: dict[tuple[str, int], list[tuple[int, int]]],
    key: tuple[str, int],
    ranges: list[tuple[int, int]],
    cq: ConsumeQueue | None,
    before: int,
    offset: int,
    new: int,
    size: int,
) -> tuple[int, int]:
    """``new`` entries of ``size`` bytes in ``[before, offset)`` without those of the queue's appends answered as
    failed (:attr:`store.message_store.MessageStore.unacknowledged`): 4.9.8's DLedgerCommitLog counts a put only on
    its own PUT_OK. The ranges all counted are dropped."""
    for first, end in ranges:
        low, high = max(first, before), min(end, offset)
        if low < high:
            new -= high - low
            if cq is not None:
                size -= cq.sizes_total(low, high)
    left = [r for r in ranges if r[1] > offset]
    if left:
        unacknowledged[key] = left
    else:
        del unacknowledged[key]
    return new, max(0, size)


def _without(low: int, high: int, ranges: list[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """``[low, high)`` without the unacknowledged ``ranges``, as sorted disjoint pairs."""
    if ranges is None:
        return [(low, high)]
    pieces = [(low, high)]
    for first, end in ranges:
        if first >= high or end <= low:
            continue
        pieces = [part for a, b in pieces for part in ((a, min(b, first)), (max(a, end), b)) if part[0] < part[1]]
    return pieces


def _within(ranges: list[tuple[int, int]] | None, end: int) -> bool:
    """Whether the batch ending at ``end`` is one of the unacknowledged appends of ``ranges``."""
    return ranges is not None and any(first < end <= last for first, last in ranges)


def _start(run: tuple[int, int, object]) -> int:
    return run[0]


def _mark(owned: list[tuple[int, int, bool]], offset: int, in_topic: bool) -> None:
    """Mark ``offset`` in the runs ``owned`` (a mark arriving out of order, or marking again: the last one wins)."""
    index = bisect_right(owned, offset, key=_start)  # the first run starting after ``offset``
    if index and owned[index - 1][1] > offset:  # inside a run: split it around ``offset``
        start, end, was = owned[index - 1]
        if was == in_topic:
            return
        parts = [(start, offset, was), (offset, offset + 1, in_topic), (offset + 1, end, was)]
        owned[index - 1 : index] = [p for p in parts if p[0] < p[1]]
        index = index - 1 + (start < offset)
    else:
        owned.insert(index, (offset, offset + 1, in_topic))
    start, end, _ = owned[index]
    if index + 1 < len(owned) and owned[index + 1][0] == end and owned[index + 1][2] == in_topic:
        end = owned.pop(index + 1)[1]
    if index and owned[index - 1][1] == start and owned[index - 1][2] == in_topic:
        start = owned.pop(index - 1)[0]
        index -= 1
    owned[index] = (start, end, in_topic)


def _take_own(
    taken: dict[str, tuple[int, int, int, int]],
    key: tuple[str, int],
    owned: list[tuple[int, int, bool]],
    cq: ConsumeQueue | None,
    before: int,
    offset: int,
    ranges: list[tuple[int, int]] | None,
) -> None:
    """Add to ``taken`` the broker's own puts of queue ``key`` counted in ``[before, offset)`` (dropping them, and
    those before it, from ``owned``); an unacknowledged one counts nowhere already. The bytes of the runs in no
    topic item are read in one pass over the ConsumeQueue (:meth:`~store.consume_queue.ConsumeQueue.sizes_within`)."""
    done = bisect_left(owned, offset, key=_start)  # the runs starting before ``offset``
    taking = owned[:done]
    if done and taking[-1][1] > offset:  # the rest of the last run is not in the queue yet
        start, end, in_topic = taking[-1]
        taking[-1] = (start, offset, in_topic)
        owned[done - 1] = (offset, end, in_topic)
        done -= 1
    del owned[:done]
    if taking and taking[0][0] < before:  # marks of entries counted before (a baseline): nothing to take
        taking = [(max(start, before), end, in_topic) for start, end, in_topic in taking if end > before]
    if ranges is not None:
        taking = [
            (first, last, in_topic) for start, end, in_topic in taking for first, last in _without(start, end, ranges)
        ]
    broker = sum(end - start for start, end, _ in taking)
    sized = [(start, end) for start, end, in_topic in taking if not in_topic]
    msgs = sum(end - start for start, end in sized)
    size = cq.sizes_within(sized) if cq is not None and sized else 0
    if broker:
        before_taken = taken.get(key[0], (0, 0, 0, 0))
        taken[key[0]] = (
            before_taken[0] + msgs,
            before_taken[1] + size,
            before_taken[2] + msgs,
            before_taken[3] + broker,
        )


def _take_typed(
    typed_taken: dict[str, dict[str, tuple[int, int]]],
    key: tuple[str, int],
    typed: list[tuple[int, int, str]],
    cq: ConsumeQueue | None,
    before: int,
    offset: int,
    ranges: list[tuple[int, int]] | None,
) -> None:
    """Add to ``typed_taken`` the typed puts of queue ``key`` counted in ``[before, offset)``, per kind (dropping
    them, and those before it, from ``typed``); an unacknowledged one counts nowhere."""
    done = bisect_left(typed, offset, key=_start)
    taking = typed[:done]
    if done and taking[-1][1] > offset:  # the rest of the last run is not in the queue yet
        start, end, kind = taking[-1]
        taking[-1] = (start, offset, kind)
        typed[done - 1] = (offset, end, kind)
        done -= 1
    del typed[:done]
    per_kind: dict[str, list[tuple[int, int]]] = {}
    for start, end, kind in taking:
        if end > before:
            per_kind.setdefault(kind, []).extend(_without(max(start, before), end, ranges))
    if not per_kind:
        return
    found = typed_taken.setdefault(key[0], {})
    for kind, pieces in per_kind.items():
        if pieces:
            count, size = found.get(kind, (0, 0))
            found[kind] = (
                count + sum(end - start for start, end in pieces),
                size + (cq.sizes_within(pieces) if cq is not None else 0),
            )
