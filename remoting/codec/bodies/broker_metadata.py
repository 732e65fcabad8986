"""Broker configuration shapes shared by the wire and the store: :class:`DataVersion`, :class:`TopicConfig`,
:class:`SubscriptionGroupConfig`, :class:`TopicFilterType` and the ``PERM_*`` bits
(docs/protocol.md#47-topicconfigserializewrapper-topicconfig-and-dataversion,
docs/protocol.md#410-subscriptiongroupconfig, docs/protocol.md#67-config-files).

They live in the codec, the lowest layer, because the register body, the admin bodies, the broker managers and the
store's ``config/*.json`` files all carry them; ``store.metadata_files`` imports them from here.

Each class is a flat attrs class whose fields map to their camelCase Java names. ``to_json`` sorts keys;
``from_json`` is fastjson-tolerant (numbers as strings, booleans as "true"/"1", enums by name or ordinal, unknown
fields ignored) and raises :class:`~remoting.codec.bodies._json.BodyDecodeError` on a wrong shape.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeVar, cast

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    expect_object,
    get_bool,
    get_enum,
    get_int,
    get_str,
    get_str_map,
    to_int,
)

PERM_PRIORITY: Final = 0x8
PERM_READ: Final = 0x4
PERM_WRITE: Final = 0x2
PERM_INHERIT: Final = 0x1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _read_field(m: dict[str, Any], key: str, default: Any) -> Any:
    """``m[key]`` converted to the type of ``default``; ``default`` when absent or null."""
    if isinstance(default, bool):
        return get_bool(m, key, default)
    if isinstance(default, int):
        return get_int(m, key, default)
    if isinstance(default, enum.Enum):
        return get_enum(m, key, type(default), default)
    return get_str(m, key, default)


S = TypeVar("S", bound="JsonShape")


class JsonShape:
    """Mixin for the flat config classes below: a class is only its field list.

    A field without a default is the table key (``topicName``, ``groupName``), which the enclosing map may supply
    when the object lacks it.
    """

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in attrs.fields(cast(Any, type(self))):
            value = getattr(self, f.name)
            out[_json_name(f.name)] = value.value if isinstance(value, enum.Enum) else value
        return {k: out[k] for k in sorted(out)}

    @classmethod
    def from_json(cls: type[S], obj: object, name: str | None = None) -> S:
        m = {} if obj is None else expect_object(obj, cls.__name__)
        kwargs: dict[str, Any] = {}
        for f in attrs.fields(cast(Any, cls)):
            key = _json_name(f.name)
            if isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
                kwargs[f.name] = _read_field(m, key, f.default.factory())
            elif f.default is not attrs.NOTHING:
                kwargs[f.name] = _read_field(m, key, f.default)
            elif not (value := get_str(m, key) or name):
                raise BodyDecodeError(f"{cls.__name__} without {key}")
            else:
                kwargs[f.name] = value
        return cls(**kwargs)


@attrs.frozen
class DataVersion(JsonShape):
    """Version stamp of a config table; two versions are equal iff both fields are
    (docs/protocol.md#47-topicconfigserializewrapper-topicconfig-and-dataversion)."""

    timestamp: int = attrs.field(factory=now_ms)
    counter: int = 0

    def next_version(self, timestamp: int | None = None) -> DataVersion:
        """The following version: counter + 1, timestamp = now (or the given ms)."""
        return DataVersion(timestamp=now_ms() if timestamp is None else timestamp, counter=self.counter + 1)


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


def _sorted_pairs(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(dict(value).items()))


_TOPIC_INT32_FIELDS: Final = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")


@attrs.frozen
class TopicConfig(JsonShape):
    """One topic's queue counts and permissions; defaults are Java's for a config built without values.

    ``attributes`` are RocketMQ 5's topic attributes (``message.type``), as sorted pairs; the JSON carries an
    ``attributes`` map only when there are some, so a 4.x topic keeps 4.9.8's shape.
    """

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_sorted_pairs)

    def attribute(self, key: str) -> str | None:
        return dict(self.attributes).get(key)

    def java_text(self) -> str:
        """4.9.8's ``TopicConfig.toString()`` (common/src/main/java/org/apache/rocketmq/common/TopicConfig.java), as
        remarks carry it to clients: ``perm`` as ``PermName.perm2String`` gives it (``RW-``)."""
        perm = self.perm
        perm_text = ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-")
        perm_text += "X" if perm & PERM_INHERIT else "-"
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm_text}, topicFilterType={self.topic_filter_type.name}, "
            f"topicSysFlag={self.topic_sys_flag}, order={'true' if self.order else 'false'}]"
        )

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        del out["attributes"]
        if self.attributes:
            out["attributes"] = dict(self.attributes)
        return {k: out[k] for k in sorted(out)}

    @classmethod
    def from_json(cls, obj: object, name: str | None = None) -> TopicConfig:
        """Java's ``TopicConfig`` int fields refuse a number past a Java int (as the compressed topic line does)."""
        m = {} if obj is None else dict(expect_object(obj, cls.__name__))
        for key in _TOPIC_INT32_FIELDS:
            if m.get(key) is not None:
                m[key] = to_int(m[key], key, bits=32)
        attributes = get_str_map(m, "attributes") if m.get("attributes") is not None else {}
        m.pop("attributes", None)
        return attrs.evolve(super().from_json(m, name), attributes=attributes)


@attrs.frozen
class SubscriptionGroupConfig(JsonShape):
    """A consumer group's broker-side settings, defaults as docs/protocol.md#410-subscriptiongroupconfig."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: RocketMQ 5: pop consumers of this group get FIFO message groups in order (5.x clients' ``subscription.fifo``).
    consume_message_orderly: bool = False
