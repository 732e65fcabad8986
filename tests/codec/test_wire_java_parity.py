"""The wire codec reads what RocketMQ 4.9.8's reads (found by a review; each failed before): header bytes that are not
UTF-8 become U+FFFD (RemotingSerializable.decode's ``new String(data, UTF_8)``, RocketMQSerializable.readStr), so a
C++ client's GBK key is answered instead of its connection closed; a ROCKETMQ binary ext value of length 0 is null; a
header boolean other than true is false (Boolean.parseBoolean); a batch entry's size word is not read
(CommitLog.MessageExtBatchEncoder walks an entry by its lengths)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

import pytest
import trio

from remoting.codec.errors import HeaderFieldError
from remoting.codec.headers.admin import DeleteSubscriptionGroupRequestHeader
from remoting.codec.headers.offsets import QueryConsumerOffsetRequestHeader
from remoting.codec.serializers import decode_json, decode_rocketmq
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.server import RemotingServer, ServerConfig
from tests.remoting.helpers import EchoProcessor, RawPeer

GBK_NI = b"\xc4\xe3"  # "你" in GBK: not UTF-8. Java's UTF-8 decoders give two U+FFFD for it.


def _rocketmq_header(remark: bytes = b"", ext: list[tuple[bytes, bytes]] = ()) -> bytes:  # type: ignore[assignment]
    """RocketMQSerializable.rocketMQProtocolEncode's layout."""
    block = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return (
        struct.pack(">hBhii", 1000, 0, 409, 5, 0)
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", len(block))
        + block
    )


# ---- non-UTF-8 bytes in header strings ------------------------------------------------------------------------


def test_json_header_with_non_utf8_bytes_is_decoded_with_replacement() -> None:
    """RemotingSerializable.decode does ``new String(data, UTF_8)`` (malformed bytes -> U+FFFD) and fastjson parses
    the result: a C++ client's GBK key is accepted. orjson refuses the bytes, so the frame is a decode error."""
    header = b'{"code":1000,"extFields":{"KEYS":"' + GBK_NI + b'"},"flag":0,"language":"CPP","opaque":1,"version":409}'
    cmd = decode_json(header, b"")
    assert cmd.ext_fields == {"KEYS": "\ufffd\ufffd"}


def test_rocketmq_header_remark_with_non_utf8_bytes_is_decoded_with_replacement() -> None:
    """RocketMQSerializable.readStr uses Netty's ``ByteBuf.readCharSequence(len, UTF_8)``, whose decoder replaces
    malformed input (CharsetUtil.decoder: CodingErrorAction.REPLACE); it never fails on bad bytes."""
    cmd = decode_rocketmq(_rocketmq_header(remark=GBK_NI), b"")
    assert cmd.remark == "\ufffd\ufffd"


def test_rocketmq_header_ext_value_with_non_utf8_bytes_is_decoded_with_replacement() -> None:
    """Same readStr for extFields keys and values (RocketMQSerializable.mapDeserialize)."""
    cmd = decode_rocketmq(_rocketmq_header(ext=[(b"KEYS", GBK_NI)]), b"")
    assert cmd.ext_fields == {"KEYS": "\ufffd\ufffd"}


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def test_server_answers_a_json_request_with_non_utf8_bytes_instead_of_closing(nursery: trio.Nursery) -> None:
    """A Java server decodes the frame (new String(..., UTF_8)) and answers it; rocketrio closes the connection on
    the HeaderDecodeError, so the client sees end of stream instead of a response."""
    processor = EchoProcessor()
    dispatcher = Dispatcher()
    dispatcher.register(1000, processor, ProcessorPool("work", 4, 100))  # type: ignore[arg-type]
    address = await nursery.start(RemotingServer(dispatcher, ServerConfig()).serve, "127.0.0.1", 0)
    peer = await RawPeer.connect(address)
    header = b'{"code":1000,"extFields":{"KEYS":"' + GBK_NI + b'"},"flag":0,"language":"CPP","opaque":7,"version":409}'
    await peer.stream.send_all(struct.pack(">ii", 4 + len(header), len(header)) + header)
    answer = await peer.receive()
    assert answer is not None, "the server closed the connection instead of answering"
    assert answer.opaque == 7


# ---- ROCKETMQ binary: a zero-length string is null ------------------------------------------------------------


def test_rocketmq_header_ext_value_of_length_zero_is_null() -> None:
    """RocketMQSerializable.readStr returns null for length 0, so ``extFields.get(k)`` is null and
    RemotingCommand.decodeCommandCustomHeader throws "the custom field <consumerGroup> is null" for a @CFNotNull
    field (QueryConsumerOffsetRequestHeader). rocketrio keeps ``""`` and accepts the header."""
    cmd = decode_rocketmq(_rocketmq_header(ext=[(b"consumerGroup", b""), (b"topic", b"T"), (b"queueId", b"0")]), b"")
    with pytest.raises(HeaderFieldError):
        QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)


# ---- header field parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["yes", "on", "t"])
def test_boolean_field_that_is_not_true_reads_as_false(raw: str) -> None:
    """decodeCommandCustomHeader parses booleans with Boolean.parseBoolean: anything but "true" (any case) is false,
    never an error. rocketrio raises HeaderFieldError, so a request Java serves is refused."""
    header = DeleteSubscriptionGroupRequestHeader.from_ext_fields({"groupName": "g", "removeOffset": raw})
    assert header.remove_offset is False


# ---- SEND_BATCH_MESSAGE body ----------------------------------------------------------------------------------


def test_batch_entry_total_size_word_is_ignored_like_java() -> None:
    """CommitLog.MessageExtBatchEncoder.encode (4.9.8 store/.../CommitLog.java) reads each entry's TOTALSIZE with a
    bare ``getInt()`` and walks the entry by its body and properties lengths; the word is never checked. rocketrio
    refuses the whole batch when the word disagrees (here a client that wrote 0)."""
    from remoting.codec.batch_body import split_stored_entries

    props = b"TAGS\x01a"
    entry = struct.pack(">iiiii", 0, 0, 0, 0, 3) + b"abc" + struct.pack(">h", len(props)) + props
    entries = split_stored_entries(entry + entry, "CLUSTER\x01c")
    assert [(body, flag) for body, _props, flag in entries] == [(b"abc", 0), (b"abc", 0)]
