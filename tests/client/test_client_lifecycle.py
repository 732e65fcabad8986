"""Starting and stopping clients as RocketMQ 4.9.8's do (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
DefaultMQPushConsumerImpl.java, DefaultLitePullConsumerImpl.java ``start``): a second start of a running client fails
and leaves the running one as it was; a stop fails what is under way, telling its callbacks."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import ClientStateError, MQClientError
from client.instance import MQClientInstance
from client.message import Message, MessageExt, SendResult
from client.producer import Producer
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, poll_until, send_bodies, wait_until
from tests.client.test_master_watch import register_as_master, silent_master
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import use_virtual_store_clock


@asynccontextmanager
async def silent_brokers(tmp_path: Path, topic: str, *, dead_too: bool = False) -> AsyncIterator[str]:
    """A cluster whose name server routes ``topic`` to a master that accepts and never answers (broker-h) and, with
    ``dead_too``, to one at an address nobody listens on (broker-d) before it; yields the name server address."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    async with EmbeddedCluster(tmp_path / "c", auto_create_topic_enable=False, **SMALL_STORE) as cluster:
        ns = cluster.namesrv_addr
        async with RemotingClient() as client, trio.open_nursery() as nursery:
            silent = await silent_master(nursery)
            if dead_too:
                await register_as_master(client, ns, dead, topic=topic, broker_name="broker-d")
            await register_as_master(client, ns, silent, topic=topic, broker_name="broker-h")
            yield ns
            nursery.cancel_scope.cancel()


