"""The lite pull consumer (Java's ``DefaultLitePullConsumer``): the application calls :meth:`poll` instead of
registering a listener.

Usage::

    async with LitePullConsumer("my-group", namesrv_addr="127.0.0.1:9876") as consumer:
        await consumer.subscribe("TopicTest")            # group rebalance decides the queues
        # or: consumer.assign(await consumer.fetch_message_queues("TopicTest"))
        msgs = await consumer.poll(timeout=5.0)          # [] when nothing arrived in time
        await consumer.seek(mq, 0)                       # replay; also seek_to_begin / seek_to_end
        await consumer.commit()                          # with auto_commit=False

A background task per queue pulls (long polling) into a buffer bounded per queue (``pull_threshold_for_queue``
messages, ``pull_threshold_size_for_queue_mib`` MiB of bodies) and in all (``pull_threshold_for_all`` messages), as
DefaultLitePullConsumer's flow control; ``poll`` hands out one buffered batch. With ``auto_commit`` (the default) the
messages of a batch count as consumed when ``poll`` returns them and their offsets are committed every
``persist_consumer_offset_interval`` (5 s) and at shutdown; otherwise :meth:`commit` does it (a broker that fails
is logged, the others' offsets still go out). ``seek`` discards what is buffered for the queue and restarts its pull
at the new offset. Each ownership of a queue (taken, seeked, taken again) has its own ``QueueState``: a buffered
batch is handed out only while its state is still the queue's. The per-queue pull task is
:class:`~client.consumer.lite_pull_worker.LitePullWorker`'s.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import anyio.lowlevel

from client import api
from client.config import ClientConfig
from client.consumer.allocate import AllocateStrategy, allocate_average
from client.consumer.lite_pull_worker import Batch, LitePullWorker, QueueState
from client.consumer.offset_store import RemoteBrokerOffsetStore
from client.consumer.process_queue import ProcessQueue
from client.consumer.pull_target import PullTargets
from client.consumer.rebalance import Rebalance
from client.consumer.subscription import build_subscription
from client.errors import ClientStateError, MQClientError
from client.instance import MQClientInstance, new_instance
from client.route import subscribe_queues
from remoting.codec.bodies import (
    EXPRESSION_TAG,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from remoting.codec.bodies.admin import PROP_CONSUMER_START_TIMESTAMP
from remoting.codec.message import MessageExt

log = logging.getLogger(__name__)


class LitePullConsumer(LitePullWorker):
    """See the module docstring."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "127.0.0.1:9876",
        *,
        instance: MQClientInstance | None = None,
        config: ClientConfig | None = None,
        auto_commit: bool = True,
        pull_batch_size: int = 10,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        pull_threshold_for_all: int = 10_000,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateStrategy = allocate_average,
    ) -> None:
        self._group = group
        self.instance, self._own_instance = (
            (instance, False) if instance is not None else (new_instance(config, namesrv_addr), True)
        )
        self.auto_commit = auto_commit
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue_mib * 1024 * 1024
        self.pull_threshold_for_all = pull_threshold_for_all
        self.consume_from_where = consume_from_where
        self._targets = PullTargets(self.instance)
        self.offset_store = RemoteBrokerOffsetStore(self.instance, group)
        self.rebalance = Rebalance(
            self.instance,
            group,
            self,
            self.offset_store,
            strategy=allocate_strategy,
            consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms,
        )
        self._queues: dict[MessageQueue, QueueState] = {}
        self._assigned_manually = False
        self._paused: set[MessageQueue] = set()
        self._send, self._receive = anyio.create_memory_object_stream[Batch](math.inf)
        self._tasks: anyio.abc.TaskGroup | None = None
        self._started = False
        #: Wall-clock ms of construction (Java's ``consumerStartTimestamp``), shown in the running info.
        self.start_timestamp_ms = time.time_ns() // 1_000_000

    @property
    def group(self) -> str:
        return self._group

    @property
    def message_model(self) -> MessageModel:
        return MessageModel.CLUSTERING

    @property
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    # -- lifecycle -----------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._own_instance:
            await self.instance.__aenter__()
        try:
            self._tasks = anyio.create_task_group()
            await self._tasks.__aenter__()
            self.instance.register_consumer(self)
            self._started = True
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    async def _stop(self) -> None:
        tasks, self._tasks = self._tasks, None
        try:
            if tasks is not None:
                tasks.cancel_scope.cancel()
                await tasks.__aexit__(None, None, None)
            if self._started:
                with anyio.CancelScope(shield=True):
                    if self.auto_commit:
                        await self.persist_offsets()
                    await self.instance.unregister(consumer_group=self._group)
        finally:
            self._started = False
            if self._own_instance:
                await self.instance.__aexit__(None, None, None)

    def _check_started(self) -> anyio.abc.TaskGroup:
        if self._tasks is None:
            raise ClientStateError(f"lite pull consumer {self._group!r} is not started (use `async with`)")
        return self._tasks

    # -- subscribe / assign --------------------------------------------------------------------------------------------

    async def subscribe(self, topic: str, expression: str = "*", expression_type: str = EXPRESSION_TAG) -> None:
        """Join the group's rebalance for ``topic`` (cannot be mixed with :meth:`assign`)."""
        self._check_started()
        if self._assigned_manually:
            raise ClientStateError("subscribe() and assign() cannot be mixed")
        self.rebalance.subscriptions[topic] = build_subscription(topic, expression, expression_type)
        await self.instance.fetch_route(topic, wait_greeting=True)
        await self.instance.send_heartbeat_to_all_brokers()
        await self.rebalance.do_rebalance()

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic``."""
        return subscribe_queues(topic, await self.instance.fetch_route(topic, wait_greeting=True))

    async def assign(self, mqs: Iterable[MessageQueue], expression: str = "*") -> None:
        """Consume exactly ``mqs`` (no rebalance). Each queue's pull task computes its start offset (from the
        broker, else consume-from-where), and again after a failure, so a queue whose broker is down now is
        consumed once the broker is back (Java's ``PullTaskImpl.nextPullOffset``)."""
        self._check_started()
        if self.rebalance.subscriptions and not self._assigned_manually:
            raise ClientStateError("subscribe() and assign() cannot be mixed")
        self._assigned_manually = True
        wanted = set(mqs)
        by_topic: dict[str, set[MessageQueue]] = {}
        for mq in wanted:
            by_topic.setdefault(mq.topic, set()).add(mq)
        for topic in by_topic:
            self.rebalance.subscriptions.setdefault(topic, build_subscription(topic, expression))
            await self.instance.route(topic, wait_greeting=True)
        for topic in {mq.topic for mq in self.rebalance.process_queues} | set(by_topic):
            await self.rebalance.remove_unallocated(topic, by_topic.get(topic, set()))
        for mq in sorted(wanted - set(self.rebalance.process_queues)):
            self._start(mq, self.rebalance.own(mq), None)

    def assignment(self) -> set[MessageQueue]:
        return set(self._queues)

    # -- ConsumerInner ---------------------------------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        subs: tuple[SubscriptionData, ...] = tuple(sub for _, sub in sorted(self.rebalance.subscriptions.items()))
        return ConsumerData(
            group_name=self._group,
            consume_type=self.consume_type,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=self.consume_from_where,
            subscription_data_set=() if self._assigned_manually else subs,
        )

    def subscribed_topics(self) -> set[str]:
        return set(self.rebalance.subscriptions)

    async def do_rebalance(self) -> None:
        if not self._assigned_manually and self._tasks is not None:
            await self.rebalance.do_rebalance()

    async def persist_offsets(self) -> None:
        if self.auto_commit:
            await self.commit()

    def running_info(self) -> dict[str, Any]:
        """Java's ``DefaultLitePullConsumerImpl.consumerRunningInfo`` (settings under Java's field names and the start
        time), plus the owned queues."""
        return {
            "properties": {
                "consumerGroup": self._group,
                "messageModel": self.message_model.name,
                "consumeFromWhere": self.consume_from_where.name,
                "autoCommit": str(self.auto_commit).lower(),
                "pullBatchSize": str(self.pull_batch_size),
                "pullThresholdForAll": str(self.pull_threshold_for_all),
                "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                "pullThresholdSizeForQueue": str(self.pull_threshold_size_for_queue // (1024 * 1024)),
                PROP_CONSUMER_START_TIMESTAMP: str(self.start_timestamp_ms),
            },
            "subscriptionSet": [s.to_json() for s in self.rebalance.subscriptions.values()],
            "mqTable": {
                mq: st.pq.info(st.consumed_offset or 0, anyio.current_time(), round(time.time() * 1000))
                for mq, st in self._queues.items()
            },
        }

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, object]:
        return {
            "order": False,
            "autoCommit": self.auto_commit,
            "consumeResult": "CR_THROW_EXCEPTION",
            "remark": "a lite pull consumer has no listener",
            "spentTimeMills": 0,
        }

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            if mq in self._queues:
                await self.seek(mq, offset)

    # -- RebalanceOwner --------------------------------------------------------------------------------------------

    def on_queue_added(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self._start(mq, pq, offset)

    def _start(self, mq: MessageQueue, pq: ProcessQueue, offset: int | None) -> None:
        """A new :class:`QueueState` for ``mq`` and its pull task (``offset`` ``None``: the task computes it)."""
        state = self._queues[mq] = QueueState(pq, offset)
        self._check_started().start_soon(self._pull_loop, mq, state)

    async def consume_idle(self, mq: MessageQueue, timeout: float) -> bool:
        return True  # the application polls; nothing of ours runs on a queue

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        state = self._queues.pop(mq, None)
        if state is None:
            return
        state.pq.dropped = True  # a pull task not started yet (a seek's, just now) ends at its first look
        if state.scope is not None:
            state.scope.cancel()
        # Without auto-commit, only what the application committed counts: the polled offset would skip the rest.
        if state.consumed_offset is not None and self.auto_commit:
            self.offset_store.update(mq, state.consumed_offset)

    # -- polling ---------------------------------------------------------------------------------------------------

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """The next buffered batch (messages of one queue, in offset order), or ``[]`` after ``timeout`` seconds;
        ``timeout=0`` returns what is buffered without waiting."""
        self._check_started()
        deadline = anyio.current_time() + timeout
        while (batch := await self._next_batch(deadline)) is not None:
            state = batch.state
            if self._queues.get(batch.mq) is not state or state.pq.dropped:
                continue  # pulled before the queue was seeked, or taken away (and maybe given back)
            offset = state.pq.remove_messages(batch.messages)
            if offset >= 0:
                state.consumed_offset = offset
                if self.auto_commit:
                    self.offset_store.update(batch.mq, offset)
            return batch.messages
        return []

    async def _next_batch(self, deadline: float) -> Batch | None:
        """The buffer's head, taken before any wait (a wait's first checkpoint would cancel a past deadline before
        looking, though a cancellation still ends the poll); ``None`` once ``deadline`` passed with nothing
        buffered."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            batch = self._receive.receive_nowait()
        except anyio.WouldBlock:
            with anyio.move_on_at(deadline):
                return await self._receive.receive()
            return None
        await anyio.lowlevel.cancel_shielded_checkpoint()  # yield (a poll(0) loop must not starve the pulls)
        return batch

    async def commit(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Commit the consumed offsets of ``mqs`` (default: every assigned queue) to the brokers, and wait for it.
        A queue whose broker fails is logged and the others are still committed (Java's commitAll and
        ``RemoteBrokerOffsetStore.persistAll``); its offset goes out with the next commit."""
        targets = list(self._queues) if mqs is None else list(mqs)
        for mq in targets:
            state = self._queues.get(mq)
            if state is None or state.consumed_offset is None:
                continue
            self.offset_store.update(mq, state.consumed_offset)
            try:
                await self.offset_store.persist(mq)
            except Exception as exc:
                log.warning("committing offset %d of %s failed: %s", state.consumed_offset, mq, exc)

    async def committed(self, mq: MessageQueue) -> int | None:
        """The offset the broker has for ``mq`` (``None`` when it has none)."""
        return await self.offset_store.read(mq)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Restart consumption of the assigned ``mq`` at ``offset``; what was buffered for it is discarded.
        Raises :class:`~client.errors.MQClientError` for an unassigned queue or an offset outside
        ``[min, max]``. The queue's state is checked again after asking the broker for the bounds: a seek that
        overlapped another is redone on top of it (the last one wins, one pull task survives, as Java's
        synchronized seek); one whose queue was taken away meanwhile does nothing (Java's new pull task finds no
        process queue)."""
        state = self._queues.get(mq)
        if state is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        while True:
            low, high = await self._bounds(mq)
            current = self._queues.get(mq)
            if current is state:
                break
            if current is None:
                log.info("seek of %s to %d dropped: the queue was taken away meanwhile", mq, offset)
                return
            state = current
        if not low <= offset <= high:
            raise MQClientError(f"seek offset {offset} of {mq} is outside [{low}, {high}]")
        if state.scope is not None:
            state.scope.cancel()
        fresh = QueueState(ProcessQueue.created_at(anyio.current_time()), offset, consumed_offset=offset)
        state.pq.dropped = True
        self._queues[mq] = fresh
        if self.auto_commit:
            self.offset_store.update(mq, offset)
        self._check_started().start_soon(self._pull_loop, mq, fresh)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, (await self._bounds(mq))[0])

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, (await self._bounds(mq))[1])

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop pulling ``mqs`` (what is buffered can still be polled) until :meth:`resume`."""
        self._paused.update(mqs)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        self._paused.difference_update(mqs)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of ``mq`` whose message was stored closest to ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        addr = self.instance.find_broker_address(mq.broker_name, master=False)
        if addr is None:
            await self.instance.fetch_route(mq.topic, wait_greeting=True)
            addr = self.instance.find_broker_address(mq.broker_name, master=False)
        if addr is None:
            raise MQClientError(f"no address for broker {mq.broker_name}")
        return await api.search_offset(self.instance.remoting, addr, mq, timestamp_ms, self.instance.config.rpc_timeout)

    async def _bounds(self, mq: MessageQueue) -> tuple[int, int]:
        addr = self.instance.find_broker_address(mq.broker_name, master=False)
        if addr is None:
            raise MQClientError(f"no address for broker {mq.broker_name}")
        timeout = self.instance.config.rpc_timeout
        low = await api.get_min_offset(self.instance.remoting, addr, mq, timeout)
        high = await api.get_max_offset(self.instance.remoting, addr, mq, timeout)
        return low, high
