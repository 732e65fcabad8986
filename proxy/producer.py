"""SendMessage and EndTransaction (RocketMQ's SendMessageActivity and EndTransactionActivity,
proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/producer/ and .../transaction/).

A send is checked as RocketMQ's proxy checks it (:meth:`Producing.check`), mapped to 4.x properties
(:func:`proxy.convert.send_properties`), its type checked against the topic's ``message.type`` attribute
(:meth:`Producing.check_type`: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; a request's first message only, once every
message is built, as ProducerProcessor.sendMessage), every message of a batch checked and encoded before any is
stored (a refusal stores nothing of it), and handed to the broker's own send
processor as SEND_MESSAGE_V2 through the :class:`~proxy.local.LocalInvoker`, so timers, transactions, permissions and
flushing behave as for a 4.x send. The proxy picks the queue: a message group always goes to the same queue (Guava's
``Hashing.consistentHash`` of the group's Java ``String.hashCode`` over the write queues, as RocketMQ's proxy picks
it), other messages round-robin. A request of several messages is one batch (SEND_MESSAGE_V2 with ``batch``) in one
round-robin queue, stored or refused as a whole, answered as one entry (:meth:`Producing._send_batch`).
Transactions are remembered by producer group (= the topic) and transaction id (= the message id) with the half
message's offsets, which EndTransaction needs (and takes away); a restart forgets them, and the broker's check then
asks the producer over Telemetry.

A timer (delay) message's entry carries the ``recall_handle`` the broker's send answer holds (empty for other
messages, as RocketMQ 5.3's SendMessageActivity answers). RecallMessage (:meth:`Producing.recall`, RocketMQ 5.3's
``RecallMessageActivity`` and ``ProducerProcessor.recallMessage``): the topic's name (ILLEGAL_TOPIC, system topics
too), its ``message.type`` DELAY or MIXED (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; a topic without the attribute
takes it, an unknown topic does not), the handle decodes (else INTERNAL_SERVER_ERROR "recall handle is invalid"), then
RECALL_MESSAGE through the broker's recall processor; any refusal there is INTERNAL_SERVER_ERROR with its remark.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from typing import Any, Final

import attrs
import trio

from broker.context import BrokerState
from processors.topic_attributes import MESSAGE_TYPE, TopicMessageType, message_type_of, topic_type
from proxy.common import (
    Code,
    RpcError,
    TransactionData,
    check_topic,
    code_of_broker_refusal,
    finish_now,
    is_blank,
    peer_of,
    proxy_error,
    routed_perm,
    status,
)
from proxy.config import ProxyConfig
from proxy.convert import (
    RESERVED,
    SYSFLAG_COMPRESSED,
    SYSFLAG_TRANSACTION_PREPARED,
    born_ms,
    send_properties,
    send_reconsume_times,
)
from proxy.local import LocalInvoker
from proxy.pb import definition, service
from remoting.codec.batch_body import encode_batch_parts
from remoting.codec.bodies.broker_metadata import PERM_WRITE
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.errors import MessageEncodeError
from remoting.codec.headers.recall import RecallMessageRequestHeader
from remoting.codec.headers.send import SendMessageRequestHeader
from remoting.codec.headers.transaction import EndTransactionRequestHeader
from remoting.codec.message_properties import PropertiesEncodeError, encode_properties, java_string_hash
from remoting.codec.msgid import decode_offset_msg_id
from remoting.codec.recall_handle import RecallHandleError, decode_recall_handle
from store.store_config import parse_delay_levels

__all__ = ["Producing", "consistent_hash"]

log = logging.getLogger(__name__)

_MASK64: Final = (1 << 64) - 1
_LCG_MULTIPLIER: Final = 2862933555777941757
_INT_MAX: Final = (1 << 31) - 1
_COMMIT: Final = 8
_ROLLBACK: Final = 12
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
_UNCHECKED_PREFIXES: Final = ("%RETRY%", "%DLQ%")
#: Protobuf enum values read per message, looked up once (each attribute access of an enum wrapper costs a call).
_TRANSACTION: Final = int(definition.MessageType.TRANSACTION)
_GZIP: Final = int(definition.Encoding.GZIP)


class Producing:
    """The producer RPCs of one proxy; state: the open transactions (:class:`~proxy.common.TransactionData`; the
    producer group of a 5.x half message is its topic)."""

    def __init__(self, broker: BrokerState, config: ProxyConfig, invoker: LocalInvoker) -> None:
        self.broker = broker
        self.config = config
        self.invoker = invoker
        self.transactions = TransactionData(
            config.transaction_data_max_num, config.transaction_data_expire_millis / 1000
        )
        self._round_robin = itertools.count()
        self._delay_levels = _sorted_delay_levels(config.message_delay_level)

    def check(self, msg: Any) -> None:
        """One message's checks, in the order of SendMessageActivity.buildMessage and buildMessageProperty
        (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/producer/SendMessageActivity.java); raises RpcError."""
        sp = msg.system_properties
        self._check_body(msg.body)
        self._check_properties(msg)
        if is_blank(sp.message_id):
            raise RpcError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        limit = self.config.max_transaction_recovery_second
        recovery = sp.orphaned_transaction_recovery_duration.seconds
        if sp.message_type == _TRANSACTION and 0 < limit < recovery:
            raise RpcError(
                Code.BAD_REQUEST, f"the max transaction recovery time of message is too large, max is {limit}"
            )
        if sp.HasField("delivery_timestamp"):
            ahead = sp.delivery_timestamp.ToMilliseconds() - int(time.time() * 1000)
            max_delay = self.config.max_delay_time_mills
            if 0 < max_delay < ahead:  # validateDelayTime: 0 or less checks nothing; its remark names the limit
                raise RpcError(
                    Code.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {max_delay}"
                )
        self._check_group(sp.message_group)

    def _check_body(self, body: bytes) -> None:
        """SendMessageActivity.validateMessageBodySize: an empty body unless ``enableMessageBodyEmptyCheck`` is off,
        then the size (a limit of 0 or less checks nothing)."""
        if not body and self.config.enable_message_body_empty_check:
            raise RpcError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        if 0 < self.config.max_message_size < len(body):
            limit = self.config.max_message_size
            raise RpcError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}")

    def _check_properties(self, msg: Any) -> None:
        """buildMessageProperty's checks of the user properties, tag and keys, with its remarks (the limit broken,
        the reserved key, whether a key or a value holds a control character: the 5.x clients raise them to the
        application); sizes count UTF-8 bytes. A blank key is taken, as there (an empty one is left out of the stored
        properties: :func:`proxy.convert.send_properties`)."""
        props, sp = msg.user_properties, msg.system_properties
        max_num = self.config.user_property_max_num
        if len(props) > max_num:
            raise RpcError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {max_num}")
        for key, value in props.items():
            if key in RESERVED:
                raise RpcError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
            if _has_control(key):
                raise RpcError(
                    Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character"
                )
            if _has_control(value):
                raise RpcError(
                    Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character"
                )
        _check_tag(sp.tag)
        for key in sp.keys:
            _check_key(key)
        size = sum(_utf8(k) + _utf8(v) for k, v in props.items()) + _utf8(sp.tag) + sum(map(_utf8, sp.keys))
        max_size = self.config.max_user_property_size
        if size > max_size:  # no "0 or less: unchecked" here, as in buildMessageProperty
            raise RpcError(
                Code.MESSAGE_PROPERTIES_TOO_LARGE, f"the total size of user property is too large, max is {max_size}"
            )

    def _check_group(self, group: str) -> None:
        """SendMessageActivity.validateMessageGroup (an empty group is no group)."""
        if not group:
            return
        if is_blank(group):
            raise RpcError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        limit = self.config.max_message_group_size
        if 0 < limit <= _utf8(group):
            raise RpcError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {limit}")
        if _has_control(group):
            raise RpcError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")

    def send_now(self, req: Any, metadata: dict[str, str]) -> Any | None:
        """:meth:`send` run to its end synchronously, without a Trio task, when no part of it can wait: the store
        answers puts at once (ASYNC_FLUSH and no SYNC_MASTER). ``None``: the caller must await :meth:`send`."""
        if self.broker.store.waits_for_put(True):
            return None
        return finish_now(self.send(req, metadata))

    async def send(self, req: Any, metadata: dict[str, str]) -> Any:
        """SendMessage: every message is checked and encoded before any is stored (SendMessageActivity builds the
        whole list first), so a refused message leaves nothing of its batch behind."""
        if not req.messages:
            raise RpcError(Code.MESSAGE_CORRUPTED, "no message to send")
        first = req.messages[0].topic
        topic = first.name
        check_topic(topic)
        encoded = []
        first_props: dict[str, str] = {}
        peer = peer_of(metadata)
        for index, msg in enumerate(req.messages):  # SendMessageActivity.buildMessage: the first's topic, then checks
            if index and msg.topic != first:
                raise RpcError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            props = self._prepare(msg, topic, peer)
            if not index:
                first_props = props
            encoded.append(self._encode(props))
        # ProducerProcessor.sendMessage (proxy/src/main/java/org/apache/rocketmq/proxy/processor/
        # ProducerProcessor.java): once every message is built, the first one's type against the topic's, then the
        # queue; later messages' types are not checked.
        self.check_type(topic, first_props)
        self._check_writable(topic)
        response = service.SendMessageResponse()
        if len(encoded) == 1:
            entry = await self._send_one(req.messages[0], topic, encoded[0], metadata)
        else:
            entry = await self._send_batch(req.messages, topic, encoded, metadata)
        response.entries.append(entry)
        code = entry.status.code  # convertToSendMessageResponse: the one entry's code, named
        response.status.CopyFrom(status(code, Code.Name(code)))
        return response

    def _prepare(self, msg: Any, topic: str, peer: tuple[str, int]) -> dict[str, str]:
        """The message's checks, then its stored properties; raises RpcError."""
        self.check(msg)
        props = send_properties(msg, topic, peer)
        if self.config.use_delay_level and "TIMER_DELIVER_MS" in props and self._delay_levels:
            props["DELAY"] = str(self._delay_level(int(props["TIMER_DELIVER_MS"])))
        return props

    def _delay_level(self, deliver_ms: int) -> int:
        """ProxyConfig.computeDelayLevel: the first level, by delay, longer than the time left, else the longest."""
        left = deliver_ms - int(time.time() * 1000)
        return next((level for level, delay in self._delay_levels if delay > left), self._delay_levels[-1][0])

    @staticmethod
    def _encode(props: dict[str, str]) -> str:
        """The stored properties encoded; raises RpcError."""
        try:
            return encode_properties(props)
        except PropertiesEncodeError as exc:
            raise RpcError(Code.MESSAGE_CORRUPTED, str(exc)) from None

    def _check_writable(self, topic: str) -> None:
        """ProducerProcessor.sendMessage (proxy/src/main/java/org/apache/rocketmq/proxy/processor/
        ProducerProcessor.java): the queue is picked among the topic's write queues (MessageQueueSelector.buildWrite:
        those of writable queue data), so a topic with none (``updateTopic -w 0`` drains it) or not writable (its perm,
        or the broker's ``brokerPermission`` its route carries, as QueryRoute offers it) is FORBIDDEN "no writable
        queue". An unknown topic is left to the broker's send (auto-creation or TOPIC_NOT_EXIST)."""
        config = self.broker.topics.get(topic)
        if config is None:
            return
        perm = routed_perm(config.perm, self.broker.config.broker_permission)
        if config.write_queue_nums <= 0 or not perm & PERM_WRITE:
            raise proxy_error(Code.FORBIDDEN, "no writable queue")

    def _queue_id(self, topic: str, group: str | None) -> int:
        config = self.broker.topics.get(topic)
        count = config.write_queue_nums if config is not None and config.write_queue_nums > 0 else 1
        if group is not None:
            return consistent_hash(java_string_hash(group), count)
        return next(self._round_robin) % count

    def check_type(self, topic: str, props: dict[str, str]) -> None:
        """The message's type against its topic's ``message.type`` (``DefaultTopicMessageTypeValidator``): a topic
        without one (every 4.x topic) takes every type; retry and DLQ topics are not checked. A topic the broker
        does not hold is UNSPECIFIED, which takes none (LocalMetadataService.getTopicMessageType), unless
        ``autoCreateTopicEnable`` lets the send create it (ours, as QueryRoute does). Raises RpcError."""
        if not self.config.enable_topic_message_type_check or topic.startswith(_UNCHECKED_PREFIXES):
            return
        config = self.broker.topics.get(topic)
        if config is None:
            expected = None if self.broker.config.auto_create_topic_enable else TopicMessageType.UNSPECIFIED
        else:
            expected = topic_type(config.attribute(MESSAGE_TYPE))
        if expected is None:
            return
        actual = message_type_of(props)
        if actual != expected and expected is not TopicMessageType.MIXED:
            raise proxy_error(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"TopicMessageType validate failed, the expected type is {expected.value}, "
                f"but actual type is {actual.value}",
            )

    def _header(self, msg: Any, topic: str, group: str | None, props: str) -> SendMessageRequestHeader:
        """The send header of a request whose first message is ``msg`` (ProducerProcessor.
        buildSendMessageRequestHeader; the sysFlag from that message, as SendMessageActivity.buildSysFlag)."""
        sp = msg.system_properties
        sys_flag = SYSFLAG_TRANSACTION_PREPARED if sp.message_type == _TRANSACTION else 0
        if sp.body_encoding == _GZIP:
            sys_flag |= SYSFLAG_COMPRESSED
        return SendMessageRequestHeader(
            producer_group=topic,
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=self._queue_id(topic, group),
            sys_flag=sys_flag,
            born_timestamp=_born_ms(sp.born_timestamp),
            flag=0,
            properties=props,
            reconsume_times=send_reconsume_times(msg, topic),
        )

    async def _send_batch(self, msgs: Any, topic: str, encoded: list[str], metadata: dict[str, str]) -> Any:
        """Several messages, stored as one batch in one queue, all or nothing (LocalMessageService.sendMessage sends
        a MessageBatch when the request holds more than one message, proxy/src/main/java/org/apache/rocketmq/proxy/
        service/message/LocalMessageService.java; SendMessageQueueSelector picks the queue without a message group
        then). The header carries no properties: each message's travel in the batch body, and the broker would
        append the header's to every one of them (RocketMQ's proxy puts the first message's there, overriding the
        others' ids and tags). The batch's one SendResult is its one entry: the first message's offset and
        transaction id, and the messages' ids joined by commas, as the cluster mode's MQClientAPIImpl.
        processSendResponse names a batch (the local mode mints an id for it that names no stored message)."""
        header = attrs.evolve(self._header(msgs[0], topic, None, ""), batch=True)
        try:
            body = encode_batch_parts([(bytes(m.body), p.encode(), 0) for m, p in zip(msgs, encoded, strict=True)])
        except MessageEncodeError as exc:
            raise RpcError(Code.MESSAGE_PROPERTIES_TOO_LARGE, str(exc)) from None
        answer = await self.invoker.send(header, body, peer_of(metadata))
        failed = _failed_send(answer)
        if failed is not None:
            return service.SendResultEntry(status=failed)
        entry = service.SendResultEntry(message_id=",".join(m.system_properties.message_id for m in msgs))
        entry.status.CopyFrom(status())
        entry.transaction_id = msgs[0].system_properties.message_id
        entry.offset = int((answer.ext_fields or {}).get("queueOffset", "0"))
        return entry

    async def _send_one(self, msg: Any, topic: str, props: str, metadata: dict[str, str]) -> Any:
        sp = msg.system_properties
        header = self._header(msg, topic, sp.message_group or None, props)
        sys_flag = header.sys_flag
        answer = await self.invoker.send(header, bytes(msg.body), peer_of(metadata))
        failed = _failed_send(answer)
        if failed is not None:
            return service.SendResultEntry(status=failed)
        entry = service.SendResultEntry(message_id=sp.message_id)
        ext = answer.ext_fields or {}
        entry.status.CopyFrom(status())
        entry.transaction_id = sp.message_id
        entry.offset = int(ext.get("queueOffset", "0"))
        entry.recall_handle = ext.get("recallHandle", "")
        if sys_flag & SYSFLAG_TRANSACTION_PREPARED:
            phy = decode_offset_msg_id(ext["msgId"]).phy_offset
            self.transactions.add((topic, sp.message_id), phy, entry.offset, trio.current_time())
        return entry

    async def recall(self, req: Any, metadata: dict[str, str]) -> Any:
        """RecallMessage (see the module docstring); raises RpcError."""
        topic = req.topic.name
        check_topic(topic)
        if self.config.enable_topic_message_type_check:
            config = self.broker.topics.get(topic)
            declared = TopicMessageType.UNSPECIFIED if config is None else topic_type(config.attribute(MESSAGE_TYPE))
            if declared is not None and declared not in (TopicMessageType.DELAY, TopicMessageType.MIXED):
                raise proxy_error(
                    Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                    f"TopicMessageType validate failed, the expected type is {declared.value}, "
                    "but actual type is DELAY",
                )
        try:
            handle = decode_recall_handle(req.recall_handle)
        except RecallHandleError as exc:
            raise proxy_error(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        header = RecallMessageRequestHeader(topic=topic, recall_handle=req.recall_handle, bname=handle.broker_name)
        answer = await self.invoker.invoke(
            request(RequestCode.RECALL_MESSAGE, header.to_ext_fields()), peer_of(metadata)
        )
        if answer.code != ResponseCode.SUCCESS:
            raise proxy_error(Code.INTERNAL_SERVER_ERROR, answer.remark or "recall failed")
        message_id = (answer.ext_fields or {}).get("msgId", "")
        return service.RecallMessageResponse(status=status(Code.OK, "OK"), message_id=message_id)

    async def end_transaction(self, req: Any, metadata: dict[str, str]) -> Any:
        """EndTransaction (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/transaction/
        EndTransactionActivity.java): the topic, then a non-blank transaction id; raises RpcError. The transaction's
        data (by producer group = topic, and transaction id) is taken away, then END_TRANSACTION goes to the broker
        oneway and the answer is OK whatever the broker makes of it (proxy/src/main/java/org/apache/rocketmq/proxy/
        processor/TransactionProcessor.java, service/message/LocalMessageService.java endTransactionOneway): a
        refused end is left to the broker's check."""
        check_topic(req.topic.name)
        tx_id = req.transaction_id
        if is_blank(tx_id):
            raise RpcError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        # AbstractTransactionService.genEndTransactionRequestHeader: the data is taken away whatever the resolution;
        # TransactionDataManager.pollNoExpireTransactionData: data past transactionDataExpireMillis is none.
        found = self.transactions.poll((req.topic.name, tx_id), trio.current_time())
        if found is None:
            raise proxy_error(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
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
        await self.invoker.invoke_oneway(
            request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True), peer_of(metadata)
        )
        return service.EndTransactionResponse(status=status())


#: The broker answers a send is stored with (LocalMessageService.sendMessage's SendStatus), and the entry status
#: SendMessageActivity.convertToSendMessageResponse gives each.
_STORED_NOT_OK: Final = {
    ResponseCode.FLUSH_DISK_TIMEOUT: (Code.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
    ResponseCode.FLUSH_SLAVE_TIMEOUT: (Code.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
    ResponseCode.SLAVE_NOT_AVAILABLE: (Code.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE"),
}


def _failed_send(answer: Any) -> Any | None:
    """The entry status of a send the broker answered without SUCCESS (``None`` for SUCCESS): a flush or slave
    timeout's (SendMessageActivity.convertToSendMessageResponse, no message id). Any other answer is a refusal,
    raised as the response's status (RpcError): LocalMessageService.sendMessage (proxy/src/main/java/org/apache/
    rocketmq/proxy/service/message/LocalMessageService.java) throws a ProxyException INTERNAL_SERVER_ERROR with the
    broker's remark (:func:`proxy.common.proxy_error`);
    TOPIC_NOT_EXIST and SYSTEM_BUSY are TOPIC_NOT_FOUND and TOO_MANY_REQUESTS, as the cluster mode answers them
    (:func:`proxy.common.code_of_broker_refusal`)."""
    if answer.code == ResponseCode.SUCCESS:
        return None
    stored = _STORED_NOT_OK.get(answer.code)
    if stored is None:
        remark = str(answer.code) if answer.remark is None else answer.remark
        code = code_of_broker_refusal(answer.code)
        if code == Code.INTERNAL_SERVER_ERROR:  # LocalMessageService's ProxyException
            raise proxy_error(code, remark)
        raise RpcError(code, remark)
    return status(stored[0], f"send message failed, sendStatus={stored[1]}")


def _has_control(text: str) -> bool:
    """GrpcValidator.containControlCharacter: Guava's ``CharMatcher.javaIsoControl`` (U+0000-U+001F, U+007F-U+009F)."""
    return _CONTROL.search(text) is not None


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _check_tag(tag: str) -> None:
    """GrpcValidator.validateTag (an empty tag is no tag)."""
    if not tag:
        return
    if is_blank(tag):
        raise RpcError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
    if "|" in tag:
        raise RpcError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if _has_control(tag):
        raise RpcError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def _check_key(key: str) -> None:
    """SendMessageActivity.validateMessageKey."""
    if key and is_blank(key):
        raise RpcError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
    if _has_control(key):
        raise RpcError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _born_ms(stamp: Any) -> int:
    """The born time for the send header: the client's when ``Timestamps.isValid`` (as buildMessageProperty takes
    it), else now."""
    return born_ms(stamp) or int(time.time() * 1000)


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


def _sorted_delay_levels(spec: str) -> list[tuple[int, int]]:
    """``(level, delay ms)`` by delay, as ProxyConfig.parseDelayLevel reads ``messageDelayLevel``; none (logged, no
    level set) for a spec that does not parse."""
    try:
        levels = parse_delay_levels(spec)
    except ValueError as exc:
        log.error("proxy: %s", exc)
        return []
    return sorted(levels.items(), key=lambda item: item[1])
