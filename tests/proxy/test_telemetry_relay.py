"""Admin requests the broker relays to a 5.x consumer over its Telemetry stream, as RocketMQ 5.3.3's proxy does
(proxy/.../grpc/v2/channel/GrpcClientChannel.java, GrpcChannelManager.java, client/ClientActivity.java):
GET_CONSUMER_RUNNING_INFO with ``jstackEnable`` becomes a ``PrintThreadStackTraceCommand`` with a nonce, and the
client's ``ThreadStackTrace`` with that nonce is the answer; CONSUME_MESSAGE_DIRECTLY (the dashboard's and
``queryMsgById -g/-d``'s resend) becomes a ``VerifyMessageCommand`` with the message, answered by the client's
``VerifyMessageResult``.

In-process tests drive :class:`proxy.messaging.MessagingActivity` over the embedded broker in virtual time; the wire
test opens a raw Telemetry stream on the gRPC port (127.0.0.1, port 0) that answers as the Java 5.x client does, and
asks through our admin client on the remoting port."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import trio
import trio.testing

from client.admin import Admin
from client.message import Message
from client.producer import Producer
from processors import broker2client
from proxy.pb import definition, service
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers import ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader
from remoting.codec.message import MessageRecord
from remoting.codec.msgid import offset_msg_id
from tests.proxy.grpc_front import PREFIX, front
from tests.proxy.test_sessions import activity_of, consumer_settings, md
from tests.semantics.helpers import create_topic

GROUP, TOPIC = "G-relay", "T-relay"


def running_info_request(client_id: str, *, jstack: bool = True) -> RemotingCommand:
    header = GetConsumerRunningInfoRequestHeader(consumer_group=GROUP, client_id=client_id, jstack_enable=jstack)
    return request(RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields())


async def ask(
    call: Callable[[], Any], pushed: list[Any], answer: Callable[[Any], None] | None = None
) -> tuple[RemotingCommand, float]:
    """Run the broker's call ``call`` while the client, when a command is pushed to it, answers with ``answer`` (None:
    never); returns the admin's response and the (virtual) seconds it took."""
    outcome: list[RemotingCommand] = []
    started = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            outcome.append(await call())

        nursery.start_soon(run)
        while not pushed and not outcome:
            await trio.sleep(0.01)
        assert pushed, f"nothing was pushed to the client's Telemetry stream; the broker answered {outcome[0]}"
        if answer is not None:
            answer(pushed[-1])
    return outcome[0], trio.current_time() - started


async def test_a_jstack_running_info_request_is_relayed_over_telemetry_and_answered(
    embedded_cluster: Any, autojump_clock: trio.testing.MockClock
) -> None:
    """The request becomes a PrintThreadStackTraceCommand; the ThreadStackTrace with its nonce answers it: OK is
    SUCCESS with a ConsumerRunningInfo holding only the stacks (ClientActivity.reportThreadStackTrace),
    VERIFY_FIFO_MESSAGE_UNSUPPORTED is NO_PERMISSION "forbidden to verify message", any other status SYSTEM_ERROR
    "verify message failed"."""
    activity = activity_of(embedded_cluster)
    ctx = embedded_cluster.controller.context
    pushed: list[Any] = []
    activity.telemetry_opened(md("c@relay"), pushed.append)
    activity.telemetry(consumer_settings(GROUP, TOPIC), md("c@relay"))

    def stack_trace(code: int, text: str = "") -> Callable[[Any], None]:
        def answer(command: Any) -> None:
            assert command.WhichOneof("command") == "print_thread_stack_trace_command"
            reply = service.TelemetryCommand(status=definition.Status(code=code))
            reply.thread_stack_trace.nonce = command.print_thread_stack_trace_command.nonce
            reply.thread_stack_trace.thread_stack_trace = text
            assert activity.telemetry(reply, md("c@relay")) is None

        return answer

    def call() -> Any:
        return broker2client.consumer_running_info(ctx, running_info_request("c@relay"))

    answered, _ = await ask(call, pushed, stack_trace(definition.Code.OK, '"main" RUNNABLE\n'))
    assert (answered.code, answered.remark) == (ResponseCode.SUCCESS, "")
    info = orjson.loads(bytes(answered.body))
    assert info["jstack"] == '"main" RUNNABLE\n' and info["mqTable"] == {} and info["subscriptionSet"] == []
    nonces = {pushed[0].print_thread_stack_trace_command.nonce}

    pushed.clear()
    fifo, _ = await ask(call, pushed, stack_trace(definition.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED))
    assert (fifo.code, fifo.remark) == (ResponseCode.NO_PERMISSION, "forbidden to verify message")
    nonces.add(pushed[0].print_thread_stack_trace_command.nonce)
    pushed.clear()
    failed, _ = await ask(call, pushed, stack_trace(definition.Code.INTERNAL_ERROR))
    assert (failed.code, failed.remark) == (ResponseCode.SYSTEM_ERROR, "verify message failed")
    nonces.add(pushed[0].print_thread_stack_trace_command.nonce)
    assert len(nonces) == 3  # one nonce per relayed request


