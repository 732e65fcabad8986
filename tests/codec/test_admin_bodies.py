"""Admin bodies: fastjson's MessageQueue-keyed maps written and read back, and the reader's error handling."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.bodies import BodyDecodeError, MessageQueue, SubscriptionData
from remoting.codec.bodies.admin import (
    CheckClientRequestBody,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    ProducerConnection,
    TopicOffset,
    TopicStatsTable,
    loads_fastjson,
)

mqs = st.builds(
    MessageQueue,
    topic=st.text("abcXYZ_-%|0123456789", min_size=1, max_size=20),
    broker_name=st.text("ab-", min_size=1, max_size=5),
    queue_id=st.integers(0, 1023),
)
offsets = st.integers(0, 2**62)


def test_message_queue_keys_are_written_as_fastjson_objects() -> None:
    table = TopicStatsTable({MessageQueue("T", "b", 0): TopicOffset(1, 5, 7)})
    assert table.encode() == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:'
        b'{"lastUpdateTimestamp":7,"maxOffset":5,"minOffset":1}}}'
    )


@given(st.dictionaries(mqs, st.builds(TopicOffset, offsets, offsets, offsets), max_size=8))
def test_topic_stats_round_trip(table: dict[MessageQueue, TopicOffset]) -> None:
    assert TopicStatsTable.decode(TopicStatsTable(table).encode()) == TopicStatsTable(table)


@given(st.dictionaries(mqs, st.builds(OffsetWrapper, offsets, offsets, offsets), max_size=8))
def test_consume_stats_round_trip(table: dict[MessageQueue, OffsetWrapper]) -> None:
    assert ConsumeStats.decode(ConsumeStats(table, 1.5).encode()) == ConsumeStats(table, 1.5)


@pytest.mark.parametrize("text", [b"{", b'{"a":}', b"[1,2", b'{"a":1}x', b"{[1]:2}", b"\xff"])
def test_malformed_bodies_raise_body_decode_errors(text: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        loads_fastjson(text)


MQ_KEY = b'{"brokerName":"b","queueId":0,"topic":"T"}'


@pytest.mark.parametrize(
    ("cls", "body"),
    [
        (ConsumerConnection, b'{"connectionSet": 5}'),
        (ConsumerConnection, b'{"connectionSet": [{"clientId": "c", "version": "x"}]}'),
        (ConsumerConnection, b'{"subscriptionTable": []}'),
        (ProducerConnection, b'{"connectionSet": {"a": 1}}'),
        (ConsumeStats, b"[1]"),
        (ConsumeStats, b'{"consumeTps": "fast"}'),
        (ConsumeStats, b'{"offsetTable": {' + MQ_KEY + b': {"consumerOffset": [1]}}}'),
        (TopicStatsTable, b'{"offsetTable": {' + MQ_KEY + b': {"maxOffset": "x"}}}'),
    ],
)
def test_a_body_of_the_wrong_shape_raises_body_decode_error(cls: type, body: bytes) -> None:
    """A reply that parses as JSON but not as the body asked for is a BodyDecodeError (a CodecError, which the
    admin client passes over as a failed broker), never a TypeError or a bare ValueError."""
    with pytest.raises(BodyDecodeError):
        cls.decode(body)


def test_check_client_body_round_trips_and_defaults_expression_type() -> None:
    body = CheckClientRequestBody("c", "g", SubscriptionData("T", "a > 1", expression_type="SQL92"))
    assert CheckClientRequestBody.decode(body.encode()) == body
    bare = CheckClientRequestBody.decode(b'{"clientId":"c","subscriptionData":{"topic":"T","subString":"*"}}')
    assert bare.subscription_data is not None and bare.subscription_data.expression_type == "TAG"
