"""Multi-dispatch and Light Message Queues (LMQ), RocketMQ 4.9.8's store/.../MultiDispatch.java and
ConsumeQueue.multiDispatchLmqQueue: a message whose ``INNER_MULTI_DISPATCH`` property lists queues (``,``-separated)
is stored once in the CommitLog and gets a ConsumeQueue entry in its own queue and in each listed one.

Owned by the :class:`~store.message_store.MessageStore` when ``enableMultiDispatch`` is on (off by default, as Java).
A listed name that is an LMQ (``%LMQ%`` prefix, with ``enableLmq``) uses queue id 0 (``LMQ_QUEUE_ID``), any other
name the message's own queue id. At append (:meth:`MultiDispatch.wrap`) each listed queue's next offset is taken and
written into the stored properties as ``INNER_MULTI_QUEUE_OFFSET`` (same order, ``,``-separated; ``WAIT`` is dropped
from the stored string, as Java's ``removeWaitStorePropertyString``); after the record is written
(:meth:`MultiDispatch.dispatch`) each listed queue gets its entry at that offset and the arrival listener is told, so
held pulls on it wake. Recovery and a replica re-dispatch the same entries from the stored properties
(:meth:`MultiDispatch.redispatch`). Prepared and rolled-back transaction messages are stamped but get no entries;
records of ``SCHEDULE_TOPIC_XXXX`` and ``rmq_sys_`` topics are not stamped or dispatched (:func:`topic_allows_lmq`).
A record the broker does not stamp (a batch, a DLedger store's send, a single send whose list is blank) is stored
without any ``INNER_MULTI_QUEUE_OFFSET`` its sender put in (:func:`unstamped`), so it gets no listed entry anywhere.

Errors: a listed name that cannot name a consume queue directory refuses the put (MESSAGE_ILLEGAL, nothing written:
Java would create the directory wherever the name points); with ``enableLmq`` and more LMQ ConsumeQueues than
``maxLmqConsumeQueueNum``, a put that lists queues is refused with :class:`LmqQueueNumExceededError`, and a pull of
an LMQ topic answers SYSTEM_ERROR (:meth:`MultiDispatch.lmq_queue_num_exceeded`, DefaultMessageStore.getMessage's
null).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import attrs

from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import decode_properties, find_property, find_text_property, with_properties
from remoting.codec.topics import SCHEDULE_TOPIC, SYSTEM_TOPIC_PREFIX
from store.consume_queue import names_a_directory
from store.errors import MessageIllegalError, PutRefusedError

if TYPE_CHECKING:
    from store.message_store import MessageStore

log = logging.getLogger(__name__)

#: MixAll.LMQ_PREFIX, LMQ_QUEUE_ID and MULTI_DISPATCH_QUEUE_SPLITTER.
LMQ_PREFIX: Final = "%LMQ%"
LMQ_QUEUE_ID: Final = 0
SPLITTER: Final = ","
#: MessageConst's property names.
MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
_DROPPED: Final = frozenset({"WAIT"})
_STAMPED: Final = frozenset({MULTI_QUEUE_OFFSET})
_STAMP_NAME: Final = MULTI_QUEUE_OFFSET + "\x01"
_LIST_NAME: Final = MULTI_DISPATCH + "\x01"


def is_lmq(name: str | None) -> bool:
    """MixAll.isLmq: the name starts with ``%LMQ%``."""
    return name is not None and name.startswith(LMQ_PREFIX)


def unstamped(properties: str) -> str:
    """``properties`` without an ``INNER_MULTI_QUEUE_OFFSET``: what a record the broker does not stamp is stored with,
    so that recovery, a slave or a DLedger commit (:meth:`MultiDispatch.redispatch`) never places entries at offsets a
    sender (or a copied stored message) chose. RocketMQ gives the listed queues only offsets it took itself
    (store/src/main/java/org/apache/rocketmq/store/MultiDispatch.java ``wrapMultiDispatch`` overwrites the property)."""
    if _STAMP_NAME not in properties:
        return properties
    return with_properties(properties, {}, _STAMPED)


def unstamp(msg: MessageRecord) -> MessageRecord:
    """``msg`` with :func:`unstamped` properties (the same record when it carries none)."""
    properties = unstamped(msg.properties)
    return msg if properties is msg.properties else attrs.evolve(msg, properties=properties)


def _listed(properties: str) -> str | None:
    """The ``INNER_MULTI_DISPATCH`` list as Java and :meth:`MultiDispatch.redispatch` read it: a name given twice is
    its last non-empty value (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java
    ``string2messageProperties`` fills a map), so the live put and a restart or a slave dispatch the same queues."""
    if properties.count(_LIST_NAME) < 2:
        return find_text_property(properties, MULTI_DISPATCH)
    return decode_properties(properties).get(MULTI_DISPATCH)


def topic_allows_lmq(topic: str) -> bool:
    """Whether a record of ``topic`` is multi-dispatched, at append and at redispatch alike: not a
    ``SCHEDULE_TOPIC_XXXX`` one (the append path never stamps it; the delivered copy is dispatched) nor an ``rmq_sys_``
    one (a timer message parked in ``rmq_sys_wheel_timer`` is dispatched when delivered). RocketMQ 5.x's
    ``MixAll.topicAllowsLMQ`` (common/src/main/java/org/apache/rocketmq/common/MixAll.java), also used by
    store/src/main/java/org/apache/rocketmq/store/queue/MultiDispatchUtils.java; its ``%RETRY%`` exclusion is not
    4.9.8's, whose retry copies are dispatched again, so it is not taken."""
    return topic != SCHEDULE_TOPIC and not topic.startswith(SYSTEM_TOPIC_PREFIX)


