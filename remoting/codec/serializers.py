"""Header serializers: JSON (RocketMQ default), ROCKETMQ binary (docs/protocol.md#16-rocketmq-binary-header) and CBOR
(rocketrio's own).

``encode_header(cmd) -> bytes`` and ``decode_header(serialize_type, data, body) -> RemotingCommand``. Decoding is
tolerant the way real 4.x clients need (docs/protocol.md#92-what-a-server-must-tolerate): extFields values may be
strings, numbers or booleans, extFields may be absent, ``{}`` or ``null``, ``remark`` may be absent, the JSON may end
with a newline, ``language`` may be a name or a number, unknown keys are ignored, and an absent ``code`` is 0
(fastjson's default); a ROCKETMQ header's negative extFields length means none, as RocketMQSerializable reads it.
Anything that does not parse raises :class:`~remoting.codec.errors.HeaderDecodeError`. ``cbor2`` is imported at the
first CBOR header, which only a client asking for it sends (RocketMQ's never do): a server that never sees one does
not carry it.
"""

from __future__ import annotations

import json
import re
import struct
from typing import Any

import orjson

from remoting.codec.codes import LanguageCode, SerializeType
from remoting.codec.command import Body, RemotingCommand
from remoting.codec.errors import HeaderDecodeError

_LANG_BY_NAME = {lang.name: lang for lang in LanguageCode}
_LANG_BY_CODE = {lang.value: lang for lang in LanguageCode}


def _language(value: object) -> LanguageCode:
    if isinstance(value, str):
        return _LANG_BY_NAME.get(value, LanguageCode.OTHER)
    if isinstance(value, int):
        return _LANG_BY_CODE.get(value, LanguageCode.OTHER)
    return LanguageCode.OTHER


def _as_str(value: object) -> str | None:
    """Coerce one extFields value to the string Java would have sent; ``None`` drops the key."""
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # CBOR bignums beyond Python's int-to-str digit limit
            raise HeaderDecodeError("extFields integer value is too large") from None
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # CBOR can carry bytes, tags, non-string keys, huge ints
        raise HeaderDecodeError(f"extFields value of type {type(value).__name__} has no string form") from None


def _ext_fields(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise HeaderDecodeError(f"extFields must be an object, got {type(raw).__name__}")
    for key, value in raw.items():
        if type(key) is not str or type(value) is not str:
            break
    else:
        # Fast path, the common case on the send hot path: every key and value is already a string, and the parser
        # built this dict for us alone, so it can be used as it is instead of copied.
        return raw
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str):  # only CBOR can produce this; JSON object keys are always strings
            raise HeaderDecodeError(f"extFields key of type {type(key).__name__} is not a string")
        if isinstance(value, str):
            out[key] = value
        else:
            text = _as_str(value)
            if text is not None:
                out[key] = text
    return out


#: the longest text an int32 field may come as ("-2147483648" with room for spaces)
_INT_TEXT_MAX = 32
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


def _int_field(fields: dict[str, Any], key: str, default: int) -> int:
    """A top-level int32 (Java ``int``). Out-of-range values are rejected here: echoed back in a response (the
    opaque is), they would make the JSON encoder fail long after the peer's bytes were accepted."""
    value = fields.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        # Only what a JSON peer can send: a boolean, a float or a numeric string. Anything else, a CBOR decimal first
        # (tag 4: int() of ``1E+1000000`` takes seconds, then minutes, on the Trio thread), is refused.
        if not isinstance(value, bool | float | str) or (isinstance(value, str) and len(value) > _INT_TEXT_MAX):
            raise HeaderDecodeError(f"header field {key!r} is not an integer ({type(value).__name__})")
        try:
            value = int(value)
        except (TypeError, ValueError, OverflowError):
            # Name the type, not the value: repr of a peer's value can be huge or fail (CBOR bignums).
            raise HeaderDecodeError(f"header field {key!r} is not an integer ({type(value).__name__})") from None
    if not _INT32_MIN <= value <= _INT32_MAX:
        # No repr of the value: a CBOR bignum can be too long for int-to-str conversion.
        raise HeaderDecodeError(f"header field {key!r} is outside int32")
    return value


def _from_mapping(fields: object, serialize_type: SerializeType, body: Body) -> RemotingCommand:
    if not isinstance(fields, dict):
        raise HeaderDecodeError("header is not an object")
    get = fields.get
    code = get("code", 0)  # absent: fastjson leaves RemotingCommand's ``int code`` at 0, and Java serves it
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    version = get("version", 0)
    # Fast path (every well-formed peer): plain ints in range are taken as they are, without a call per field;
    # anything else (strings, floats, null, bools, out of range) goes through _int_field's checks and errors.
    if not (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
    ):
        code = _int_field(fields, "code", 0)
        opaque = _int_field(fields, "opaque", 0)
        flag = _int_field(fields, "flag", 0)
        version = _int_field(fields, "version", 0)
    language = get("language")
    remark = get("remark")
    raw_ext = get("extFields")
    return RemotingCommand(
        code,
        opaque,
        flag,
        _LANG_BY_NAME.get(language, LanguageCode.OTHER) if type(language) is str else _language(language),
        version,
        remark if isinstance(remark, str) else None,
        {} if raw_ext is None else _ext_fields(raw_ext),
        body,
        serialize_type,
    )


