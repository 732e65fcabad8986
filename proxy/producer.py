"""SendMessage and EndTransaction (RocketMQ's SendMessageActivity and EndTransactionActivity,
proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/producer/ and .../transaction/).

A send is checked as RocketMQ's proxy checks it (:meth:`Producing.check`), mapped to 4.x properties
(:func:`proxy.convert.send_properties`), its type checked against the topic's ``message.type`` attribute
(:meth:`Producing.check_type`: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, nothing stored) and handed to the broker's own send
processor as SEND_MESSAGE_V2 through the :class:`~proxy.local.LocalInvoker`, so timers, transactions, permissions and
flushing behave as for a 4.x send. The proxy picks the queue: a message group always goes to the same queue (Guava's
``Hashing.consistentHash`` of the group's Java ``String.hashCode`` over the write queues, as RocketMQ's proxy picks
it), other messages round-robin.
Transactions are remembered by transaction id (= the message id) with the half message's offsets, which EndTransaction
needs; a restart forgets them, and the broker's check then asks the producer over Telemetry.

A timer (delay) message's entry carries the ``recall_handle`` the broker's send answer holds (empty for other
messages, as RocketMQ 5.3's SendMessageActivity answers). RecallMessage (:meth:`Producing.recall`, RocketMQ 5.3's
``RecallMessageActivity`` and ``ProducerProcessor.recallMessage``): the topic's name (ILLEGAL_TOPIC, system topics
too), its ``message.type`` DELAY or MIXED (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; a topic without the attribute
takes it, an unknown topic does not), the handle decodes (else INTERNAL_SERVER_ERROR "recall handle is invalid"), then
RECALL_MESSAGE through the broker's recall processor; any refusal there is INTERNAL_SERVER_ERROR with its remark.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Final

from broker.context import BrokerState
from processors.topic_attributes import MESSAGE_TYPE, TopicMessageType, message_type_of, topic_type
from proxy.common import Code, RpcError, finish_now, peer_of, status, status_of_response_code
from proxy.config import ProxyConfig
from proxy.convert import RESERVED, SYSFLAG_COMPRESSED, SYSFLAG_TRANSACTION_PREPARED, send_properties
from proxy.local import LocalInvoker
from proxy.pb import definition, service
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.headers.recall import RecallMessageRequestHeader
from remoting.codec.headers.send import SendMessageRequestHeader
from remoting.codec.headers.transaction import EndTransactionRequestHeader
from remoting.codec.message_properties import encode_properties, java_string_hash
from remoting.codec.msgid import decode_offset_msg_id
from remoting.codec.recall_handle import RecallHandleError, decode_recall_handle
from remoting.codec.topics import is_system_topic, validate_topic

__all__ = ["Producing", "consistent_hash"]

_MASK64: Final = (1 << 64) - 1
_LCG_MULTIPLIER: Final = 2862933555777941757
_INT_MAX: Final = (1 << 31) - 1
_COMMIT: Final = 8
_ROLLBACK: Final = 12
_MAX_USER_PROPERTIES: Final = 128
_MAX_PROPERTIES_SIZE: Final = 16 * 1024
#: Open transactions remembered for EndTransaction; beyond it the oldest is forgotten (the broker's check then asks
#: its producer, whose answer names the offsets again).
_MAX_OPEN_TRANSACTIONS: Final = 100_000
_UNCHECKED_PREFIXES: Final = ("%RETRY%", "%DLQ%")
#: Protobuf enum values read per message, looked up once (each attribute access of an enum wrapper costs a call).
_TRANSACTION: Final = int(definition.MessageType.TRANSACTION)
_GZIP: Final = int(definition.Encoding.GZIP)


class Producing:
    """The producer RPCs of one proxy; state: the open transactions (id -> commit-log offset, queue offset)."""

    def __init__(self, broker: BrokerState, config: ProxyConfig, invoker: LocalInvoker) -> None:
        self.broker = broker
        self.config = config
        self.invoker = invoker
        self.transactions: dict[str, tuple[int, int]] = {}
        self._round_robin = itertools.count()

    def check(self, msg: Any) -> None:
        """RocketMQ's proxy checks of one message; raises RpcError."""
        sp = msg.system_properties
        if not msg.body:
            raise RpcError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        if len(msg.body) > self.config.max_message_size:
            raise RpcError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed {self.config.max_message_size}")
        if not sp.message_id:
            raise RpcError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        if sp.HasField("tag") and (not sp.tag.strip() or "|" in sp.tag):
            raise RpcError(Code.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is illegal")
        if any(not k.strip() for k in sp.keys):
            raise RpcError(Code.ILLEGAL_MESSAGE_KEY, "message keys cannot be blank")
        if sp.HasField("message_group") and (not sp.message_group.strip() or len(sp.message_group) >= 64):
            raise RpcError(Code.ILLEGAL_MESSAGE_GROUP, "message group is illegal")
        if len(msg.user_properties) > _MAX_USER_PROPERTIES:
            raise RpcError(Code.MESSAGE_PROPERTIES_TOO_LARGE, "too many user properties")
        for key in msg.user_properties:
            if key in RESERVED or not key.strip():
                raise RpcError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property key {key!r} is reserved or blank")
        size = sum(len(k) + len(v) for k, v in msg.user_properties.items()) + len(sp.tag) + sum(map(len, sp.keys))
        if size > _MAX_PROPERTIES_SIZE:
            raise RpcError(Code.MESSAGE_PROPERTIES_TOO_LARGE, "properties exceed 16 KiB")
        if sp.HasField("delivery_timestamp"):
            ahead = sp.delivery_timestamp.ToMilliseconds() - int(time.time() * 1000)
            if ahead > self.config.max_delay_time_mills:
                raise RpcError(Code.ILLEGAL_DELIVERY_TIME, "delivery time is too far ahead")

    def send_now(self, req: Any, metadata: dict[str, str]) -> Any | None:
        """:meth:`send` run to its end synchronously, without a Trio task, when no part of it can wait: the store
        answers puts at once (ASYNC_FLUSH and no SYNC_MASTER). ``None``: the caller must await :meth:`send`."""
        if self.broker.store.waits_for_put(True):
            return None
        return finish_now(self.send(req, metadata))

    async def send(self, req: Any, metadata: dict[str, str]) -> Any:
        if not req.messages:
            raise RpcError(Code.MESSAGE_CORRUPTED, "no message to send")
        topic = req.messages[0].topic.name
        if any(m.topic.name != topic for m in req.messages):
            raise RpcError(Code.MESSAGE_CORRUPTED, "messages of one request must share a topic")
        for msg in req.messages:
            self.check(msg)
        props = [send_properties(msg, topic) for msg in req.messages]
        for each in props:
            self.check_type(topic, each)
        response = service.SendMessageResponse()
        entries = [await self._send_one(msg, topic, p, metadata) for msg, p in zip(req.messages, props, strict=True)]
        response.entries.extend(entries)
        codes = {e.status.code for e in entries}
        response.status.CopyFrom(entries[0].status if len(codes) == 1 else status(Code.MULTIPLE_RESULTS, "mixed"))
        return response

    def _queue_id(self, topic: str, group: str | None) -> int:
        config = self.broker.topics.get(topic)
        count = config.write_queue_nums if config is not None and config.write_queue_nums > 0 else 1
        if group is not None:
            return consistent_hash(java_string_hash(group), count)
        return next(self._round_robin) % count

    def check_type(self, topic: str, props: dict[str, str]) -> None:
        """The message's type against its topic's ``message.type`` (``DefaultTopicMessageTypeValidator``): a topic
        without one (every 4.x topic) takes every type; retry and DLQ topics are not checked. Raises RpcError."""
        if not self.config.enable_topic_message_type_check or topic.startswith(_UNCHECKED_PREFIXES):
            return
        config = self.broker.topics.get(topic)
        expected = None if config is None else topic_type(config.attribute(MESSAGE_TYPE))
        if expected is None:
            return
        actual = message_type_of(props)
        if actual != expected and expected is not TopicMessageType.MIXED:
            raise RpcError(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"TopicMessageType validate failed, the expected type is {expected.value}, "
                f"but actual type is {actual.value}",
            )

    async def _send_one(self, msg: Any, topic: str, props: dict[str, str], metadata: dict[str, str]) -> Any:
        sp = msg.system_properties
        sys_flag = SYSFLAG_TRANSACTION_PREPARED if sp.message_type == _TRANSACTION else 0
        if sp.body_encoding == _GZIP:
            sys_flag |= SYSFLAG_COMPRESSED
        group = sp.message_group if sp.HasField("message_group") else None
        header = SendMessageRequestHeader(
            producer_group=topic,
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=self._queue_id(topic, group),
            sys_flag=sys_flag,
            born_timestamp=sp.born_timestamp.ToMilliseconds() or int(time.time() * 1000),
            flag=0,
            properties=encode_properties(props),
            reconsume_times=max(0, sp.delivery_attempt - 1) if sp.HasField("delivery_attempt") else 0,
        )
        answer = await self.invoker.send(header, bytes(msg.body), peer_of(metadata))
        entry = service.SendResultEntry(message_id=sp.message_id)
        if answer.code != ResponseCode.SUCCESS:
            entry.status.CopyFrom(status(status_of_response_code(answer.code), answer.remark or "send failed"))
            return entry
        ext = answer.ext_fields or {}
        entry.status.CopyFrom(status())
        entry.transaction_id = sp.message_id
        entry.offset = int(ext.get("queueOffset", "0"))
        entry.recall_handle = ext.get("recallHandle", "")
        if sys_flag & SYSFLAG_TRANSACTION_PREPARED:
            phy = decode_offset_msg_id(ext["msgId"]).phy_offset
            if len(self.transactions) >= _MAX_OPEN_TRANSACTIONS:  # never ended nor checked: forget the oldest
                del self.transactions[next(iter(self.transactions))]
            self.transactions[sp.message_id] = (phy, entry.offset)
        return entry

    async def recall(self, req: Any, metadata: dict[str, str]) -> Any:
        """RecallMessage (see the module docstring); raises RpcError."""
        topic = req.topic.name
        remark = validate_topic(topic)
        if remark is not None:
            raise RpcError(Code.ILLEGAL_TOPIC, remark)
        if is_system_topic(topic):
            raise RpcError(Code.ILLEGAL_TOPIC, "cannot access system topic")
        if self.config.enable_topic_message_type_check:
            config = self.broker.topics.get(topic)
            declared = TopicMessageType.UNSPECIFIED if config is None else topic_type(config.attribute(MESSAGE_TYPE))
            if declared is not None and declared not in (TopicMessageType.DELAY, TopicMessageType.MIXED):
                raise RpcError(
                    Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                    f"TopicMessageType validate failed, the expected type is {declared.value}, "
                    "but actual type is DELAY",
                )
        try:
            handle = decode_recall_handle(req.recall_handle)
        except RecallHandleError as exc:
            raise RpcError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        header = RecallMessageRequestHeader(topic=topic, recall_handle=req.recall_handle, bname=handle.broker_name)
        answer = await self.invoker.invoke(
            request(RequestCode.RECALL_MESSAGE, header.to_ext_fields()), peer_of(metadata)
        )
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(Code.INTERNAL_SERVER_ERROR, answer.remark or "recall failed")
        message_id = (answer.ext_fields or {}).get("msgId", "")
        return service.RecallMessageResponse(status=status(Code.OK, "OK"), message_id=message_id)

    async def end_transaction(self, req: Any, metadata: dict[str, str]) -> Any:
        tx_id = req.transaction_id or req.message_id
        if not tx_id.strip():
            raise RpcError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        found = self.transactions.get(tx_id)
        if found is None:
            raise RpcError(Code.INTERNAL_SERVER_ERROR, f"transaction {tx_id} is unknown to this broker")
        resolution = {definition.TransactionResolution.COMMIT: _COMMIT,
                      definition.TransactionResolution.ROLLBACK: _ROLLBACK}.get(req.resolution, 0)  # fmt: skip
        header = EndTransactionRequestHeader(
            producer_group=req.topic.name,
            tran_state_table_offset=found[1],
            commit_log_offset=found[0],
            commit_or_rollback=resolution,
            msg_id=req.message_id,
            from_transaction_check=req.source == definition.TransactionSource.SOURCE_SERVER_CHECK,
        )
        answer = await self.invoker.invoke(
            request(RequestCode.END_TRANSACTION, header.to_ext_fields()), peer_of(metadata)
        )
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(status_of_response_code(answer.code), answer.remark or "end transaction failed")
        if resolution:
            self.transactions.pop(tx_id, None)
        return service.EndTransactionResponse(status=status())


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)``: jump consistent hashing driven by a 64-bit linear congruential
    generator seeded with ``value`` (sign-extended), so a message group lands on the queue RocketMQ's proxy picks."""
    state = value & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULTIPLIER * state + 1) & _MASK64
        step = ((state >> 33) + 1) / (1 << 31)
        following = min(int((candidate + 1) / step), _INT_MAX)
        if following >= buckets:
            return candidate
        candidate = following
