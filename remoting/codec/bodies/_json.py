"""JSON plumbing shared by every body class: fastjson-tolerant parsing, stable output and typed field readers.

Output (:func:`dumps`) is standard JSON: string keys, map keys sorted, UTF-8. Callers build plain dicts and leave out
``None`` fields themselves, so "null fields omitted" is decided per class, next to the field list.

Input (:func:`loads`) first tries strict JSON through orjson; only if that fails does it rewrite fastjson's unquoted
numeric map keys (``{0:"10.0.0.1:10911"}``, docs/protocol.md#41-json-conventions) into quoted ones and try again.
Anything that still does not parse, or a field of the wrong type, raises :class:`BodyDecodeError` (a
:class:`~remoting.codec.errors.CodecError`), never a bare ``KeyError``/``TypeError``, so a processor can answer with a
remark instead of crashing.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar

import orjson

from remoting.codec.errors import CodecError

JsonObject = dict[str, Any]
E = TypeVar("E", bound=enum.Enum)

_DIGITS = frozenset("0123456789-")
_SPACE = frozenset(" \t\r\n")
#: Texts fastjson's TypeUtils casts to null: a primitive field keeps its default.
_NULL_TEXTS: Final = frozenset({"", "null", "NULL"})
_JAVA_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_TRAILING_ZEROS = re.compile(r"\.0*$")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


class BodyDecodeError(CodecError):
    """A request or response body is not the JSON (or compressed layout) its code calls for."""


def dumps(obj: object) -> bytes:
    """Standard JSON bytes with sorted keys; int map keys become strings."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def quote_numeric_keys(text: str) -> str:
    """Quote bare numeric object keys outside string literals, leaving everything else untouched.

    A number is a key when it follows ``{`` or ``,`` and is followed by ``:`` (whitespace allowed); in valid JSON an
    array element is never followed by ``:``, so arrays are not disturbed.
    """
    out: list[str] = []
    i, n = 0, len(text)
    expect_key = False
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
            expect_key = False
            continue
        if ch in "{,":
            expect_key = True
        elif expect_key and ch in _DIGITS:
            j = i
            while j < n and text[j] in _DIGITS:
                j += 1
            k = j
            while k < n and text[k] in _SPACE:
                k += 1
            if k < n and text[k] == ":":
                out.append(f'"{text[i:j]}"')
                i = j
                expect_key = False
                continue
            expect_key = False
        elif ch not in _SPACE:
            expect_key = False
        out.append(ch)
        i += 1
    return "".join(out)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse a body; accepts fastjson's unquoted numeric keys. Raises :class:`BodyDecodeError`."""
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        return orjson.loads(quote_numeric_keys(text))
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise BodyDecodeError(f"body is not JSON: {exc}") from None


def load_object(data: bytes | bytearray | memoryview | str, what: str) -> JsonObject:
    obj = loads(data)
    return expect_object(obj, what)


def expect_object(obj: object, what: str) -> JsonObject:
    if not isinstance(obj, dict):
        raise BodyDecodeError(f"{what} must be a JSON object, got {type(obj).__name__}")
    return obj


def get_str(obj: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise BodyDecodeError(f"field {key!r} must be a string, got {type(value).__name__}")


def req_str(obj: Mapping[str, Any], key: str) -> str:
    value = get_str(obj, key)
    if value is None:
        raise BodyDecodeError(f"field {key!r} is missing")
    return value


def to_int(value: object, key: str, bits: int = 64) -> int:
    """An int from a JSON number or a numeric text (fastjson accepts both; clients send both), a fraction cut to its
    integer part as fastjson cuts it. It must fit a Java ``long`` (``bits=64``) or ``int`` (``bits=32``), as fastjson
    refuses a number its field cannot hold (ours: a fraction past the range too, where Java keeps its low bits)."""
    number = _as_int(value, bits)
    if number is None:
        raise BodyDecodeError(f"field {key!r} must be an integer, got {str(value)[:100]!r}")
    if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        raise BodyDecodeError(f"field {key!r} does not fit a {bits}-bit integer: {str(value)[:100]!r}")
    return number


def _as_int(value: object, bits: int) -> int | None:
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float) and math.isfinite(value):
        return int(value)  # toward zero, as fastjson's BigDecimal.intValue() / longValue() of a fraction
    if isinstance(value, str):
        return _text_int(value, bits)
    return None


