"""Recall handles as RocketMQ 5.3 writes and reads them (``RecallMessageHandle.java``): URL-safe base64 of
``v1 topic brokerName timestamp messageId``; Java's decoder rules for padding, alphabet, UTF-8 and ``split(" ")``;
``NumberUtils.toLong`` for the timestamp; the RECALL_MESSAGE headers."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.codes import RequestCode
from remoting.codec.headers import HEADER_BY_REQUEST_CODE, RecallMessageRequestHeader, SendMessageResponseHeader
from remoting.codec.recall_handle import (
    RecallHandle,
    RecallHandleError,
    decode_recall_handle,
    encode_recall_handle,
    java_long_or,
)

#: What Java's ``HandleV1.buildHandle("TopicA", "broker-a", "1700000000001", <id>)`` returns.
GOLDEN = "djEgVG9waWNBIGJyb2tlci1hIDE3MDAwMDAwMDAwMDEgN0YwMDAwMDEwMDAwMkE5RjAwMDAwMDAwMDAwMDAwMDE="
GOLDEN_PARTS = RecallHandle("TopicA", "broker-a", "1700000000001", "7F00000100002A9F0000000000000001")

_part = st.text(st.characters(blacklist_characters=" ", blacklist_categories=("Cs",)), min_size=1, max_size=40)


def _b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


def test_the_golden_handle_encodes_and_decodes() -> None:
    assert encode_recall_handle(*GOLDEN_PARTS) == GOLDEN
    assert decode_recall_handle(GOLDEN) == GOLDEN_PARTS


@given(_part, _part, _part, _part)
def test_every_handle_decodes_to_its_parts_with_or_without_padding(
    topic: str, broker: str, timestamp: str, message_id: str
) -> None:
    handle = encode_recall_handle(topic, broker, timestamp, message_id)
    assert set(handle.rstrip("=")) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_recall_handle(handle) == (topic, broker, timestamp, message_id)
    assert decode_recall_handle(handle.rstrip("=")) == (topic, broker, timestamp, message_id)


@pytest.mark.parametrize(
    "handle",
    [
        "",
        "v1 a b c d",  # not base64 (spaces)
        _b64("v1 a b c"),  # four items
        _b64("v2 a b c d"),  # another version
        _b64("    "),  # nothing but separators
        _b64("v1 a b c d").replace("-", "+") + "+",  # '+' is not in the URL-safe alphabet
        "djEgYSBiIGMgZA/=",
        "QQ=",  # '=' that does not complete its unit
        "QUJDRA=",
        "QUJDR",  # a lone character in the last unit
        GOLDEN + "=",
        GOLDEN + "\n",
    ],
)
def test_what_java_refuses_is_refused_with_its_message(handle: str) -> None:
    with pytest.raises(RecallHandleError, match=r"^recall handle is invalid$"):
        decode_recall_handle(handle)


def test_items_are_split_as_javas_string_split() -> None:
    assert decode_recall_handle(_b64("v1 a b c d   ")) == ("a", "b", "c", "d")  # trailing empties dropped
    assert decode_recall_handle(_b64("v1 a b c d e f")) == ("a", "b", "c", "d")  # the rest ignored
    assert decode_recall_handle(_b64("v1 a  b c")) == ("a", "", "b", "c")  # an inner empty item counts
    assert decode_recall_handle(_b64("v1 Té b 1 m?>")) == ("Té", "b", "1", "m?>")
    bad_utf8 = base64.urlsafe_b64encode(b"v1 a\xff b c d").decode()
    assert decode_recall_handle(bad_utf8) == ("a\ufffd", "b", "c", "d")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1700000000001", 1700000000001),
        ("+5", 5),
        ("-1", -1),
        ("9223372036854775807", (1 << 63) - 1),
        ("9223372036854775808", -7),
        ("", -7),
        (" 1", -7),
        ("1_000", -7),
        ("1.0", -7),
        ("0x10", -7),
    ],
)
def test_timestamps_are_read_as_java_longs(text: str, value: int) -> None:
    assert java_long_or(text, -7) == value


def test_the_recall_headers_on_the_wire() -> None:
    assert HEADER_BY_REQUEST_CODE[RequestCode.RECALL_MESSAGE] is RecallMessageRequestHeader
    header = RecallMessageRequestHeader(topic="T", recall_handle=GOLDEN, producer_group="PG")
    assert header.to_ext_fields() == {"topic": "T", "recallHandle": GOLDEN, "producerGroup": "PG"}
    assert RecallMessageRequestHeader.from_ext_fields({"topic": "T", "recallHandle": "h"}).producer_group is None
    answer = SendMessageResponseHeader.from_ext_fields({"msgId": "m", "queueId": "0", "queueOffset": "3"})
    assert answer.recall_handle is None
    answer = SendMessageResponseHeader.from_ext_fields(
        {"msgId": "m", "queueId": "0", "queueOffset": "3", "recallHandle": GOLDEN}
    )
    assert answer.recall_handle == GOLDEN
