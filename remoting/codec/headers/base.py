"""Declarative custom headers: typed views of a command's ``extFields``
(docs/protocol.md#18-extfields-and-custom-headers).

A header is a frozen, slotted attrs class deriving from :class:`Header`. Each attribute declares

* its **wire key** with ``attrs.field(metadata=wire("queueId"))``,
* its **type** with the annotation: ``str``, ``int``, ``bool`` or one of them ``| None``,
* whether it is **required**: a field without a default is required (Java's not-null annotation), a field with a
  default (``None``, ``False``, ``0``) is optional.

``wire(key, int32=True)`` marks a Java ``int``/``Integer`` field whose value must fit in 32 bits; other integer fields
are Java ``long`` and must fit in 64 bits. The range check keeps absurd numbers from a peer out of the store.

Parsing (:meth:`Header.from_ext_fields`) is tolerant the way real 4.x clients need
(docs/protocol.md#92-what-a-server-must-tolerate): integers from ``"12"`` (surrounding whitespace allowed), booleans
true for ``true`` in any case or ``1``, false for anything else (Java's Boolean.parseBoolean), unknown keys ignored,
an empty string for a number or boolean treated
as absent (Java reads an empty binary-header string as null). A missing required field or an unparsable value raises
:class:`~remoting.codec.errors.HeaderFieldError` whose ``field`` is the wire key. Encoding
(:meth:`Header.to_ext_fields`) writes every value as a string, booleans as ``"true"``/``"false"``, and omits ``None``.

Both directions are on the send hot path, so each class's field table is compiled once (on first use, cached per
class) and the per-call work is a loop over that table: no reflection, no ``exec``/``eval``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, NamedTuple, Self

import attrs

from remoting.codec.errors import HeaderFieldError

_WIRE_KEY: Final = "rocketrio.wire_key"
_INT32: Final = "rocketrio.int32"

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1

_TRUE: Final = frozenset({"true", "1"})


def wire(key: str, *, int32: bool = False) -> dict[str, Any]:
    """Field metadata naming the extFields key of an attribute (and, for ints, whether Java declares it ``int``)."""
    return {_WIRE_KEY: key, _INT32: int32}


def _shown(raw: str) -> str:
    """A peer's value for an error remark, cut short: remarks go back to the client and into logs."""
    return repr(raw) if len(raw) <= 64 else repr(raw[:64]) + "..."


# A parser turns the raw string into the attribute value or raises HeaderFieldError naming the key.
_Parser = Callable[[str, str], Any]


