"""RegisterBrokerBody: the REGISTER_BROKER body in its JSON and its zlib-compressed form
(docs/protocol.md#46-registerbrokerbody).

The compressed form is a zlib stream (best compression) of, all integers big-endian int32:
``len + DataVersion JSON``, ``topicCount``, per topic ``len + topic line``, then ``len + JSON array of filter
servers``. ``bodyCrc32`` in the header is :func:`body_crc32` of the bytes actually sent. Decoding either form raises
:class:`~remoting.codec.bodies._json.BodyDecodeError` on a corrupt or truncated body.
"""

from __future__ import annotations

import struct
import zlib

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    JsonObject,
    dumps,
    expect_object,
    get_str_list,
    load_object,
    loads,
)
from remoting.codec.bodies.topic_config import (
    TopicConfig,
    TopicConfigSerializeWrapper,
    decode_data_version,
    encode_data_version,
    parse_topic_line,
    topic_line,
)

_INT = struct.Struct(">i")
#: Most bytes a compressed REGISTER_BROKER body may inflate to (the most a frame may carry, 16 MiB: a broker's topic
#: table of a few hundred thousand topics).
REGISTER_BODY_MAX = 16 * 1024 * 1024


def body_crc32(body: bytes | memoryview) -> int:
    """CRC32 masked to a non-negative Java int, as the broker puts in the ``bodyCrc32`` header."""
    return zlib.crc32(body) & 0x7FFFFFFF


@attrs.frozen(slots=True)
class RegisterBrokerBody:
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = attrs.field(factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = attrs.field(factory=list)

    def to_json(self) -> JsonObject:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json(),
        }

    @classmethod
    def from_json(cls, obj: object) -> RegisterBrokerBody:
        o = expect_object(obj, "RegisterBrokerBody")
        wrapper = o.get("topicConfigSerializeWrapper")
        return cls(
            topic_config_serialize_wrapper=(
                TopicConfigSerializeWrapper() if wrapper is None else TopicConfigSerializeWrapper.from_json(wrapper)
            ),
            filter_server_list=get_str_list(o, "filterServerList"),
        )

    def encode(self, compress: bool = False) -> bytes:
        if not compress:
            return dumps(self.to_json())
        wrapper = self.topic_config_serialize_wrapper
        parts: list[bytes] = []

        def chunk(data: bytes) -> None:
            parts.append(_INT.pack(len(data)))
            parts.append(data)

        chunk(encode_data_version(wrapper.data_version))
        parts.append(_INT.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            chunk(topic_line(tc).encode())
        chunk(dumps(list(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes | memoryview, compressed: bool = False) -> RegisterBrokerBody:
        if not compressed:
            return cls.from_json(load_object(data, "RegisterBrokerBody"))
        inflater = zlib.decompressobj()
        try:
            # Bounded: zlib expands zeros 1000:1, so a 16 MiB frame could ask for 16 GiB (Java inflates as a stream).
            raw = inflater.decompress(data, REGISTER_BODY_MAX)
        except zlib.error as exc:
            raise BodyDecodeError(f"register body is not a zlib stream: {exc}") from None
        if inflater.unconsumed_tail or not inflater.eof:
            raise BodyDecodeError(f"register body inflates past {REGISTER_BODY_MAX} bytes or is cut short")
        reader = _Reader(raw)
        version = decode_data_version(reader.chunk())
        table: dict[str, TopicConfig] = {}
        for _ in range(reader.int32()):
            tc = parse_topic_line(reader.chunk().decode())
            table[tc.topic_name] = tc
        servers = loads(reader.chunk())
        if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
            raise BodyDecodeError("filter server list must be an array of strings")
        return cls(TopicConfigSerializeWrapper(table, version), list(servers))


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def int32(self) -> int:
        if self._pos + 4 > len(self._data):
            raise BodyDecodeError("compressed register body is truncated")
        (value,) = _INT.unpack_from(self._data, self._pos)
        self._pos += 4
        return int(value)

    def chunk(self) -> bytes:
        length = self.int32()
        if length < 0 or self._pos + length > len(self._data):
            raise BodyDecodeError("compressed register body is truncated")
        out = self._data[self._pos : self._pos + length]
        self._pos += length
        return out