# ---- JSON -------------------------------------------------------------------------------------------------------


def encode_json(cmd: RemotingCommand) -> bytes:
    """Keys in fastjson's order (sorted), ``null`` fields omitted, extFields omitted when empty."""
    fields: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields:
        fields["extFields"] = cmd.ext_fields
    fields["flag"] = cmd.flag
    fields["language"] = cmd.language.name
    fields["opaque"] = cmd.opaque
    if cmd.remark is not None:
        fields["remark"] = cmd.remark
    fields["serializeTypeCurrentRPC"] = "JSON"
    fields["version"] = cmd.version
    try:
        return orjson.dumps(fields)
    except orjson.JSONEncodeError:
        # An unpaired surrogate (orjson refuses it): Java writes it as ``?``, String.getBytes(UTF_8) of fastjson's
        # text (RemotingSerializable.encode). What still does not encode after that is raised.
        return orjson.dumps(_java_utf8(fields))


def _java_utf8(value: object) -> object:
    """``value`` with each unpaired surrogate of its strings (keys too) replaced by ``?``, as Java's UTF-8 encoders
    write it."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode()
    if isinstance(value, dict):
        return {_java_utf8(k): _java_utf8(v) for k, v in value.items()}
    return value


def decode_json(data: bytes | memoryview, body: Body) -> RemotingCommand:
    return _from_mapping(loads_json_header(data), SerializeType.JSON, body)


def loads_json_header(data: bytes | memoryview) -> object:
    """A JSON header parsed; bytes that are not UTF-8 become U+FFFD first, as Java's ``new String(data, UTF_8)``
    (RemotingSerializable.decode) makes them (a C++ client's GBK topic or key). Raises HeaderDecodeError.

    An escaped surrogate without its other half (``\\ud83d`` alone: Node's JSON.stringify of a string cut inside a
    surrogate pair), which orjson refuses, parses as fastjson parses it, and becomes ``?``: what Java's UTF-8 encoder
    writes for it wherever the String goes (the CommitLog's properties, the config files, the answers)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        error = exc
    text = bytes(data).decode("utf-8", "replace")
    if text.encode() != bytes(data):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as again:
            error = again
    if _SURROGATE_ESCAPE.search(text) is not None:
        try:
            return _without_lone_surrogates(json.loads(text, parse_constant=_refuse_constant))
        except (ValueError, RecursionError):
            pass
    raise HeaderDecodeError(f"bad JSON header: {error}") from None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _refuse_constant(name: str) -> object:
    """``NaN`` and ``Infinity`` are not JSON; orjson refuses them, so the fallback parser does too."""
    raise ValueError(f"{name} is not JSON")


def _without_lone_surrogates(value: object) -> object:
    """``value`` (what ``json.loads`` gave) with each unpaired surrogate replaced by ``?``."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


def command_from_json(fields: object, body: Body) -> RemotingCommand:
    """:func:`decode_json` of a header already parsed by ``orjson.loads``: the same command, the same errors."""
    return _from_mapping(fields, SerializeType.JSON, body)


# ---- ROCKETMQ binary --------------------------------------------------------------------------------------------

_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def encode_rocketmq(cmd: RemotingCommand) -> bytes:
    """RocketMQSerializable's layout; an unpaired surrogate in the remark or extFields is written as ``?``, as Netty's
    UTF-8 writer does (retried only after the plain encoding refused it: the usual header pays nothing)."""
    try:
        return _encode_rocketmq(cmd, "strict")
    except UnicodeEncodeError:
        return _encode_rocketmq(cmd, "replace")


def _encode_rocketmq(cmd: RemotingCommand, errors: str) -> bytes:
    parts = [_FIXED.pack(cmd.code, cmd.language.value, cmd.version, cmd.opaque, cmd.flag)]
    if cmd.remark:
        remark = cmd.remark.encode("utf-8", errors)
        parts += [_I32.pack(len(remark)), remark]
    else:
        parts.append(_I32.pack(0))
    entries = []
    if errors == "strict":
        for key, value in cmd.ext_fields.items():
            k, v = key.encode(), value.encode()
            entries += [_I16.pack(len(k)), k, _I32.pack(len(v)), v]
    else:
        for key, value in cmd.ext_fields.items():
            k, v = key.encode("utf-8", errors), value.encode("utf-8", errors)
            entries += [_I16.pack(len(k)), k, _I32.pack(len(v)), v]
    block = b"".join(entries)
    parts += [_I32.pack(len(block)), block]
    return b"".join(parts)


def decode_rocketmq(data: bytes | memoryview, body: Body) -> RemotingCommand:
    view = memoryview(data)
    try:
        code, lang, version, opaque, flag = _FIXED.unpack_from(view, 0)
        pos = _FIXED.size
        (remark_len,) = _I32.unpack_from(view, pos)
        pos += 4
        remark = None
        if remark_len > 0:
            remark = _utf8(view, pos, remark_len)
            pos += remark_len
        elif remark_len < 0:
            raise HeaderDecodeError("negative remark length")
        (ext_len,) = _I32.unpack_from(view, pos)
        pos += 4
        if pos + ext_len > len(view):
            raise HeaderDecodeError("extFields block overruns the header")
        # rocketMQProtocolDecode reads extFields only when their length is above 0: a negative one means none.
        ext_fields = _decode_rocketmq_ext(view[pos : pos + ext_len]) if ext_len > 0 else {}
    except struct.error:
        raise HeaderDecodeError("truncated ROCKETMQ header") from None
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_LANG_BY_CODE.get(lang, LanguageCode.OTHER),
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _utf8(view: memoryview, pos: int, length: int) -> str:
    if pos + length > len(view):
        raise HeaderDecodeError("string overruns the header")
    return str(view[pos : pos + length], "utf-8", "replace")  # as Netty's readCharSequence(UTF_8)


def _decode_rocketmq_ext(block: memoryview) -> dict[str, str]:
    # One copy of the block, then bytes slices decoded in place: measured ~1.7x faster than a memoryview slice and
    # a helper call per string (bench.codec, ROCKETMQ send request decode).
    data = bytes(block)
    end = len(data)
    i16 = _I16.unpack_from
    i32 = _I32.unpack_from
    out: dict[str, str] = {}
    pos = 0
    try:
        while pos < end:
            (key_len,) = i16(data, pos)
            pos += 2
            key_end = pos + key_len
            if key_len < 0 or key_end + 4 > end:
                raise HeaderDecodeError("extFields key overruns the header")
            key = data[pos:key_end].decode("utf-8", "replace")  # as RocketMQSerializable.readStr
            (value_len,) = i32(data, key_end)
            pos = key_end + 4
            value_end = pos + value_len
            if value_len < 0 or value_end > end:
                raise HeaderDecodeError("extFields value overruns the header")
            value = data[pos:value_end].decode("utf-8", "replace")
            pos = value_end
            if key and value:  # readStr reads a length of 0 as null: no key, or a null value (absent to us)
                out[key] = value
    except struct.error:
        raise HeaderDecodeError("truncated extFields entry") from None
    return out


# ---- CBOR (rocketrio native) ------------------------------------------------------------------------------------


def encode_cbor(cmd: RemotingCommand) -> bytes:
    import cbor2

    fields: dict[str, Any] = {
        "code": cmd.code,
        "flag": cmd.flag,
        "language": cmd.language.value,
        "opaque": cmd.opaque,
        "version": cmd.version,
    }
    if cmd.remark is not None:
        fields["remark"] = cmd.remark
    if cmd.ext_fields:
        fields["extFields"] = cmd.ext_fields
    try:
        return cbor2.dumps(fields)
    except UnicodeEncodeError:  # an unpaired surrogate: ``?``, as the other serializers write it
        return cbor2.dumps(_java_utf8(fields))


def decode_cbor(data: bytes | memoryview, body: Body) -> RemotingCommand:
    import cbor2

    try:
        fields = cbor2.loads(bytes(data))
    except Exception as exc:  # cbor2 raises several unrelated types on garbage
        raise HeaderDecodeError(f"bad CBOR header: {exc}") from None
    return _from_mapping(fields, SerializeType.CBOR, body)


_ENCODERS = {
    SerializeType.JSON: encode_json,
    SerializeType.ROCKETMQ: encode_rocketmq,
    SerializeType.CBOR: encode_cbor,
}
_DECODERS = {
    SerializeType.JSON.value: decode_json,
    SerializeType.ROCKETMQ.value: decode_rocketmq,
    SerializeType.CBOR.value: decode_cbor,
}


def encode_header(cmd: RemotingCommand) -> bytes:
    return _ENCODERS[cmd.serialize_type](cmd)


def decode_header(serialize_type: int, data: bytes | memoryview, body: Body) -> RemotingCommand:
    decoder = _DECODERS.get(serialize_type)
    if decoder is None:
        raise HeaderDecodeError(f"unknown serialize type {serialize_type}")
    return decoder(data, body)
