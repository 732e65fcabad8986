"""DataVersion, TopicConfig and TopicConfigSerializeWrapper (protocol.md 6.5, 6.6; store.md 8.1).

These are the shapes a broker sends in REGISTER_BROKER and GET_ALL_TOPIC_CONFIG and writes to ``topics.json``.
``to_json``/``from_json`` convert to and from plain JSON objects; ``encode``/``decode`` to and from bytes. Decoding
raises :class:`~remoting.codec.bodies._json.BodyDecodeError` on a wrong shape; unknown fields are ignored.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    JsonObject,
    dumps,
    expect_object,
    get_bool,
    get_enum,
    get_int,
    get_map,
    load_object,
    req_str,
)

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


class TopicFilterType(enum.Enum):
    """Java ``TopicFilterType``; member order is the Java ordinal."""

    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


@attrs.frozen(slots=True)
class DataVersion:
    """A broker's config version. Equal iff both fields are equal; :meth:`next_version` bumps the counter."""

    timestamp: int = 0
    counter: int = 0

    def next_version(self, now_ms: int) -> DataVersion:
        return DataVersion(timestamp=now_ms, counter=self.counter + 1)

    def to_json(self) -> JsonObject:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: object) -> DataVersion:
        o = expect_object(obj, "DataVersion")
        return cls(timestamp=get_int(o, "timestamp"), counter=get_int(o, "counter"))

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> DataVersion:
        return cls.from_json(load_object(data, "DataVersion"))


@attrs.frozen(slots=True)
class TopicConfig:
    """Java ``TopicConfig`` with Java's defaults (16/16 queues, perm RW, SINGLE_TAG)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> JsonObject:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type.name,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: object, name: str | None = None) -> TopicConfig:
        """``name`` (the table key) is used when the object itself lacks ``topicName``."""
        o = expect_object(obj, "TopicConfig")
        if o.get("topicName") is None and name is not None:
            o = {**o, "topicName": name}
        return cls(
            topic_name=req_str(o, "topicName"),
            read_queue_nums=get_int(o, "readQueueNums", 16),
            write_queue_nums=get_int(o, "writeQueueNums", 16),
            perm=get_int(o, "perm", PERM_READ | PERM_WRITE),
            topic_filter_type=get_enum(o, "topicFilterType", TopicFilterType, TopicFilterType.SINGLE_TAG),
            topic_sys_flag=get_int(o, "topicSysFlag"),
            order=get_bool(o, "order"),
        )

    def encode_line(self) -> str:
        """The compressed register body's topic line: ``name read write perm filterType`` (no sysFlag, no order)."""
        fields = (self.topic_name, self.read_queue_nums, self.write_queue_nums, self.perm, self.topic_filter_type.name)
        return " ".join(str(f) for f in fields)

    @classmethod
    def decode_line(cls, line: str) -> TopicConfig:
        """Parse a topic line; a trailing sixth field (5.x attributes) is ignored."""
        parts = line.split(" ")
        if len(parts) < 5:
            raise BodyDecodeError(f"topic line needs 5 fields: {line!r}")
        try:
            return cls(
                topic_name=parts[0],
                read_queue_nums=int(parts[1]),
                write_queue_nums=int(parts[2]),
                perm=int(parts[3]),
                topic_filter_type=TopicFilterType[parts[4]],
            )
        except (ValueError, KeyError):
            raise BodyDecodeError(f"bad topic line: {line!r}") from None


@attrs.frozen(slots=True)
class TopicConfigSerializeWrapper:
    """A broker's whole topic table plus its DataVersion."""

    topic_config_table: dict[str, TopicConfig] = attrs.field(factory=dict)
    data_version: DataVersion = attrs.field(factory=DataVersion)

    def to_json(self) -> JsonObject:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: tc.to_json() for name, tc in self.topic_config_table.items()},
        }

    @classmethod
    def from_json(cls, obj: object) -> TopicConfigSerializeWrapper:
        o = expect_object(obj, "TopicConfigSerializeWrapper")
        table: dict[str, Any] = get_map(o, "topicConfigTable")
        raw_version = o.get("dataVersion")
        return cls(
            topic_config_table={name: TopicConfig.from_json(tc, name) for name, tc in table.items() if tc is not None},
            data_version=DataVersion() if raw_version is None else DataVersion.from_json(raw_version),
        )

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> TopicConfigSerializeWrapper:
        return cls.from_json(load_object(data, "TopicConfigSerializeWrapper"))
