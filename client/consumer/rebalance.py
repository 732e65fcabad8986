"""Rebalance (Java's ``RebalanceImpl``): decide which queues this consumer owns and keep a
:class:`~client.consumer.process_queue.ProcessQueue` per owned queue.

Per subscribed topic: read the topic's readable queues from the route; in CLUSTERING ask one broker of the topic for
the group's consumer ids (GET_CONSUMER_LIST_BY_GROUP) and apply the allocation strategy, in BROADCASTING take them
all. Queues no longer owned are dropped (their offsets persisted first, an orderly one's lock given up, 20 s
later while it still holds messages); new ones get their start offset from the
offset store or, when it has none, from consume-from-where, and for orderly CLUSTERING consumers only once the broker
granted the queue lock (orderly BROADCASTING members lock no queue). A push consumer's queue not pulled for over
:data:`PULL_MAX_IDLE_TIME` (its pull loop ended) is dropped and taken again in the same pass. The owner (push or
lite pull consumer) hears about both through :class:`RebalanceOwner`. The lite pull consumer's assign mode does not
allocate: it drops queues with :meth:`Rebalance.remove_unallocated` and owns new ones with :meth:`Rebalance.own`, its
pull task computing their start offsets. :meth:`Rebalance.reset` (a
RESET_CONSUMER_CLIENT_OFFSET) drops queues with their new offsets, serialised with the passes as their removals are.
An owner that stops takes no new queue (:attr:`RebalanceOwner.taking_queues`) and forgets its queues with
:meth:`Rebalance.drop_all`, after the pass under way: a restart rebalances from scratch.

Failures for one topic (no route, broker down, a strategy that raised) are logged and leave that topic's queues as
they are. The queues and consumer ids reach the strategy sorted as Java sorts them; of its answer only queues among
the topic's readable ones are taken (Java would take any, say a ``CONFIG`` strategy's queue of another topic, and
never drop it again).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Protocol

import anyio

from client import api
from client.consumer.allocate import AllocateStrategy, allocate_average, resolve_strategy, sort_like_java, strategy_name
from client.consumer.offset_store import OffsetStore
from client.consumer.process_queue import ProcessQueue, java_property_seconds
from client.errors import ClientStateError, MQClientError
from client.route import subscribe_queues
from remoting.codec.bodies import (
    ConsumeFromWhere,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from remoting.errors import RemotingError

if TYPE_CHECKING:
    from client.instance import MQClientInstance

log = logging.getLogger(__name__)

#: Consume-from-timestamp default: half an hour ago (Java's ``consumeTimestamp``).
DEFAULT_CONSUME_TIMESTAMP_AGO_MS = 30 * 60 * 1000


#: Told, after a pass changed the owned queues of a topic, of the topic, its readable queues and the ones now
#: allocated to this member (Java's ``RebalanceImpl.messageQueueChanged``).
QueuesChanged = Callable[[str, set[MessageQueue], set[MessageQueue]], Awaitable[None]]

#: How long a push consumer's queue may go unpulled before a pass drops it and takes it again, by default (Java's
#: ProcessQueue ``PULL_MAX_IDLE_TIME``, 120 s).
PULL_MAX_IDLE_TIME = 120.0


def pull_max_idle_time() -> float:
    """:data:`PULL_MAX_IDLE_TIME`, or ``ROCKETMQ_CLIENT_PULL_PULL_MAX_IDLE_TIME`` ms: ProcessQueue reads
    ``rocketmq.client.pull.pullMaxIdleTime`` (:func:`~client.consumer.process_queue.java_property_seconds`)."""
    return java_property_seconds("ROCKETMQ_CLIENT_PULL_PULL_MAX_IDLE_TIME", PULL_MAX_IDLE_TIME)


#: How long LOCK_BATCH_MQ and UNLOCK_BATCH_MQ may take, whatever the client's ``rpc_timeout``: RebalanceImpl's
#: ``lock``, ``lockAll``, ``unlock`` and ``unlockAll`` pass 1000 ms
#: (client/src/main/java/org/apache/rocketmq/client/impl/consumer/RebalanceImpl.java).
LOCK_TIMEOUT = 1.0

#: How long a removal waits for an orderly queue's listener call before keeping the queue for the next pass (Java's
#: ``consumeLock.tryLock(1000, ms)`` in RebalancePushImpl.removeUnnecessaryMessageQueue).
ORDERLY_REMOVE_WAIT = 1.0

#: How long a dropped orderly queue whose process queue still holds messages keeps its broker lock, by default (Java's
#: ``UNLOCK_DELAY_TIME_MILLS``, 20000 in RebalancePushImpl.unlockDelay).
UNLOCK_DELAY = 20.0


def unlock_delay() -> float:
    """:data:`UNLOCK_DELAY`, or ``ROCKETMQ_CLIENT_UNLOCK_DELAY_TIME_MILLS`` ms: RebalancePushImpl reads
    ``rocketmq.client.unlockDelayTimeMills`` (:func:`~client.consumer.process_queue.java_property_seconds`)."""
    return java_property_seconds("ROCKETMQ_CLIENT_UNLOCK_DELAY_TIME_MILLS", UNLOCK_DELAY)


class RebalanceOwner(Protocol):
    @property
    def taking_queues(self) -> bool:
        """False once the owner is stopping: a pass then takes no queue (no broker lock, no process queue)."""
        ...

    def on_queue_added(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None: ...

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> None: ...

    async def consume_idle(self, mq: MessageQueue, timeout: float) -> bool:
        """Whether no listener call runs on ``mq`` (orderly owners wait up to ``timeout`` for one that does)."""
        ...


class Rebalance:
    """Queue ownership of one consumer group member. See the module docstring."""

    def __init__(
        self,
        instance: MQClientInstance,
        group: str,
        owner: RebalanceOwner,
        offset_store: OffsetStore,
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        strategy: AllocateStrategy | str = allocate_average,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        orderly: bool = False,
        memory_first: bool = False,
        pull_max_idle: float | None = None,
    ) -> None:
        self.instance = instance
        self.group = group
        self.owner = owner
        self.offset_store = offset_store
        self.message_model = message_model
        self._strategy = resolve_strategy(strategy)
        self.consume_from_where = consume_from_where
        #: CONSUME_FROM_TIMESTAMP's time; by default 30 minutes before the consumer was made, to the second, fixed
        #: then as the ``consumeTimestamp`` field of client/src/main/java/org/apache/rocketmq/client/consumer/
        #: DefaultMQPushConsumer.java (and DefaultLitePullConsumer.java), a yyyyMMddHHmmss string: a queue taken
        #: later without a stored offset starts there too.
        if consume_timestamp_ms is None:
            consume_timestamp_ms = (time.time_ns() // 1_000_000 - DEFAULT_CONSUME_TIMESTAMP_AGO_MS) // 1000 * 1000
        self.consume_timestamp_ms = consume_timestamp_ms
        self.orderly = orderly
        #: Start offsets read from memory first (RebalanceLitePullImpl's ``MEMORY_FIRST_THEN_STORE``: an offset
        #: committed before the queue's first pull counts); push consumers read the store (``READ_FROM_STORE``).
        self.memory_first = memory_first
        #: Seconds after which a pass drops an allocated queue whose pulls stopped, to take it again at once (the push
        #: consumer's :data:`PULL_MAX_IDLE_TIME`; None, the lite pull consumer's: never, as Java's CONSUME_ACTIVELY).
        self.pull_max_idle = pull_max_idle
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        #: orderly queues a removal kept (their listener call ran on): removed by a later pass, allocated or not
        self._kept: set[MessageQueue] = set()
        #: Seconds a dropped orderly queue with cached messages keeps its lock: :data:`UNLOCK_DELAY`, or the
        #: push consumer's :func:`unlock_delay` read at its start (RebalancePushImpl's static final)
        self.unlock_delay_time = UNLOCK_DELAY
        #: dropped orderly queues whose unlock waits :attr:`unlock_delay_time` (cancelled when the queue is taken again)
        self._unlocks_later: dict[MessageQueue, anyio.CancelScope] = {}
        #: Set when the last pass failed for a topic or left an allocated queue out (its lock was refused or its
        #: offset unknown): the owner then rebalances again soon instead of waiting for the 20 s timer.
        self.incomplete = False
        #: Awaited after a pass changed a topic's owned queues, once the pass released its lock (so it may subscribe,
        #: seek or rebalance): the push consumer's heartbeat, the lite pull consumer's MessageQueueListener.
        self.on_changed: QueuesChanged | None = None
        #: The owner picks its queues itself (the lite pull consumer's assign mode): passes do nothing. Set under
        #: :meth:`serialised` and read by a pass under it, so a pass already waiting for the lock when assign mode
        #: begins does not rebalance the assigned topics as subscriptions (Java's ``assign`` never enters
        #: ``subscriptionInner``).
        self.assigned_by_owner = False
        self._lock = anyio.Lock()

    @property
    def strategy(self) -> AllocateStrategy:
        """The allocation strategy the next pass applies (Java's ``RebalanceImpl.allocateMessageQueueStrategy``).
        Set to a strategy or to the name of a settings-free one (:func:`~client.consumer.allocate.resolve_strategy`:
        ``"AVG"``, ``"AVG_BY_CIRCLE"``, ``"CONSISTENT_HASH"``; another name raises ValueError)."""
        return self._strategy

    @strategy.setter
    def strategy(self, strategy: AllocateStrategy | str) -> None:
        self._strategy = resolve_strategy(strategy)

    @property
    def locks_queues(self) -> bool:
        """Whether queues are owned under broker locks: orderly CLUSTERING only. A BROADCASTING member consumes every
        queue itself, so it locks none (RocketMQ 5.3.3's
        ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/RebalanceImpl.java`` passes ``isOrder=false``
        for BROADCASTING; 4.9.8 locked them, so a second member got no queue until the first one's locks expired),
        nor waits for a listener call before dropping a queue (``RebalancePushImpl.removeUnnecessaryMessageQueue``)."""
        return self.orderly and self.message_model is MessageModel.CLUSTERING

    async def do_rebalance(self) -> None:
        """One rebalance pass over every subscription (serialised: concurrent calls run one after the other), then
        :attr:`on_changed` for each topic whose owned queues it changed."""
        changes: list[tuple[str, set[MessageQueue], set[MessageQueue]]] = []
        async with self._lock:
            if self.assigned_by_owner:
                return
            self.incomplete = False
            for topic in list(self.subscriptions):
                try:
                    if (change := await self._rebalance_topic(topic)) is not None:
                        changes.append(change)
                except Exception as exc:
                    # Typically a route not registered yet (a retry topic right after the first heartbeat).
                    log.info("rebalance of %s for group %s failed: %s", topic, self.group, exc)
                    self.incomplete = True
            await self._remove_all([mq for mq in self.process_queues if mq.topic not in self.subscriptions])
        if self.on_changed is not None:
            for topic, mq_all, allocated in changes:
                await self.on_changed(topic, mq_all, allocated)

    async def _rebalance_topic(self, topic: str) -> tuple[str, set[MessageQueue], set[MessageQueue]] | None:
        """Rebalance ``topic``: its readable queues and this member's share when the owned queues changed."""
        route = await self.instance.route(topic, wait_greeting=True)
        mq_all = subscribe_queues(topic, route)
        if self.message_model is MessageModel.BROADCASTING:
            allocated = set(mq_all)
        else:
            # Java's findBrokerAddrByTopic: a group's selectBrokerAddr, its master or, without one, a slave.
            addresses = [addr for bd in route.broker_datas if (addr := bd.select_broker_addr()) is not None]
            if not addresses:
                raise MQClientError(f"topic {topic} has no broker address")
            mqs, cids = sort_like_java(mq_all, await self._consumer_ids(addresses))
            try:
                answer = self.strategy(self.group, self.instance.client_id, mqs, cids)
            except Exception as exc:
                # Java's rebalanceByTopic: logged, and the topic's queues stay as they are.
                name = strategy_name(self.strategy)
                log.error("allocate strategy %s of group %s failed for %s: %r", name, self.group, topic, exc)
                return None
            allocated = set(answer or ())
            if strays := allocated.difference(mq_all):
                log.warning(
                    "allocate strategy %s gave %s queues not readable in %s: %s",
                    strategy_name(self.strategy),
                    self.group,
                    topic,
                    sorted(strays),
                )
                allocated -= strays
        owned = {mq for mq in self.process_queues if mq.topic == topic}
        await self.update_process_queues(topic, allocated)
        if owned == {mq for mq in self.process_queues if mq.topic == topic}:
            return None
        log.info(
            "rebalanced result changed: strategy %s, group %s, topic %s, client %s, %d queues, %d allocated: %s",
            strategy_name(self.strategy),
            self.group,
            topic,
            self.instance.client_id,
            len(mq_all),
            len(allocated),
            sorted(allocated),
        )
        return topic, set(mq_all), allocated

    async def _consumer_ids(self, addresses: list[str]) -> list[str]:
        """The group's consumer ids from one of the topic's broker groups' ``addresses``, in random order (Java picks
        one at random, so a broker that hangs does not stall every pass) and the next one when it fails. Raises the
        last failure."""
        failure: Exception | None = None
        for address in random.sample(addresses, len(addresses)):
            try:
                return await api.get_consumer_id_list(
                    self.instance.remoting, address, self.group, self.instance.config.rpc_timeout
                )
            except (MQClientError, RemotingError) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def update_process_queues(self, topic: str, allocated: set[MessageQueue]) -> None:
        """Drop the owned queues of ``topic`` not in ``allocated`` and take the new ones, while the owner takes any."""
        await self.remove_unallocated(topic, allocated)
        await self._remove_pull_expired(topic)
        for mq in sorted(allocated - set(self.process_queues)):
            if not self.owner.taking_queues:
                return
            await self._take(mq)

    async def _remove_pull_expired(self, topic: str) -> None:
        """Drop the owned queues of ``topic`` not pulled for over :attr:`pull_max_idle` (their pull loop ended while
        the queue stayed owned), so the pass takes them again with a new pull loop: ``client/src/main/java/org/apache/
        rocketmq/client/impl/consumer/RebalanceImpl.java``'s ``updateProcessQueueTableInRebalance`` does so for
        CONSUME_PASSIVELY consumers whose ProcessQueue ``isPullExpired`` (``PULL_MAX_IDLE_TIME``, 120 s)."""
        if self.pull_max_idle is None:
            return
        now = anyio.current_time()
        expired = [
            mq
            for mq, pq in self.process_queues.items()
            if mq.topic == topic and mq not in self._kept and now - pq.last_pull_time > self.pull_max_idle
        ]
        for mq in expired:
            log.error(
                "queue %s of group %s not pulled for %.0f s: dropped to be taken again",
                mq,
                self.group,
                now - self.process_queues[mq].last_pull_time,
            )
        await self._remove_all(expired)

    async def _take(self, mq: MessageQueue) -> None:
        """Own ``mq`` from its start offset (orderly: once the broker granted its lock) and tell the owner. Left out
        (the pass is incomplete) when its lock is refused or its offset unknown; left out, its lock given back, when
        the owner began to stop meanwhile."""
        if self.locks_queues:
            self._cancel_unlock_later(mq)
        if self.locks_queues and not await self.lock(mq):
            log.info("queue %s not added: the broker refused its lock", mq)
            self.incomplete = True
            return
        self.offset_store.remove(mq)
        try:
            offset = await self.compute_pull_from_where(mq)
        except Exception as exc:
            log.warning("queue %s not added this round, its offset is unknown: %s", mq, exc)
            self.incomplete = True
            return
        if not self.owner.taking_queues:
            if self.locks_queues:
                await self.unlock([mq])
            return
        pq = self.process_queues[mq] = ProcessQueue.created_at(anyio.current_time())
        pq.locked = self.orderly
        self.owner.on_queue_added(mq, pq, offset)

    async def remove_unallocated(self, topic: str, allocated: set[MessageQueue]) -> None:
        """Drop the owned queues of ``topic`` not in ``allocated``. A queue still held from an earlier removal (its
        listener call was running) and allocated again: finish that removal first, so it is taken afresh."""
        await self._remove_all(
            [mq for mq in self.process_queues if mq.topic == topic and (mq not in allocated or mq in self._kept)]
        )

    async def _remove_all(self, mqs: list[MessageQueue]) -> None:
        """:meth:`_remove` each of ``mqs``, together: an orderly queue's listener call, or a broker address to look
        up, is waited for once, not once per queue. The offset persist waits for no broker (:meth:`_drop`)."""
        if len(mqs) <= 1:
            for mq in mqs:
                await self._remove(mq)
            return
        async with anyio.create_task_group() as tasks:
            for mq in mqs:
                tasks.start_soon(self._remove, mq)

    async def drop_topic(self, topic: str) -> None:
        """Drop every owned queue of ``topic`` (an unsubscribe), serialised with the passes."""
        async with self._lock:
            await self.remove_unallocated(topic, set())

    async def drop_all(self) -> None:
        """Forget every owned queue, kept ones included, once the pass (or reset) under way ended: the owner stopped
        (it no longer takes queues, and persisted and unlocked what it had to), so a restart rebalances from scratch.
        """
        async with self._lock:
            for pq in self.process_queues.values():
                pq.dropped = True
            self.process_queues.clear()
            self._kept.clear()

    def serialised(self) -> anyio.Lock:
        """The lock a pass, a reset and a drop hold: the lite pull consumer's assign mode holds it to change its
        queues, so overlapping changes take effect one after the other."""
        return self._lock

    def own(self, mq: MessageQueue) -> ProcessQueue:
        """Own ``mq`` without computing its start offset (the lite pull consumer's assign mode: its pull task
        computes it, retrying while the broker does not answer). Not for orderly consumers (no lock is taken)."""
        self.offset_store.remove(mq)
        pq = self.process_queues[mq] = ProcessQueue.created_at(anyio.current_time())
        return pq

    async def remove_process_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Drop ``mq`` as a rebalance does, if ``pq`` still is its process queue (Java's ``removeProcessQueue``):
        the next pass takes it again afresh."""
        async with self._lock:
            if self.process_queues.get(mq) is pq:
                await self._remove(mq)

    async def reset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Move the owned queues of ``topic`` listed in ``offsets`` to their offset there (Java's
        ``MQClientInstance.resetOffset``), after the pass under way if any (a queue it takes is reset too). Each is
        dropped, its new offset persisted (a failure is logged) and its orderly broker lock given up (at once, cached
        messages or not) once no listener call runs on it (waiting up to :data:`ORDERLY_REMOVE_WAIT`, as
        ``removeUnnecessaryMessageQueue``; else the lock is left to expire): the next pass takes it again from there.
        The other queues are their owners' to reset."""
        async with self._lock:
            for mq in [mq for mq in self.process_queues if mq.topic == topic and mq in offsets]:
                pq = self.process_queues[mq]
                pq.dropped = True
                self.offset_store.update(mq, offsets[mq])
                await self._drop(mq, pq)
                if self.locks_queues and await self.owner.consume_idle(mq, ORDERLY_REMOVE_WAIT):
                    # MQClientInstance.resetOffset clears the process queue first: no unlockDelay, unlocked at once.
                    await self._give_up_lock(mq, cached=False)

    async def _remove(self, mq: MessageQueue) -> None:
        """Drop ``mq``; an orderly one whose listener call does not end within :data:`ORDERLY_REMOVE_WAIT` is kept,
        broker lock and all (renewed as any held queue's), and removed by a later pass: giving up the lock while the
        call runs let another member consume the queue at the same time."""
        pq = self.process_queues.get(mq)
        if pq is None:
            return
        pq.dropped = True
        idle = not self.locks_queues or await self.owner.consume_idle(mq, ORDERLY_REMOVE_WAIT)
        if not idle:
            log.info("queue %s is still being consumed: kept, and its lock, until a later rebalance", mq)
            pq.try_unlock_times += 1
            self._kept.add(mq)
            self.incomplete = True
            return
        cached = pq.has_messages()
        await self._drop(mq, pq)
        if self.locks_queues:
            await self._give_up_lock(mq, cached)

    async def _give_up_lock(self, mq: MessageQueue, cached: bool) -> None:
        """Unlock dropped ``mq`` one way; when its process queue still held messages (``cached``), in the client
        instance's task group :attr:`unlock_delay_time` later, as RebalancePushImpl.unlockDelay (lost if the instance
        stops first: the broker's lock then expires)."""
        if not cached:
            await self.unlock([mq], oneway=True)
            return
        self._cancel_unlock_later(mq)
        scope = self._unlocks_later[mq] = anyio.CancelScope()
        delay = self.unlock_delay_time

        async def unlock_later() -> None:
            with scope:
                await anyio.sleep(delay)
                await self.unlock([mq], oneway=True)
            if self._unlocks_later.get(mq) is scope:
                del self._unlocks_later[mq]

        try:
            self.instance.task_group.start_soon(unlock_later)
        except (RuntimeError, ClientStateError):
            log.info("client instance stopping: the lock of %s is left to expire", mq)

    def _cancel_unlock_later(self, mq: MessageQueue) -> None:
        """A delayed unlock of ``mq`` must not give up the lock of its next process queue here."""
        scope = self._unlocks_later.pop(mq, None)
        if scope is not None:
            scope.cancel()

    async def _drop(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Take ``mq`` (with its process queue ``pq``) out of the table and the kept queues, stop its pulls, persist
        its offset and forget it. The persist is ``persist_all``'s: one way to a broker, a failure logged, as
        ``RemoteBrokerOffsetStore.persist`` sends it (``updateConsumeOffsetToBroker(mq, offset)``, oneway)."""
        pq.dropped = True
        del self.process_queues[mq]
        self._kept.discard(mq)
        await self.owner.on_queue_removed(mq, pq)
        await self.offset_store.persist_all([mq])
        self.offset_store.remove(mq)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The stored offset (with ``memory_first``, the one in memory if any), else consume-from-where (retry topics
        start at 0 / the max offset as in Java). The deprecated MIN_OFFSET, MAX_OFFSET and
        LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST count as LAST_OFFSET, as in RebalancePushImpl."""
        stored = self.offset_store.read_memory(mq) if self.memory_first else None
        if stored is None:
            stored = await self.offset_store.read(mq)
        if stored is not None and stored >= 0:
            return stored
        where = self.consume_from_where
        remoting, timeout = self.instance.remoting, self.instance.config.rpc_timeout
        addr = self.instance.find_broker_address(mq.broker_name, master=False)
        if addr is None:
            raise MQClientError(f"no address for broker {mq.broker_name}")
        is_retry = mq.topic.startswith("%RETRY%")
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            if is_retry:
                return await api.get_max_offset(remoting, addr, mq, timeout)
            return await api.search_offset(remoting, addr, mq, self.consume_timestamp_ms, timeout)
        if is_retry:
            return 0
        return await api.get_max_offset(remoting, addr, mq, timeout)

    # -- orderly locks ---------------------------------------------------------------------------------------------

    def _lock_body(self, mqs: Iterable[MessageQueue]) -> LockBatchRequestBody:
        return LockBatchRequestBody(consumer_group=self.group, client_id=self.instance.client_id, mq_set=frozenset(mqs))

    async def lock(self, mq: MessageQueue) -> bool:
        addr = self.instance.find_broker_address(mq.broker_name)
        if addr is None:
            return False
        try:
            locked = await api.lock_batch_mq(self.instance.remoting, addr, self._lock_body([mq]), LOCK_TIMEOUT)
        except Exception as exc:
            log.info("locking %s failed: %s", mq, exc)
            return False
        return mq in locked

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue, broker by broker (Java does this every 20 s)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, mqs in by_broker.items():
            addr = self.instance.find_broker_address(broker_name)
            if addr is None:
                continue
            try:
                locked = await api.lock_batch_mq(self.instance.remoting, addr, self._lock_body(mqs), LOCK_TIMEOUT)
            except Exception as exc:
                log.info("renewing locks on %s failed: %s", broker_name, exc)
                continue
            now = anyio.current_time()
            for mq in mqs:
                pq = self.process_queues.get(mq)
                if pq is None:
                    continue
                pq.locked = mq in locked
                if pq.locked:
                    pq.last_lock_time = now

    async def unlock(self, mqs: Iterable[MessageQueue], *, oneway: bool = False) -> None:
        """Give up the locks of ``mqs``, broker by broker; ``oneway`` sends UNLOCK_BATCH_MQ without awaiting the answer,
        as ``RebalancePushImpl.removeUnnecessaryMessageQueue`` does for a dropped queue (``unlock(mq, true)``)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, queues in by_broker.items():
            addr = self.instance.find_broker_address(broker_name)
            if addr is None:
                continue
            try:
                send = api.unlock_batch_mq_oneway if oneway else api.unlock_batch_mq
                await send(self.instance.remoting, addr, self._lock_body(queues), LOCK_TIMEOUT)
            except Exception as exc:
                log.info("unlocking queues on %s failed: %s", broker_name, exc)
