"""A send's DELAY as RocketMQ 4.9.8 reads it (found by a second review of the send path; each failed before): an empty
value is no property (MessageDecoder.string2messageProperties drops it), and a rejected transaction is refused
before DELAY is parsed (CommitLog parses it only in the put)."""

from __future__ import annotations

from remoting.codec.codes import ResponseCode
from remoting.codec.message import BatchEntry, encode_batch_body
from tests.processors.conftest import ServedBroker, send_request
from tests.processors.test_send_java_parity import batch_request, round_trip, stored


async def test_an_empty_delay_value_is_dropped_as_javas_decoder_does_and_the_send_is_stored(
    served: ServedBroker, served_address: tuple[str, int]
) -> None:
    """MessageDecoder.string2messageProperties keeps a pair only when ``kvSepIndex < newIndex - 1`` (a non-empty
    value): ``DELAY\\x01`` never reaches the map, getDelayTimeLevel() returns 0 and the message is stored."""
    response = await round_trip(served_address, send_request(properties="TAGS\x01t\x02DELAY\x01\x02KEYS\x01k"))
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    (record,) = stored(served.broker, response)
    assert record.topic == "TopicTest"


async def test_an_empty_delay_value_on_a_batch_is_stored(served: ServedBroker, served_address: tuple[str, int]) -> None:
    """asyncSendBatchMessage decodes the header with string2messageProperties, which drops ``DELAY\\x01``;
    CommitLog.asyncPutMessages' getDelayTimeLevel() is 0 and the batch is stored."""
    body = encode_batch_body([BatchEntry(b"a", "TAGS\x01x")])
    response = await round_trip(served_address, batch_request(body, properties="DELAY\x01"))
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)


async def test_a_rejected_transaction_with_a_bad_delay_answers_no_permission(make_broker, peer_ctx) -> None:
    """asyncSendMessage checks rejectTransactionMessage (NO_PERMISSION) before any put; DELAY is only parsed inside
    CommitLog.asyncPutMessage, which is never reached. We answer SYSTEM_ERROR first."""
    from processors.send import SendMessageProcessor

    broker = make_broker(reject_transaction_message=True)
    response = await SendMessageProcessor(broker).process(
        peer_ctx, send_request(properties="TRAN_MSG\x01true\x02DELAY\x01x")
    )
    assert response is not None
    assert response.code == ResponseCode.NO_PERMISSION, (response.code, response.remark)
