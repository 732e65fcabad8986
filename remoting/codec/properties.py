"""Message properties strings (protocol.md 4.3) and Java's ``String.hashCode`` (the consume-queue tags code).

Properties travel as ``name 0x01 value 0x02 ...`` in UTF-8. Java writes no trailing ``0x02``, ali-ons writes one;
:func:`decode_properties` accepts both and, like Java, drops any segment without a ``0x01`` or with an empty name or
value. Neither separator can be escaped, so :func:`encode_properties` refuses names containing ``0x01``/``0x02`` and
values containing ``0x02`` with :class:`PropertiesEncodeError` instead of writing something that decodes differently.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from typing import Final

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

#: Well-known property names the store and broker read (protocol.md 4.3).
PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT: Final = "WAIT"
PROPERTY_DELAY: Final = "DELAY"
PROPERTY_UNIQ_KEY: Final = "UNIQ_KEY"
PROPERTY_CLUSTER: Final = "CLUSTER"


class PropertiesEncodeError(ValueError):
    """A property name or value contains a separator byte that the wire format cannot carry."""


def encode_properties(props: Mapping[str, str | None]) -> str:
    """Java's form: pairs joined by ``0x02``, no trailing separator; ``None`` values are skipped as Java does.

    Raises :class:`PropertiesEncodeError` for an empty name, a name containing ``0x01``/``0x02`` or a value
    containing ``0x02`` (each would decode to different properties).
    """
    parts = []
    for name, value in props.items():
        if value is None:
            continue
        if not name or NAME_VALUE_SEPARATOR in name or PROPERTY_SEPARATOR in name:
            raise PropertiesEncodeError(f"property name {name!r} is empty or contains a separator")
        if PROPERTY_SEPARATOR in value:
            raise PropertiesEncodeError(f"property {name!r} value contains the 0x02 separator")
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}")
    return PROPERTY_SEPARATOR.join(parts)


def decode_properties(raw: str | bytes | memoryview) -> dict[str, str]:
    """Parse a properties string in Java's or ali-ons' form. Never raises: malformed segments are skipped.

    Bytes are decoded as UTF-8 with replacement characters, as Java's ``new String(bytes, UTF_8)`` does.
    """
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    result: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            result[name] = value
    return result


def find_property(raw: bytes | memoryview, name: bytes) -> bytes | None:
    """The raw value of one property without building a dict (the store's dispatch path).

    ``name`` is the UTF-8 name without separators. Returns ``None`` when absent or empty. When a name repeats, the
    last occurrence wins, matching :func:`decode_properties`.
    """
    data = bytes(raw)
    needle = name + b"\x01"
    found: bytes | None = None
    start = 0
    while True:
        pos = data.find(needle, start)
        if pos < 0:
            return found
        if pos == 0 or data[pos - 1] == 0x02:
            value_start = pos + len(needle)
            end = data.find(b"\x02", value_start)
            value = data[value_start:] if end < 0 else data[value_start:end]
            if value:
                found = value
        start = pos + 1


@functools.lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, wrapped to a signed 32-bit int.

    Astral characters count as two surrogate units; lone surrogates are hashed as the unit they are.
    """
    if text.isascii():
        units: bytes | tuple[int, ...] = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code_of_raw(properties: bytes) -> int:
    """The tags code straight from a raw (UTF-8) properties string: the store's dispatch path. 0 without tags."""
    start = properties.find(b"TAGS\x01")
    if start < 0:
        return 0
    if (start and properties[start - 1] != 0x02) or properties.find(b"TAGS\x01", start + 5) >= 0:
        tags = find_property(properties, b"TAGS")  # rare shapes: a name ending in TAGS, or a repeated TAGS
        return _hash_utf8(tags) if tags else 0
    end = properties.find(b"\x02", start + 5)
    tags = properties[start + 5 :] if end < 0 else properties[start + 5 : end]
    return _hash_utf8(tags) if tags else 0


@functools.lru_cache(maxsize=4096)
def _hash_utf8(raw: bytes) -> int:
    return java_string_hash(raw.decode("utf-8", "replace"))


def tags_code(tags: str | None) -> int:
    """The consume-queue tags code of a message: Java hashCode of ``TAGS`` (sign-extended), 0 without tags."""
    if not tags:
        return 0
    return java_string_hash(tags)