class LmqQueueNumExceededError(PutRefusedError):
    """More LMQ ConsumeQueues than ``maxLmqConsumeQueueNum``: the put is refused with nothing written."""

    put_status = "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"


class MultiDispatch:
    """The store's multi-dispatch (see the module docstring); reads ``enableLmq`` and ``maxLmqConsumeQueueNum`` from
    the store's config at every put."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self._lmq_queues: int | None = None  # LMQ ConsumeQueues; None: count again (after a load or a drop)
        #: Deleted queues' tombstones (store/topic_cleanup.py), set by recovery: a listed queue deleted after the
        #: record was stored gets no entry back.
        self.tombstones: dict[str, int] = {}
        #: queue key -> (entries, record bytes) dispatched into it since the statistics last took them
        #: (:meth:`take_dispatched`): they are no puts of their own.
        self._dispatched: dict[tuple[str, int], tuple[int, int]] = {}
        store.queue_drop_listeners.append(self._dropped)

    def _dropped(self, topic: str, _queue_id: int) -> None:
        if is_lmq(topic):
            self._lmq_queues = None

    def take_dispatched(self) -> dict[tuple[str, int], tuple[int, int]]:
        """The entries and record bytes dispatched per listed queue since the last call (:mod:`broker.stats.puts`
        takes them out of the queues' new entries: RocketMQ 4.9.8 counts a put once, under the message's own topic,
        store/src/main/java/org/apache/rocketmq/store/CommitLog.java putMessage and the broker's
        SendMessageProcessor ``handlePutMessageResult``, never per MultiDispatch entry)."""
        dispatched, self._dispatched = self._dispatched, {}
        return dispatched

    def lmq_queue_count(self) -> int:
        """How many LMQ ConsumeQueues the store has (DefaultMessageStore's ``lmqConsumeQueueNum``)."""
        if self._lmq_queues is None:
            self._lmq_queues = sum(1 for topic, _ in self.store.consume_queues if is_lmq(topic))
        return self._lmq_queues

    def lmq_queue_num_exceeded(self) -> bool:
        """More LMQ ConsumeQueues than ``maxLmqConsumeQueueNum`` with ``enableLmq`` and ``enableMultiDispatch``
        (DefaultMessageStore.java ``isLmqConsumeQueueNumExceeded``): puts that list queues and reads of LMQ topics
        are refused."""
        config = self.store.config
        return (
            config.enable_lmq
            and config.enable_multi_dispatch
            and self.lmq_queue_count() > config.max_lmq_consume_queue_num
        )

    def _key(self, name: str, queue_id: int) -> tuple[str, int]:
        """MultiDispatch.queueKey: an LMQ's queue id is 0 with ``enableLmq``, any other name keeps the message's."""
        if self.store.config.enable_lmq and is_lmq(name):
            return name, LMQ_QUEUE_ID
        return name, queue_id

    def wrap(self, msg: MessageRecord) -> tuple[MessageRecord, list[tuple[tuple[str, int], int]]] | None:
        """The message as it is stored, with ``INNER_MULTI_QUEUE_OFFSET``, and each listed queue's key and offset;
        ``None`` when it lists no queue. Raises MessageIllegalError or LmqQueueNumExceededError (nothing changed)."""
        if not topic_allows_lmq(msg.topic):
            return None
        listed = _listed(msg.properties)
        if listed is None or not listed.strip():
            return None
        if self.lmq_queue_num_exceeded():
            raise LmqQueueNumExceededError(
                f"lmq consumeQueue num {self._lmq_queues} exceeds maxLmqConsumeQueueNum "
                f"{self.store.config.max_lmq_consume_queue_num}"
            )
        offsets = self.store.queue_offsets
        targets = []
        for name in listed.split(SPLITTER):
            if not names_a_directory(name):
                raise MessageIllegalError(f"multi-dispatch queue {name!r} cannot name a consume queue directory")
            key = self._key(name, msg.queue_id)
            targets.append((key, offsets.get(key, 0)))
        stamp = SPLITTER.join(str(offset) for _, offset in targets)
        properties = with_properties(msg.properties, {MULTI_QUEUE_OFFSET: stamp}, _DROPPED)
        return attrs.evolve(msg, properties=properties), targets

    def dispatch(self, targets: list[tuple[tuple[str, int], int]], phy: int, size: int, tags: int,
                 properties: str) -> None:  # fmt: skip
        """Give each listed queue its entry for the record at ``phy`` (at the offset :meth:`wrap` stamped), move its
        next offset on and tell the arrival listener (MultiDispatch.updateMultiQueueOffset,
        notifyMessageArrive4MultiQueue)."""
        store = self.store
        listener = store.arrival_listener
        for key, offset in targets:
            self._put(key, offset, phy, size, tags)
            if listener is not None:
                listener(key[0], key[1], offset, tags, properties)

    def _put(self, key: tuple[str, int], offset: int, phy: int, size: int, tags: int) -> None:
        store = self.store
        cq = store.consume_queues.get(key)
        if cq is None:
            cq = store.consume_queue(*key)
            if self._lmq_queues is not None and is_lmq(key[0]):
                self._lmq_queues += 1
        cq.put(offset, phy, size, tags)
        entries, total = self._dispatched.get(key, (0, 0))
        self._dispatched[key] = (entries + 1, total + size)
        if cq.max_offset > store.queue_offsets.get(key, 0):
            store.queue_offsets[key] = cq.max_offset

    def redispatch(self, properties: bytes, queue_id: int, phy: int, size: int, tags: int) -> None:
        """Recovery's and a replica's dispatch of a stored record: the entries its ``INNER_MULTI_DISPATCH`` and
        ``INNER_MULTI_QUEUE_OFFSET`` name (DefaultMessageStore.checkMultiDispatchQueue). A record whose two lists
        do not match, or name an impossible directory, is logged and gets none."""
        listed = find_property(properties, MULTI_DISPATCH.encode())
        stamped = find_property(properties, MULTI_QUEUE_OFFSET.encode())
        if not listed or not stamped:
            return
        names = listed.decode("utf-8", "replace").split(SPLITTER)
        offsets = stamped.decode("ascii", "replace").split(SPLITTER)
        if len(names) != len(offsets) or not all(o.isdigit() for o in offsets):
            log.error("[bug] multi-dispatch record at %d: queues %r, offsets %r", phy, names, offsets)
            return
        tombstones = self.tombstones
        for name, offset in zip(names, offsets, strict=True):
            if names_a_directory(name) and phy >= tombstones.get(name, -1):
                self._put(self._key(name, queue_id), int(offset), phy, size, tags)
