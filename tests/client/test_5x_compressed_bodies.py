"""Bodies a RocketMQ 5 producer compresses with ``compressType`` LZ4 or ZSTD (sysFlag COMPRESSED | type << 8,
common/src/main/java/org/apache/rocketmq/common/sysflag/MessageSysFlag.java), and a 5.x consumer's
``MessageDecoder.decode`` inflates (``CompressionType.findByValue``): common/.../compression/Lz4Compressor.java writes
one LZ4 frame with lz4-java's ``LZ4FrameOutputStream``, ZstdCompressor.java one Zstandard frame with zstd-jni's
``ZstdOutputStream``. The LZ4 frames below were written by lz4-java 1.11's ``LZ4FrameOutputStream``: the default one
Lz4Compressor uses, and one with 64 KiB blocks, the content size and block and content checksums; the ZSTD frame by
zstd-jni 1.5.7's ``ZstdOutputStream`` at level 5 (RocketMQ's default ``compressLevel``), as ZstdCompressor writes it.
Virtual time against the embedded name server and broker, real sockets on 127.0.0.1."""

from __future__ import annotations

import time
import zlib

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client import api
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import MessageExt, uncompressed
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.headers import SendMessageRequestHeaderV2
from remoting.codec.message import SYSFLAG_COMPRESSED, MessageRecord, decode_record, encode_record

#: MessageSysFlag.COMPRESSION_LZ4_TYPE
COMPRESSION_LZ4 = 1 << 8
#: MessageSysFlag.COMPRESSION_ZSTD_TYPE
COMPRESSION_ZSTD = 2 << 8

#: What both frames hold: 33,108 bytes of text.
CONTENT = (
    b"The quick brown fox jumps over the lazy dog; RocketMQ 5 LZ4 body. "
    + b"".join(b"rocketmq-%d " % (i % 7) for i in range(3000))
    + b"tail: 0123456789abcdefghijklmnopqrstuvwxyz"
)
#: ``new LZ4FrameOutputStream(out)``, as Lz4Compressor.compress writes it.
DEFAULT_FRAME = bytes.fromhex(
    "04224d1860707317010000f13454686520717569636b2062726f776e20666f78206a756d7073206f76657220746865206c617a79"
    "20646f673b20526f636b65744d512035204c5a3420626f64792e20721500466d712d300b0016310b0016320b0016330b0016340b"
    "0016350b0016360b000f4d00ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff00f01b7461696c3a20303132333435"
    "363738396162636465666768696a6b6c6d6e6f707172737475767778797a00000000"
)
#: ``LZ4FrameOutputStream(out, SIZE_64KB, length, BLOCK_INDEPENDENCE, CONTENT_CHECKSUM, BLOCK_CHECKSUM, CONTENT_SIZE)``.
FLAGGED_FRAME = bytes.fromhex(
    "04224d187c4054810000000000000017010000f13454686520717569636b2062726f776e20666f78206a756d7073206f76657220"
    "746865206c617a7920646f673b20526f636b65744d512035204c5a3420626f64792e20721500466d712d300b0016310b0016320b"
    "0016330b0016340b0016350b0016360b000f4d00ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff00f01b7461696c"
    "3a20303132333435363738396162636465666768696a6b6c6d6e6f707172737475767778797ae376b47700000000d7e2436e"
)

#: ``new ZstdOutputStream(out, 5)``, as ZstdCompressor.compress writes it, holding :data:`ZSTD_CONTENT`.
ZSTD_FRAME = bytes.fromhex(
    "28b52ffd0058bd0900d6604618a0b7d001287457cce6c5bdcd1843f89652269912af55150e46003c003c00457371b9513417971b"
    "457371b9513417971b457371b9513417971b457371b9513417971b457371b9513417971b4573715930ac9050b018281c0200040a"
    "2f2410080607040b451b457371b9513417971b457371b9513417971b457371b9513417971b457371b9513417971b457371b95134"
    "17971b457371b9513417971b457371b911e546d15c5c6e14cdc5e546d15c5c6e14cdc5e546d15c5c6e14cdc5e546d15c5c6e14cd"
    "c5e546d15c5c6e14cdc5e546d15c5c6e14cdc5e546d15c5c0605c3289a8bcb8da2b9b8dc289a8bcb8da2b9b8dc289a8bcb8da2b9"
    "b8dc289a8bcb8da2b9b8dc289a8bcb8da2b9b8dc289a8bcb8da2b9b8dc289a8b0381f3a811e0ef7f07e1cf0111fcaf10f0074926"
    "9964521e6516a8aa"
)
#: 12,000 bytes: ``"RocketMQ 5 ZSTD body <i % 10>; "`` for i in 0..499.
ZSTD_CONTENT = b"".join(b"RocketMQ 5 ZSTD body %d; " % (i % 10) for i in range(500))


