"""Client namespaces (RocketMQ 4.9.8's ``ClientConfig.namespace`` and ``NamespaceUtil``): a namespaced client puts
``ns%Topic`` / ``ns%Group`` on the wire and shows the application its own names, so a namespaced Java client (whose
wire names a raw request spells out here) and ours share topics, and two namespaces on one broker stay apart.

The wire-level tests run against the threaded embedded cluster over real sockets; the retry test runs in virtual time
(the retry's 10 s delay on the broker's store clock)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import anyio
import pytest
import trio

from broker.embedded import EmbeddedCluster
from client import api, sync
from client.admin import Admin
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import TopicRouteNotFoundError
from client.hooks import SendMessageContext
from client.message import Message, MessageExt
from client.mqadmin_trace import find_traces
from client.namespace import instance_id_from_endpoint, namespace_of, strip_namespace, unwrap, wrap
from client.producer import Producer
from client.request_reply import create_reply_message
from client.trace import TraceType
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic, poll_until
from tests.semantics.helpers import use_virtual_store_clock
from tests.threaded_cluster import ThreadedCluster

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


# -- names (NamespaceUtil) ---------------------------------------------------------------------------------------------


def test_wrap_puts_the_namespace_after_a_retry_or_dlq_prefix_and_never_on_system_names() -> None:
    assert wrap("ns", "Topic") == "ns%Topic"
    assert wrap("ns", "%RETRY%Group") == "%RETRY%ns%Group"
    assert wrap("ns", "%DLQ%Group") == "%DLQ%ns%Group"
    assert wrap("ns", "ns%Topic") == "ns%Topic"  # already under it
    assert wrap("ns", "%RETRY%ns%Group") == "%RETRY%ns%Group"
    for system in ("TBW102", "RMQ_SYS_TRACE_TOPIC", "rmq_sys_wheel_timer", "SCHEDULE_TOPIC_XXXX", "CID_RMQ_SYS_X"):
        assert wrap("ns", system) == system
    assert wrap(None, "Topic") == wrap("", "Topic") == "Topic"


def test_unwrap_strips_only_the_clients_own_namespace() -> None:
    assert unwrap("ns", "ns%Topic") == "Topic"
    assert unwrap("ns", "%RETRY%ns%Group") == "%RETRY%Group"
    assert unwrap("ns", "%DLQ%ns%Group") == "%DLQ%Group"
    assert unwrap("ns", "other%Topic") == "other%Topic"
    assert unwrap("ns", "Topic") == "Topic"
    assert unwrap(None, "ns%Topic") == "ns%Topic"
    assert strip_namespace("other%Topic") == "Topic"
    assert strip_namespace("%RETRY%other%G") == "%RETRY%G"
    assert namespace_of("%DLQ%ns%Group") == "ns"
    assert namespace_of("Topic") == ""


def test_the_namespace_comes_from_an_instance_endpoint_when_none_is_set() -> None:
    """Java's getNamespace: NameServerAddressUtils.parseInstanceIdFromEndpoint of an MQ_INST_xxx_yyy endpoint."""
    endpoint = "http://MQ_INST_1234_abcd.cn-hangzhou.mq.aliyuncs.com:80"
    assert instance_id_from_endpoint(endpoint) == "MQ_INST_1234_abcd"
    assert ClientConfig(namesrv_addr=endpoint).resolved_namespace == "MQ_INST_1234_abcd"
    assert ClientConfig(namesrv_addr=endpoint, namespace="mine").resolved_namespace == "mine"
    assert ClientConfig(namesrv_addr="127.0.0.1:9876").resolved_namespace is None
    assert instance_id_from_endpoint("MQ_INST_nounderscore.host:80") is None


class _Recorder:
    """A send hook keeping every context it is given (Java's SendMessageContext carries the namespace)."""

    def __init__(self, into: list[SendMessageContext]) -> None:
        self.into = into

    def hook_name(self) -> str:
        return "recorder"

    def send_message_before(self, context: SendMessageContext) -> None:
        self.into.append(context)

    def send_message_after(self, context: SendMessageContext) -> None:
        pass


# -- on the wire ---------------------------------------------------------------------------------------------------


