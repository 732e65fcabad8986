"""Broker configuration shapes shared by the wire and the store: :class:`DataVersion`, :class:`TopicConfig`,
:class:`SubscriptionGroupConfig`, :class:`TopicFilterType` and the ``PERM_*`` bits
(docs/protocol.md#47-topicconfigserializewrapper-topicconfig-and-dataversion,
docs/protocol.md#410-subscriptiongroupconfig, docs/protocol.md#67-config-files).

They live in the codec, the lowest layer, because the register body, the admin bodies, the broker managers and the
store's ``config/*.json`` files all carry them; ``store.metadata_files`` imports them from here.

Each class is a flat attrs class whose fields map to their camelCase Java names. ``to_json`` sorts keys and leaves a
None field out, as fastjson writes no null field;
``from_json`` reads what fastjson reads (docs/protocol.md#41-json-conventions: numbers as texts, ints within their Java
type, enums by name (a JSON string) or ordinal (a JSON number), unknown fields ignored) and raises
:class:`~remoting.codec.bodies._json.BodyDecodeError` on a wrong shape.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final, TypeVar, cast

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    expect_object,
    get_bool,
    get_enum,
    get_int,
    get_nullable_enum,
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


def _read_field(m: dict[str, Any], key: str, default: Any, int32: bool = False) -> Any:
    """``m[key]`` converted to the type of ``default`` (an int within a Java ``int`` when ``int32``, else a ``long``);
    ``default`` when absent or null, but for an enum: null, or a name no member has, is None, as fastjson sets it."""
    if isinstance(default, bool):
        return get_bool(m, key, default)
    if isinstance(default, int):
        return get_int(m, key, default, 32 if int32 else 64)
    if isinstance(default, enum.Enum):
        return get_nullable_enum(m, key, type(default), default)
    return get_str(m, key, default)


def _java_name(member: enum.Enum | None) -> str:
    """A member as Java's ``String.valueOf`` prints it: its name, ``null`` for None."""
    return "null" if member is None else member.name


S = TypeVar("S", bound="JsonShape")


class JsonShape:
    """Mixin for the flat config classes below: a class is only its field list.

    A field without a default is the table key (``topicName``, ``groupName``), which the enclosing map may supply
    when the object lacks it. :attr:`INT32_FIELDS` names the JSON keys Java declares ``int``: fastjson refuses a
    number past that range, as it refuses one past a ``long`` for the other integer fields.
    """

    INT32_FIELDS: ClassVar[frozenset[str]] = frozenset()

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in attrs.fields(cast(Any, type(self))):
            value = getattr(self, f.name)
            if value is not None:
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
                kwargs[f.name] = _read_field(m, key, f.default, key in cls.INT32_FIELDS)
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


@attrs.frozen
class TopicConfig(JsonShape):
    """One topic's queue counts and permissions; defaults are Java's for a config built without values.

    ``attributes`` are RocketMQ 5's topic attributes (``message.type``), as sorted pairs; the JSON carries an
    ``attributes`` map only when there are some, so a 4.x topic keeps 4.9.8's shape.
    """

    INT32_FIELDS: ClassVar[frozenset[str]] = frozenset({"readQueueNums", "writeQueueNums", "perm", "topicSysFlag"})

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    #: None when the JSON named no member (or gave null): fastjson sets the field to null over its default.
    topic_filter_type: TopicFilterType | None = TopicFilterType.SINGLE_TAG
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
            f"writeQueueNums={self.write_queue_nums}, perm={perm_text}, "
            f"topicFilterType={_java_name(self.topic_filter_type)}, "
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
        m = {} if obj is None else dict(expect_object(obj, cls.__name__))
        attributes = get_str_map(m, "attributes") if m.get("attributes") is not None else {}
        m.pop("attributes", None)
        return attrs.evolve(super().from_json(m, name), attributes=attributes)


@attrs.frozen
class SubscriptionGroupConfig(JsonShape):
    """A consumer group's broker-side settings, defaults as docs/protocol.md#410-subscriptiongroupconfig."""

    INT32_FIELDS: ClassVar[frozenset[str]] = frozenset({"retryQueueNums", "retryMaxTimes"})

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
    #: RocketMQ 5.3.3: the delays a 5.x consumer of the group retries after (its Settings' backoff policy, the proxy's
    #: release of an auto-renewed message); None: the default, CUSTOMIZED with RocketMQ's delay table. The JSON
    #: carries ``groupRetryPolicy`` only when set, so a 4.x group keeps 4.9.8's shape.
    group_retry_policy: GroupRetryPolicy | None = None

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        policy = out.pop("groupRetryPolicy", None)
        if policy is not None:
            out["groupRetryPolicy"] = policy.to_json()
        return {k: out[k] for k in sorted(out)}

    @classmethod
    def from_json(cls, obj: object, name: str | None = None) -> SubscriptionGroupConfig:
        m = {} if obj is None else dict(expect_object(obj, cls.__name__))
        raw_policy = m.pop("groupRetryPolicy", None)
        config = super().from_json(m, name)
        if raw_policy is None:
            return config
        return attrs.evolve(config, group_retry_policy=GroupRetryPolicy.from_json(raw_policy))

    @property
    def retry_policy(self) -> RetryPolicy:
        """The policy the proxy delays a retry by: GroupRetryPolicy.getRetryPolicy, the default one when unset."""
        return (self.group_retry_policy or GroupRetryPolicy()).retry_policy


