"""Request-reply through our client and the embedded broker, in virtual time (autojump clock): a requester's
``Producer.request`` (and its callback form) answered by a consumer that replies with ``create_reply_message``; a
reply after the timeout is dropped and counted; 1,000 concurrent requests on one producer all get their own reply;
the broker's reply topic is a system topic.

No real client in tests/e2e can take part: ali-ons 3.12 has no request API and the C++ core 2.1 sends every message
with SEND_MESSAGE_V2, so a reply from it is stored in the reply topic but never pushed (docs/FEATURES.md)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.errors import MessageValidationError, MQBrokerError, MQClientError, TopicRouteNotFoundError
from client.message import Message, MessageExt
from client.producer import Producer
from client.request_reply import CreateReplyMessageError, RequestTimeoutError, create_reply_message
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers.ops import ReplyMessageRequestHeader
from remoting.codec.message import decode_record
from remoting.codec.message_properties import decode_properties, encode_properties
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer
from tests.client.test_master_watch import register_as_master
from tests.conftest import SMALL_STORE

TOPIC = "RequestTopic"
Replier = Callable[[MessageExt], Awaitable[bytes | None]]


async def _echo(msg: MessageExt) -> bytes:
    return b"pong:" + msg.body


@pytest.fixture
async def requests_topic(embedded_cluster: EmbeddedCluster) -> AsyncIterator[EmbeddedCluster]:
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
    yield embedded_cluster


@contextlib.asynccontextmanager
async def replier(cluster: EmbeddedCluster, answer: Replier) -> AsyncIterator[None]:
    """A replier: a push consumer of TOPIC answering each request through its own producer."""
    async with Producer("replier-pg", cluster.namesrv_addr) as producer:

        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            for msg in msgs:
                body = await answer(msg)
                if body is not None:
                    await producer.send(create_reply_message(msg, body))
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("replier-cg", cluster.namesrv_addr, consume_thread_min=64, consume_thread_max=64)
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(listener)
        async with consumer:
            yield


async def test_a_requester_gets_its_reply_within_the_timeout(
    requests_topic: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with replier(requests_topic, _echo), Producer("requester-pg", requests_topic.namesrv_addr) as requester:
        reply = await requester.request(Message(TOPIC, b"ping", tags="Q"), timeout=3.0)
        got: list[MessageExt | Exception] = []
        done = trio.Event()

        def callback(outcome: MessageExt | Exception) -> None:
            got.append(outcome)
            done.set()

        requester.request_async(Message(TOPIC, b"again"), callback, timeout=3.0)
        with trio.fail_after(10):
            await done.wait()
    assert reply.body == b"pong:ping" and reply.topic == "DefaultCluster_REPLY_TOPIC"
    props = reply.properties
    assert props["MSG_TYPE"] == "reply" and props["TTL"] == "3000"
    assert props["REPLY_TO_CLIENT"] == requester.instance.client_id
    assert int(props["ARRIVE_TIME"]) >= int(props["PUSH_REPLY_TIME"]) > 0
    assert [r.body for r in got if isinstance(r, MessageExt)] == [b"pong:again"]
    assert requester.instance.replies.matched == 2 and len(requester.instance.replies) == 0


async def test_a_reply_after_the_timeout_is_dropped_and_counted(
    requests_topic: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async def slow(msg: MessageExt) -> bytes:
        await trio.sleep(5)
        return b"late"

    async with replier(requests_topic, slow), Producer("late-pg", requests_topic.namesrv_addr) as requester:
        started = trio.current_time()
        with pytest.raises(RequestTimeoutError) as caught:
            await requester.request(Message(TOPIC, b"ping"), timeout=2.0)
        assert trio.current_time() - started == pytest.approx(2.0, abs=0.5)
        assert caught.value.code == caught.value.response_code == 10006  # RequestTimeoutException.getResponseCode
        assert "wait reply message timeout, 2000 ms" in str(caught.value)
        replies = requester.instance.replies
        with trio.fail_after(30):
            while replies.unmatched < 1:
                await trio.sleep(0.1)
        failed: list[MessageExt | Exception] = []
        requester.request_async(Message(TOPIC, b"again"), failed.append, timeout=1.0)
        with trio.fail_after(30):
            while not failed:
                await trio.sleep(0.1)
    assert (replies.matched, len(replies)) == (0, 0)
    assert isinstance(failed[0], RequestTimeoutError) and str(failed[0]) == "request timeout, no reply message."


async def test_a_thousand_concurrent_requests_on_one_producer_each_get_their_own_reply(
    requests_topic: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    replies: dict[int, bytes] = {}
    async with replier(requests_topic, _echo), Producer("many-pg", requests_topic.namesrv_addr) as requester:

        async def one(i: int) -> None:
            replies[i] = (await requester.request(Message(TOPIC, f"req-{i}".encode()), timeout=60.0)).body

        async with trio.open_nursery() as requests:
            for i in range(1000):
                requests.start_soon(one, i)
    assert replies == {i: f"pong:req-{i}".encode() for i in range(1000)}
    assert requester.instance.replies.matched == 1000 and requester.instance.replies.unmatched == 0


async def test_a_request_to_a_queue_of_another_topic_is_sent_as_java_sends_it(
    requests_topic: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's request(msg, mq, timeout) calls sendKernelImpl directly and compares no topics (only send(msg, mq) and
    send(msg, mq, callback) do): the request is stored in its own topic at that queue id and, with no replier, the
    caller gets RequestTimeoutException. Before, it failed as "send request message to <..> fail", nothing sent."""
    async with Admin(requests_topic.namesrv_addr) as admin:
        await admin.create_topic("ReqOther", read_queue_nums=2, write_queue_nums=2)
    async with Producer("req-mq-pg", requests_topic.namesrv_addr) as producer:
        with pytest.raises(RequestTimeoutError):
            await producer.request(Message(TOPIC, b"ask"), 3.0, queue=MessageQueue("ReqOther", "broker-a", 1))
    stored = requests_topic.controller.context.store.get(TOPIC, 1, 0, 64).messages
    assert [decode_record(m).body for m in stored] == [b"ask"]