async def _raw_java_send(cluster: ThreadedCluster, topic: str, group: str, body: bytes) -> None:
    """SEND_MESSAGE_V2 as a Java client with a namespace writes it: the wrapped topic and group in the header."""
    fields = {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "0",
        "h": "0",
        "i": "UNIQ_KEY\x01raw-java-1\x02WAIT\x01true\x02",
        "j": "0",
        "k": "false",
    }
    async with RemotingClient() as remoting:
        await api.send_message(remoting, cluster.broker_addr, "broker-a", fields, body, 3.0, uniq_id="raw-java-1")


@pytest.mark.anyio
async def test_a_raw_namespaced_java_send_reaches_our_consumer_of_the_same_namespace(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "ns1%Orders", queues=1)
    await _raw_java_send(cluster, "ns1%Orders", "ns1%pg-java", b"from-java")
    got: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg", cluster.namesrv_addr, namespace="ns1", consume_from_where=FIRST)
    consumer.subscribe("Orders")
    consumer.register_message_listener(listener)
    async with consumer:
        with anyio.fail_after(HANG_GUARD):
            while not got:
                await anyio.sleep(0.05)
        assert consumer.group == "ns1%cg"
        assert set(consumer.subscribed_topics()) == {"ns1%Orders", "%RETRY%ns1%cg"}
    assert [(m.topic, m.body) for m in got] == [("Orders", b"from-java")]  # the listener sees its own name


@pytest.mark.anyio
async def test_our_namespaced_producer_writes_the_wrapped_topic_and_returns_the_plain_one(
    cluster: ThreadedCluster,
) -> None:
    """What a namespaced Java consumer pulls: the topic ``ns1%Orders`` (read here by a consumer without a namespace,
    which names queues as the wire does); the SendResult names ``Orders`` (Java's processSendResponse)."""
    await create_topic(cluster.namesrv_addr, "ns1%Orders", queues=1)
    hooked: list[SendMessageContext] = []
    async with Producer("pg", cluster.namesrv_addr, namespace="ns1") as producer:
        producer.register_send_message_hook(_Recorder(hooked))
        assert producer.group == "ns1%pg"
        msg = Message("Orders", b"from-python")
        result = await producer.send(msg)
        assert msg.topic == "Orders"  # the application's message is left as it was
        batch = await producer.send_batch([Message("Orders", b"b1"), Message("Orders", b"b2")])
        queued = await producer.send(Message("Orders", b"q"), queue=MessageQueue("Orders", "broker-a", 0))
        batch += await producer.send_batch([Message("Orders", b"qb")], queue=MessageQueue("Orders", "broker-a", 0))
        sent: list[object] = []
        producer.send_async(Message("Orders", b"async"), sent.append)
        producer.send_batch_async([Message("Orders", b"ab")], sent.append)
        with anyio.fail_after(HANG_GUARD):
            while len(sent) < 2:
                await anyio.sleep(0.02)
        await producer.send_oneway(Message("Orders", b"oneway"))
        selected: list[str] = []

        def pick(mqs: Sequence[MessageQueue], m: Message, arg: object) -> MessageQueue:
            selected.append(m.topic)  # Java's sendSelectImpl hands the selector the application's topic
            return mqs[0]

        picked = await producer.send(Message("Orders", b"selected"), selector=pick)
    assert result.topic == queued.topic == picked.topic == "Orders"
    assert selected == ["Orders"]
    assert [r.topic for r in batch] == ["Orders", "Orders"]
    assert [getattr(r, "topic", r) for r in sent] == ["Orders", "Orders"]
    async with LitePullConsumer("cg-raw", cluster.namesrv_addr, consume_from_where=FIRST) as raw:
        await raw.assign([MessageQueue("ns1%Orders", "broker-a", 0)])
        pulled = await poll_until(raw, 9)
    # a oneway send is not waited for: the next send may be stored before it
    assert sorted(m.body for m in pulled) == sorted(
        [b"from-python", b"b1", b"b2", b"q", b"qb", b"async", b"ab", b"oneway", b"selected"]
    )
    assert {m.topic for m in pulled} == {"ns1%Orders"}
    assert {(c.namespace, c.producer_group, c.mq.topic) for c in hooked} == {("ns1", "ns1%pg", "ns1%Orders")}


