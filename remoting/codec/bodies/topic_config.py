"""TopicConfigSerializeWrapper and the wire forms of DataVersion and TopicConfig
(docs/protocol.md#47-topicconfigserializewrapper-topicconfig-and-dataversion; the topic lines of the compressed
register body: docs/protocol.md#46-registerbrokerbody).

:class:`DataVersion`, :class:`TopicConfig`, :class:`TopicFilterType` and the ``PERM_*`` bits come from
:mod:`remoting.codec.bodies.broker_metadata`, so the broker, the name server, the register body and ``topics.json``
share one class each. Decoding raises :class:`~remoting.codec.bodies._json.BodyDecodeError` on a wrong shape;
unknown fields are ignored.
"""

from __future__ import annotations

from typing import Any

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    JsonObject,
    dumps,
    expect_object,
    get_map,
    load_object,
)
from remoting.codec.bodies.broker_metadata import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicFilterType,
)

__all__ = [
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "DataVersion",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
    "decode_data_version",
    "encode_data_version",
    "parse_topic_line",
    "topic_line",
]


def encode_data_version(version: DataVersion) -> bytes:
    """The DataVersion body of QUERY_DATA_VERSION (and of the compressed register body)."""
    return dumps(version.to_json())


def data_version_from_json(obj: object) -> DataVersion:
    return DataVersion.from_json(expect_object(obj, "DataVersion"))


def decode_data_version(data: bytes | memoryview) -> DataVersion:
    return data_version_from_json(load_object(data, "DataVersion"))


def topic_config_from_json(obj: object, name: str | None = None) -> TopicConfig:
    """``name`` (the table key) is used when the object itself lacks ``topicName``."""
    try:
        return TopicConfig.from_json(expect_object(obj, "TopicConfig"), name)
    except (KeyError, ValueError) as exc:
        raise BodyDecodeError(f"bad TopicConfig: {exc}") from None


def topic_line(tc: TopicConfig) -> str:
    """The compressed register body's topic line: ``name read write perm filterType`` (no sysFlag, no order).

    Ours: a null filter type (:attr:`TopicConfig.topic_filter_type` None) is written SINGLE_TAG, as a name server
    reads it from the JSON body, which leaves it out. 4.9.8's TopicConfig.encode writes ``null``, on which the name
    server's TopicConfig.decode (TopicFilterType.valueOf) throws and the whole registration fails."""
    filter_type = tc.topic_filter_type or TopicFilterType.SINGLE_TAG
    fields = (tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, filter_type.name)
    return " ".join(str(f) for f in fields)


def parse_topic_line(line: str) -> TopicConfig:
    """Parse a topic line; a trailing sixth field (5.x attributes) is ignored."""
    parts = line.split(" ")
    if len(parts) < 5:
        raise BodyDecodeError(f"topic line needs 5 fields: {line!r}")
    try:
        # Java ints: a larger number, stored, made every later route query of that topic fail to encode.
        read, write, perm = (int(p) for p in parts[1:4] if len(p) <= 11)
        if not all(-(1 << 31) <= n < 1 << 31 for n in (read, write, perm)):
            raise ValueError("outside int32")
        return TopicConfig(
            topic_name=parts[0],
            read_queue_nums=read,
            write_queue_nums=write,
            perm=perm,
            topic_filter_type=TopicFilterType[parts[4]],
        )
    except (ValueError, KeyError):
        raise BodyDecodeError(f"bad topic line: {line[:200]!r}") from None


@attrs.frozen(slots=True)
class TopicConfigSerializeWrapper:
    """A broker's whole topic table plus its DataVersion (the same content as the store's ``TopicConfigTable``).

    The default DataVersion is ``(0, 0)``: what Java assumes for a registration without a body.
    """

    topic_config_table: dict[str, TopicConfig] = attrs.field(factory=dict)
    data_version: DataVersion = attrs.field(factory=lambda: DataVersion(timestamp=0, counter=0))

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
            topic_config_table={name: topic_config_from_json(tc, name) for name, tc in table.items() if tc is not None},
            data_version=DataVersion(0, 0) if raw_version is None else data_version_from_json(raw_version),
        )

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> TopicConfigSerializeWrapper:
        return cls.from_json(load_object(data, "TopicConfigSerializeWrapper"))
