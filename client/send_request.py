"""Building send requests (Java's ``DefaultMQProducerImpl`` preparation steps), without I/O: validation, the
UNIQ_KEY, body compression above the threshold, the SEND_MESSAGE_V2 header, and batch bodies within the size limit.

:class:`SendBuilder` holds a producer's settings; everything raises :class:`~client.errors.MessageValidationError`
for a message that cannot be sent as given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final, Self, TypeVar

import attrs
import orjson

from client.body_codecs import compressor
from client.errors import UNEXPECTED_HINT, MessageValidationError, MQClientError
from client.message import PROPERTY_MAX_RECONSUME_TIMES, PROPERTY_RECONSUME_TIME, Message
from remoting.codec.codes import CURRENT_VERSION, RequestCode, ResponseCode
from remoting.codec.message import SYSFLAG_COMPRESSED, encode_batch_parts
from remoting.codec.message_properties import (
    PROPERTY_DELAY,
    PROPERTY_SEPARATOR,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    encode_properties,
    find_text_property,
)
from remoting.codec.msgid import UniqKeyGenerator
from remoting.codec.record_layout import MAX_PROPERTIES_BYTES
from remoting.codec.send_frame import send_frame
from remoting.codec.topics import (
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    TOPIC_MAX_LENGTH,
    VALID_NAME_PATTERN,
    is_legal_name,
)

#: Java's ``maxMessageSize`` and ``compressMsgBodyOverHowmuch`` defaults.
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
COMPRESS_OVER: Final = 4 * 1024
#: Bytes a batch entry adds around its body and properties.
BATCH_ENTRY_OVERHEAD: Final = 22

_uniq_keys: dict[str, UniqKeyGenerator] = {}


def uniq_key_generator(ip: str) -> UniqKeyGenerator:
    """One generator per client IP for the process (the counter must not repeat within a millisecond)."""
    gen = _uniq_keys.get(ip)
    if gen is None:
        try:
            gen = UniqKeyGenerator(ip)
        except ValueError:
            gen = UniqKeyGenerator()
        _uniq_keys[ip] = gen
    return gen


#: The hex digits of the longest UNIQ_KEY a producer makes, from an IPv6 client address (32 from an IPv4 one):
#: MessageClientIDSetter's layout of address, pid, class-loader hash, time and counter.
LONGEST_NEW_UNIQ_KEY: Final = 2 * (16 + 2 + 4 + 4 + 2)


def batch_entry_size(msg: Message) -> int:
    """The most bytes ``msg`` takes in a batch body (its own UNIQ_KEY, or the longest a new one can be, whatever the
    producer's client address): a caller splitting a long list keeps each :meth:`SendBuilder.batch` within
    ``max_message_size`` by adding these up, as Java's users do with the ``ListSplitter`` of the batch example."""
    props = msg.all_properties()
    props.setdefault(PROPERTY_UNIQ_KEY, "0" * LONGEST_NEW_UNIQ_KEY)
    return BATCH_ENTRY_OVERHEAD + len(msg.body) + len(encode_properties(props).encode())


class BatchSizeError(MessageValidationError):
    """A batch whose encoded body passes ``max_message_size``: Java's ``sendDefaultImpl`` refuses it
    (``Validators.checkMessage`` of the MessageBatch), so an async batch's callback hears of it, while the rules
    ``DefaultMQProducer.batch`` checks raise to the caller (client/src/main/java/org/apache/rocketmq/client/producer/
    DefaultMQProducer.java)."""


def batch_refused() -> MessageValidationError:
    """What 4.9.8's ``DefaultMQProducer.batch`` raises for a list it cannot make a batch of: ``MQClientException(
    "Failed to initiate the MessageBatch", cause)``, response code -1; raise it ``from`` the rule's error."""
    return MessageValidationError(f"Failed to initiate the MessageBatch{UNEXPECTED_HINT}")


class PreparedSend:
    """A send ready to go but for the queue: the SEND_MESSAGE_V2 extFields (``e`` and ``n`` are set per attempt), the
    (maybe compressed) body and the message id(s), plus the request ``code`` (:func:`send_code` of the fields).

    The fields are kept JSON-encoded, split around the queue id: ``head`` up to ``"e":"`` and ``tail`` from the quote
    after it, so an attempt's frame costs two formats (:meth:`frame`) and an in-flight send holds no dict.
    :attr:`fields` decodes them again for the paths that want a dict (signing, tracing, transactions)."""

    __slots__ = ("body", "code", "head", "hooked", "msg_id", "tail", "topic")

    #: With send hooks registered (:mod:`client.hooks`): the message(s) and communication mode the hooks are told of;
    #: never set otherwise (read with ``getattr(prepared, "hooked", None)``, nothing to do on the hot path).
    hooked: tuple[Message | Sequence[Message], str]

    def __init__(self, fields: dict[str, str], body: bytes, msg_id: str) -> None:
        """From the V2 ``fields`` (``n`` ignored; without ``e`` the queue id goes last, as :meth:`for_queue` puts
        it)."""
        members = {k: v for k, v in fields.items() if k != "n"}
        members.setdefault("e", "")
        keys = list(members)
        at = keys.index("e")
        before = {k: members[k] for k in keys[:at]}
        after = {k: members[k] for k in keys[at + 1 :]}
        self.head = (orjson.dumps(before)[1:-1] + b"," if before else b"") + b'"e":"'
        self.tail = b'"' + (b"," + orjson.dumps(after)[1:-1] if after else b"")
        self.body = body
        self.msg_id = msg_id
        self.topic = fields["b"]
        self.code = send_code(fields)

    @classmethod
    def encoded(cls, head: bytes, tail: bytes, body: bytes, msg_id: str, topic: str, code: int) -> Self:
        """From fields already encoded (:meth:`SendBuilder.single`'s hot path); a subclass gets its own kind."""
        self = cls.__new__(cls)
        self.head, self.tail, self.body, self.msg_id, self.topic, self.code = head, tail, body, msg_id, topic, code
        return self

    @property
    def fields(self) -> dict[str, str]:
        """The V2 fields as a dict (``e`` is ``"0"``, no ``n``)."""
        fields: dict[str, str] = orjson.loads(b"{" + self.head + b"0" + self.tail + b"}")
        return fields

    def for_queue(self, queue_id: int, broker_name: str) -> dict[str, str]:
        fields = self.fields
        fields["e"] = str(queue_id)
        fields["n"] = broker_name
        return fields

    def frame(self, opaque: int, queue_id: int, broker_name: str) -> bytes:
        """The request frame for one attempt: ``encode_json_request(code, opaque, for_queue(queue_id, broker_name),
        body)``, byte for byte (:func:`remoting.codec.send_frame.send_frame`, one C call when the extension is
        built)."""
        broker = _broker_json(broker_name)
        return send_frame(self.code, opaque, self.head, queue_id, self.tail, broker, self.body, _VERSION)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PreparedSend):
            return NotImplemented
        return (self.head, self.tail, self.body, self.msg_id, self.code) == (
            other.head,
            other.tail,
            other.body,
            other.msg_id,
            other.code,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PreparedSend(fields={self.fields!r}, body={self.body!r}, msg_id={self.msg_id!r})"


#: What :meth:`SendBuilder.single_as` makes: a :class:`PreparedSend` or a subclass of it.
P = TypeVar("P", bound=PreparedSend)

_VERSION: Final = int(CURRENT_VERSION)
_brokers_json: dict[str, bytes] = {}


def _broker_json(name: str) -> bytes:
    """``orjson.dumps(name)``, kept: a producer sends to a handful of brokers."""
    encoded = _brokers_json.get(name)
    if encoded is None:
        if len(_brokers_json) >= 4096:
            _brokers_json.clear()
        encoded = _brokers_json[name] = orjson.dumps(name)
    return encoded


def check_topic(topic: str) -> None:
    """Java's Validators.checkTopic and isNotAllowedSendTopic: a topic the broker would refuse is refused here, with
    the Java client's remark, before anything is sent (MessageValidationError)."""
    check_topic_name(topic)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MessageValidationError(f"Sending message to topic[{topic}] is forbidden.")


def check_topic_name(topic: str) -> None:
    """Java's Validators.checkTopic alone (blank, longer than 127, illegal characters, in that order, with Java's
    remarks): a name any client may use, sending to it or not. Raises MessageValidationError."""
    if not topic or not topic.strip():
        raise MessageValidationError("The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MessageValidationError(f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not is_legal_name(topic):
        raise MessageValidationError(
            f"The specified topic[{topic}] contains illegal characters, allowing only {VALID_NAME_PATTERN}"
        )


#: Java's ``MixAll.DEFAULT_PRODUCER_GROUP`` and ``MixAll.DEFAULT_CONSUMER_GROUP``, which a producer or a consumer
#: may not use, and ``Validators.CHARACTER_MAX_LENGTH``.
DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"
GROUP_MAX_LENGTH: Final = 255


def check_group(group: str) -> None:
    """Java's Validators.checkGroup (client/src/main/java/org/apache/rocketmq/client/Validators.java): blank, longer
    than 255, illegal characters, in that order, with Java's texts. Raises :class:`~client.errors.MQClientError`."""
    if not group or not group.strip():
        raise MQClientError("the specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise MQClientError(f"the specified group is longer than group max length {GROUP_MAX_LENGTH}.")
    if not is_legal_name(group):
        raise MQClientError(
            f"the specified group[{group}] contains illegal characters, allowing only {VALID_NAME_PATTERN}"
        )


def check_producer_group(group: str) -> None:
    """Java's DefaultMQProducerImpl.checkConfig at start: :func:`check_group`, and no DEFAULT_PRODUCER
    (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java). Raises
    :class:`~client.errors.MQClientError`."""
    check_group(group)
    if group == DEFAULT_PRODUCER_GROUP:
        raise MQClientError(f"producerGroup can not equal {DEFAULT_PRODUCER_GROUP}, please specify another one.")


def check_consumer_group(group: str) -> None:
    """The group checks of Java's DefaultMQPushConsumerImpl.checkConfig and DefaultLitePullConsumerImpl.checkConfig
    at start (client/src/main/java/org/apache/rocketmq/client/impl/consumer/): :func:`check_group`, and no
    DEFAULT_CONSUMER. Raises :class:`~client.errors.MQClientError`."""
    check_group(group)
    if group == DEFAULT_CONSUMER_GROUP:
        raise MQClientError(f"consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}, please specify another one.")


def send_code(fields: dict[str, str]) -> int:
    """The request code of a send with the V2 ``fields``: SEND_BATCH_MESSAGE when ``m`` is ``true``,
    SEND_REPLY_MESSAGE_V2 for a reply (``MSG_TYPE=reply``, as Java's client), else SEND_MESSAGE_V2."""
    if fields.get("m") == "true":
        return RequestCode.SEND_BATCH_MESSAGE
    if find_text_property(fields.get("i", ""), _MSG_TYPE) == _REPLY_FLAG:
        return RequestCode.SEND_REPLY_MESSAGE_V2
    return RequestCode.SEND_MESSAGE_V2


#: The property that makes a send a reply, when it is exactly ``reply`` (Java's MixAll.REPLY_MESSAGE_FLAG).
_MSG_TYPE, _REPLY_FLAG = "MSG_TYPE", "reply"
_SEND_V2: Final = int(RequestCode.SEND_MESSAGE_V2)
_SEND_REPLY: Final = int(RequestCode.SEND_REPLY_MESSAGE_V2)
_SEND_BATCH: Final = int(RequestCode.SEND_BATCH_MESSAGE)


def _batch_tail(wait: bool) -> bytes:
    """The encoded fields after ``e`` of a batch (``%d``: the born timestamp): no flag, the batch's ``WAIT`` (its
    first message's :meth:`~client.message.Message.waits_for_store`, as Java's ``MessageBatch.generateFromList``),
    ``m`` (batch)."""
    properties = encode_properties({PROPERTY_WAIT: "true" if wait else "false"})
    return b'","f":"0","g":"%d","h":"0","i":' + orjson.dumps(properties) + b',"j":"0","k":"false","m":"true"'


_BATCH_TAIL: Final = _batch_tail(True)
_BATCH_TAIL_NO_WAIT: Final = _batch_tail(False)


@attrs.define(slots=True)
class SendBuilder:
    group: str
    uniq: UniqKeyGenerator
    max_message_size: int = MAX_MESSAGE_SIZE
    compress_over: int = COMPRESS_OVER
    create_topic_key: str = "TBW102"
    default_topic_queue_nums: int = 4
    #: DefaultMQProducerImpl's ``compressLevel`` and ``compressType`` (client/src/main/java/org/apache/rocketmq/client/
    #: impl/producer/DefaultMQProducerImpl.java; the producer passes the environment's, see client/body_codecs.py).
    compress_level: int = 5
    compress_type: str = attrs.field(default="ZLIB")
    _compress: tuple[int, Callable[[bytes, int], bytes]] = attrs.field(init=False, repr=False, eq=False)
    _heads: dict[str, bytes] = attrs.field(factory=dict, init=False, repr=False, eq=False)
    _tag_prefixes: dict[str | None, bytes] = attrs.field(factory=dict, init=False, repr=False, eq=False)
    _batch_prefixes: dict[str | None, bytes] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        self._compress = compressor(self.compress_type)

    def validate(self, msg: Message) -> None:
        if msg.topic not in self._heads:  # a topic already sent to passed
            check_topic(msg.topic)
        # Validators.checkMessage's codes and texts (client/src/main/java/org/apache/rocketmq/client/Validators.java).
        if msg.body is None:
            raise MessageValidationError("the message body is null", ResponseCode.MESSAGE_ILLEGAL)
        if not msg.body:
            raise MessageValidationError("the message body length is zero", ResponseCode.MESSAGE_ILLEGAL)
        if len(msg.body) > self.max_message_size:
            raise MessageValidationError(
                f"the message body size over max value, MAX: {self.max_message_size}", ResponseCode.MESSAGE_ILLEGAL
            )

    def set_topic_template(self, create_topic_key: str, default_topic_queue_nums: int) -> None:
        """The header's ``c`` and ``d`` from the next send on (the encoded heads kept so far are dropped)."""
        self.create_topic_key, self.default_topic_queue_nums = create_topic_key, default_topic_queue_nums
        self._heads.clear()

    def _head(self, topic: str) -> bytes:
        """The encoded fields ``a`` to ``d`` of ``topic``'s sends, up to ``"e":"`` (kept per topic)."""
        head = self._heads.get(topic)
        if head is None:
            if len(self._heads) >= 1024:
                self._heads.clear()
            fields = {"a": self.group, "b": topic, "c": self.create_topic_key, "d": str(self.default_topic_queue_nums)}
            head = self._heads[topic] = orjson.dumps(fields)[1:-1] + b',"e":"'
        return head

    def single(self, msg: Message) -> PreparedSend:
        """:meth:`single_as` a :class:`PreparedSend`."""
        return self.single_as(msg, PreparedSend)

    def single_as(self, msg: Message, kind: type[P]) -> P:
        """One message: UNIQ_KEY set if missing, body compressed (``compress_type`` at ``compress_level``, zlib at
        5 by default) when at least ``compress_over`` bytes, even if larger that way, RECONSUME_TIME /
        MAX_RECONSUME_TIMES moved into the header for a ``%RETRY%`` topic as Java's
        DefaultMQProducerImpl.sendKernelImpl does (any other topic keeps them as properties, ``reconsumeTimes`` 0: a
        re-sent 5.x message's delivery attempt is no reconsume count).

        The fields are encoded here (:class:`PreparedSend`, or the subclass ``kind``: the producer's async send is
        one): the same bytes ``_fields`` and ``orjson`` would give."""
        self.validate(msg)
        now_ms = time.time_ns() // 1_000_000  # the UNIQ_KEY's time and the born timestamp: one clock read
        uniq = self.uniq.next_id(now_ms)
        body = msg.body if type(msg.body) is bytes else bytes(msg.body)
        sys_flag = 0
        if len(body) >= self.compress_over:
            # client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java
            # tryToCompressMessage keeps the compressed body even when it is larger, sendKernelImpl flags it.
            type_flag, compress = self._compress
            body = compress(body, self.compress_level)
            sys_flag = SYSFLAG_COMPRESSED | type_flag
        tags = msg.tags
        prefix_json = (
            self._tag_prefixes.get(tags)
            if (tags is None or type(tags) is str)
            and not (msg.properties or msg.keys)
            and not msg.delay_level
            and msg.wait_store_msg_ok
            else None
        )
        if prefix_json is None:
            prefix_json = self._plain_json(msg)
        if prefix_json is not None:  # no user properties: neither a reply nor a reconsume count
            tail = _TAIL_PLAIN % (sys_flag, now_ms, msg.flag, prefix_json, uniq.encode())
            return kind.encoded(self._head(msg.topic), tail, body, uniq, msg.topic, _SEND_V2)
        props = msg.all_properties()
        uniq = props.setdefault(PROPERTY_UNIQ_KEY, uniq)  # one the message carries is kept (setUniqID)
        reconsume = max_reconsume = None
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # sendKernelImpl: a retry send only, else kept as is
            reconsume = props.pop(PROPERTY_RECONSUME_TIME, None)
            max_reconsume = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
        properties = encode_properties(props)
        tail = _TAIL % (sys_flag, now_ms, msg.flag, orjson.dumps(properties), int(reconsume or 0))
        if max_reconsume:
            tail += b',"l":"%d"' % int(max_reconsume)
        code = _SEND_REPLY if props.get(_MSG_TYPE) == _REPLY_FLAG else _SEND_V2
        return kind.encoded(self._head(msg.topic), tail, body, uniq, msg.topic, code)

    def _plain_json(self, msg: Message) -> bytes | None:
        """``orjson.dumps`` of :func:`_plain_prefix` without its closing quote, or None (see :func:`_kept_prefix`),
        for :meth:`single_as`."""
        return _kept_prefix(self._tag_prefixes, msg, _prefix_json)

    def _batch_prefix(self, msg: Message) -> bytes | None:
        """:func:`_plain_prefix` and the UNIQ_KEY's name and separator, as UTF-8, or None (see :func:`_kept_prefix`),
        for :meth:`batch`."""
        return _kept_prefix(self._batch_prefixes, msg, _prefix_with_uniq_name)

    def batch(self, msgs: Sequence[Message]) -> list[PreparedSend]:
        """The SEND_BATCH_MESSAGE request for ``msgs`` (one topic and WAIT, no delay, no retry topic), as a list of
        one; a body over ``max_message_size`` is refused (:class:`BatchSizeError`, MESSAGE_ILLEGAL), as Java refuses
        it, never split: add up :func:`batch_entry_size` to split a list beforehand. A list breaking a rule raises
        :func:`batch_refused` from the rule's error (:meth:`check_batch`). ``msg_id`` joins the messages' UNIQ_KEYs
        (new ones, or those they carry) by commas."""
        if not msgs:  # Java's generateFromList meets no first message (a NullPointerException, wrapped)
            raise batch_refused() from MessageValidationError("the list of messages is empty")
        topic = msgs[0].topic
        # A list whose messages may break a rule is checked whole, once, in Java's order (check_batch); the usual one
        # is judged by the few comparisons of the loop's first test.
        checked = not topic or topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic not in self._heads
        if checked:
            self.check_batch(msgs)
        wait = msgs[0].waits_for_store()
        entries: list[tuple[bytes, bytes, int]] = []
        size = 0
        ids = self.uniq.next_ids(len(msgs))
        limit, prefixes = self.max_message_size, self._batch_prefixes
        for m, uniq in zip(msgs, ids, strict=True):
            body = m.body
            if not checked and (
                m.topic != topic
                or m.delay_level
                or not body
                or len(body) > limit
                or m.wait_store_msg_ok != wait
                or PROPERTY_WAIT in m.properties
                or PROPERTY_DELAY in m.properties
            ):
                self.check_batch(msgs)
                checked = True
            tags = m.tags
            prefix = (
                prefixes.get(tags)
                if (tags is None or type(tags) is str)
                and not (m.properties or m.keys or m.delay_level)
                and m.wait_store_msg_ok
                else None
            )
            if prefix is None:
                prefix = self._batch_prefix(m)
            if prefix is None:
                props = m.all_properties()
                # One the message carries is kept (``len(entries)``: this message's index).
                ids[len(entries)] = props.setdefault(PROPERTY_UNIQ_KEY, uniq)
                encoded = encode_properties(props).encode()
            else:  # the same text: all_properties' order, then the UNIQ_KEY
                encoded = prefix + uniq.encode()
            if type(body) is not bytes:
                body = bytes(body)
            if len(encoded) > MAX_PROPERTIES_BYTES:
                # Ours: MessageDecoder.encodeMessage would write the length as a wrapped short. After the rules, which
                # Java checks for the whole list before encoding any message.
                if not checked:
                    self.check_batch(msgs)
                raise batch_refused() from MessageValidationError(
                    f"the properties of a batch message are {len(encoded)} bytes, over {MAX_PROPERTIES_BYTES}"
                )
            size += BATCH_ENTRY_OVERHEAD + len(body) + len(encoded)
            entries.append((body, encoded, m.flag))
        if size > limit:
            # One request for the whole list, refused over the limit as Java's DefaultMQProducer.send(Collection):
            # batch() encodes one body and sendDefaultImpl's Validators.checkMessage refuses it, nothing sent
            # (client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java, Validators.java).
            raise BatchSizeError(f"the message body size over max value, MAX: {limit}", ResponseCode.MESSAGE_ILLEGAL)
        tail = (_BATCH_TAIL if wait else _BATCH_TAIL_NO_WAIT) % (time.time_ns() // 1_000_000)
        body = encode_batch_parts(entries)
        return [PreparedSend.encoded(self._head(topic), tail, body, ",".join(ids), topic, _SEND_BATCH)]

    def check_batch(self, msgs: Sequence[Message]) -> None:
        """Raise :func:`batch_refused` from the first rule ``msgs`` break, in the order of 4.9.8's
        ``DefaultMQProducer.batch``: ``MessageBatch.generateFromList`` over the whole list (no delay level, no retry
        topic, the first message's topic and waitStoreMsgOK; common/src/main/java/org/apache/rocketmq/common/message/
        MessageBatch.java), then each message's ``Validators.checkMessage`` (:meth:`validate`)."""
        topic, wait = msgs[0].topic, msgs[0].waits_for_store()
        try:
            for m in msgs:
                _check_batch_rules(m, topic, wait)
            for m in msgs:
                self.validate(m)
        except MessageValidationError as exc:
            raise batch_refused() from exc


def _check_batch_rules(msg: Message, topic: str, wait: bool) -> None:
    """``generateFromList``'s rules for ``msg`` in a batch of the first message's ``topic`` and ``wait``, with its
    texts (Java throws UnsupportedOperationException, response code -1 once wrapped)."""
    if _delay_time_level(msg) > 0:
        raise MessageValidationError("TimeDelayLevel is not supported for batching")
    if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        raise MessageValidationError("Retry Group is not supported for batching")
    if msg.topic != topic:
        raise MessageValidationError("The topic of the messages in one batch should be the same")
    if msg.waits_for_store() != wait:
        raise MessageValidationError("The waitStoreMsgOK of the messages in one batch should the same")


def _delay_time_level(msg: Message) -> int:
    """Java's ``Message.getDelayTimeLevel``: ``delay_level`` when set, else the DELAY property (a batch refuses either,
    common/src/main/java/org/apache/rocketmq/common/message/MessageBatch.java generateFromList). A DELAY that is no
    integer raises :class:`MessageValidationError` (Java's parseInt throws there too)."""
    if msg.delay_level > 0:
        return msg.delay_level
    value = msg.properties.get(PROPERTY_DELAY)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise MessageValidationError(f"the DELAY property {value!r} of a batch message is no delay level") from None


#: The encoded fields after ``e`` (``f`` to ``k``) of a single send.
_TAIL: Final = b'","f":"%d","g":"%d","h":"%d","i":%b,"j":"%d","k":"false"'
#: The same for a message without user properties: the properties' JSON up to the UNIQ_KEY, then the key.
_TAIL_PLAIN: Final = b'","f":"%d","g":"%d","h":"%d","i":%bUNIQ_KEY\\u0001%b","j":"0","k":"false"'


def _kept_prefix(kept: dict[str | None, bytes], msg: Message, encode: Callable[[str], bytes]) -> bytes | None:
    """``encode`` of :func:`_plain_prefix`, or None when that is None. A message with a tag at most (a str or None)
    and nothing else has it kept per tag in ``kept`` (at most 1,024 tags), for its builder's lookup by tag."""
    prefix = _plain_prefix(msg)
    if prefix is None:
        return None
    encoded = encode(prefix)
    tags = msg.tags
    if (tags is None or type(tags) is str) and not msg.keys and not msg.delay_level and msg.wait_store_msg_ok:
        if len(kept) >= 1024:
            kept.clear()
        kept[tags] = encoded
    return encoded


def _prefix_json(prefix: str) -> bytes:
    return orjson.dumps(prefix)[:-1]


def _prefix_with_uniq_name(prefix: str) -> bytes:
    return f"{prefix}UNIQ_KEY\x01".encode()


def _plain_prefix(msg: Message) -> str | None:
    """The properties string of a message without user properties up to its UNIQ_KEY (TAGS, KEYS, DELAY, WAIT: the
    order of :meth:`Message.all_properties`), or ``None`` when it has user properties or a value needs the general
    encoder's checks."""
    if msg.properties:
        return None
    tags, keys = msg.tags, msg.keys
    parts = []
    if tags:
        if type(tags) is not str or PROPERTY_SEPARATOR in tags:
            return None
        parts.append(f"TAGS\x01{tags}\x02")
    if keys:
        if type(keys) is not str or PROPERTY_SEPARATOR in keys:
            return None
        parts.append(f"KEYS\x01{keys}\x02")
    if msg.delay_level:  # a negative one too, as setDelayTimeLevel writes it (the broker delays only above 0)
        parts.append(f"DELAY\x01{msg.delay_level}\x02")
    if not msg.wait_store_msg_ok:
        parts.append("WAIT\x01false\x02")
    return "".join(parts)