def test_a_reply_needs_the_cluster_the_broker_stamped_on_the_request() -> None:
    from remoting.codec.message import MessageExt as Ext

    request = Ext(0, 0, 0, 0, 0, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2), 0, 0, b"", "T", {}, b"")
    with pytest.raises(CreateReplyMessageError) as caught:
        create_reply_message(request, b"x")
    assert caught.value.code == caught.value.response_code == 10007  # MQClientException.getResponseCode
    stamped = Ext(0, 0, 0, 0, 0, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2), 0, 0, b"", "T",
                  {"CLUSTER": "C1", "CORRELATION_ID": "c", "REPLY_TO_CLIENT": "r", "TTL": "5"}, b"")  # fmt: skip
    reply = create_reply_message(stamped, b"x")
    assert (reply.topic, reply.properties) == (
        "C1_REPLY_TOPIC",
        {"MSG_TYPE": "reply", "CORRELATION_ID": "c", "REPLY_TO_CLIENT": "r", "TTL": "5"},
    )


async def test_the_reply_topic_is_a_system_topic_admin_cannot_delete_or_redefine(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 4.9.8's TopicConfigManager registers ``<cluster>_REPLY_TOPIC`` with ``TopicValidator.addSystemTopic``,
    so AdminBrokerProcessor.deleteTopic / updateAndCreateTopic refuse it (SYSTEM_ERROR, "The topic[...] is conflict
    with system topic.") and GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists it: replies never depend on auto-creation."""
    reply_topic = "DefaultCluster_REPLY_TOPIC"
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        with pytest.raises(MQBrokerError) as deleting:
            await admin.delete_topic(reply_topic)
        assert deleting.value.code == 1 and "conflict with system topic" in (deleting.value.remark or "")
        with pytest.raises(MQBrokerError) as creating:
            await admin.create_topic(reply_topic, read_queue_nums=8, write_queue_nums=8, perm=2)
        assert creating.value.code == 1 and "conflict with system topic" in (creating.value.remark or "")
        assert reply_topic in await admin.system_topics(embedded_cluster.broker_addr)
    assert embedded_cluster.controller.context.topics.get(reply_topic) is not None


class SlowGreetingBroker:
    """A master that answers HEART_BEAT after a second and refuses sends; it notes how many heartbeats it had
    answered when each send arrived."""

    def __init__(self) -> None:
        self.heartbeats_answered = 0
        self.answered_at_send: list[int] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.HEART_BEAT:
            await trio.sleep(1.0)
            self.heartbeats_answered += 1
        elif request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE):
            self.answered_at_send.append(self.heartbeats_answered)
            return request.response(ResponseCode.SYSTEM_ERROR, "refused")
        return request.response(ResponseCode.SUCCESS)


async def test_a_first_request_to_a_topic_goes_out_after_the_heartbeat_to_its_broker_was_answered(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker pushes a reply to the requester's channel, which it knows from the requester's heartbeat; so
    DefaultMQProducerImpl.prepareSendRequest, for a topic whose route the client does not have yet, reads the route
    and sends the heartbeat to every broker (sendHeartbeatToAllBrokerWithLock, a sync call) before the request goes
    out. Before, the heartbeat was only started in the background and the request sent at once: a fast replier's
    reply could find no channel of the requester and be lost."""
    topic = "FirstRequest"
    broker = SlowGreetingBroker()
    dispatcher = Dispatcher()
    dispatcher.set_default(broker, ProcessorPool("slow-greeting", 4, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, embedded_cluster.namesrv_addr, f"{host}:{port}", topic, "broker-slow")
        async with Producer("first-request-pg", embedded_cluster.namesrv_addr) as requester:
            with pytest.raises(MQClientError) as refused:
                await requester.request(Message(topic, b"ask"), timeout=5.0)
        nursery.cancel_scope.cancel()
    # waitResponse's MQClientException(message, cause): response code -1, as the client's other errors carry theirs
    assert refused.value.response_code == -1 and isinstance(refused.value.__cause__, MQBrokerError)
    [answered] = broker.answered_at_send  # one attempt: a refusal is not retried
    assert answered >= 1


async def test_request_async_hands_the_callback_the_send_failure_itself(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultMQProducerImpl.request(msg, callback, timeout): the send's onException sets the future's cause to the
    exception and requestFail runs the RequestCallback with it (RequestResponseFuture.executeRequestCallback:
    onException(cause)), so the callback gets the broker's MQBrokerException itself; only the blocking request wraps
    it ("send request message to <topic> fail"). Before, the callback got that MQClientError wrapper."""
    topic = "RefusedRequest"
    broker = SlowGreetingBroker()
    dispatcher = Dispatcher()
    dispatcher.set_default(broker, ProcessorPool("refusing", 4, 100))
    got: list[MessageExt | Exception] = []
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, embedded_cluster.namesrv_addr, f"{host}:{port}", topic, "broker-refusing")
        async with Producer("refused-request-pg", embedded_cluster.namesrv_addr) as requester:
            requester.request_async(Message(topic, b"ask"), got.append, timeout=5.0)
            with trio.fail_after(30):
                while not got:
                    await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    [outcome] = got
    assert isinstance(outcome, MQBrokerError) and outcome.code == ResponseCode.SYSTEM_ERROR, repr(outcome)


async def test_a_reply_whose_compressed_body_does_not_inflate_still_completes_its_request(
    requests_topic: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """client/.../impl/ClientRemotingProcessor.java receiveReplyMessage: a reply flagged COMPRESSED whose body the
    compressor cannot inflate is logged and handed to its request with the body as it came (the IOException is
    caught around the decompress only), and the broker's push is answered SUCCESS, so the replier's send succeeds.
    Before, the requester answered the push SYSTEM_ERROR: the replier got "push reply message to <client>fail." and
    the request waited out its timeout."""
    answers: list[RemotingCommand] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        props = {k: msgs[0].properties[k] for k in ("CORRELATION_ID", "REPLY_TO_CLIENT", "TTL")}
        props["MSG_TYPE"] = "reply"
        fields = {"a": "raw-replier-pg", "b": "DefaultCluster_REPLY_TOPIC", "c": "TBW102", "d": "4", "e": "0",
                  "f": "1", "g": "1700000000123", "h": "0", "i": encode_properties(props), "j": "0",
                  "k": "false"}  # fmt: skip
        reply = request(RequestCode.SEND_REPLY_MESSAGE_V2, fields, b"not deflated")
        answers.append(await raw.invoke(requests_topic.broker_addr, reply, 15))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("raw-replier-cg", requests_topic.namesrv_addr)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(listener)
    async with RemotingClient() as raw, consumer, Producer("raw-requester-pg", requests_topic.namesrv_addr) as asker:
        reply = await asker.request(Message(TOPIC, b"ping"), timeout=10.0)
    assert reply.body == b"not deflated" and reply.properties["MSG_TYPE"] == "reply"
    assert [a.code for a in answers] == [ResponseCode.SUCCESS], [a.remark for a in answers]


async def test_a_request_the_send_refuses_at_once_raises_the_send_s_own_error(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultMQProducerImpl.request runs sendDefaultImpl on the caller's thread, so what it throws before anything
    is sent reaches the caller as itself: Validators.checkMessage's MQClientException (an empty body: code 13) and
    "No route info of this topic"; only a failure the async send reports later is wrapped ("send request message to
    <topic> fail"). request(msg, callback, timeout) throws checkMessage's error to its caller too. Before, the
    blocking request wrapped both and the callback form handed the validation error to the callback."""
    async with EmbeddedCluster(tmp_path / "c", auto_create_topic_enable=False, **SMALL_STORE) as cluster:
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
        async with Producer("refused-at-once-pg", cluster.namesrv_addr) as requester:
            with pytest.raises(MessageValidationError) as empty:
                await requester.request(Message(TOPIC, b""), timeout=3.0)
            assert empty.value.response_code == ResponseCode.MESSAGE_ILLEGAL
            with pytest.raises(TopicRouteNotFoundError):
                await requester.request(Message("NoSuchRequestTopic", b"ask"), timeout=3.0)
            got: list[MessageExt | Exception] = []
            with pytest.raises(MessageValidationError):
                requester.request_async(Message(TOPIC, b""), got.append, timeout=3.0)
            await trio.sleep(5)
            assert got == []
            assert len(requester.instance.replies) == 0


def _no_queue(queues: object, msg: Message, arg: object) -> None:
    return None


def _broken(queues: object, msg: Message, arg: object) -> None:
    raise KeyError(arg)


@pytest.mark.parametrize(
    ("selector", "text"),
    [(_no_queue, "select message queue return null."), (_broken, "select message queue threw exception")],
    ids=["returns-none", "raises"],
)
async def test_a_request_whose_selector_picks_no_queue_raises_the_selectors_error(
    requests_topic: EmbeddedCluster, autojump_clock: trio.testing.MockClock, selector: Any, text: str
) -> None:
    """request(msg, selector, arg, timeout) runs sendSelectImpl on the caller's thread, which throws its
    MQClientException ("select message queue return null." / "select message queue threw exception.") before anything
    is sent, so it reaches the caller as it is, not wrapped in "send request message to <topic> fail" (waitResponse
    wraps only what the async send reports later)."""
    async with Producer("selector-refused-pg", requests_topic.namesrv_addr) as requester:
        with pytest.raises(MQClientError) as caught:
            await requester.request(Message(TOPIC, b"ask"), timeout=3.0, selector=selector, arg="k")
    assert str(caught.value).startswith(text), caught.value
    assert len(requester.instance.replies) == 0


class ReplyFirstBroker:
    """A master that, for a request, pushes its reply (326) to the requester's connection at once and never answers
    the send itself (a broker slow to answer it, such as a SYNC_MASTER waiting for its slave while a consumer already
    took the request)."""

    def __init__(self) -> None:
        self.pushes: list[int] = []

    async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code != RequestCode.SEND_MESSAGE_V2:
            return cmd.response(ResponseCode.SUCCESS)
        props = decode_properties(cmd.ext_fields["i"])
        reply_props = {k: props[k] for k in ("CORRELATION_ID", "REPLY_TO_CLIENT", "TTL")} | {"MSG_TYPE": "reply"}
        header = ReplyMessageRequestHeader(
            producer_group="replier-pg", topic="DefaultCluster_REPLY_TOPIC", default_topic="TBW102",
            default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1, flag=0,
            born_host="127.0.0.1:1", store_host="127.0.0.1:2", store_timestamp=2,
            properties=encode_properties(reply_props),
        )  # fmt: skip
        push = request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header.to_ext_fields(), b"early")
        self.pushes.append((await ctx.connection.invoke(push, 5)).code)
        return None


@pytest.mark.parametrize("mode", ["request", "request_async"])
async def test_a_reply_that_comes_before_the_send_is_answered_completes_the_request_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    """client/.../impl/ClientRemotingProcessor.java processReplyMessage hands a reply to its RequestResponseFuture
    whenever it comes: putResponseMessage releases the blocking request's waitResponseMessage and the callback of
    request(msg, callback, timeout) gets onSuccess at once, whatever became of the send (DefaultMQProducerImpl.request
    sends in ASYNC mode and does not wait for it). Before, the request waited for the send's answer first: a reply
    that beat it was returned only at the timeout."""
    topic = "ReplyFirst"
    broker = ReplyFirstBroker()
    dispatcher = Dispatcher()
    dispatcher.set_default(broker, ProcessorPool("reply-first", 4, 100))
    got: list[MessageExt | Exception] = []
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, embedded_cluster.namesrv_addr, f"{host}:{port}", topic, "broker-rf")
        async with Producer("reply-first-pg", embedded_cluster.namesrv_addr) as requester:
            await requester.publish_info(topic)
            started = trio.current_time()
            if mode == "request":
                got.append(await requester.request(Message(topic, b"ask"), timeout=10.0))
            else:
                requester.request_async(Message(topic, b"ask"), got.append, timeout=10.0)
                with trio.fail_after(30):
                    while not got:
                        await trio.sleep(0.01)
            elapsed = trio.current_time() - started
        nursery.cancel_scope.cancel()
    [reply] = got
    assert isinstance(reply, MessageExt) and reply.body == b"early", reply
    assert broker.pushes == [ResponseCode.SUCCESS]
    assert elapsed < 1.0, elapsed