class GroupRetryPolicyType(enum.Enum):
    """remoting/src/main/java/org/apache/rocketmq/remoting/protocol/subscription/GroupRetryPolicyType.java."""

    EXPONENTIAL = "EXPONENTIAL"
    CUSTOMIZED = "CUSTOMIZED"


#: CustomizedRetryPolicy's default ``next`` (ms): messageDelayLevel's 1s 5s 10s 30s 1m 2m ... 10m 20m 30m 1h 2h.
DEFAULT_RETRY_NEXT_MS: Final = tuple(
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)


@attrs.frozen
class ExponentialRetryPolicy:
    """RocketMQ 5.3.3's ExponentialRetryPolicy (ms; defaults 5 s, 2 h, 2)."""

    initial: int = 5000
    max: int = 7_200_000
    multiplier: int = 2

    def next_delay_ms(self, reconsume_times: int) -> int:
        """``min(max, initial * multiplier ** reconsumeTimes)``, reconsumeTimes clamped to 0..32."""
        times = min(max(reconsume_times, 0), 32)
        return min(self.max, self.initial * int(self.multiplier**times))

    def to_json(self) -> dict[str, Any]:
        return {"initial": self.initial, "max": self.max, "multiplier": self.multiplier}

    @classmethod
    def from_json(cls, obj: object) -> ExponentialRetryPolicy:
        m = expect_object(obj, cls.__name__)
        return cls(get_int(m, "initial", 5000), get_int(m, "max", 7_200_000), get_int(m, "multiplier", 2))


@attrs.frozen
class CustomizedRetryPolicy:
    """RocketMQ 5.3.3's CustomizedRetryPolicy: a table of delays (ms)."""

    next: tuple[int, ...] = DEFAULT_RETRY_NEXT_MS

    def next_delay_ms(self, reconsume_times: int) -> int:
        """``next[reconsumeTimes + 2]`` (the old delay levels' offset), the last entry beyond the table."""
        table = self.next or DEFAULT_RETRY_NEXT_MS  # ours: Java fails on an empty table
        return table[min(max(reconsume_times, 0) + 2, len(table) - 1)]

    def to_json(self) -> dict[str, Any]:
        return {"next": list(self.next)}

    @classmethod
    def from_json(cls, obj: object) -> CustomizedRetryPolicy:
        m = expect_object(obj, cls.__name__)
        raw = m.get("next")
        if raw is None:
            return cls()
        if not isinstance(raw, list):
            raise BodyDecodeError(f"field 'next' must be an array, got {str(raw)[:100]!r}")
        return cls(tuple(to_int(v, "next") for v in raw))


RetryPolicy = ExponentialRetryPolicy | CustomizedRetryPolicy


@attrs.frozen
class GroupRetryPolicy:
    """remoting/src/main/java/org/apache/rocketmq/remoting/protocol/subscription/GroupRetryPolicy.java: the type and
    the policy of each type, either unset."""

    type: GroupRetryPolicyType = GroupRetryPolicyType.CUSTOMIZED
    exponential: ExponentialRetryPolicy | None = None
    customized: CustomizedRetryPolicy | None = None

    @property
    def retry_policy(self) -> RetryPolicy:
        """getRetryPolicy: the policy of the type, the default customized one when that is unset."""
        if self.type is GroupRetryPolicyType.EXPONENTIAL and self.exponential is not None:
            return self.exponential
        if self.type is GroupRetryPolicyType.CUSTOMIZED and self.customized is not None:
            return self.customized
        return CustomizedRetryPolicy()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type.value}
        if self.customized is not None:
            out["customizedRetryPolicy"] = self.customized.to_json()
        if self.exponential is not None:
            out["exponentialRetryPolicy"] = self.exponential.to_json()
        return {k: out[k] for k in sorted(out)}

    @classmethod
    def from_json(cls, obj: object) -> GroupRetryPolicy:
        m = expect_object(obj, cls.__name__)
        exponential = m.get("exponentialRetryPolicy")
        customized = m.get("customizedRetryPolicy")
        return cls(
            get_enum(m, "type", GroupRetryPolicyType, GroupRetryPolicyType.CUSTOMIZED),
            None if exponential is None else ExponentialRetryPolicy.from_json(exponential),
            None if customized is None else CustomizedRetryPolicy.from_json(customized),
        )