def _parse_int64(key: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise HeaderFieldError(key, f"header field {key!r} is not an integer: {_shown(raw)}") from None
    if not _INT64_MIN <= value <= _INT64_MAX or "_" in raw:
        raise HeaderFieldError(key, f"header field {key!r} is not a 64-bit integer: {_shown(raw)}")
    return value


def _parse_int32(key: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise HeaderFieldError(key, f"header field {key!r} is not an integer: {_shown(raw)}") from None
    if not _INT32_MIN <= value <= _INT32_MAX or "_" in raw:
        raise HeaderFieldError(key, f"header field {key!r} is not a 32-bit integer: {_shown(raw)}")
    return value


def _parse_bool(key: str, raw: str) -> bool:
    """Java's Boolean.parseBoolean (RemotingCommand.decodeCommandCustomHeader): anything but ``true`` is false;
    ours: ``1`` is true as well."""
    return raw.strip().lower() in _TRUE


class _InField(NamedTuple):
    key: str
    parse: _Parser | None  # None: the raw string is the value
    required: bool
    default: Any


class _OutField(NamedTuple):
    name: str
    key: str
    is_bool: bool


class WireField(NamedTuple):
    """Public description of one header field, for tests, docs and tools."""

    name: str
    key: str
    kind: type[Any]  # str, int or bool
    required: bool
    optional: bool  # the annotation admits None
    int32: bool


class _Table(NamedTuple):
    inbound: tuple[_InField, ...]
    outbound: tuple[_OutField, ...]
    fields: tuple[WireField, ...]


_TABLES: dict[type[Any], _Table] = {}


def _base_type(annotation: Any, where: str) -> tuple[type[Any], bool]:
    """``(str|int|bool, admits None)`` from ``X`` or ``X | None``; anything else is a declaration bug."""
    optional = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"{where}: unsupported header field type {annotation!r}")
        annotation, optional = members[0], True
    if annotation not in (str, int, bool):
        raise TypeError(f"{where}: unsupported header field type {annotation!r}")
    return typing.cast(type[Any], annotation), optional


def _compile(cls: type[Any]) -> _Table:
    hints = typing.get_type_hints(cls)
    inbound: list[_InField] = []
    outbound: list[_OutField] = []
    specs: list[WireField] = []
    for attribute in attrs.fields(cls):
        where = f"{cls.__name__}.{attribute.name}"
        key = attribute.metadata.get(_WIRE_KEY)
        if key is None:
            raise TypeError(f"{where}: header field lacks wire(...) metadata")
        if not attribute.init:
            raise TypeError(f"{where}: header fields must be constructor arguments")
        kind, optional = _base_type(hints[attribute.name], where)
        int32 = bool(attribute.metadata.get(_INT32))
        parse: _Parser | None
        if kind is bool:
            parse = _parse_bool
        elif kind is int:
            parse = _parse_int32 if int32 else _parse_int64
        else:
            parse = None
        if isinstance(attribute.default, attrs.Factory):  # type: ignore[arg-type]
            raise TypeError(f"{where}: header field defaults must be plain values")
        required = attribute.default is attrs.NOTHING
        inbound.append(_InField(key, parse, required, None if required else attribute.default))
        outbound.append(_OutField(attribute.name, key, kind is bool))
        specs.append(WireField(attribute.name, key, kind, required, optional, int32))
    table = _Table(tuple(inbound), tuple(outbound), tuple(specs))
    _TABLES[cls] = table
    return table


def header_parse_plan(cls: type[Header]) -> tuple[tuple[str, _Parser | None, bool, Any], ...]:
    """``(wire key, parser or None for str, required, default)`` per field of ``cls`` in declaration order: the exact
    steps :meth:`Header.from_ext_fields` takes, for specialised parsers that must behave identically."""
    return tuple((f.key, f.parse, f.required, f.default) for f in (_TABLES.get(cls) or _compile(cls)).inbound)


class Header:
    """Base of every custom header class. Subclasses are ``@attrs.frozen(slots=True)`` with ``wire`` metadata.

    Instances are immutable values; build one from a request with :meth:`from_ext_fields` and put one into a
    command with :meth:`to_ext_fields`.
    """

    __slots__ = ()

    #: Request code(s) the header belongs to, for documentation and dispatch tables (empty for response headers).
    REQUEST_CODES: ClassVar[tuple[int, ...]] = ()

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str]) -> Self:
        """Parse ``ext_fields`` (a command's ``str -> str`` map). Unknown keys are ignored.

        Raises :class:`HeaderFieldError` (``field`` = wire key) for a missing required field or an unparsable value.
        """
        table = _TABLES.get(cls) or _compile(cls)
        get = ext_fields.get
        args: list[Any] = []
        append = args.append
        for key, parse, required, default in table.inbound:
            raw = get(key)
            if raw is None or (parse is not None and raw == ""):
                if required:
                    raise HeaderFieldError(key, f"missing required header field {key!r}")
                append(default)
            elif parse is None:
                append(raw)
            else:
                append(parse(key, raw))
        return cls(*args)

    def to_ext_fields(self) -> dict[str, str]:
        """Every non-``None`` field as a string keyed by its wire name; booleans as ``"true"``/``"false"``."""
        cls = type(self)
        table = _TABLES.get(cls) or _compile(cls)
        out: dict[str, str] = {}
        for name, key, is_bool in table.outbound:
            value = getattr(self, name)
            if value is None:
                continue
            if is_bool:
                out[key] = "true" if value else "false"
            else:
                out[key] = value if type(value) is str else str(value)
        return out

    @classmethod
    def wire_fields(cls) -> tuple[WireField, ...]:
        """The fields this class reads and writes, in declaration order."""
        return (_TABLES.get(cls) or _compile(cls)).fields

    @classmethod
    def wire_keys(cls) -> tuple[str, ...]:
        """The extFields keys this class reads and writes, in declaration order."""
        return tuple(field.key for field in cls.wire_fields())

    @classmethod
    def required_keys(cls) -> tuple[str, ...]:
        """The keys :meth:`from_ext_fields` insists on."""
        return tuple(field.key for field in cls.wire_fields() if field.required)
