"""The producer's batch rules against Java's ``MessageBatch.generateFromList`` and ``DefaultMQProducer.batch``
(common/src/main/java/org/apache/rocketmq/common/message/MessageBatch.java,
client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java): a batch the Java client refuses is
refused here before anything is sent, with a :class:`~client.errors.MessageValidationError`."""

from __future__ import annotations

import pytest

from client.errors import MessageValidationError
from client.message import Message
from client.send_request import SendBuilder
from remoting.codec.msgid import UniqKeyGenerator


@pytest.mark.parametrize("delay", ["3", "1"])
def test_a_batch_message_with_a_delay_property_is_refused(delay: str) -> None:
    """Java's ``getDelayTimeLevel`` reads the DELAY property: a batch message carrying one is refused ("TimeDelayLevel
    is not supported for batching"), as one with ``delay_level`` is; the broker only reads the batch's own header, so
    sent it would be stored for delivery at once."""
    builder = SendBuilder("group", UniqKeyGenerator())
    msgs = [Message("T", b"a"), Message("T", b"b", properties={"DELAY": delay})]
    with pytest.raises(MessageValidationError, match="Failed to initiate the MessageBatch") as refused:
        builder.batch(msgs)
    assert str(refused.value.__cause__) == "TimeDelayLevel is not supported for batching"


def test_a_batch_message_whose_properties_overflow_the_int16_length_is_a_validation_error() -> None:
    """MessageDecoder.encodeMessage throws for properties over 32,767 bytes and ``batch`` wraps it in an
    MQClientException ("Failed to initiate the MessageBatch"): nothing is sent and the caller gets the client's error,
    not a codec ValueError."""
    builder = SendBuilder("group", UniqKeyGenerator())
    msgs = [Message("T", b"a"), Message("T", b"b", properties={"P": "y" * 40000})]
    with pytest.raises(MessageValidationError, match="Failed to initiate the MessageBatch") as refused:
        builder.batch(msgs)
    assert "32767" in str(refused.value.__cause__)
