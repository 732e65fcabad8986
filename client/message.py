"""Client-side message values: :class:`Message` (what a producer sends), :class:`SendResult`, and consumer helpers
around the codec's :class:`~remoting.codec.message.MessageExt` (what a consumer receives).

``Message`` is a plain mutable attrs class, like Java's: the producer reads it and never changes the caller's copy
(it works on the properties it derives). ``MessageExt`` is the codec's frozen record; :func:`uncompressed` returns a
copy with a zlib body inflated.
"""

from __future__ import annotations

import enum
import zlib

import attrs

from client.body_codecs import inflate_lz4, inflate_zstd
from remoting.codec.message import SYSFLAG_COMPRESSED, MessageExt
from remoting.codec.message_properties import (
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
)

__all__ = [
    "PROPERTY_TRANSACTION_PREPARED",
    "Message",
    "MessageExt",
    "SendResult",
    "SendStatus",
    "uncompressed",
    "uniq_msg_id",
]

#: sysFlag bits 8-10: compression type (docs/protocol.md#52-message-sysflag). 0 (old clients) and 3 both mean zlib.
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 1 << 8
COMPRESSION_ZSTD = 2 << 8
COMPRESSION_ZLIB = 3 << 8

PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_CONSUME_START_TIME = "CONSUME_START_TIME"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"


@attrs.define(slots=True)
class Message:
    """A message to send. ``tags``, ``keys`` and ``delay_level`` are stored as the well-known properties.

    ``keys`` may be one string (several keys separated by spaces) or a list. ``delay_level`` is 1..18
    (``1s 5s 10s 30s 1m ... 2h``); 0 means no delay; one below 0 is sent as its DELAY property and not delayed, as
    Java's (the broker delays only a level above 0).
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] = attrs.field(factory=dict)
    delay_level: int = 0
    flag: int = 0
    wait_store_msg_ok: bool = True
    #: The UNIQ_KEY of a half message, set by ``TransactionProducer`` before the local transaction runs (Java's
    #: ``Message.getTransactionId``); not sent.
    transaction_id: str | None = None

    def waits_for_store(self) -> bool:
        """The WAIT this message sends (Java's ``isWaitStoreMsgOK``): False when ``wait_store_msg_ok`` is, else its
        ``WAIT`` property's, absent meaning true and only ``true`` in any case true (``Boolean.parseBoolean``)."""
        if not self.wait_store_msg_ok:
            return False
        wait = self.properties.get(PROPERTY_WAIT)
        return wait is None or wait.lower() == "true"

    def all_properties(self) -> dict[str, str]:
        """The properties as they go on the wire (user properties plus TAGS, KEYS, DELAY, WAIT)."""
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = self.keys if isinstance(self.keys, str) else " ".join(self.keys)
        if self.delay_level:  # a negative one too, as Java's setDelayTimeLevel writes it; only above 0 delays
            props[PROPERTY_DELAY] = str(self.delay_level)
        if not self.wait_store_msg_ok:
            props[PROPERTY_WAIT] = "false"
        return props


class SendStatus(enum.Enum):
    """Java's SendStatus: the message is stored in every case; the non-OK values say a flush or replica lagged."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


#: The region of a send answer without ``MSG_REGION`` (Java's ``MixAll.DEFAULT_TRACE_REGION_ID``).
DEFAULT_TRACE_REGION_ID = "DefaultRegion"


@attrs.frozen(slots=True)
class SendResult:
    """Outcome of a stored send. ``msg_id`` is the client's UNIQ_KEY (comma-joined for batches) and
    ``offset_msg_id`` the broker's offset id, as in Java's SendResult. ``region_id`` is the broker's ``MSG_REGION``,
    :data:`DEFAULT_TRACE_REGION_ID` when it sent none or an empty one (Java's ``processSendResponse``)."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    region_id: str = DEFAULT_TRACE_REGION_ID
    #: The broker's ``TRACE_ON``: false only when it answered the exact text ``false`` (Java's rule).
    trace_on: bool = True
    #: RocketMQ 5.3's handle of a timer (delay) message, for :meth:`client.producer.Producer.recall_message`.
    recall_handle: str | None = None


def uniq_msg_id(msg: MessageExt) -> str:
    """Java's ``MessageClientExt.getMsgId``: the UNIQ_KEY when present, else the offset msgId."""
    return msg.properties.get(PROPERTY_UNIQ_KEY) or msg.msg_id


def uncompressed(msg: MessageExt) -> MessageExt:
    """``msg`` with its body inflated when the COMPRESSED sysFlag is set: zlib for compression type 0 or 3, an LZ4
    frame for type 1 and a Zstandard frame for type 2 (a RocketMQ 5 producer's ``compressType``), as a 5.x consumer's
    ``MessageDecoder.decode`` picks the codec (common/src/main/java/org/apache/rocketmq/common/compression/
    CompressionType.java findByValue; :mod:`client.body_codecs`).

    Unknown types are left compressed with the flag kept, so a caller can see it; a body that does not inflate raises
    ``zlib.error`` (:class:`~client.body_codecs.BodyCodecError` is one).
    """
    if not msg.sys_flag & SYSFLAG_COMPRESSED:
        return msg
    kind = msg.sys_flag & COMPRESSION_TYPE_MASK
    if kind in (0, COMPRESSION_ZLIB):
        body = zlib.decompress(msg.body)
    elif kind == COMPRESSION_LZ4:
        body = inflate_lz4(msg.body)
    elif kind == COMPRESSION_ZSTD:
        body = inflate_zstd(msg.body)
    else:
        return msg
    flags = msg.sys_flag & ~(SYSFLAG_COMPRESSED | COMPRESSION_TYPE_MASK)
    return attrs.evolve(msg, body=body, sys_flag=flags)
