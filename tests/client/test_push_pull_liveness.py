"""Liveness of the push consumer's pull loops, as RocketMQ 4.9.8's
client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java ``pullMessage`` (it stamps
``lastPullTimestamp`` on every call, flow-controlled or not; a FLOW_CONTROL answer is pulled again after
``PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL``, 20 ms) and RebalanceImpl.java ``updateProcessQueueTableInRebalance``
(a queue whose last pull is older than ProcessQueue's ``PULL_MAX_IDLE_TIME``, 120 s, is dropped and taken again).
Virtual time against the embedded cluster, and a master on 127.0.0.1 that answers every pull with FLOW_CONTROL."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere, MessageModel, MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer
from tests.client.helpers import first_offset_consumer
from tests.client.test_master_watch import register_as_master
from tests.client.test_producer_timeout_budget import RouteFront


async def _one_queue_topic(cluster: EmbeddedCluster, topic: str) -> MessageQueue:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    return MessageQueue(topic, "broker-a", 0)


async def test_a_flow_controlled_queue_keeps_its_last_pull_time_current_and_its_process_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """pullMessage sets lastPullTimestamp before its flow-control checks, so a queue held back by
    pullThresholdForQueue for minutes still shows a recent last pull (``consumerStatus``'s lastPullTimestamp) and is
    not taken for a dead one (PULL_MAX_IDLE_TIME): its process queue, and what it holds, stay. Ours stamped only the
    pulls sent, so the queue looked idle since its last one."""
    topic = "PullLiveFlow"
    mq = await _one_queue_topic(embedded_cluster, topic)

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await trio.sleep_forever()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = first_offset_consumer(
        embedded_cluster.namesrv_addr, "cg-live-flow", topic, pull_batch_size=1, pull_threshold_for_queue=1
    )
    consumer.register_message_listener(listener)
    async with consumer, Producer("pg-live-flow", embedded_cluster.namesrv_addr) as producer:
        for i in range(5):
            await producer.send(Message(topic, f"{i}".encode()), queue=mq)
        await trio.sleep(5)
        pq = consumer.rebalance.process_queues[mq]
        held = pq.msg_count
        assert held == 2  # the threshold (1) plus one pull: flow control holds the rest back
        await trio.sleep(300)
        now = trio.current_time()
        assert consumer.rebalance.process_queues.get(mq) is pq, "the flow-controlled queue was dropped and taken again"
        assert pq.msg_count == held
        assert now - pq.last_pull_time <= 1.0, f"last pull {now - pq.last_pull_time:.1f} s ago while flow-controlled"
        info = consumer.running_info()["mqTable"][mq]
        assert info["lastPullTimestamp"] >= info["lastConsumeTimestamp"] + 290_000


async def test_a_queue_whose_pull_loop_ended_is_dropped_and_taken_again_after_pull_max_idle_time(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A queue still allocated whose pulls stopped (its pull loop gone, as a Java PullRequest lost) is dropped by the
    next rebalance once its last pull is more than 120 s old and taken again at once, from its committed offset:
    what was sent meanwhile is consumed. Ours kept the silent queue for ever."""
    topic = "PullLiveDead"
    mq = await _one_queue_topic(embedded_cluster, topic)
    got: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-live-dead", topic)
    consumer.register_message_listener(listener)
    async with consumer, Producer("pg-live-dead", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message(topic, b"before"), queue=mq)
        await trio.sleep(2)
        assert got == [b"before"]
        pq = consumer.rebalance.process_queues[mq]
        consumer.pull_service.stop(mq)  # the loop ends; the queue stays owned, not dropped
        await producer.send(Message(topic, b"after"), queue=mq)
        await trio.sleep(100)
        assert got == [b"before"]  # not idle for 120 s yet: kept
        await trio.sleep(60)  # idle for over 120 s, and a rebalance (every 20 s) since
        assert got == [b"before", b"after"]
        assert consumer.rebalance.process_queues[mq] is not pq
        assert pq.dropped


async def test_pull_max_idle_time_is_read_from_the_environment_as_javas_system_property(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4.9.8's ProcessQueue reads ``PULL_MAX_IDLE_TIME`` from ``rocketmq.client.pull.pullMaxIdleTime``, as this client
    reads Java's system properties from the environment (``ROCKETMQ_CLIENT_PULL_PULL_MAX_IDLE_TIME``): at 30000 a
    queue whose pulls stopped is taken again within a minute, not after 120 s. Ours was a constant."""
    monkeypatch.setenv("ROCKETMQ_CLIENT_PULL_PULL_MAX_IDLE_TIME", "30000")
    topic = "PullLiveTuned"
    mq = await _one_queue_topic(embedded_cluster, topic)
    got: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-live-tuned", topic)
    consumer.register_message_listener(listener)
    async with consumer, Producer("pg-live-tuned", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message(topic, b"before"), queue=mq)
        await trio.sleep(2)
        consumer.pull_service.stop(mq)  # the loop ends; the queue stays owned, not dropped
        await producer.send(Message(topic, b"after"), queue=mq)
        await trio.sleep(25)
        assert got == [b"before"]  # not idle for 30 s yet: kept
        await trio.sleep(30)  # idle for over 30 s, and a rebalance (every 20 s) since
        assert got == [b"before", b"after"]


class FlowControllingBroker:
    """A master whose queues are empty (offset 0) and that answers every pull with ``code`` (FLOW_CONTROL, 215)."""

    def __init__(self, code: int = ResponseCode.FLOW_CONTROL) -> None:
        self.code = code
        self.pulled_at: list[float] = []
        self.pulled_by_queue: dict[str, list[float]] = {}

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.PULL_MESSAGE:
            self.pulled_at.append(trio.current_time())
            self.pulled_by_queue.setdefault(request.ext_fields["queueId"], []).append(trio.current_time())
            return request.response(self.code, "flow control")
        if request.code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET):
            return request.response(ResponseCode.SUCCESS, None, {"offset": "0"})
        return request.response(ResponseCode.SUCCESS)


@contextlib.asynccontextmanager
async def _flow_controlling_master(
    cluster: EmbeddedCluster, topic: str, code: int = ResponseCode.FLOW_CONTROL
) -> AsyncIterator[FlowControllingBroker]:
    broker = FlowControllingBroker(code)
    dispatcher = Dispatcher()
    dispatcher.set_default(broker, ProcessorPool("flow-controlling", 4, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, cluster.namesrv_addr, f"{host}:{port}", topic, "broker-flow")
        yield broker
        nursery.cancel_scope.cancel()


def _broadcasting_consumer(
    cluster: EmbeddedCluster, group: str, topic: str, tmp_path: Path, **settings: float
) -> PushConsumer:
    """A BROADCASTING consumer of ``topic`` from the first offset, consuming everything successfully."""
    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        message_model=MessageModel.BROADCASTING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        offset_store_dir=tmp_path / "offsets",
        await_termination=1.0,
        **settings,
    )
    consumer.subscribe(topic)
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    return consumer


async def test_a_pull_answered_with_flow_control_is_made_again_after_20_ms(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """pullMessage's onException: a broker's FLOW_CONTROL is pulled again after
    PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL (20 ms), any other failure after pullTimeDelayMillsWhenException
    (1 s). Ours waited 3 s after a FLOW_CONTROL too."""
    topic = "PullLiveBrokerFlow"
    async with (
        _flow_controlling_master(embedded_cluster, topic) as broker,
        _broadcasting_consumer(embedded_cluster, "cg-live-broker-flow", topic, tmp_path),
    ):
        with trio.fail_after(60):
            while len(broker.pulled_at) < 8:
                await trio.sleep(0.005)
    by_queue_gaps = sorted(b - a for a, b in zip(broker.pulled_at, broker.pulled_at[1:], strict=False))
    # Two queues pulled side by side: every queue's pulls come 20 ms apart, so no gap reaches 1 s.
    assert by_queue_gaps[-1] == pytest.approx(0.02, abs=0.01), broker.pulled_at


@pytest.mark.parametrize("delay", [None, 0.3], ids=["default", "set"])
async def test_a_pull_the_broker_refuses_busy_is_made_again_after_pull_time_delay_when_exception(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path, delay: float | None
) -> None:
    """pullMessage's onException: a failed pull (here the broker's SYSTEM_BUSY) is made again after
    pullTimeDelayMillsWhenException, which DefaultMQPushConsumerImpl's constructor takes from the consumer's
    ClientConfig: 1000 ms by default (client/.../ClientConfig.java, 4.9.8; the impl's own 3000 is overwritten), a
    setting. Ours waited a fixed 3 s."""
    topic = "PullLiveBusy"
    settings = {} if delay is None else {"pull_time_delay_when_exception": delay}
    async with (
        _flow_controlling_master(embedded_cluster, topic, ResponseCode.SYSTEM_BUSY) as broker,
        _broadcasting_consumer(embedded_cluster, "cg-live-busy", topic, tmp_path, **settings),
    ):
        await trio.sleep(10)
    gaps = [b - a for pulls in broker.pulled_by_queue.values() for a, b in itertools.pairwise(pulls)]
    assert gaps and min(gaps) == pytest.approx(1.0 if delay is None else delay, abs=0.05), broker.pulled_by_queue


async def test_an_orderly_queue_shows_when_its_messages_were_last_taken_for_consumption(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ProcessQueue.takeMessages (client/src/main/java/org/apache/rocketmq/client/impl/consumer/ProcessQueue.java)
    sets lastConsumeTimestamp, so an orderly consumer's ``consumerStatus`` shows when each queue was last consumed.
    Ours never moved it for orderly consumption: it stayed at the time the queue was taken."""
    topic = "PullLiveOrderly"
    mq = await _one_queue_topic(embedded_cluster, topic)
    got: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-live-orderly", topic)
    consumer.register_message_listener_orderly(listener)
    async with consumer, Producer("pg-live-orderly", embedded_cluster.namesrv_addr) as producer:
        await trio.sleep(100)
        sent = trio.current_time()
        await producer.send(Message(topic, b"late"), queue=mq)
        await trio.sleep(2)
        assert got == [b"late"]
        pq = consumer.rebalance.process_queues[mq]
        assert pq.last_consume_time >= sent, f"last consumed at {pq.last_consume_time}, the message came at {sent}"
        info = consumer.running_info()["mqTable"][mq]
        # Both in wall-clock ms: the queue was pulled within a long poll (15 s) and consumed 2 s ago.
        assert info["lastPullTimestamp"] - info["lastConsumeTimestamp"] <= 15_000


@contextlib.asynccontextmanager
async def _counting_front(cluster: EmbeddedCluster) -> AsyncIterator[tuple[RouteFront, str]]:
    """A :class:`RouteFront` before the cluster's name server, counting route lookups and answering them at once."""
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        dispatcher = Dispatcher()
        front = RouteFront(cluster.namesrv_addr, client, 0.0, lambda lookup: False)
        dispatcher.set_default(front, ProcessorPool("front", 4, 100))
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        yield front, f"{host}:{port}"
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("kind", ["push", "lite"])
async def test_failed_pulls_do_not_ask_the_name_server_for_the_route(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path, kind: str
) -> None:
    """A failed pull is only made again later: DefaultMQPushConsumerImpl.pullMessage's onException and
    DefaultLitePullConsumerImpl.PullTaskImpl.run re-schedule it, and PullAPIWrapper.pullKernelImpl reads the route
    only when it names no address for the queue's broker; the route is re-read by MQClientInstance's poll, every
    ``pollNameServerInterval`` (30 s). Ours asked the name server after every failed pull of every queue."""
    topic = f"PullLiveNoReread-{kind}"
    async with (
        _flow_controlling_master(embedded_cluster, topic, ResponseCode.SYSTEM_BUSY) as broker,
        _counting_front(embedded_cluster) as (front, namesrv),
    ):
        if kind == "push":
            consumer: PushConsumer | LitePullConsumer = PushConsumer(
                "cg-live-no-reread",
                namesrv,
                message_model=MessageModel.BROADCASTING,
                offset_store_dir=tmp_path / "offsets",
                await_termination=1.0,
            )
            consumer.subscribe(topic)
            consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        else:
            consumer = LitePullConsumer("cg-lite-no-reread", namesrv)
        async with consumer:
            if isinstance(consumer, LitePullConsumer):
                await consumer.assign([MessageQueue(topic, "broker-flow", 0), MessageQueue(topic, "broker-flow", 1)])
            await trio.sleep(2)
            pulls, lookups = len(broker.pulled_at), front.lookups
            await trio.sleep(20)  # within one route poll
            pulls, lookups = len(broker.pulled_at) - pulls, front.lookups - lookups
    assert pulls >= 20  # both queues failing, each pulled again every second
    assert lookups == 0