async def test_a_second_start_of_a_running_push_consumer_fails_and_leaves_it_consuming(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``DefaultMQPushConsumerImpl.start`` on a RUNNING consumer throws "The PushConsumer service state not OK,
    maybe started once" and changes nothing. Before: on a shared instance the second start replaced the running
    consumer's task groups, failed to register the group again, and its clean-up stopped and unregistered the
    running consumer, which consumed nothing more."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "SecondStart", queues=1)
    got: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    instance = MQClientInstance(ClientConfig(namesrv_addr=ns))
    consumer = PushConsumer(
        "cg-second-start",
        instance=instance,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        await_termination=1,
    )
    consumer.subscribe("SecondStart")
    consumer.register_message_listener(listener)
    async with instance, consumer:
        await send_bodies(ns, "SecondStart", [b"before"])
        await wait_until(lambda: got == [b"before"])
        with pytest.raises(ClientStateError):
            async with consumer:
                pass
        assert "cg-second-start" in instance.consumers
        await send_bodies(ns, "SecondStart", [b"after"])
        await wait_until(lambda: got == [b"before", b"after"])


async def test_a_second_start_of_a_running_lite_pull_consumer_fails_and_leaves_it_pulling(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``DefaultLitePullConsumerImpl.start`` on a RUNNING consumer throws "The PullConsumer service state not
    OK, maybe started once" and changes nothing. Before: on a shared instance the second start replaced the running
    consumer's task group and its clean-up stopped and unregistered the running consumer."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "SecondStartLite", queues=1)
    instance = MQClientInstance(ClientConfig(namesrv_addr=ns))
    consumer = LitePullConsumer(
        "cg-second-start-lite", instance=instance, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    async with instance, consumer:
        await consumer.subscribe("SecondStartLite")
        await send_bodies(ns, "SecondStartLite", [b"before"])
        assert [m.body for m in await poll_until(consumer, 1)] == [b"before"]
        with pytest.raises(ClientStateError):
            async with consumer:
                pass
        assert "cg-second-start-lite" in instance.consumers
        await send_bodies(ns, "SecondStartLite", [b"after"])
        assert [m.body for m in await poll_until(consumer, 1)] == [b"after"]


async def test_an_async_send_under_way_when_its_producer_stops_is_called_back_with_the_failure(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An async send still waiting for a broker (one that accepts and never answers) when its producer stops gets its
    callback with an exception, as in Java: the client's shutdown closes the channel and ``failFast``
    (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java, called from
    ``NettyRemotingClient``'s close handler) fails its pending request, whose callback reaches ``SendCallback
    .onException`` (client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java ``sendMessageAsync``).
    Before: a send that had to look its route up first ran as a task of the instance, cancelled at the stop, and its
    callback was never called, so an application waiting for it waited forever."""
    outcomes: list[object] = []
    async with silent_brokers(tmp_path, "StopMidSend") as ns:
        async with Producer("pg-stop-mid-send", ns, send_msg_timeout=600) as producer:
            producer.send_async(Message("StopMidSend", b"x"), outcomes.append)  # its route is not cached yet
            await trio.sleep(1)
            assert outcomes == []
        assert len(outcomes) == 1 and isinstance(outcomes[0], MQClientError), outcomes


async def test_async_sends_retrying_when_their_producer_stops_are_called_back_with_the_failure(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Async sends whose first attempt failed at once (a broker address nobody listens on) go on in a task of the
    instance to the other broker, which accepts and never answers; when the producer stops then, every callback is
    called once, with an exception, as Java's ``failFast`` fails the pending requests of the channels its shutdown
    closes (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java). Before: the retries'
    task was cancelled at the stop and those callbacks were never called."""
    outcomes: list[object] = []
    async with silent_brokers(tmp_path, "StopMidRetry", dead_too=True) as ns:
        async with Producer("pg-stop-mid-retry", ns, send_msg_timeout=600) as producer:
            assert len((await producer.publish_info("StopMidRetry")).message_queues) == 4
            for i in range(4):
                producer.send_async(Message("StopMidRetry", str(i).encode()), outcomes.append)
            await trio.sleep(1)
            assert outcomes == []
        assert len(outcomes) == 4 and all(isinstance(o, MQClientError) for o in outcomes), outcomes


async def test_a_producer_start_cancelled_part_way_leaves_its_group_unregistered_on_a_shared_instance(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A producer start that does not finish leaves the producer as it was, not started, as Java's
    ``DefaultMQProducerImpl.start`` puts its state back to CREATE_JUST when it fails
    (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java), and as our consumers'
    starts undo what they did: here the start is cancelled while its heartbeat waits for a broker that never answers.
    Before: the group stayed registered on the shared instance (heartbeated to every broker as a producer nobody
    runs), and starting the producer again raised "already registered"."""
    async with silent_brokers(tmp_path, "CancelledStart") as ns:
        instance = MQClientInstance(ClientConfig(namesrv_addr=ns))
        async with instance:
            await instance.fetch_route("CancelledStart")  # the silent master is in the broker table
            producer = Producer("pg-cancelled-start", instance=instance)
            with trio.move_on_after(1) as scope:
                async with producer:
                    pytest.fail("the start should not finish: its heartbeat waits for the silent master")
            assert scope.cancelled_caught
            assert "pg-cancelled-start" not in instance.producers
            async with producer:  # started again, this time to the end
                assert "pg-cancelled-start" in instance.producers


async def test_a_request_async_under_way_when_its_producer_stops_is_called_back_with_the_failure(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A ``request_async`` whose request message is still waiting for a broker (one that accepts and never answers)
    when its producer stops gets its callback with an exception, as an async send's does: Java's request sends
    asynchronously, and the failure its shutdown's ``failFast`` gives the pending send
    (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java) reaches
    ``RequestCallback.onException`` through the send callback's ``requestFail``
    (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java). Before: the request
    ran as a task of the instance, cancelled at the stop, and its callback was never called."""
    outcomes: list[object] = []
    async with silent_brokers(tmp_path, "StopMidRequest") as ns:
        async with Producer("pg-stop-mid-request", ns, send_msg_timeout=600) as producer:
            producer.request_async(Message("StopMidRequest", b"x"), outcomes.append, 600)
            await trio.sleep(10)  # past the heartbeat the first request waits for: the request is sent
            assert outcomes == []
        assert len(outcomes) == 1 and isinstance(outcomes[0], MQClientError), outcomes


async def test_coroutine_callbacks_of_async_sends_under_way_when_their_producer_stops_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A coroutine callback of an async send under way at the stop runs too, awaited for at most ``rpc_timeout``, as
    a plain one is called (Java's ``failFast``, remoting/src/main/java/org/apache/rocketmq/remoting/netty/
    NettyRemotingAbstract.java, fails the pending requests of the channels its shutdown closes, and each callback
    runs): sends waiting on the broker that never answers (their request in the connection's table, failed when the
    client closes it) and sends whose retry goes on in a task of the instance (cancelled at the stop). Before: the
    coroutine was started in the task group being cancelled, or closed unstarted once it was gone, so it never got
    past its first await."""
    outcomes: list[object] = []

    async def callback(outcome: object) -> None:
        await trio.sleep(0)
        outcomes.append(outcome)

    async with silent_brokers(tmp_path, "StopMidCoroutine", dead_too=True) as ns:
        async with Producer("pg-stop-mid-coroutine", ns, send_msg_timeout=600) as producer:
            assert len((await producer.publish_info("StopMidCoroutine")).message_queues) == 4
            for i in range(4):
                producer.send_async(Message("StopMidCoroutine", str(i).encode()), callback)
            await trio.sleep(1)
            assert outcomes == []
        assert len(outcomes) == 4 and all(isinstance(o, MQClientError) for o in outcomes), outcomes


async def test_a_second_start_of_a_running_transaction_producer_fails_and_leaves_it_checking(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``DefaultMQProducerImpl.start`` on a RUNNING producer throws "The producer service state not OK, maybe
    started once" (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java), and the
    running transactional producer goes on answering its broker's check-backs. Before: the second start replaced the
    running producer's check-back queue with one it closed on failing, so every later check-back was dropped ("the
    producer is not running") and the half message stayed unknown."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "SecondStartTx", queues=1)
    checked: list[str] = []

    async def unknown(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async def check(msg: MessageExt) -> LocalTransactionState:
        checked.append(msg.transaction_id or "")
        return LocalTransactionState.COMMIT_MESSAGE

    producer = TransactionProducer(
        "pg-second-start-tx", ns, execute_local_transaction=unknown, check_local_transaction=check
    )
    async with producer:
        with pytest.raises(ClientStateError):
            async with producer:
                pass
        sent = await producer.send_message_in_transaction(Message("SecondStartTx", b"half"))
        with trio.move_on_after(300):
            while not checked:
                await trio.sleep(0.5)
    assert checked and set(checked) == {sent.transaction_id}


async def test_coroutine_callbacks_of_answered_async_sends_running_when_their_producer_stops_finish(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A coroutine callback of an async send answered before the stop, still running when its producer stops, gets
    to finish (at most ``rpc_timeout``), as a callback whose send the stop fails does: Java's callbacks run on the
    remoting client's executor, which its shutdown stops with ``ExecutorService.shutdown`` and not ``shutdownNow``
    (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java), so a callback running then
    runs to its end. Both paths: the task-free one and a send to a selector's queue (a task of the instance). Before:
    the stop cancelled the callback at its next await."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "StopMidCallback", queues=1)
    outcomes: list[object] = []

    async def callback(outcome: object) -> None:
        await trio.sleep(1)  # less than rpc_timeout
        outcomes.append(outcome)

    async with Producer("pg-stop-mid-callback", ns) as producer:
        await producer.send(Message("StopMidCallback", b"warm"))  # the route is cached: the next send is task-free
        producer.send_async(Message("StopMidCallback", b"task-free"), callback)
        producer.send_async(Message("StopMidCallback", b"selected"), callback, selector=lambda mqs, m, a: mqs[0])
        await trio.sleep(0.1)  # both answered, their callbacks running
        assert outcomes == []
    assert len(outcomes) == 2 and all(isinstance(o, SendResult) for o in outcomes), outcomes


@pytest.mark.parametrize(
    "setting", ["poll_name_server_interval", "heartbeat_broker_interval", "persist_consumer_offset_interval"]
)
@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_a_client_timer_interval_not_above_zero_is_refused(setting: str, seconds: float) -> None:
    """MQClientInstance.startScheduledTask (client/src/main/java/org/apache/rocketmq/client/impl/factory/
    MQClientInstance.java) runs the route refresh, the heartbeat and the offset persist with scheduleAtFixedRate, which
    refuses a period not above 0, so a Java client so configured fails to start. Ours took it, and its timer looped
    without pause: an offset persist interval of 0 sent UPDATE_CONSUMER_OFFSET for every queue on every loop turn."""
    with pytest.raises(ValueError, match=setting):
        ClientConfig(namesrv_addr="127.0.0.1:9876", **{setting: seconds})