async def test_a_5x_consumer_that_does_not_send_its_stacks_is_answered_system_busy_after_the_relay_timeout(
    embedded_cluster: Any, autojump_clock: trio.testing.MockClock
) -> None:
    """GrpcChannelManager.scanExpireResultFuture answers a relayed request nobody answered SYSTEM_BUSY "call remote
    timeout" once ``grpcProxyRelayRequestTimeoutInSeconds`` (5 s) passed, before the broker's own 10 s; an answer
    coming later is dropped. Without ``jstackEnable`` nothing is written (GrpcClientChannel
    .processGetConsumerRunningInfo), so the broker's call ends CONSUME_MSG_TIMEOUT after its 10 s."""
    activity = activity_of(embedded_cluster)
    ctx = embedded_cluster.controller.context
    pushed: list[Any] = []
    activity.telemetry_opened(md("c@mute"), pushed.append)
    activity.telemetry(consumer_settings(GROUP, TOPIC), md("c@mute"))

    answered, took = await ask(lambda: broker2client.consumer_running_info(ctx, running_info_request("c@mute")), pushed)
    assert (answered.code, answered.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
    assert 5 <= took < 10
    late = service.TelemetryCommand(status=definition.Status(code=definition.Code.OK))
    late.thread_stack_trace.nonce = pushed[0].print_thread_stack_trace_command.nonce
    assert activity.telemetry(late, md("c@mute")) is None  # nobody waits for it any more

    pushed.clear()
    plain = await broker2client.consumer_running_info(ctx, running_info_request("c@mute", jstack=False))
    assert plain.code == ResponseCode.CONSUME_MSG_TIMEOUT and pushed == []


class RawTelemetry:
    """A 5.x push consumer's Telemetry stream, run on a worker thread, answering as the Java 5.x client does
    (ClientImpl.onPrintThreadStackTraceCommand: its stacks with status OK; PushConsumerImpl.onVerifyMessageCommand:
    the listener's result, here OK)."""

    def __init__(self, endpoint: str, client_id: str) -> None:
        self.endpoint = endpoint
        self.metadata = (("x-mq-client-id", client_id), ("x-mq-language", "JAVA"))
        self.requests: queue.Queue[Any] = queue.Queue()
        self.settled = threading.Event()
        self.seen: list[Any] = []

    def _outgoing(self) -> Iterator[Any]:
        return iter(self.requests.get, None)

    def run(self) -> None:
        command = consumer_settings(GROUP, TOPIC)
        command.settings.client_type = definition.ClientType.PUSH_CONSUMER
        self.requests.put(command)
        with grpc.insecure_channel(self.endpoint) as channel:
            telemetry = channel.stream_stream(
                PREFIX + "Telemetry",
                request_serializer=service.TelemetryCommand.SerializeToString,
                response_deserializer=service.TelemetryCommand.FromString,
            )
            for received in telemetry(self._outgoing(), metadata=self.metadata, timeout=60):
                self.seen.append(received)
                kind = received.WhichOneof("command")
                if kind == "settings":
                    self.settled.set()
                elif kind == "print_thread_stack_trace_command":
                    reply = service.TelemetryCommand(status=definition.Status(code=definition.Code.OK))
                    reply.thread_stack_trace.nonce = received.print_thread_stack_trace_command.nonce
                    reply.thread_stack_trace.thread_stack_trace = "Thread main RUNNABLE\n  at Main.main"
                    self.requests.put(reply)
                elif kind == "verify_message_command":  # PushConsumerImpl.onVerifyMessageCommand: consumed, OK
                    reply = service.TelemetryCommand(status=definition.Status(code=definition.Code.OK))
                    reply.verify_message_result.nonce = received.verify_message_command.nonce
                    self.requests.put(reply)

    def close(self) -> None:
        self.requests.put(None)


async def test_mqadmin_running_info_with_jstack_reaches_a_5x_consumer_over_its_telemetry_stream(
    tmp_path: Path,
) -> None:
    """End to end: our admin client on the remoting port, the broker, the gRPC port, a raw Telemetry stream."""
    async with front(tmp_path) as f, trio.open_nursery() as nursery:
        stream = RawTelemetry(f.endpoint, "java-consumer@1")
        nursery.start_soon(trio.to_thread.run_sync, stream.run)
        try:
            assert await trio.to_thread.run_sync(stream.settled.wait, 30)
            async with Admin(f.cluster.namesrv_addr) as admin:
                info = await admin.consumer_running_info(GROUP, "java-consumer@1", jstack=True)
        finally:
            stream.close()
    assert info["jstack"] == "Thread main RUNNABLE\n  at Main.main"
    assert [c.WhichOneof("command") for c in stream.seen] == ["settings", "print_thread_stack_trace_command"]


def store_message(ctx: Any) -> str:
    """A message of TOPIC put straight into the store; returns its offset msgId (what an admin resends by)."""
    record = MessageRecord(TOPIC, b"verify me", properties="UNIQ_KEY\x01ABC\x02TAGS\x01TagA\x02KEYS\x01k1")
    stored = ctx.store.append(record)
    return offset_msg_id(stored.store_host, stored.phy_offset)


async def test_a_consume_message_directly_request_is_relayed_as_a_verify_message_command(
    embedded_cluster: Any, autojump_clock: trio.testing.MockClock
) -> None:
    """The request becomes a VerifyMessageCommand with a nonce and the stored message as a 5.x client receives it
    (GrpcClientChannel.processConsumeMessageDirectly); the client's VerifyMessageResult with that nonce is SUCCESS
    with a ConsumeMessageDirectlyResult whose consumeResult follows its status (OK: CR_SUCCESS,
    FAILED_TO_CONSUME_MESSAGE: CR_LATER, MESSAGE_CORRUPTED: CR_RETURN_NULL, another: none) and remark "from gRPC
    client" (ClientActivity.reportVerifyMessageResult, buildConsumeMessageDirectlyResult). Unanswered: SYSTEM_BUSY
    "call remote timeout" after the relay timeout."""
    activity = activity_of(embedded_cluster)
    ctx = embedded_cluster.controller.context
    pushed: list[Any] = []
    activity.telemetry_opened(md("c@verify"), pushed.append)
    activity.telemetry(consumer_settings(GROUP, TOPIC), md("c@verify"))
    header = ConsumeMessageDirectlyResultRequestHeader(GROUP, "c@verify", store_message(ctx))

    def call() -> Any:
        admin = request(RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_ext_fields())
        return broker2client.consume_message_directly(ctx, admin)

    def verified(code: int) -> Callable[[Any], None]:
        def answer(command: Any) -> None:
            assert command.WhichOneof("command") == "verify_message_command"
            reply = service.TelemetryCommand(status=definition.Status(code=code))
            reply.verify_message_result.nonce = command.verify_message_command.nonce
            assert activity.telemetry(reply, md("c@verify")) is None

        return answer

    results = {}
    for code in ("OK", "FAILED_TO_CONSUME_MESSAGE", "MESSAGE_CORRUPTED", "NOT_IMPLEMENTED"):
        pushed.clear()
        answered, _ = await ask(call, pushed, verified(definition.Code.Value(code)))
        assert (answered.code, answered.remark) == (ResponseCode.SUCCESS, "")
        results[code] = orjson.loads(bytes(answered.body))
    assert results["OK"] == {
        "autoCommit": True,
        "consumeResult": "CR_SUCCESS",
        "order": False,
        "remark": "from gRPC client",
        "spentTimeMills": 0,
    }
    assert results["FAILED_TO_CONSUME_MESSAGE"]["consumeResult"] == "CR_LATER"
    assert results["MESSAGE_CORRUPTED"]["consumeResult"] == "CR_RETURN_NULL"
    assert "consumeResult" not in results["NOT_IMPLEMENTED"]  # the Java simple consumer's answer
    message = pushed[0].verify_message_command.message
    assert (message.topic.name, message.body, message.system_properties.message_id) == (TOPIC, b"verify me", "ABC")
    assert (message.system_properties.tag, list(message.system_properties.keys)) == ("TagA", ["k1"])

    pushed.clear()
    unanswered, took = await ask(call, pushed)
    assert (unanswered.code, unanswered.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
    assert 5 <= took < 10


async def test_a_resend_reaches_a_5x_push_consumer_over_its_telemetry_stream(tmp_path: Path) -> None:
    """End to end: a 4.x producer stores the message, our admin client resends it to the 5.x consumer (the
    dashboard's resend, ``queryMsgById -g -d``), which verifies it over its Telemetry stream."""
    async with front(tmp_path) as f, trio.open_nursery() as nursery:
        await create_topic(f.cluster, TOPIC)
        async with Producer("pg-relay", f.cluster.namesrv_addr) as producer:
            sent = await producer.send(Message(TOPIC, b"resend me", tags="TagA"))
        stream = RawTelemetry(f.endpoint, "java-consumer@2")
        nursery.start_soon(trio.to_thread.run_sync, stream.run)
        try:
            assert await trio.to_thread.run_sync(stream.settled.wait, 30)
            async with Admin(f.cluster.namesrv_addr) as admin:
                result = await admin.consume_message_directly(GROUP, "java-consumer@2", sent.offset_msg_id)
        finally:
            stream.close()
    assert (result["consumeResult"], result["remark"]) == ("CR_SUCCESS", "from gRPC client")
    [verify] = [c.verify_message_command for c in stream.seen if c.HasField("verify_message_command")]
    assert (verify.message.topic.name, verify.message.body, verify.message.system_properties.tag) == (
        TOPIC,
        b"resend me",
        "TagA",
    )
