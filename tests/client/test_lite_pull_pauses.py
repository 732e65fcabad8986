"""The lite pull consumer's waits (RocketMQ 4.9.8's
client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java ``PullTaskImpl``)
against a master that refuses every pull: real sockets on 127.0.0.1, virtual time."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.consumer.lite_pull import LitePullConsumer
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer
from tests.client.test_master_watch import register_as_master

TOPIC = "LitePauses"
BROKER = "broker-refusing"


class RefusingBroker:
    """A master whose queues are empty (offset 0) and that answers every pull with SYSTEM_ERROR."""

    def __init__(self) -> None:
        self.pulled_at: list[float] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.PULL_MESSAGE:
            self.pulled_at.append(trio.current_time())
            return request.response(ResponseCode.SYSTEM_ERROR, "refused")
        if request.code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET):
            return request.response(ResponseCode.SUCCESS, None, {"offset": "0"})
        return request.response(ResponseCode.SUCCESS)


@contextlib.asynccontextmanager
async def _refusing_master(cluster: EmbeddedCluster) -> AsyncIterator[RefusingBroker]:
    refusing = RefusingBroker()
    dispatcher = Dispatcher()
    dispatcher.set_default(refusing, ProcessorPool("refusing", 4, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, cluster.namesrv_addr, f"{host}:{port}", TOPIC, BROKER)
        yield refusing
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("delay", [None, 0.2], ids=["default", "set"])
async def test_a_failed_lite_pull_is_made_again_after_pull_time_delay_when_exception(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, delay: float | None
) -> None:
    """PullTaskImpl.run schedules the pull task again ``pullTimeDelayMillsWhenException`` after a failed pull: the
    consumer's setting (ClientConfig, 1000 ms by default). Ours waited 3 s (the push consumer's wait) and had no
    setting."""
    async with _refusing_master(embedded_cluster) as refusing:
        kwargs = {} if delay is None else {"pull_time_delay_when_exception": delay}
        async with LitePullConsumer("lite-pauses", embedded_cluster.namesrv_addr, **kwargs) as consumer:
            await consumer.assign([MessageQueue(TOPIC, BROKER, 0)])
            with trio.fail_after(60):
                while len(refusing.pulled_at) < 3:
                    await trio.sleep(0.05)
    gaps = [b - a for a, b in zip(refusing.pulled_at, refusing.pulled_at[1:], strict=False)]
    expected = 1.0 if delay is None else delay
    assert gaps[:2] == [pytest.approx(expected, abs=0.06)] * 2, refusing.pulled_at


async def test_a_paused_queue_is_looked_at_again_every_second(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PullTaskImpl.run finds a paused queue paused and schedules itself again PULL_TIME_DELAY_MILLS_WHEN_PAUSE
    (1000 ms) later: a queue paused for 2.5 s is not pulled, and resumed it is pulled at the next look, 3 s after its
    first. Ours looked every 50 ms, pulling 50 ms after the resume."""
    async with (
        _refusing_master(embedded_cluster) as refusing,
        LitePullConsumer("lite-paused", embedded_cluster.namesrv_addr) as consumer,
    ):
        mq = MessageQueue(TOPIC, BROKER, 0)
        await consumer.assign([mq])
        consumer.pause([mq])  # before its pull task first runs
        assigned = trio.current_time()
        await trio.sleep(2.5)
        paused_pulls = list(refusing.pulled_at)
        consumer.resume([mq])
        with trio.fail_after(60):
            while not refusing.pulled_at:
                await trio.sleep(0.01)
    assert paused_pulls == []
    assert refusing.pulled_at[0] - assigned == pytest.approx(3.0, abs=0.1), (assigned, refusing.pulled_at)


async def test_a_pause_of_a_queue_not_assigned_is_ignored(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """AssignedMessageQueue.pause sets the flag only in the MessageQueueState of an assigned queue
    (client/src/main/java/org/apache/rocketmq/client/impl/consumer/AssignedMessageQueue.java, 4.9.8): a queue paused
    before it is assigned is pulled once assigned. Ours kept the pause, and the queue was never pulled."""
    async with (
        _refusing_master(embedded_cluster) as refusing,
        LitePullConsumer("lite-paused-early", embedded_cluster.namesrv_addr) as consumer,
    ):
        mq = MessageQueue(TOPIC, BROKER, 0)
        consumer.pause([mq])
        await consumer.assign([mq])
        with trio.move_on_after(10):
            while not refusing.pulled_at:
                await trio.sleep(0.01)
        pulled = list(refusing.pulled_at)
    assert pulled, "the queue paused before its assignment was never pulled"