@pytest.mark.parametrize("frame", [DEFAULT_FRAME, FLAGGED_FRAME], ids=["default", "checksums"])
def test_an_lz4_body_is_inflated_as_a_5x_consumer_inflates_it(frame: bytes) -> None:
    flags = SYSFLAG_COMPRESSED | COMPRESSION_LZ4
    msg = decode_record(encode_record(MessageRecord(topic="T", body=frame, sys_flag=flags)))
    plain = uncompressed(msg)
    assert plain.body == CONTENT
    assert not plain.sys_flag & (SYSFLAG_COMPRESSED | COMPRESSION_LZ4)


async def test_a_push_consumer_gets_the_content_of_a_5x_producers_lz4_body(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The message is sent as a 5.x Java producer sends it (SEND_MESSAGE_V2, sysFlag 0x101, the LZ4 frame as body);
    the listener gets the text, as a 5.x Java consumer's does. It used to get the frame itself."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("Lz4Topic", read_queue_nums=1, write_queue_nums=1)
    flags = SYSFLAG_COMPRESSED | COMPRESSION_LZ4
    header = SendMessageRequestHeaderV2(
        a="pg-java5", b="Lz4Topic", c="TBW102", d=4, e=0, f=flags, g=int(time.time() * 1000), h=0, i=""
    )
    async with RemotingClient() as client:
        await api.send_message(
            client, embedded_cluster.broker_addr, "broker-a", header.to_ext_fields(), DEFAULT_FRAME, 3.0, uniq_id=""
        )
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "cg-lz4", embedded_cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("Lz4Topic")
    consumer.register_message_listener(listener)
    async with consumer:
        with trio.move_on_after(60):
            while not seen:
                await trio.sleep(0.1)
    assert seen == [CONTENT]


def test_a_zstd_body_is_inflated_as_a_5x_consumer_inflates_it() -> None:
    msg = decode_record(
        encode_record(MessageRecord(topic="T", body=ZSTD_FRAME, sys_flag=SYSFLAG_COMPRESSED | COMPRESSION_ZSTD))
    )
    plain = uncompressed(msg)
    assert plain.body == ZSTD_CONTENT
    assert not plain.sys_flag & (SYSFLAG_COMPRESSED | COMPRESSION_ZSTD)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        (COMPRESSION_LZ4, b"no frame at all"),
        (COMPRESSION_ZSTD, b"no frame at all"),
        (COMPRESSION_ZSTD, ZSTD_FRAME[:-9]),
    ],
    ids=["lz4-garbage", "zstd-garbage", "zstd-cut"],
)
def test_a_body_that_does_not_inflate_raises_zlib_error(kind: int, body: bytes) -> None:
    """Callers that drop or keep a body that does not inflate catch ``zlib.error``, whatever the codec."""
    msg = decode_record(encode_record(MessageRecord(topic="T", body=body, sys_flag=SYSFLAG_COMPRESSED | kind)))
    with pytest.raises(zlib.error):
        uncompressed(msg)


#: An LZ4 skippable frame (magic 0x184D2A50..5F, a 4-byte size, that many bytes): a reader passes over it.
LZ4_SKIPPABLE = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"


@pytest.mark.parametrize(
    ("kind", "body", "content"),
    [
        (COMPRESSION_LZ4, DEFAULT_FRAME + FLAGGED_FRAME, CONTENT + CONTENT),
        (COMPRESSION_LZ4, LZ4_SKIPPABLE + DEFAULT_FRAME, CONTENT),
        (COMPRESSION_ZSTD, ZSTD_FRAME + ZSTD_FRAME, ZSTD_CONTENT + ZSTD_CONTENT),
    ],
    ids=["lz4-two-frames", "lz4-skippable", "zstd-two-frames"],
)
def test_every_frame_of_a_body_is_inflated(kind: int, body: bytes, content: bytes) -> None:
    """lz4-java's ``LZ4FrameInputStream`` reads frame after frame to the end of its input (skipping skippable frames)
    and zstd-jni's ``ZstdInputStream`` too: a body of two frames reads as both contents, not the first alone."""
    msg = decode_record(encode_record(MessageRecord(topic="T", body=body, sys_flag=SYSFLAG_COMPRESSED | kind)))
    assert uncompressed(msg).body == content


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        (COMPRESSION_LZ4, DEFAULT_FRAME + b"trailing junk"),
        (COMPRESSION_ZSTD, ZSTD_FRAME + b"trailing junk"),
        (COMPRESSION_LZ4, DEFAULT_FRAME + DEFAULT_FRAME[:-9]),
    ],
    ids=["lz4-junk", "zstd-junk", "lz4-second-frame-cut"],
)
def test_bytes_after_the_frame_that_are_no_frame_do_not_inflate(kind: int, body: bytes) -> None:
    """What follows a frame is read as the next frame (LZ4FrameInputStream, ZstdInputStream): junk or a frame cut
    short fails as the whole body does, it is not dropped unseen."""
    msg = decode_record(encode_record(MessageRecord(topic="T", body=body, sys_flag=SYSFLAG_COMPRESSED | kind)))
    with pytest.raises(zlib.error):
        uncompressed(msg)
