"""The push consumer's pull loop (Java's ``PullMessageService`` + the pull half of ``DefaultMQPushConsumerImpl``):
one task per owned queue long-polls the queue's broker and hands what it gets to the consume service.

Flow control: the loop waits (50 ms steps) while the queue's process queue holds more than
``pull_threshold_for_queue`` messages or ``pull_threshold_size_for_queue`` body bytes, or, for concurrent
consumption, while the offsets in flight span more than 2000. After a failed pull it waits 3 s. An illegal offset
(PULL_OFFSET_MOVED) moves to the broker's suggestion. Every pull posts the subscription and, when the consumer has an
offset, commits it (the commit bit), as ali-ons does, unless it goes to a slave. Which broker of the queue's group
is pulled (the master, a slave it suggests, a slave while the master is gone) is :mod:`client.consumer.pull_target`'s
choice.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from client import api
from client.consumer.process_queue import ProcessQueue
from client.consumer.pull_target import PullTargets
from client.consumer.subscription import tag_filter
from remoting.codec.bodies import MessageModel, MessageQueue

if TYPE_CHECKING:
    from client.consumer.push import PushConsumer

log = logging.getLogger(__name__)

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
#: Broker hold time for a long poll, and the client's timeout for it (Java: 15 s and 30 s).
BROKER_SUSPEND_MAX = 15.0
PULL_TIMEOUT = 30.0
SUSPEND_MILLIS = str(int(BROKER_SUSPEND_MAX * 1000))
#: Waits of the pull loop: after an error, and when flow control holds pulling back (Java: 3 s and 50 ms).
PULL_DELAY_ON_ERROR = 3.0
PULL_DELAY_FLOW_CONTROL = 0.05
#: Concurrent mode: stop pulling when the offsets in flight span more than this (Java's ``consumeConcurrentlyMaxSpan``).
CONSUME_CONCURRENTLY_MAX_SPAN = 2000


class PullService:
    """Pull loops of one push consumer, one per owned queue. See the module docstring."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self._scopes: dict[MessageQueue, anyio.CancelScope] = {}
        self.targets = PullTargets(consumer.instance)

    def stop(self, mq: MessageQueue) -> None:
        """Cancel the loop of ``mq`` (its process queue is already marked dropped)."""
        scope = self._scopes.pop(mq, None)
        self.targets.forget(mq)
        if scope is not None:
            scope.cancel()

    def _flow_controlled(self, pq: ProcessQueue) -> bool:
        c = self.consumer
        if pq.msg_count > c.pull_threshold_for_queue or pq.msg_size > c.pull_threshold_size_for_queue:
            return True
        return not c.orderly and pq.max_span > CONSUME_CONCURRENTLY_MAX_SPAN

    async def pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Long-poll ``mq`` from ``offset`` until the queue is dropped or the consumer stops."""
        c = self.consumer
        with anyio.CancelScope() as scope:
            self._scopes[mq] = scope
            next_offset = offset
            while not pq.dropped and not c.stopping:
                if self._flow_controlled(pq):
                    await anyio.sleep(PULL_DELAY_FLOW_CONTROL)
                    continue
                try:
                    next_offset = await self._pull_once(mq, pq, next_offset)
                except Exception as exc:
                    log.info("pull from %s at %d failed: %s", mq, next_offset, exc)
                    await self.targets.refresh(mq)
                    await anyio.sleep(PULL_DELAY_ON_ERROR)
        if self._scopes.get(mq) is scope:
            del self._scopes[mq]

    async def _pull_once(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> int:
        c = self.consumer
        sub = c.rebalance.subscriptions.get(mq.topic)
        if sub is None:
            await anyio.sleep(PULL_DELAY_ON_ERROR)
            return offset
        addr, is_slave = await self.targets.address(mq)
        commit = 0
        if c.message_model is MessageModel.CLUSTERING and not is_slave:  # a slave ignores commits: Java clears the bit
            commit = c.offset_store.read_memory(mq) or 0
        sys_flag = PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION | (PULL_FLAG_COMMIT_OFFSET if commit > 0 else 0)
        # The PullMessageRequestHeader fields as a plain dict: this is the pull hot path.
        fields = {
            "consumerGroup": c.group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(c.pull_batch_size),
            "sysFlag": str(sys_flag),
            "commitOffset": str(commit),
            "suspendTimeoutMillis": SUSPEND_MILLIS,
            "subVersion": str(sub.sub_version),
            "subscription": sub.sub_string,
            "expressionType": sub.expression_type,
        }
        pq.last_pull_time = anyio.current_time()
        result = await api.pull_message(c.instance.remoting, addr, fields, PULL_TIMEOUT, tag_filter(sub))
        self.targets.suggest(mq, result.suggest_which_broker_id)
        if pq.dropped:
            return offset
        if result.status is api.PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal, moving to %d", offset, mq, result.next_begin_offset)
            c.offset_store.update(mq, result.next_begin_offset)
            return result.next_begin_offset
        if result.messages:
            pq.put_messages(result.messages)
            assert c.consume_service is not None
            c.consume_service.submit(mq, pq, result.messages)
        elif not pq.has_messages() and pq.msg_count == 0:
            # Nothing in flight: everything up to the next offset is consumed (Java's correctTagsOffset).
            c.offset_store.update(mq, result.next_begin_offset, increase_only=True)
        return result.next_begin_offset