def _text_int(text: str, bits: int) -> int | None:
    """fastjson's ``TypeUtils.castToInt`` (commas dropped, a trailing ``.0`` cut, ``Integer.parseInt``) or
    ``castToLong`` (commas dropped, ``Long.parseLong``) of a text; None where Java throws."""
    text = text.replace(",", "")
    if bits <= 32:
        text = _TRAILING_ZEROS.sub("", text)
    return int(text) if _JAVA_INT_TEXT.fullmatch(text) else None


def get_int(obj: Mapping[str, Any], key: str, default: int = 0, bits: int = 64) -> int:
    """``obj[key]`` as :func:`to_int` reads it; ``default`` when absent, null or an empty or ``null`` text (fastjson's
    null, which leaves a primitive field as it is)."""
    value = obj.get(key)
    if value is None or (isinstance(value, str) and value in _NULL_TEXTS):
        return default
    return to_int(value, key, bits)


def get_float(obj: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    """A float from a JSON number or a numeric string; ``default`` when absent or null."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise BodyDecodeError(f"field {key!r} must be a number, got {str(value)[:100]!r}")


def get_bool(obj: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """A boolean as fastjson 1.2.69's BooleanCodec reads one: a number is ``intValue() == 1``, a text is cast by
    ``TypeUtils.castToBoolean``; absent, null or an empty text is ``default``."""
    value = obj.get(key)
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return to_int(value, key, bits=32) == 1
    if value is None or (isinstance(value, str) and value in _NULL_TEXTS):
        return default
    cast = java_cast_to_boolean(value) if isinstance(value, str) else None
    if cast is not None:
        return cast
    raise BodyDecodeError(f"field {key!r} must be a boolean, got {value!r}")


def java_cast_to_boolean(text: str) -> bool | None:
    """fastjson's ``TypeUtils.castToBoolean`` of a text: ``true``/``false`` in any case, ``1``/``0``, ``Y``/``F`` in
    any case, ``T``/``N``; None for any other text (null for an empty one, an error for the rest)."""
    lower = text.lower()
    if lower in ("true", "y") or text in ("1", "T"):
        return True
    if lower in ("false", "f") or text in ("0", "N"):
        return False
    return None


def get_list(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyDecodeError(f"field {key!r} must be an array, got {type(value).__name__}")
    return value


def get_map(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BodyDecodeError(f"field {key!r} must be an object, got {type(value).__name__}")
    return value


def get_str_list(obj: Mapping[str, Any], key: str) -> list[str]:
    out: list[str] = []
    for item in get_list(obj, key):
        if not isinstance(item, str):
            raise BodyDecodeError(f"field {key!r} must hold strings, got {item!r}")
        out.append(item)
    return out


def get_str_map(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in get_map(obj, key).items():
        if v is None:
            continue
        if not isinstance(v, str):
            raise BodyDecodeError(f"field {key!r} must map to strings, got {v!r}")
        out[k] = v
    return out


def get_enum(obj: Mapping[str, Any], key: str, enum_type: type[E], default: E) -> E:
    """:func:`get_nullable_enum` with what fastjson reads as null taken as absent: ``default``."""
    value = get_nullable_enum(obj, key, enum_type, default)
    return default if value is None else value


def get_nullable_enum(obj: Mapping[str, Any], key: str, enum_type: type[E], default: E | None) -> E | None:
    """An enum member from its name (a JSON string) or its Java ordinal (a JSON number: the C++ client sends
    ordinals), as fastjson 1.2.69's EnumDeserializer reads them; ``default`` when ``key`` is absent. A name matches
    in any ASCII case; ``null``, an empty name or one no member has (digits too: ``"0"`` is a name) is None, as
    fastjson sets the field to null over its default. An ordinal out of range, or another JSON type, raises
    BodyDecodeError, as fastjson's "parse enum ... error"."""
    if key not in obj:
        return default
    value = obj[key]
    if value is None or isinstance(value, str):
        name = "" if value is None else value.translate(_ASCII_UPPER)
        return enum_type[name] if name in enum_type.__members__ else None
    members = list(enum_type)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(members):
        return members[value]
    raise BodyDecodeError(f"field {key!r}: {value!r} is not a {enum_type.__name__}")
