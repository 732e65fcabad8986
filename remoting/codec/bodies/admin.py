"""Admin and client-check bodies the broker writes and reads, in the JSON shapes Java's admin tools use.

Standard JSON (sorted keys, null fields omitted) except for one thing no standard JSON can express: Java's
``Map<MessageQueue, X>`` tables (topic stats, consume stats). fastjson writes those with the MessageQueue object itself
as the map key, ``{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}``, and Java's admin tools can read nothing else,
so :func:`dumps_mq_map` writes that form and :func:`loads_fastjson` reads it back (object keys become
:class:`~remoting.codec.bodies.MessageQueue`). Decoders raise :class:`~remoting.codec.bodies.BodyDecodeError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from remoting.codec.bodies._json import (
    BodyDecodeError,
    dumps,
    expect_object,
    get_float,
    get_int,
    get_list,
    get_map,
    get_str,
    load_object,
)
from remoting.codec.bodies.heartbeat import SubscriptionData
from remoting.codec.bodies.tables import MessageQueue

# ---- fastjson's object-keyed maps --------------------------------------------------------------------------------


def dumps_mq_map(table: Mapping[MessageQueue, Any]) -> bytes:
    """``{MessageQueue: value}`` in fastjson's form, queues in (topic, brokerName, queueId) order."""
    parts = [dumps(mq.to_json()) + b":" + dumps(value) for mq, value in sorted(table.items())]
    return b"{" + b",".join(parts) + b"}"


class _Parser:
    """A small JSON reader that also accepts any JSON value as an object key (fastjson's non-string keys)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> BodyDecodeError:
        return BodyDecodeError(f"bad JSON at offset {self.pos}: {what}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def value(self) -> Any:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        if ch == '"':
            return self.string()
        return self.scalar()

    def obj(self) -> dict[Any, Any]:
        self.pos += 1
        out: dict[Any, Any] = {}
        self.skip()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            key = self.value()
            if isinstance(key, dict):
                key = MessageQueue.from_json(key)
            elif isinstance(key, list):
                raise self.fail("array as object key")
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value()
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return out
            raise self.fail("expected ',' or '}'")

    def array(self) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        self.skip()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            raise self.fail("expected ',' or ']'")

    def string(self) -> str:
        end = self.pos + 1
        while end < len(self.text) and self.text[end] != '"':
            end += 2 if self.text[end] == "\\" else 1
        if end >= len(self.text):
            raise self.fail("unterminated string")
        raw = self.text[self.pos : end + 1]
        self.pos = end + 1
        try:
            result: str = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise self.fail(str(exc)) from None
        return result

    def scalar(self) -> Any:
        end = self.pos
        while end < len(self.text) and self.text[end] not in ",:}] \t\r\n":
            end += 1
        token = self.text[self.pos : end]
        self.pos = end
        try:
            return orjson.loads(token)
        except orjson.JSONDecodeError:
            raise self.fail(f"bad token {token!r}") from None


def loads_fastjson(data: bytes | memoryview | str) -> Any:
    """Parse JSON that may use MessageQueue objects as map keys. Raises BodyDecodeError."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode()
    except UnicodeDecodeError as exc:
        raise BodyDecodeError(f"body is not UTF-8: {exc}") from None
    parser = _Parser(text)
    value = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("trailing data")
    return value


def _mq_table(root: object, what: str) -> dict[MessageQueue, dict[str, Any]]:
    """``root["offsetTable"]`` as {MessageQueue: object}; raises BodyDecodeError on another shape."""
    table = expect_object(root, what).get("offsetTable") or {}
    if not isinstance(table, dict) or not all(
        isinstance(k, MessageQueue) and isinstance(v, dict) for k, v in table.items()
    ):
        raise BodyDecodeError(f"{what}.offsetTable must map MessageQueue objects to objects")
    return table


# ---- topic stats and consume stats -------------------------------------------------------------------------------


@attrs.frozen
class TopicOffset:
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }


@attrs.frozen
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO body: ``{"offsetTable": {MessageQueue: TopicOffset}}``."""

    offset_table: dict[MessageQueue, TopicOffset] = attrs.field(factory=dict)

    def encode(self) -> bytes:
        return b'{"offsetTable":' + dumps_mq_map({mq: o.to_json() for mq, o in self.offset_table.items()}) + b"}"

    @classmethod
    def decode(cls, data: bytes | memoryview) -> TopicStatsTable:
        table = {
            mq: TopicOffset(get_int(v, "minOffset"), get_int(v, "maxOffset"), get_int(v, "lastUpdateTimestamp"))
            for mq, v in _mq_table(loads_fastjson(data), "TopicStatsTable").items()
        }
        return cls(table)


@attrs.frozen
class OffsetWrapper:
    """One queue of a ConsumeStats. ``pull_offset`` is RocketMQ 5's ``pullOffset`` (GET_CONSUME_STATS sets it; the
    JSON leaves it out when ``None``, as 4.9.8's class has no such field)."""

    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    pull_offset: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }
        if self.pull_offset is not None:
            out["pullOffset"] = self.pull_offset
        return out

    @classmethod
    def from_json(cls, obj: object) -> OffsetWrapper:
        o = expect_object(obj, "OffsetWrapper")
        pull = None if o.get("pullOffset") is None else get_int(o, "pullOffset")
        return cls(get_int(o, "brokerOffset"), get_int(o, "consumerOffset"), get_int(o, "lastTimestamp"), pull)


