"""Where the producer differed from RocketMQ 4.9.8's DefaultMQProducerImpl, Validators, MessageClientIDSetter and
MessageBatch (found by a review, each test failing on the code before): topics Java refuses before sending, a user
property named like ``MSG_TYPE`` or ``TRAN_MSG`` taken for the real one (a reply send, a transactional trace record),
a selector's missing queue, a queue of another topic, a UNIQ_KEY the message carries, a batch's WAIT, a refusal kept
from the latency fault table. Embedded broker, real sockets."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.config import ClientConfig
from client.errors import MessageValidationError, MQBrokerError, MQClientError, SendFailedError
from client.instance import new_instance
from client.message import Message, SendStatus
from client.producer import Producer
from client.trace import MessageType, TraceType
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import MessageExt, decode_record
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.processor import Processor
from remoting.server import RemotingServer
from tests.client.test_master_watch import register_as_master
from tests.client.test_producer_timeout_budget import SilentBroker
from tests.client.test_trace import _create, _traces
from tests.conftest import SMALL_STORE


@pytest.mark.parametrize(
    "topic",
    ["Bad Topic!", "T" * 128, "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"],
    ids=["illegal-characters", "longer-than-127", "schedule-topic", "half-topic"],
)
async def test_a_topic_java_refuses_is_refused_before_anything_is_sent(
    embedded_cluster: EmbeddedCluster, topic: str
) -> None:
    """Java's ``Validators.checkMessage`` (checkTopic + isNotAllowedSendTopic) throws MQClientException before any
    request; the broker never sees the message (before: sent three times, the broker's refusals reported)."""
    async with Producer("pg-validate", embedded_cluster.namesrv_addr) as producer:
        with pytest.raises(MessageValidationError):
            await producer.send(Message(topic, b"x"))


async def test_a_user_property_ending_in_msg_type_with_value_reply_is_an_ordinary_send(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """Java's ``sendKernelImpl`` sends SEND_REPLY_MESSAGE_V2 only when the ``MSG_TYPE`` property *equals* ``reply``
    (``MessageConst.PROPERTY_MESSAGE_TYPE``, ``MixAll.REPLY_MESSAGE_FLAG``). Before, a substring test of the encoded
    properties turned a message with a user property such as ``ORDER_MSG_TYPE=reply`` into a reply: the broker's reply
    processor answered SYSTEM_ERROR (no REPLY_TO_CLIENT), the producer retried it, and every attempt stored a copy."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("Orders", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-orders", embedded_cluster.namesrv_addr) as producer:
        result = await producer.send(Message("Orders", b"order-1", properties={"ORDER_MSG_TYPE": "reply"}))
    stored = embedded_cluster.controller.context.store.get("Orders", 0, 0, 32).messages
    assert result.queue_offset == 0 and len(stored) == 1


async def test_a_user_property_ending_in_tran_msg_does_not_make_a_pub_record_transactional(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java sets the Pub record's msgType from ``msg.getProperty(TRAN_MSG)`` equal to ``"true"``
    (DefaultMQProducerImpl.sendKernelImpl -> context.setMsgType(Trans_Msg_Half)). Before, a substring test of
    ``TRAN_MSG\\x01true`` in the encoded properties traced an ordinary message with a user property
    ``X_TRAN_MSG=true`` as a half (transactional) message."""
    await _create(embedded_cluster, "PlainTraced")
    async with Producer("plain-traced-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True) as producer:
        sent = await producer.send(Message("PlainTraced", b"plain", properties={"X_TRAN_MSG": "true"}))
        views = await _traces(embedded_cluster, sent.msg_id, None, {TraceType.Pub})
    [pub] = [v.record for v in views if v.record.type is TraceType.Pub]
    assert pub.msg_type is MessageType.Normal_Msg


@pytest.mark.parametrize(
    ("props", "transactional"),
    [({"DELAY": "0"}, False), ({"__STARTDELIVERTIME": "1700000000000"}, False), ({"__STARTDELIVERTIME": "1"}, True)],
    ids=["delay-0", "start-deliver-time", "transactional-start-deliver-time"],
)
async def test_a_pub_record_is_delayed_when_the_message_has_a_delay_or_start_deliver_time_property(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    props: dict[str, str],
    transactional: bool,
) -> None:
    """DefaultMQProducerImpl.sendKernelImpl sets the Pub record's msgType to Delay_Msg when the message has a
    ``__STARTDELIVERTIME`` or a ``DELAY`` property, whatever its value, after (so over) Trans_Msg_Half. Before, only
    a ``DELAY`` other than 0 made it Delay_Msg, ``__STARTDELIVERTIME`` never, a half message never."""
    await _create(embedded_cluster, "DelayTraced")
    msg = Message("DelayTraced", b"later", properties=props)
    if transactional:

        async def commit(msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        async with TransactionProducer(
            "delay-traced-tx-pg",
            embedded_cluster.namesrv_addr,
            execute_local_transaction=commit,
            check_local_transaction=commit,
            enable_msg_trace=True,
        ) as tx_producer:
            msg_id = (await tx_producer.send_message_in_transaction(msg)).send_result.msg_id
            views = await _traces(embedded_cluster, msg_id, None, {TraceType.Pub})
    else:
        async with Producer("delay-traced-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True) as producer:
            msg_id = (await producer.send(msg)).msg_id
            views = await _traces(embedded_cluster, msg_id, None, {TraceType.Pub})
    [pub] = [v.record for v in views if v.record.type is TraceType.Pub]
    assert pub.msg_type is MessageType.Delay_Msg


async def test_the_name_server_given_beside_a_config_is_used(embedded_cluster: EmbeddedCluster) -> None:
    """``Producer(group, addr, config=ClientConfig(access_key=...))`` (the README's ACL form) used the config's default
    127.0.0.1:9876 and dropped ``addr``; a config naming name servers of its own keeps them."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("WithConfig", read_queue_nums=1, write_queue_nums=1)
    config = ClientConfig(instance_name="with-config")
    async with Producer("pg-config", embedded_cluster.namesrv_addr, config=config) as producer:
        assert (await producer.send(Message("WithConfig", b"x"))).queue_offset == 0
    own = ClientConfig(namesrv_addr="10.0.0.1:9876;10.0.0.2:9876")
    assert new_instance(own, embedded_cluster.namesrv_addr).config.namesrv_addr == ("10.0.0.1:9876", "10.0.0.2:9876")


async def _create_queues(cluster: EmbeddedCluster, topic: str, queues: int) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def _stored(cluster: EmbeddedCluster, topic: str, queues: int) -> list[MessageExt]:
    store = cluster.controller.context.store
    return [decode_record(m) for q in range(queues) for m in store.get(topic, q, 0, 64).messages]


async def _send(producer: Producer, msg: Message, mode: str, **where: object) -> object:
    """The outcome of one send in ``mode`` (send / send_async / send_oneway): a SendResult, None or the exception."""
    try:
        if mode == "send":
            return await producer.send(msg, **where)  # type: ignore[arg-type]
        if mode == "send_oneway":
            return await producer.send_oneway(msg, **where)  # type: ignore[arg-type]
    except Exception as exc:
        return exc
    done = trio.Event()
    outcome: list[object] = []

    def callback(result: object) -> None:
        outcome.append(result)
        done.set()

    try:
        producer.send_async(msg, callback, **where)  # type: ignore[arg-type]
    except Exception as exc:
        return exc
    await done.wait()
    return outcome[0]


def _no_queue(queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    return None  # type: ignore[return-value]


def _broken(queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    raise KeyError(arg)


@pytest.mark.parametrize("mode", ["send", "send_async", "send_oneway"])
@pytest.mark.parametrize("selector", [_no_queue, _broken], ids=["returns-none", "raises"])
async def test_a_selector_that_picks_no_queue_is_refused_and_nothing_is_sent(
    embedded_cluster: EmbeddedCluster, mode: str, selector: object
) -> None:
    """sendSelectImpl throws MQClientException for a selector that returns null ("select message queue return null.")
    or throws ("select message queue threw exception."). Before, send and send_async fell back to round robin with
    retries (an ordered message landed on an arbitrary queue) and send_oneway died with AttributeError."""
    await _create_queues(embedded_cluster, "Sel", 2)
    async with Producer("pg-sel", embedded_cluster.namesrv_addr) as producer:
        outcome = await _send(producer, Message("Sel", b"ordered"), mode, selector=selector, arg="order-1")
    assert isinstance(outcome, MQClientError), outcome
    assert _stored(embedded_cluster, "Sel", 2) == []


@pytest.mark.parametrize("mode", ["send", "send_async"])
async def test_a_queue_of_another_topic_is_refused_and_nothing_is_sent(
    embedded_cluster: EmbeddedCluster, mode: str
) -> None:
    """send(msg, mq) and send(msg, mq, callback) throw "message's topic not equal mq's topic" (to the callback for the
    async one). Before, the message was stored in its own topic at the other topic's queue id. (Java's
    sendOneway(msg, mq) does not compare the topics, nor does ours.)"""
    await _create_queues(embedded_cluster, "Mine", 2)
    await _create_queues(embedded_cluster, "Other", 2)
    async with Producer("pg-mq", embedded_cluster.namesrv_addr) as producer:
        outcome = await _send(producer, Message("Mine", b"x"), mode, queue=MessageQueue("Other", "broker-a", 1))
    assert isinstance(outcome, MQClientError), outcome
    assert _stored(embedded_cluster, "Mine", 2) == [] and _stored(embedded_cluster, "Other", 2) == []


async def test_a_uniq_key_the_message_already_carries_is_kept(embedded_cluster: EmbeddedCluster) -> None:
    """MessageClientIDSetter.setUniqID sets UNIQ_KEY only when the message has none, for a single send and for each
    message of a batch (DefaultMQProducer.batch); the SendResult's msgId is that key. Before, a new one replaced it."""
    await _create_queues(embedded_cluster, "Uniq", 1)
    key, batch_key = "7F00000100002A9F0000000000000001", "7F00000100002A9F0000000000000002"
    async with Producer("pg-uniq", embedded_cluster.namesrv_addr) as producer:
        single = await producer.send(Message("Uniq", b"one", properties={"UNIQ_KEY": key}))
        [batch] = await producer.send_batch(
            [Message("Uniq", b"b0", properties={"UNIQ_KEY": batch_key}), Message("Uniq", b"b1")]
        )
    stored = _stored(embedded_cluster, "Uniq", 1)
    assert single.msg_id == key and stored[0].properties["UNIQ_KEY"] == key
    assert batch.msg_id.split(",")[0] == batch_key and stored[1].properties["UNIQ_KEY"] == batch_key
    assert batch.msg_id.split(",")[1] == stored[2].properties["UNIQ_KEY"] != batch_key


async def test_a_batch_of_messages_that_do_not_wait_for_the_store_does_not_wait(tmp_path: Path) -> None:
    """MessageBatch.generateFromList gives the batch its first message's waitStoreMsgOK and refuses a batch whose
    messages disagree; the broker waits for a slave only ``if (messageExt.isWaitStoreMsgOK())``. Before, a batch always
    carried WAIT=true: on a SYNC_MASTER without a slave a batch of WAIT=false messages got SLAVE_NOT_AVAILABLE (a single
    such message gets SEND_OK), and a mixed batch was sent."""
    async with EmbeddedCluster(tmp_path / "c", broker_role="SYNC_MASTER", **SMALL_STORE) as cluster:
        await _create_queues(cluster, "NoWait", 2)
        async with Producer("pg-nowait", cluster.namesrv_addr) as producer:
            single = await producer.send(Message("NoWait", b"one", wait_store_msg_ok=False))
            [batch] = await producer.send_batch([Message("NoWait", b"b", wait_store_msg_ok=False) for _ in range(3)])
            assert single.send_status is SendStatus.SEND_OK
            assert batch.send_status is SendStatus.SEND_OK
            with pytest.raises(MessageValidationError):
                await producer.send_batch([Message("NoWait", b"w"), Message("NoWait", b"n", wait_store_msg_ok=False)])


class BusyBroker:
    """A master that refuses every send with SYSTEM_BUSY (a broker in flow control), SUCCESS for anything else."""

    def __init__(self) -> None:
        self.sends = 0

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE):
            self.sends += 1
            return request.response(ResponseCode.SYSTEM_BUSY, "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control")
        return request.response(ResponseCode.SUCCESS)


@contextlib.asynccontextmanager
async def _beside_a_busy_broker(cluster: EmbeddedCluster, topic: str) -> AsyncIterator[tuple[BusyBroker, Producer]]:
    """A producer with ``send_latency_fault_enable`` and ``topic``'s two queues on each of two masters: the cluster's
    broker-a and a :class:`BusyBroker` registered as broker-b."""
    await _create_queues(cluster, topic, 2)
    busy = BusyBroker()
    dispatcher = Dispatcher()
    dispatcher.set_default(busy, ProcessorPool("busy", 2, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, cluster.namesrv_addr, f"{host}:{port}", topic, "broker-b")
        async with Producer(f"pg-{topic}", cluster.namesrv_addr, send_latency_fault_enable=True) as producer:
            assert len((await producer.publish_info(topic)).route.broker_datas) == 2
            yield busy, producer
        nursery.cancel_scope.cancel()


async def _refusals(producer: Producer, topic: str, mode: str, sends: int = 12) -> int:
    """How many of ``sends`` round-robin sends in ``mode`` the busy broker refused."""
    refused = 0
    for i in range(sends):
        outcome = await _send(producer, Message(topic, f"m{i}".encode()), mode)
        if isinstance(outcome, MQBrokerError):
            assert outcome.code == ResponseCode.SYSTEM_BUSY
            refused += 1
    return refused


@pytest.mark.parametrize("mode", ["send", "send_async"])
async def test_with_send_latency_fault_enable_a_busy_broker_is_avoided_after_its_refusal(
    embedded_cluster: EmbeddedCluster, mode: str
) -> None:
    """sendDefaultImpl calls ``updateFaultItem(brokerName, ..., true)`` for every broker refusal, retried or not
    (sendMessageAsync likewise): the broker is isolated for 10 minutes. Before, a refusal that is not retried
    (SYSTEM_BUSY) was raised before the fault table heard of it, and half of twelve sends went to the busy broker."""
    async with _beside_a_busy_broker(embedded_cluster, "Busy") as (busy, producer):
        refused = await _refusals(producer, "Busy", mode)
    assert (refused, busy.sends) == (1, 1)


def _to_busy(queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    return next(q for q in queues if q.broker_name == "broker-b")


@pytest.mark.parametrize(
    ("mode", "where"),
    [("send_async", "queue"), ("send_async", "selector"), ("request", "queue"), ("send", "queue")],
    ids=["async-queue", "async-selector", "request-queue", "sync-queue"],
)
async def test_an_async_send_to_a_chosen_queue_reports_its_refusal_to_the_fault_table(
    embedded_cluster: EmbeddedCluster, mode: str, where: str
) -> None:
    """MQClientAPIImpl.sendMessageAsync serves every async send, also send(msg, mq, callback), send(msg, selector, arg,
    callback) and request(msg, mq): a refusal calls ``updateFaultItem(brokerName, ..., true)``, isolating the broker.
    sendMessageSync does not: a sync send(msg, mq) leaves the table as it was, and the busy broker is found by the
    next round-robin send. Before, an async send to a chosen queue never reported, and about half of the later sends
    went to the busy broker."""
    topic = "BusyQ"
    async with _beside_a_busy_broker(embedded_cluster, topic) as (busy, producer):
        chosen = {"queue": MessageQueue(topic, "broker-b", 0)} if where == "queue" else {"selector": _to_busy}
        msg = Message(topic, b"first")
        if mode == "request":
            with pytest.raises(MQClientError) as caught:
                await producer.request(msg, 3.0, **chosen)  # type: ignore[arg-type]
            outcome: object = caught.value.__cause__
        else:
            outcome = await _send(producer, msg, mode, **chosen)
        assert isinstance(outcome, MQBrokerError) and outcome.code == ResponseCode.SYSTEM_BUSY
        assert producer.fault.is_available("broker-b") is (mode == "send")
        refused_later = await _refusals(producer, topic, "send")
    assert (refused_later, busy.sends) == ((1, 2) if mode == "send" else (0, 1))


async def test_a_batch_of_messages_whose_properties_say_wait_false_does_not_wait(tmp_path: Path) -> None:
    """What a message sends as WAIT is its ``WAIT`` property unless ``wait_store_msg_ok`` is False
    (Message.all_properties), and Java's isWaitStoreMsgOK() reads that property (absent: true; only "true" in any case
    is true), as MessageBatch.generateFromList does for a batch. Before, a batch took the attribute only: messages
    carrying WAIT=false in their properties (a MessageExt's re-sent, a Spark row's) went as a WAIT=true batch and got
    SLAVE_NOT_AVAILABLE on a SYNC_MASTER without a slave, where each alone gets SEND_OK."""
    async with EmbeddedCluster(tmp_path / "c", broker_role="SYNC_MASTER", **SMALL_STORE) as cluster:
        await _create_queues(cluster, "PropWait", 2)
        async with Producer("pg-propwait", cluster.namesrv_addr) as producer:
            single = await producer.send(Message("PropWait", b"one", properties={"WAIT": "false"}))
            [batch] = await producer.send_batch(
                [Message("PropWait", b"b", properties={"WAIT": "False" if i else "false"}) for i in range(3)]
            )
            with pytest.raises(MessageValidationError):
                await producer.send_batch(
                    [Message("PropWait", b"w"), Message("PropWait", b"n", properties={"WAIT": "no"})]
                )
    assert single.send_status is SendStatus.SEND_OK
    assert batch.send_status is SendStatus.SEND_OK, batch.send_status


async def test_a_oneway_send_avoids_a_broker_the_fault_table_isolated(embedded_cluster: EmbeddedCluster) -> None:
    """Java's sendOneway(msg) is sendDefaultImpl(msg, ONEWAY, ...): its queue comes from selectOneMessageQueue, which
    with sendLatencyFaultEnable skips a broker the latency fault table isolated (MQFaultStrategy), as every other
    send without a chosen queue does. Once an async send to a chosen queue of the busy broker isolated it, no later
    oneway send reaches it (send_oneway picked its queue without the table: every other one went there)."""
    topic = "BusyOneway"
    async with _beside_a_busy_broker(embedded_cluster, topic) as (busy, producer):
        outcome = await _send(
            producer, Message(topic, b"first"), "send_async", queue=MessageQueue(topic, "broker-b", 0)
        )
        assert isinstance(outcome, MQBrokerError) and outcome.code == ResponseCode.SYSTEM_BUSY
        assert not producer.fault.is_available("broker-b")
        assert busy.sends == 1
        sends = 8
        for i in range(sends):
            await producer.send_oneway(Message(topic, f"o{i}".encode()))
        with trio.fail_after(10):  # hang guard only: every oneway request is counted where it arrived
            while len(_stored(embedded_cluster, topic, 2)) + busy.sends - 1 < sends:
                await trio.sleep(0.01)
    assert busy.sends - 1 == 0, f"{busy.sends - 1} of {sends} oneway sends went to the isolated broker"


class RefusingBroker:
    """A master that refuses every send with ``code`` (one of Java's retryResponseCodes), SUCCESS for anything else."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.sends = 0

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE):
            self.sends += 1
            return request.response(self.code, "refused")
        return request.response(ResponseCode.SUCCESS)


@pytest.mark.parametrize("code", [ResponseCode.SYSTEM_ERROR, ResponseCode.TOPIC_NOT_EXIST])
@pytest.mark.parametrize("mode", ["send_async", "send_async-cached", "request"])
async def test_an_async_send_refused_by_its_broker_is_not_retried(
    embedded_cluster: EmbeddedCluster, mode: str, code: int
) -> None:
    """MQClientAPIImpl.sendMessageAsync retries only when no answer came (the request could not be written, or
    timed out): a broker's refusal throws from processSendResponse and goes to onExceptionImpl with needRetry false,
    so the callback gets that MQBrokerException after one attempt, whatever its code (retryResponseCodes are
    sendDefaultImpl's, a sync send's). ``request`` sends this way too (sendDefaultImpl in ASYNC mode: one attempt).
    Before, a refusal with SYSTEM_ERROR, TOPIC_NOT_EXIST, ... was sent twice more and reported as SendFailedError."""
    topic = "Refused"
    refusing = RefusingBroker(code)
    dispatcher = Dispatcher()
    dispatcher.set_default(refusing, ProcessorPool("refusing", 2, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, embedded_cluster.namesrv_addr, f"{host}:{port}", topic, "broker-r")
        async with Producer("pg-refused", embedded_cluster.namesrv_addr) as producer:
            msg = Message(topic, b"refused")
            if mode == "send_async-cached":
                await producer.publish_info(topic)  # route and address cached: the task-free path
            if mode == "request":
                with pytest.raises(MQClientError) as caught:
                    await producer.request(msg, 3.0)
                outcome: object = caught.value.__cause__
            else:
                outcome = await _send(producer, msg, "send_async")
        nursery.cancel_scope.cancel()
    assert isinstance(outcome, MQBrokerError) and outcome.code == code, outcome
    assert refusing.sends == 1


async def test_a_transactional_message_drops_a_delay_level_given_as_a_property(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultMQProducerImpl.sendMessageInTransaction clears a DELAY property other than 0 before the half message
    goes out: the committed message is delivered at once, not parked in SCHEDULE_TOPIC_XXXX (``delay_level=`` was
    dropped already; one given in ``properties`` was kept)."""
    await _create(embedded_cluster, "TxDelayProp")

    async def commit(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    async with TransactionProducer(
        "tx-delay-prop-pg",
        embedded_cluster.namesrv_addr,
        execute_local_transaction=commit,
        check_local_transaction=commit,
    ) as producer:
        sent = await producer.send_message_in_transaction(Message("TxDelayProp", b"now", properties={"DELAY": "3"}))
    assert sent.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    store = embedded_cluster.controller.context.store
    [stored] = [decode_record(m) for q in range(4) for m in store.get("TxDelayProp", q, 0, 32).messages]
    assert stored.body == b"now" and "DELAY" not in stored.properties
    assert store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 0


async def test_a_sync_send_answered_system_busy_is_raised_after_one_attempt(embedded_cluster: EmbeddedCluster) -> None:
    """SYSTEM_BUSY, the answer of a broker in flow control ([TIMEOUT_CLEAN_QUEUE], [PCBUSY_CLEAN_QUEUE],
    [REJECTREQUEST], [OVERLOAD]), is not one of RocketMQ 4.9.8's ``retryResponseCodes`` (DefaultMQProducer.java;
    5.x added it): sendDefaultImpl throws the MQBrokerException at once instead of trying another queue."""
    topic = "SyncBusy"
    refusing = RefusingBroker(ResponseCode.SYSTEM_BUSY)
    dispatcher = Dispatcher()
    dispatcher.set_default(refusing, ProcessorPool("refusing", 2, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, embedded_cluster.namesrv_addr, f"{host}:{port}", topic, "broker-busy")
        async with Producer("pg-sync-busy", embedded_cluster.namesrv_addr) as producer:
            outcome = await _send(producer, Message(topic, b"busy"), "send")
        nursery.cancel_scope.cancel()
    assert isinstance(outcome, MQBrokerError) and outcome.code == ResponseCode.SYSTEM_BUSY, outcome
    assert refusing.sends == 1


@contextlib.asynccontextmanager
async def _fake_master(
    cluster: EmbeddedCluster, topic: str, broker_name: str, handler: Processor | None
) -> AsyncIterator[None]:
    """``handler`` (a processor for every request) serving on 127.0.0.1, registered as ``broker_name``'s master with
    ``topic``; None: a dead address registered instead."""
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        if handler is None:
            addr = _dead_address()
        else:
            dispatcher = Dispatcher()
            dispatcher.set_default(handler, ProcessorPool(broker_name, 2, 100))
            host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
            addr = f"{host}:{port}"
        await register_as_master(client, cluster.namesrv_addr, addr, topic, broker_name)
        yield
        nursery.cancel_scope.cancel()


def _dead_address() -> str:
    """An address on 127.0.0.1 nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        host, port = sock.getsockname()
    return f"{host}:{port}"


@pytest.mark.parametrize(
    ("broker", "code"),
    [("refusing", ResponseCode.SYSTEM_ERROR), ("silent", 10002), ("dead", 10001)],
    ids=["refused-system-error", "timed-out", "connect-refused"],
)
async def test_a_send_that_failed_every_attempt_carries_javas_response_code(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, broker: str, code: int
) -> None:
    """sendDefaultImpl's MQClientException "Send [n] times, still failed" carries a response code from the last
    attempt's exception (client/.../impl/producer/DefaultMQProducerImpl.java): the broker's code of an
    MQBrokerException, CONNECT_BROKER_EXCEPTION (10001) for a connection refused, ACCESS_BROKER_TIMEOUT (10002) for
    a timeout (client/.../common/ClientErrorCode.java). Ours had none to tell them apart by."""
    topic = "FailedEveryTime"
    handler = {"refusing": RefusingBroker(code), "silent": SilentBroker()}.get(broker)
    async with (
        _fake_master(embedded_cluster, topic, "broker-f", handler),
        Producer("pg-failed-every-time", embedded_cluster.namesrv_addr) as producer,
    ):
        producer.retry_times_when_send_failed = 0 if broker == "silent" else 2
        with pytest.raises(SendFailedError) as caught:
            await producer.send(Message(topic, b"failed"))
    assert caught.value.response_code == code, caught.value


async def test_a_refusal_code_added_to_the_retry_codes_is_retried_on_another_broker(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """DefaultMQProducer.addRetryResponseCode (client/.../producer/DefaultMQProducer.java) adds to the
    ``retryResponseCodes`` sendDefaultImpl retries on another queue: with SYSTEM_BUSY added, a sync send the busy
    broker refuses is stored on the other one. Ours had the codes fixed."""
    topic = "BusyRetried"
    await _create_queues(embedded_cluster, topic, 2)
    refusing = RefusingBroker(ResponseCode.SYSTEM_BUSY)
    async with (
        _fake_master(embedded_cluster, topic, "broker-b", refusing),
        Producer("pg-busy-retried", embedded_cluster.namesrv_addr) as producer,
    ):
        assert ResponseCode.SYSTEM_BUSY not in producer.retry_response_codes
        producer.add_retry_response_code(ResponseCode.SYSTEM_BUSY)
        outcomes = [await _send(producer, Message(topic, f"m{i}".encode()), "send") for i in range(4)]
    assert refusing.sends >= 1
    assert all(getattr(o, "send_status", None) is SendStatus.SEND_OK for o in outcomes), outcomes
    assert len(_stored(embedded_cluster, topic, 2)) == 4


@pytest.mark.parametrize("mode", ["send", "send_async"])
async def test_the_latency_fault_tables_can_be_set_as_javas(embedded_cluster: EmbeddedCluster, mode: str) -> None:
    """DefaultMQProducer.setLatencyMax and setNotAvailableDuration (client/.../producer/DefaultMQProducer.java,
    latency/MQFaultStrategy.java) replace the tables a latency, or a failure taken as 30 s, is looked up in: with
    every duration 0 a broker that refused is not isolated, and the round robin keeps reaching it. Ours had the
    tables fixed (the refusal isolated it for 10 minutes)."""
    async with _beside_a_busy_broker(embedded_cluster, "BusyTables") as (busy, producer):
        producer.latency_max = (100, 1000, 15000)
        producer.not_available_duration = (0, 0, 0)
        assert producer.not_available_duration == (0, 0, 0)
        refused = await _refusals(producer, "BusyTables", mode)
    assert refused > 1 and busy.sends == refused, (refused, busy.sends)


class DroppingBroker:
    """A master that drops the connection of the first send it gets (a broker restarting under the producer) and
    stores none; it answers every later send SUCCESS."""

    def __init__(self) -> None:
        self.sends = 0

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code not in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE):
            return request.response(ResponseCode.SUCCESS)
        self.sends += 1
        if self.sends == 1:
            ctx.connection.close()
            return None
        fields = {"msgId": "0" * 32, "queueId": request.ext_fields["e"], "queueOffset": str(self.sends)}
        return request.response(ResponseCode.SUCCESS, None, fields)


@pytest.mark.parametrize("where", ["queue", "selector"])
async def test_an_async_send_to_a_chosen_queue_is_retried_there_when_its_connection_fails(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """send(msg, mq, callback) and sendSelectImpl in ASYNC mode hand sendKernelImpl no TopicPublishInfo, and
    MQClientAPIImpl.onExceptionImpl then retries a send that got no answer on the same broker, the same request, up
    to retryTimesWhenSendAsyncFailed times (client/.../impl/MQClientAPIImpl.java, 4.9.8). Ours made one attempt: a
    connection dropped under it failed the send."""
    topic = "DroppedOnce"
    dropping = DroppingBroker()
    async with (
        _fake_master(embedded_cluster, topic, "broker-d", dropping),
        Producer("pg-dropped-once", embedded_cluster.namesrv_addr) as producer,
    ):
        chosen: dict[str, object] = (
            {"queue": MessageQueue(topic, "broker-d", 1)}
            if where == "queue"
            else {"selector": lambda mqs, m, a: mqs[1]}
        )
        outcome = await _send(producer, Message(topic, b"dropped once"), "send_async", **chosen)
    assert getattr(outcome, "send_status", None) is SendStatus.SEND_OK, outcome
    assert getattr(outcome, "queue_id", None) == 1
    assert dropping.sends == 2


@pytest.mark.parametrize("mode", ["send", "send_async", "send_oneway"])
async def test_a_send_to_a_topic_without_route_says_no_route_info_with_javas_code(tmp_path: Path, mode: str) -> None:
    """sendDefaultImpl (sync, async and oneway alike) throws MQClientException "No route info of this topic: <topic>"
    with the FAQ hint and ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION (10005) when neither the topic nor TBW102 has a
    route (client/.../impl/producer/DefaultMQProducerImpl.java). Ours raised an error of its own words and no code."""
    async with (
        EmbeddedCluster(tmp_path / "c", auto_create_topic_enable=False, **SMALL_STORE) as cluster,
        Producer("pg-no-route", cluster.namesrv_addr) as producer,
    ):
        outcome = await _send(producer, Message("NoSuchTopic", b"lost"), mode)
    assert isinstance(outcome, MQClientError), outcome
    assert getattr(outcome, "response_code", None) == 10005, outcome
    assert str(outcome).startswith(
        "No route info of this topic: NoSuchTopic\nSee http://rocketmq.apache.org/docs/faq/ for further details."
    ), outcome


async def test_a_send_without_any_name_server_says_so_with_javas_code() -> None:
    """validateNameServerSetting, run by sendDefaultImpl before its "No route info": with no name server address
    MQClientException "No name server address, please set it." and NO_NAME_SERVER_EXCEPTION (10004)."""
    async with Producer("pg-no-namesrv", config=ClientConfig(namesrv_addr=())) as producer:
        with pytest.raises(MQClientError) as caught:
            await producer.send(Message("AnyTopic", b"lost"))
    assert getattr(caught.value, "response_code", None) == 10004, caught.value
    assert str(caught.value).startswith("No name server address, please set it.\nSee "), caught.value


async def test_a_oneway_send_whose_broker_cannot_be_reached_carries_javas_response_code(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """sendOneway(msg) is sendDefaultImpl in ONEWAY mode: the failed write is caught and rethrown as its "Send [1]
    times, still failed" MQClientException with CONNECT_BROKER_EXCEPTION (10001). Ours raised the bare transport
    error (a caller catching MQClientError missed it)."""
    topic = "OnewayDead"
    async with (
        _fake_master(embedded_cluster, topic, "broker-dead", None),
        Producer("pg-oneway-dead", embedded_cluster.namesrv_addr) as producer,
    ):
        outcome = await _send(producer, Message(topic, b"lost"), "send_oneway")
    assert isinstance(outcome, SendFailedError), outcome
    assert (outcome.response_code, len(outcome.attempts)) == (10001, 1)


@pytest.mark.parametrize("mode", ["send", "send_async", "send_oneway"])
async def test_a_selected_send_to_a_topic_without_route_says_so_in_send_select_impls_words(
    tmp_path: Path, mode: str
) -> None:
    """sendSelectImpl (a send with a MessageQueueSelector, client/.../impl/producer/DefaultMQProducerImpl.java) throws
    its own MQClientException "No route info for this topic, <topic>" without a code (-1), not sendDefaultImpl's."""
    async with (
        EmbeddedCluster(tmp_path / "c", auto_create_topic_enable=False, **SMALL_STORE) as cluster,
        Producer("pg-no-route-selected", cluster.namesrv_addr) as producer,
    ):
        outcome = await _send(producer, Message("NoSuchTopic", b"lost"), mode, selector=_broken, arg=1)
    assert isinstance(outcome, MQClientError), outcome
    assert getattr(outcome, "response_code", None) == -1, outcome
    assert str(outcome).startswith("No route info for this topic, NoSuchTopic"), outcome
