"""Blocking access to a rocketrio (or RocketMQ) cluster for the connector's synchronous Spark callbacks.

A :class:`BrokerSession` owns one :class:`~client.admin.Admin` (and, when asked, a :class:`~client.producer.Producer`
sharing its :class:`~client.instance.MQClientInstance`) running on a background event loop started with
``anyio.from_thread.start_blocking_portal``. Every method blocks the calling thread until its requests are answered
and raises what the client raised (:class:`~client.errors.MQBrokerError`, :class:`~remoting.errors.RemotingError`,
:class:`~client.errors.TopicRouteNotFoundError`).

Sessions are opened lazily where they are used (inside a Spark task, or in the driver-side worker) and never
pickled: readers and writers hold options, not sessions. Close a session with ``close()`` or ``with``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import Any, Self

import anyio
import attrs
from anyio.from_thread import BlockingPortal, start_blocking_portal

from client import api
from client.admin import Admin
from client.config import ClientConfig
from client.consumer.subscription import build_subscription, tag_filter
from client.errors import MQClientError, TopicRouteNotFoundError
from client.message import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET, Message, SendResult
from client.producer import Producer
from client.route import MASTER_ID, master_address, subscribe_queues
from remoting.codec.bodies import MessageQueue, SubscriptionData
from remoting.codec.message import MessageExt

__all__ = ["PULL_BATCH", "BrokerSession", "LostOffsets", "QueueRead"]

#: Most messages one pull returns (the broker's in-memory transfer cap, maxTransferCountOnMessageInMemory).
PULL_BATCH = 32
#: Offsets per slice: :meth:`BrokerSession.pull_range` reads each slice of its range in its own task (so a 4096-offset
#: range has 16 pulls in flight), one pull of ``PULL_BATCH`` after another.
SLICE = PULL_BATCH * 8
PULL_FLAG_SUBSCRIPTION = 0x4
_DROPPED_PROPERTIES = (PROPERTY_MIN_OFFSET, PROPERTY_MAX_OFFSET)
#: (most messages one pull asks for, seconds to wait for its answer), or None for the session's defaults.
PullSettings = tuple[int, float] | None


#: Pull statuses saying the offset asked is not in the queue: PULL_OFFSET_MOVED (below its first offset, or past its
#: end) and PULL_NOT_FOUND (at its end, or in a consume queue file that is gone).
_GONE = frozenset({api.PullStatus.OFFSET_ILLEGAL, api.PullStatus.NO_NEW_MSG})


@attrs.frozen(slots=True)
class LostOffsets:
    """Offsets ``[start, end)`` of a queue that a read found gone, and the offsets ``low..high`` the queue held
    then."""

    start: int
    end: int
    low: int
    high: int


@attrs.define(slots=True)
class QueueRead:
    """What :meth:`BrokerSession.read_queue` read: messages in offset order, lost offset ranges in offset order."""

    messages: list[MessageExt] = attrs.field(factory=list)
    lost: list[LostOffsets] = attrs.field(factory=list)

    def add_lost(self, lost: LostOffsets) -> None:
        """Append ``lost``, merged into the last range when it follows it (the slices of one gap)."""
        if self.lost and self.lost[-1].end == lost.start:
            lost = attrs.evolve(lost, start=self.lost.pop().start)
        self.lost.append(lost)


def _next_offset(result: api.PullResult, offset: int) -> int:
    """Where to read on after a pull from ``offset``: the next offset the broker named, or, below the queue's first
    offset, that first offset. A master names it (PULL_OFFSET_MOVED); a slave without ``offsetCheckInSlave`` names
    ``offset`` itself (``store/.../DefaultMessageStore.java`` ``nextOffsetCorrection``) in a PULL_RETRY_IMMEDIATELY
    (``broker/.../processor/PullMessageProcessor.java``)."""
    following = result.next_begin_offset
    if following <= offset < result.min_offset:
        return result.min_offset
    return following


def _lost_in_pull(
    result: api.PullResult, offset: int, end: int, messages: list[MessageExt], *, every_offset: bool
) -> list[LostOffsets]:
    """The offsets of ``[offset, end)`` that a pull from ``offset`` (which returned ``messages``, those below ``end``)
    found gone. A status of :data:`_GONE`, or no way forward: the broker no longer holds ``offset``, up to the next
    offset it names or its first offset (past the gap, :func:`_next_offset`), or up to ``end`` when the queue now ends
    before ``offset`` (reset). Else, when the subscription is ``*`` (``every_offset``), any offset the pull passed over
    without a message: the CommitLog data of a queue entry is gone (retention deletes CommitLog segments before it moves
    the queues' first offset, and a pull in between answers PULL_RETRY_IMMEDIATELY past them, or FOUND with the messages
    after them: ``store/.../DefaultMessageStore.java`` getMessage, MESSAGE_WAS_REMOVING). A tag-filtered pull skips
    entries of other tags the same way, so there a passed-over offset is not loss."""
    following = _next_offset(result, offset)
    bounds = (result.min_offset, result.max_offset)
    if result.status in _GONE or following <= offset or offset < result.min_offset:  # a slave: a retry, see above
        return [LostOffsets(offset, min(following, end) if following > offset else end, *bounds)]
    if not every_offset:
        return []
    lost: list[LostOffsets] = []
    expected = offset
    for found in [msg.queue_offset for msg in messages] + [min(following, end)]:
        if found > expected:
            lost.append(LostOffsets(expected, found, *bounds))
        expected = found + 1
    return lost


def _pull_header(mq: MessageQueue, offset: int, max_msgs: int, group: str, sub: SubscriptionData) -> dict[str, str]:
    """PULL_MESSAGE extFields for one non-suspending pull of ``mq`` from ``offset`` with subscription ``sub``."""
    return {
        "consumerGroup": group,
        "topic": mq.topic,
        "queueId": str(mq.queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_msgs),
        "sysFlag": str(PULL_FLAG_SUBSCRIPTION),
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": sub.sub_string,
        "subVersion": str(sub.sub_version),
        "expressionType": sub.expression_type,
    }


def _first_leaf(group: BaseExceptionGroup[Exception]) -> Exception:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


class _SlaveBehind(MQClientError):
    """A slave read for a master that is down ends before the range: the rest may be on the master alone (the slave
    replicates behind it), so it is not lost; the read fails, to be retried once the master is back."""

    def __init__(self, mq: MessageQueue, held: int, end: int) -> None:
        super().__init__(
            f"broker {mq.broker_name} has no master and its slave holds {mq.topic} queue {mq.queue_id} only up to "
            f"offset {held}, short of {end}"
        )


class BrokerSession:
    """See the module docstring. ``producer_group`` set: :meth:`send_batch` is available."""

    def __init__(
        self,
        name_server: str,
        *,
        producer_group: str | None = None,
        rpc_timeout: float = 10.0,
        config: ClientConfig | None = None,
    ) -> None:
        self._name_server = name_server
        self._config = config
        self._producer_group = producer_group
        self._rpc_timeout = rpc_timeout
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._admin: Admin | None = None
        self._producer: Producer | None = None

    def open(self) -> Self:
        """Start the loop, the client instance and (when configured) the producer. Raises what connecting raised."""
        if self._stack is not None:
            return self
        stack = ExitStack()
        try:
            self._portal = stack.enter_context(start_blocking_portal("asyncio"))
            admin = Admin(self._name_server, config=self._config)
            self._admin = stack.enter_context(self._portal.wrap_async_context_manager(admin))
            if self._producer_group is not None:
                producer = Producer(self._producer_group, instance=admin.instance, send_msg_timeout=self._rpc_timeout)
                self._producer = stack.enter_context(self._portal.wrap_async_context_manager(producer))
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def close(self) -> None:
        """Shut the producer, the instance and the loop down. Idempotent."""
        stack, self._stack = self._stack, None
        self._portal = self._admin = self._producer = None
        if stack is not None:
            stack.close()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, fn: Any, *args: Any) -> Any:
        if self._portal is None:
            self.open()
        assert self._portal is not None
        return self._portal.call(fn, *args)

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self.open()
        assert self._admin is not None
        return self._admin

    # -- queues and offsets ----------------------------------------------------------------------------------------

    def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (fresh route from the name server)."""
        route = self._run(self.admin.topic_route, topic)
        return sorted(subscribe_queues(topic, route))

    async def _address(self, mq: MessageQueue) -> str:
        instance = self.admin.instance
        addr = instance.find_broker_address(mq.broker_name)
        if addr is None:
            route = await instance.fetch_route(mq.topic)
            addr = master_address(route, mq.broker_name)
        if addr is None:
            raise MQClientError(f"broker {mq.broker_name} of {mq.topic} has no master")
        return addr

    async def _read_address(self, mq: MessageQueue) -> tuple[str, bool]:
        """Where a pull of ``mq`` goes, and whether that is a slave: the master, else, while the route lists none,
        the group's lowest-id slave, as RocketMQ's pull (``client/.../impl/consumer/PullAPIWrapper.java``
        ``pullKernelImpl``: ``findBrokerAddressInSubscribe(brokerName, MASTER_ID, false)``, the route fetched again
        when the group is unknown). Raises MQClientError when the group has no broker at all."""
        instance = self.admin.instance
        found = instance.find_broker_address_in_subscribe(
            mq.broker_name, MASTER_ID, only_this_broker=False, topic=mq.topic
        )
        if found is None:
            await instance.fetch_route(mq.topic)
            found = instance.find_broker_address_in_subscribe(
                mq.broker_name, MASTER_ID, only_this_broker=False, topic=mq.topic
            )
        if found is None:
            raise MQClientError(f"broker {mq.broker_name} of {mq.topic} not exist")
        return found

    async def _min_max(self, mqs: Sequence[MessageQueue]) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        remoting = self.admin.instance.remoting
        for mq in mqs:
            addr = await self._address(mq)
            low = await api.get_min_offset(remoting, addr, mq, self._rpc_timeout)
            high = await api.get_max_offset(remoting, addr, mq, self._rpc_timeout)
            out.append((low, high))
        return out

    def min_max_offsets(self, mqs: Sequence[MessageQueue]) -> dict[MessageQueue, tuple[int, int]]:
        """``{queue: (min offset, max offset)}``; max is the offset the next message will get."""
        return dict(zip(mqs, self._run(self._min_max, list(mqs)), strict=True))

    async def _search(self, mqs: Sequence[MessageQueue], timestamp_ms: int) -> list[int]:
        remoting = self.admin.instance.remoting
        search = api.search_offset
        return [await search(remoting, await self._address(mq), mq, timestamp_ms, 10.0, "LOWER") for mq in mqs]

    def offsets_for_timestamp(self, mqs: Sequence[MessageQueue], timestamp_ms: int) -> dict[MessageQueue, int]:
        """SEARCH_OFFSET_BY_TIMESTAMP per queue with RocketMQ 5's ``LOWER`` boundary: the first offset stored at or
        after ``timestamp_ms`` (4.9's answer may be an earlier neighbour, or any of several equal times)."""
        return dict(zip(mqs, self._run(self._search, list(mqs), timestamp_ms), strict=True))

    async def _commit(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        remoting = self.admin.instance.remoting
        for mq, offset in offsets.items():
            await api.update_consumer_offset(remoting, await self._address(mq), group, mq, offset, self._rpc_timeout)

    def update_consumer_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        """UPDATE_CONSUMER_OFFSET for each queue (what ``mqadmin consumerProgress`` then shows for ``group``)."""
        self._run(self._commit, group, offsets)

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """UPDATE_AND_CREATE_TOPIC on every master (idempotent)."""
        self._run(lambda: self.admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues))

    # -- reading ---------------------------------------------------------------------------------------------------

    async def _pull_slice(
        self, mq: MessageQueue, start: int, end: int, group: str, tags: str, out: QueueRead, pull: PullSettings
    ) -> None:
        sub = build_subscription(mq.topic, tags)
        wanted = tag_filter(sub)
        remoting = self.admin.instance.remoting
        addr, from_slave = await self._read_address(mq)
        batch, timeout = pull if pull is not None else (PULL_BATCH, self._rpc_timeout)
        offset = start
        while offset < end:
            header = _pull_header(mq, offset, min(batch, end - offset), group, sub)
            result = await api.pull_message(remoting, addr, header, timeout, wanted)
            if from_slave and offset >= result.max_offset:
                raise _SlaveBehind(mq, result.max_offset, end)
            messages = [msg for msg in result.messages if msg.queue_offset < end]
            for msg in messages:
                for name in _DROPPED_PROPERTIES:
                    msg.properties.pop(name, None)
            out.messages.extend(messages)
            out.lost.extend(_lost_in_pull(result, offset, end, messages, every_offset=wanted is None))
            following = _next_offset(result, offset)
            if following <= offset:
                return
            offset = following

    async def _pull_page(
        self, mq: MessageQueue, start: int, end: int, group: str, tags: str, pull: PullSettings
    ) -> QueueRead:
        slices = [(s, min(s + SLICE, end)) for s in range(start, end, SLICE)]
        outs = [QueueRead() for _ in slices]
        try:
            async with anyio.create_task_group() as tg:
                for (s, e), out in zip(slices, outs, strict=True):
                    tg.start_soon(self._pull_slice, mq, s, e, group, tags, out, pull)
        except ExceptionGroup as failed:  # a slice's own error, not "unhandled errors in a TaskGroup"
            raise _first_leaf(failed) from failed
        read = QueueRead()
        for out in outs:
            read.messages.extend(out.messages)
            for lost in out.lost:
                read.add_lost(lost)
        return read

    def read_queue(
        self, mq: MessageQueue, start: int, end: int, group: str, tags: str = "*", pull: PullSettings = None
    ) -> QueueRead:
        """The messages of ``mq`` with queue offsets in ``[start, end)`` matching the tag expression, in offset
        order, and the offsets of the range the broker no longer holds: a pull answered PULL_OFFSET_MOVED (below the
        queue's first offset, or past its end) or PULL_NOT_FOUND (the queue ends before ``end``, or the consume queue
        file holding the offset is gone), as ``broker/.../PullMessageProcessor.java`` maps the store's statuses, or,
        with ``tags`` ``*``, passed over offsets whose CommitLog data is gone (see :func:`_lost_in_pull`; a
        tag-filtered read cannot tell those from entries of other tags). Pulls from the master, or from a slave while
        the route lists no master (:meth:`_read_address`; a range the slave does not hold yet fails the read, it is
        not lost). Reads every :data:`SLICE` of the range at once; call it with ranges of a bounded size. ``pull``:
        (most messages one pull asks for, its timeout in seconds), by default (:data:`PULL_BATCH`, the session's RPC
        timeout)."""
        read: QueueRead = self._run(self._pull_page, mq, start, end, group, tags, pull)
        return read

    def pull_range(self, mq: MessageQueue, start: int, end: int, group: str, tags: str = "*") -> list[MessageExt]:
        """:meth:`read_queue`'s messages: offsets the broker no longer holds are skipped."""
        return self.read_queue(mq, start, end, group, tags).messages

    # -- writing ---------------------------------------------------------------------------------------------------

    def send_batch(self, msgs: Sequence[Message]) -> list[SendResult]:
        """Send messages of one topic in SEND_BATCH_MESSAGE requests (retried by the producer on transport errors)."""
        if self._producer is None:
            self.open()
        if self._producer is None:
            raise MQClientError("this session has no producer group")
        results: list[SendResult] = self._run(self._producer.send_batch, list(msgs))
        return results

    def send(self, msg: Message) -> SendResult:
        if self._producer is None:
            self.open()
        if self._producer is None:
            raise MQClientError("this session has no producer group")
        result: SendResult = self._run(self._producer.send, msg)
        return result

    def query_by_key(self, topic: str, key: str) -> list[MessageExt]:
        """Messages of ``topic`` indexed under ``key`` (QUERY_MESSAGE on every master; Admin drops hash collisions).
        Raises what a master that fails or does not answer raised, and BrokerNotExistError for a broker of the route
        whose master is down: its messages are not known to be absent (Java's ``MQAdminImpl.queryMessage`` passes
        such a master over or reads its slave, fine for ``mqadmin`` but not for the sink's markers, whose absence
        makes a task publish its rows). A broker the route no longer lists is not asked (see
        :mod:`spark.stream_writer`'s limits)."""

        async def query() -> list[MessageExt]:
            end = int(time.time() * 1000) + 86_400_000  # a day of clock skew between this host and the broker
            return await self.admin.query_msg_by_key(topic, key, max_num=64, end_ms=end, every_broker=True)

        try:
            found: list[MessageExt] = self._run(query)
        except TopicRouteNotFoundError:
            return []  # the topic was never written: nothing can be indexed under the key
        return found