@attrs.frozen
class ConsumeStats:
    """GET_CONSUME_STATS body: ``{"consumeTps": 0.0, "offsetTable": {MessageQueue: OffsetWrapper}}``."""

    offset_table: dict[MessageQueue, OffsetWrapper] = attrs.field(factory=dict)
    consume_tps: float = 0.0

    def encode(self) -> bytes:
        table = dumps_mq_map({mq: o.to_json() for mq, o in self.offset_table.items()})
        return b'{"consumeTps":' + dumps(self.consume_tps) + b',"offsetTable":' + table + b"}"

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ConsumeStats:
        return cls.from_json(loads_fastjson(data))

    @classmethod
    def from_json(cls, obj: object) -> ConsumeStats:
        """One ConsumeStats as :func:`loads_fastjson` reads it (MessageQueue keys); BodyDecodeError on another
        shape."""
        table = {mq: OffsetWrapper.from_json(v) for mq, v in _mq_table(obj, "ConsumeStats").items()}
        return cls(table, get_float(expect_object(obj, "ConsumeStats"), "consumeTps"))


# ---- connections -------------------------------------------------------------------------------------------------


@attrs.frozen
class ClientConnection:
    """One client connection as admin bodies list it (Java's ``Connection``)."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: object) -> ClientConnection:
        o = expect_object(obj, "Connection")
        return cls(
            client_id=get_str(o, "clientId") or "",
            client_addr=get_str(o, "clientAddr") or "",
            language=get_str(o, "language") or "",
            version=get_int(o, "version", bits=32),
        )


@attrs.frozen
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST body."""

    connection_set: tuple[ClientConnection, ...] = ()
    subscription_table: dict[str, SubscriptionData] = attrs.field(factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None

    def encode(self) -> bytes:
        out: dict[str, Any] = {
            "connectionSet": [c.to_json() for c in self.connection_set],
            "subscriptionTable": {t: s.to_json() for t, s in self.subscription_table.items()},
        }
        for key, value in (
            ("consumeType", self.consume_type),
            ("messageModel", self.message_model),
            ("consumeFromWhere", self.consume_from_where),
        ):
            if value is not None:
                out[key] = value
        return dumps(out)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ConsumerConnection:
        o = load_object(data, "ConsumerConnection")
        subs = get_map(o, "subscriptionTable")
        return cls(
            connection_set=tuple(ClientConnection.from_json(c) for c in get_list(o, "connectionSet")),
            subscription_table={t: SubscriptionData.from_json(s) for t, s in subs.items()},
            consume_type=get_str(o, "consumeType"),
            message_model=get_str(o, "messageModel"),
            consume_from_where=get_str(o, "consumeFromWhere"),
        )


@attrs.frozen
class ProducerConnection:
    """GET_PRODUCER_CONNECTION_LIST body."""

    connection_set: tuple[ClientConnection, ...] = ()

    def encode(self) -> bytes:
        return dumps({"connectionSet": [c.to_json() for c in self.connection_set]})

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ProducerConnection:
        o = load_object(data, "ProducerConnection")
        return cls(tuple(ClientConnection.from_json(c) for c in get_list(o, "connectionSet")))


# ---- consumer running info ---------------------------------------------------------------------------------------

#: Property names of a consumer's running info (Java's ``ConsumerRunningInfo.PROP_*``): the client instance adds the
#: first three, a push consumer the rest (a lite pull consumer only the start timestamp). Java's ``mqadmin
#: consumerStatus`` reads PROP_CONSUME_TYPE and PROP_CONSUMER_START_TIMESTAMP (``analyzeSubscription``; without them
#: it fails).
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


# ---- client config check -----------------------------------------------------------------------------------------


@attrs.frozen
class CheckClientRequestBody:
    """CHECK_CLIENT_CONFIG body: ``{clientId, group, subscriptionData}``."""

    client_id: str | None
    group: str | None
    subscription_data: SubscriptionData | None

    def encode(self) -> bytes:
        out: dict[str, Any] = {}
        if self.client_id is not None:
            out["clientId"] = self.client_id
        if self.group is not None:
            out["group"] = self.group
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data.to_json()
        return dumps(out)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> CheckClientRequestBody:
        o = load_object(data, "CheckClientRequestBody")
        sub = o.get("subscriptionData")
        return cls(
            client_id=get_str(o, "clientId"),
            group=get_str(o, "group"),
            subscription_data=None if sub is None else SubscriptionData.from_json(sub),
        )