@pytest.mark.anyio
async def test_two_namespaces_with_the_same_topic_name_stay_apart(cluster: ThreadedCluster) -> None:
    for ns in ("blue", "green"):
        await create_topic(cluster.namesrv_addr, f"{ns}%Shared", queues=1)
        # the keyword, or the client config's setting as Java's ClientConfig.setNamespace
        options = {"namespace": ns} if ns == "blue" else {"config": ClientConfig(namespace=ns)}
        async with Producer("pg", cluster.namesrv_addr, **options) as producer:  # type: ignore[arg-type]
            assert producer.namespace == ns
            await producer.send(Message("Shared", ns.encode()))
    for ns in ("blue", "green"):
        async with LitePullConsumer("cg", cluster.namesrv_addr, namespace=ns, consume_from_where=FIRST) as consumer:
            queues = await consumer.fetch_message_queues("Shared")
            assert queues == [MessageQueue("Shared", "broker-a", 0)]  # the application's names
            await consumer.assign(queues)
            got = await poll_until(consumer, 1)
            await consumer.commit()
            assert await consumer.committed(queues[0]) == 1
        assert [(m.topic, m.body) for m in got] == [("Shared", ns.encode())]


@pytest.mark.anyio
async def test_a_namespaced_lite_pull_subscription_and_transaction(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "ns2%Tx", queues=1)
    executed: list[str] = []

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        executed.append(msg.topic)
        return LocalTransactionState.COMMIT_MESSAGE

    def check(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    producer = TransactionProducer(
        "tpg",
        cluster.namesrv_addr,
        namespace="ns2",
        execute_local_transaction=execute,
        check_local_transaction=check,
    )
    async with producer:
        result = await producer.send_message_in_transaction(Message("Tx", b"tx"))
    assert executed == ["Tx"]
    assert result.send_result.topic == "Tx"
    async with LitePullConsumer("cg", cluster.namesrv_addr, namespace="ns2", consume_from_where=FIRST) as consumer:
        await consumer.subscribe("Tx")
        got = await poll_until(consumer, 1)
    assert [(m.topic, m.body) for m in got] == [("Tx", b"tx")]


# -- retry under a namespace ---------------------------------------------------------------------------------------


async def test_a_failed_message_comes_back_through_the_namespaced_retry_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The send-back goes to ``%RETRY%ns%cg`` (the broker makes it from the wrapped group), the listener sees the
    message again under its plain topic, and past max_reconsume_times it lands in ``%DLQ%ns%cg``."""
    use_virtual_store_clock(embedded_cluster)
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("ns3%Jobs", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg", embedded_cluster.namesrv_addr, namespace="ns3") as producer:
        await producer.send(Message("Jobs", b"job"))
    seen: list[tuple[str, int]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend((m.topic, m.reconsume_times) for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    consumer = PushConsumer(
        "cg", embedded_cluster.namesrv_addr, namespace="ns3", consume_from_where=FIRST, max_reconsume_times=1
    )
    consumer.subscribe("Jobs")
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(120)  # the first retry after 10 s, the second failure goes to the DLQ
    assert seen == [("Jobs", 0), ("Jobs", 1)]
    context = embedded_cluster.controller.context
    assert context.topics.get("%RETRY%ns3%cg") is not None
    assert context.topics.get("%DLQ%ns3%cg") is not None
    assert context.store.max_offset_in_queue("%DLQ%ns3%cg", 0) == 1


# -- request-reply and the blocking facade -------------------------------------------------------------------------


async def test_a_namespaced_request_gets_its_reply_from_a_namespaced_replier(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The request goes to ``ns4%Ask``; the replier's producer wraps the reply topic as Java's does, the broker still
    pushes the reply to the requester, which shows it without the namespace (ClientRemotingProcessor)."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("ns4%Ask", read_queue_nums=1, write_queue_nums=1)
    asked: list[str] = []
    async with Producer("replier-pg", embedded_cluster.namesrv_addr, namespace="ns4") as replier:

        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            for msg in msgs:
                asked.append(msg.topic)
                await replier.send(create_reply_message(msg, b"pong"))
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("replier-cg", embedded_cluster.namesrv_addr, namespace="ns4")
        consumer.subscribe("Ask")
        consumer.register_message_listener(listener)
        async with consumer, Producer("requester-pg", embedded_cluster.namesrv_addr, namespace="ns4") as requester:
            reply = await requester.request(Message("Ask", b"ping"), timeout=3.0)
    assert asked == ["Ask"]
    assert reply.body == b"pong"
    assert not reply.topic.startswith("ns4%"), reply.topic


def test_the_blocking_facades_take_the_namespace(cluster: ThreadedCluster) -> None:
    trio.run(create_topic, cluster.namesrv_addr, "ns5%Sync", 1)
    with sync.Producer("pg", cluster.namesrv_addr, namespace="ns5") as producer:
        assert producer.send(Message("Sync", b"s")).topic == "Sync"
    with sync.LitePullConsumer("cg", cluster.namesrv_addr, namespace="ns5", consume_from_where=FIRST) as consumer:
        consumer.subscribe("Sync")
        got: list[MessageExt] = []
        for _ in range(100):
            got.extend(consumer.poll(timeout=0.5))
            if got:
                break
    assert [(m.topic, m.body) for m in got] == [("Sync", b"s")]


async def test_trace_records_of_namespaced_clients_name_group_and_topic_without_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's SendMessageTraceHookImpl and ConsumeMessageTraceHookImpl strip the namespace from the group and the
    topic; the records go to RMQ_SYS_TRACE_TOPIC, a system topic, never wrapped."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("ns6%Traced", read_queue_nums=1, write_queue_nums=1)
    done = trio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    ns = embedded_cluster.namesrv_addr
    consumer = PushConsumer("tcg", ns, namespace="ns6", enable_msg_trace=True, consume_from_where=FIRST)
    consumer.subscribe("Traced")
    consumer.register_message_listener(listener)
    async with consumer, Producer("tpg", ns, namespace="ns6", enable_msg_trace=True) as producer:
        sent = await producer.send(Message("Traced", b"t"))
        with trio.fail_after(60):
            await done.wait()
        want = {TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter}
        async with Admin(ns) as admin:
            with trio.fail_after(60):
                while True:
                    with contextlib.suppress(TopicRouteNotFoundError):  # made by the first trace batch
                        views = await find_traces(admin, sent.msg_id, None)
                        if {v.record.type for v in views} >= want:
                            break
                    await trio.sleep(0.2)
    by_type = {v.record.type: v.record for v in views}
    assert (by_type[TraceType.Pub].group, by_type[TraceType.Pub].topic) == ("tpg", "Traced")
    assert by_type[TraceType.SubBefore].group == by_type[TraceType.SubAfter].group == "tcg"


@pytest.mark.anyio
async def test_an_orderly_namespaced_listener_sees_its_plain_topic(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "ns7%Ordered", queues=1)
    async with Producer("pg", cluster.namesrv_addr, namespace="ns7") as producer:
        for body in (b"1", b"2", b"3"):
            await producer.send(Message("Ordered", body))
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        got.extend(msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg", cluster.namesrv_addr, namespace="ns7", consume_from_where=FIRST)
    consumer.subscribe("Ordered")
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        with anyio.fail_after(HANG_GUARD):
            while len(got) < 3:
                await anyio.sleep(0.05)
    assert [(m.topic, m.body) for m in got] == [("Ordered", b"1"), ("Ordered", b"2"), ("Ordered", b"3")]


async def test_a_namespaced_transaction_check_back_sees_the_plain_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker asks the wrapped producer group; the check sees the topic without the namespace
    (ClientRemotingProcessor.checkTransactionState), and the committed message reaches the namespace's consumers."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("ns8%TxCheck", read_queue_nums=1, write_queue_nums=1)
    checked: list[str] = []

    def unknown(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    def check(msg: MessageExt) -> LocalTransactionState:
        checked.append(msg.topic)
        return LocalTransactionState.COMMIT_MESSAGE

    ns = embedded_cluster.namesrv_addr
    producer = TransactionProducer(
        "tpg", ns, namespace="ns8", execute_local_transaction=unknown, check_local_transaction=check
    )
    async with producer:
        await producer.send_message_in_transaction(Message("TxCheck", b"later"))
        with trio.fail_after(300):
            while not checked:
                await trio.sleep(0.5)
    assert set(checked) == {"TxCheck"}
    async with LitePullConsumer("cg", ns, namespace="ns8", consume_from_where=FIRST) as consumer:
        await consumer.subscribe("TxCheck")
        with trio.fail_after(60):
            got: list[MessageExt] = []
            while not got:
                got = await consumer.poll(1.0)
    assert [(m.topic, m.body) for m in got] == [("TxCheck", b"later")]


@pytest.mark.anyio
async def test_a_namespaced_selector_sees_queues_named_by_the_applications_topic(cluster: ThreadedCluster) -> None:
    """Java's sendSelectImpl hands the selector ``parsePublishMessageQueues``'s list, the queues' topics without the
    namespace like the message's, so a selector can match a queue's topic to the message's; its pick is wrapped."""
    await create_topic(cluster.namesrv_addr, "ns9%Picked", queues=2)
    seen: list[tuple[str, set[str]]] = []

    def pick(mqs: Sequence[MessageQueue], m: Message, arg: object) -> MessageQueue:
        seen.append((m.topic, {mq.topic for mq in mqs}))
        return next(mq for mq in mqs if mq.topic == m.topic and mq.queue_id == arg)

    async with Producer("pg", cluster.namesrv_addr, namespace="ns9") as producer:
        result = await producer.send(Message("Picked", b"sync"), selector=pick, arg=1)
        await producer.send_oneway(Message("Picked", b"oneway"), selector=pick, arg=1)
    assert (result.topic, result.queue_id) == ("Picked", 1)
    assert seen == [("Picked", {"Picked"})] * 2


async def test_end_transaction_trace_records_name_group_and_topic_without_the_namespace(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's EndTransactionTraceHookImpl strips the namespace from the producer group and the message's topic, for the
    end after the local transaction and for the one answering a check-back (whose message names its REAL_TOPIC)."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("ns10%TxTraced", read_queue_nums=1, write_queue_nums=1)
    checked: list[str] = []

    def unknown(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    def check(msg: MessageExt) -> LocalTransactionState:
        checked.append(msg.topic)
        return LocalTransactionState.COMMIT_MESSAGE

    ns = embedded_cluster.namesrv_addr
    producer = TransactionProducer(
        "tpg",
        ns,
        namespace="ns10",
        execute_local_transaction=unknown,
        check_local_transaction=check,
        enable_msg_trace=True,
    )
    async with producer:
        sent = await producer.send_message_in_transaction(Message("TxTraced", b"t"))
        with trio.fail_after(300):
            while not checked:
                await trio.sleep(0.5)
        async with Admin(ns) as admin:
            with trio.fail_after(60):
                while True:
                    with contextlib.suppress(TopicRouteNotFoundError):  # made by the first trace batch
                        views = await find_traces(admin, sent.send_result.msg_id, None)
                        ends = [v.record for v in views if v.record.type is TraceType.EndTransaction]
                        if {r.from_transaction_check for r in ends} == {False, True}:
                            break
                    await trio.sleep(0.2)
    assert {(r.group, r.topic) for r in ends} == {("tpg", "TxTraced")}


def test_a_blank_namespace_given_to_a_client_falls_back_to_the_instance_endpoint() -> None:
    """Java's constructors (``DefaultMQProducer(namespace, group)``, ``DefaultMQPushConsumer(namespace, ...)``) store
    the namespace as given and ``ClientConfig.getNamespace`` only returns it when it is not empty: a blank one falls
    back to the instance id of an ``MQ_INST_xxx_yyy`` name server endpoint."""
    endpoint = "http://MQ_INST_1234_abcd.cn-hangzhou.mq.aliyuncs.com:80"
    assert Producer("pg", endpoint, namespace="").namespace == "MQ_INST_1234_abcd"
    assert PushConsumer("cg", endpoint, namespace="").namespace == "MQ_INST_1234_abcd"
    assert LitePullConsumer("cg", endpoint, namespace="").namespace == "MQ_INST_1234_abcd"
    assert Producer("pg", endpoint, namespace="mine").namespace == "mine"


async def test_the_trace_producer_under_an_instance_endpoint_takes_the_endpoints_namespace() -> None:
    """Java's AsyncTraceDispatcher starts its own DefaultMQProducer with the host's name server address and no
    namespace set, so its ``getNamespace`` is the instance id of an ``MQ_INST_xxx_yyy`` endpoint and every send wraps a
    customized trace topic under it (``withNamespace``); the host's own namespace is not the trace producer's. It sent
    the trace topic unwrapped."""
    endpoint = "http://MQ_INST_1234_abcd.cn-hangzhou.mq.aliyuncs.com:80"
    with trio.fail_after(HANG_GUARD):
        async with Producer(
            "pg", endpoint, namespace="mine", enable_msg_trace=True, customized_trace_topic="MyTrace"
        ) as producer:
            assert producer.trace is not None
            inner = producer.trace._producer
            assert inner is not None
            assert wrap(inner.namespace, "MyTrace") == "MQ_INST_1234_abcd%MyTrace"
        async with Producer("pg", "127.0.0.1:9876", namespace="mine", enable_msg_trace=True) as producer:
            assert producer.trace is not None and producer.trace._producer is not None
            assert producer.trace._producer.namespace is None
