"""Where an async send's refusal of a message goes: RocketMQ 4.9.8's ``DefaultMQProducerImpl.send(msg, callback,
timeout)``, ``send(msg, mq, callback, timeout)`` and ``send(msg, selector, arg, callback, timeout)`` run
``Validators.checkMessage`` inside the async sender executor's task, so a message it refuses reaches
``SendCallback.onException`` and the call itself returns (client/src/main/java/org/apache/rocketmq/client/impl/producer/
DefaultMQProducerImpl.java; 5.3.3 alike). A batch's messages are checked by ``DefaultMQProducer.batch`` on the
caller's thread, but the encoded batch's size by ``sendDefaultImpl``, in the executor. Embedded broker, real sockets."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.errors import MessageValidationError
from client.message import Message, SendResult
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import ResponseCode


class Outcomes:
    """A send callback that keeps what it gets."""

    def __init__(self) -> None:
        self.got: list[SendResult | Exception] = []
        self.arrived = trio.Event()

    def __call__(self, outcome: SendResult | Exception) -> None:
        self.got.append(outcome)
        self.arrived.set()

    async def one(self) -> SendResult | Exception:
        with trio.fail_after(10):
            await self.arrived.wait()
        [outcome] = self.got
        return outcome


def _first_queue(queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    return queues[0]


@pytest.mark.parametrize(
    ("message", "code", "text"),
    [
        (Message("AsyncBody", b""), ResponseCode.MESSAGE_ILLEGAL, "the message body length is zero"),
        (Message("AsyncBody", b"x" * 1025), ResponseCode.MESSAGE_ILLEGAL, "the message body size over max value"),
        (Message("Bad Topic", b"x"), -1, "contains illegal characters"),
    ],
    ids=["empty-body", "over-max-message-size", "illegal-topic"],
)
@pytest.mark.parametrize("mode", ["default", "queue", "selector"])
async def test_an_async_send_of_a_message_java_refuses_calls_back_with_the_refusal(
    embedded_cluster: EmbeddedCluster, message: Message, code: int, text: str, mode: str
) -> None:
    """Before, ``send_async`` raised MessageValidationError at the call and never called back: an application whose
    error handling is in its callback, as a Java one's is, saw its send loop fail instead."""
    async with Producer("pg-async-check", embedded_cluster.namesrv_addr, max_message_size=1024) as producer:
        await producer.send(Message("AsyncBody", b"route"))
        info = await producer.publish_info("AsyncBody")
        broker_name = info.message_queues[0].broker_name
        options: dict[str, object] = {
            "default": {},
            "queue": {"queue": MessageQueue(message.topic, broker_name, 0)},
            "selector": {"selector": _first_queue},
        }[mode]  # type: ignore[assignment]
        callback = Outcomes()
        producer.send_async(message, callback, **options)  # type: ignore[arg-type]
        outcome = await callback.one()
    assert isinstance(outcome, MessageValidationError)
    assert outcome.response_code == code and text in str(outcome)


async def test_an_async_batch_over_max_message_size_calls_back_and_a_broken_rule_still_raises(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """The batch's encoded size is ``sendDefaultImpl``'s check (the callback's), a delay level ``batch``'s (the
    caller's). Before, the size raised at the call too."""
    async with Producer("pg-async-batch", embedded_cluster.namesrv_addr, max_message_size=1024) as producer:
        callback = Outcomes()
        producer.send_batch_async([Message("AsyncBatch", b"x" * 400) for _ in range(3)], callback)
        outcome = await callback.one()
        with pytest.raises(MessageValidationError, match="Failed to initiate the MessageBatch") as refused:
            producer.send_batch_async([Message("AsyncBatch", b"x", delay_level=3)], callback)
    assert str(refused.value.__cause__) == "TimeDelayLevel is not supported for batching"
    assert isinstance(outcome, MessageValidationError)
    assert outcome.response_code == ResponseCode.MESSAGE_ILLEGAL
    assert "the message body size over max value, MAX: 1024" in str(outcome)


@pytest.mark.parametrize("kind", ["message", "batch"])
async def test_a_refusal_is_called_back_after_the_send_returned(embedded_cluster: EmbeddedCluster, kind: str) -> None:
    """Java's ``send(msg, callback)`` runs ``Validators.checkMessage`` (and ``sendDefaultImpl``'s batch size check)
    in its async sender's task, so ``onException`` runs after ``send`` returned, never inside it. Ours called back
    synchronously inside ``send_async``: a callback that sends the refused message again recursed without end."""
    async with Producer("pg-async-later", embedded_cluster.namesrv_addr, max_message_size=1024) as producer:
        returned = False
        seen: list[tuple[bool, SendResult | Exception]] = []
        arrived = trio.Event()

        def resend(outcome: SendResult | Exception) -> None:
            seen.append((returned, outcome))
            if len(seen) < 3:
                send()
            else:
                arrived.set()

        def send() -> None:
            nonlocal returned
            returned = False
            if kind == "message":
                producer.send_async(Message("AsyncLater", b"x" * 1025), resend)
            else:
                producer.send_batch_async([Message("AsyncLater", b"x" * 400) for _ in range(3)], resend)
            returned = True

        send()
        with trio.fail_after(10):
            await arrived.wait()
    assert [after for after, _ in seen] == [True, True, True]
    assert all(isinstance(outcome, MessageValidationError) for _, outcome in seen)
