"""Java ``.properties`` text, and typed settings classes read from and written to it. Sans-IO: callers read files.

The text is what RocketMQ's ``mqbroker -c`` and ``mqnamesrv -c`` read and what the config requests carry in their
bodies (GET_BROKER_CONFIG, UPDATE_BROKER_CONFIG). :func:`parse_properties` reads it as OpenJDK's
``java.util.Properties.load`` does (``java.base/share/classes/java/util/Properties.java``, ``LineReader`` and
``loadConvert``): a logical line continues onto the next physical one when it ends with an odd number of
backslashes (the next line's leading blanks are dropped); ``#`` or ``!`` as the first non-blank character starts a
comment; the key ends at the first unescaped ``=``, ``:`` or blank, then blanks, one optional ``=`` or ``:`` and
blanks separate it from the value, whose trailing blanks are kept; ``\\uXXXX``, ``\\t``, ``\\n``, ``\\r``, ``\\f``
are escapes and any other escaped character is itself. A file is read as UTF-8, or ISO-8859-1 bytes when it is not
UTF-8, as ``Properties.load(InputStream)`` reads any (:func:`decode_properties_file`). Settings ignore the blanks
around a value (:func:`apply_properties`; ours, as before). :func:`format_properties` escapes what that reader would
misread and writes everything outside printable ASCII as ``\\uXXXX``, as ``Properties.store`` does, so Java reads it
back alike.
The command-line form ``--name value`` (``mqbroker --listenPort 0``) is :func:`parse_property_args`; the keys the
config-update requests refuse (``configBlackList``) are :func:`black_listed_keys`.

A settings class is an attrs class; each field's property name is its camelCase form, or ``metadata["key"]`` where
RocketMQ spells it otherwise (``brokerIP1``). An ``int`` field holds a Java ``int`` unless ``metadata["java"]`` is
``"long"``, and ``metadata["range"]`` narrows it further (``listenPort``). A boolean is true for a case-insensitive
``true`` and false for anything else (logged), as Java's ``Boolean.parseBoolean``; a number Java's parser refuses
(not a number, or past its Java type), or a text outside a field's ``metadata["choices"]`` (an enum's names), is
skipped, logged, and the setting keeps its value, as ``properties2Object`` swallows the NumberFormatException (or
``valueOf``'s IllegalArgumentException). ``strict`` settings (the 5.x proxy's, which RocketMQ reads with fastjson)
refuse both instead. Errors: :class:`PropertiesError` for a number outside ``metadata["range"]``, a malformed
``\\uXXXX``, a malformed argument, or (``strict``) a boolean other than true/false or a number that does not parse.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs

T = TypeVar("T")

log = logging.getLogger(__name__)

_BLANKS = " \t\f"
_PHYSICAL = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_ESCAPE = re.compile(r"\\(u(.{0,4})|.)", re.DOTALL)
_SIMPLE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: A finite decimal number as ``Double.parseDouble`` reads one (common/src/main/java/org/apache/rocketmq/common/
#: MixAll.java ``properties2Object``), a ``d``/``f`` suffix included; unlike Python's ``float``, no ``_`` between
#: digits, and ``nan``/``inf`` are refused (none of our number settings is a Java ``double``: each is a time in
#: seconds of ours, such as the name server's ``scanInterval``).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
#: Java's int and long ranges (``Integer.parseInt``, ``Long.parseLong``).
_JAVA_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


#: Field metadata: a Java ``long`` setting, and a port (``metadata["range"]``).
JAVA_LONG: Final = {"java": "long"}
PORT: Final = {"range": (0, 65535)}


class PropertiesError(ValueError):
    """A config value does not convert to its field's type; the message names the key and the file."""


class CommandLineError(PropertiesError):
    """A command-line token that is not ``--name`` (``-x``, a stray word): the server mains exit as after commons-cli's
    ParseException."""


class UnreadableProperties(PropertiesError):
    """A text ``Properties.load`` refuses (a malformed ``\\uXXXX``): MixAll.string2Properties's null, which the
    config updates answer SYSTEM_ERROR :data:`STRING2PROPERTIES_ERROR`."""


#: The remark of AdminBrokerProcessor.updateBrokerConfig and DefaultRequestProcessor.updateConfig (4.9.8) for a body
#: that does not load.
STRING2PROPERTIES_ERROR: Final = "string2Properties error"


def physical_lines(text: str) -> list[str]:
    """``text`` split after each ``\\n``, ``\\r`` or ``\\r\\n`` (the only line ends Java knows), endings kept."""
    return _PHYSICAL.findall(text)


def _odd_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def logical_lines(lines: list[str]) -> Iterator[tuple[int, int, str]]:
    """``(first, end, text)`` per key line as Java's ``Properties.LineReader`` joins them: physical lines
    ``[first, end)`` without comments and blank lines, a continuation's backslash and leading blanks dropped."""
    text, first = "", -1
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r\n").lstrip(_BLANKS)
        if first < 0 and (not line or line[0] in "#!"):
            continue  # a blank or comment line outside a continuation
        if first >= 0 and not line and not text:
            first = -1  # a continuation that joined nothing: Java drops the empty logical line
            continue
        if first >= 0 and not line:
            yield first, i, text  # a blank line ends a continued line
            text, first = "", -1
            continue
        if first < 0:
            first = i
        elif not text and line[0] in "#!":
            first = -1  # "\\" alone, then a comment: Java's reader is back at a line start
            continue
        if _odd_backslashes(line):
            text += line[:-1]
            continue
        yield first, i + 1, text + line
        text, first = "", -1
    if first >= 0:
        yield first, len(lines), text  # a backslash at the very end is dropped


def split_line(line: str) -> tuple[str, str]:
    """A logical line's raw (still escaped) key and value, split as ``Properties.load0`` does."""
    key_end, value_start, has_sep, escaped = len(line), len(line), False, False
    for i, c in enumerate(line):
        if not escaped and c in "=:" + _BLANKS:
            key_end, value_start, has_sep = i, i + 1, c in "=:"
            break
        escaped = c == "\\" and not escaped
    while value_start < len(line) and line[value_start] in _BLANKS + ("" if has_sep else "=:"):
        has_sep = has_sep or line[value_start] in "=:"
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape_one(match: re.Match[str]) -> str:
    if match.group(2) is None:
        return _SIMPLE.get(match.group(1), match.group(1))
    digits = match.group(2)
    if len(digits) < 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
        raise UnreadableProperties(f"Malformed \\uxxxx encoding: \\u{digits}")
    return chr(int(digits, 16))


def unescape(raw: str) -> str:
    """``loadConvert``: the escapes resolved; UTF-16 surrogate pairs from ``\\uD83D\\uDE00`` become one character."""
    text = _ESCAPE.sub(_unescape_one, raw)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace") if "\\u" in raw else text


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs ``java.util.Properties.load`` reads from ``text`` (a later key wins).

    Raises :class:`UnreadableProperties` for a malformed ``\\uXXXX`` (Java's ``IllegalArgumentException``)."""
    out: dict[str, str] = {}
    for _, _, line in logical_lines(physical_lines(text)):
        key, value = split_line(line)
        out[unescape(key)] = unescape(value)
    return out


def properties_file_encoding(data: bytes) -> str:
    """The encoding a properties file is read (and written back) in: UTF-8 when it decodes so (ours: the usual
    encoding of a file with non-ASCII paths, names or comments, which Java would garble), else ISO-8859-1, as
    ``Properties.load(InputStream)`` reads any bytes."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "latin-1"
    return "utf-8"


def decode_properties_file(data: bytes) -> str:
    """A properties file's text, in :func:`properties_file_encoding`."""
    return data.decode(properties_file_encoding(data))


def _escape(text: str, specials: str) -> str:
    out = []
    for c in text:
        if c == "\\" or c in specials:
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(c)])
        elif " " <= c <= "~":
            out.append(c)
        else:
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04X}" for i in range(0, len(units), 2))
    return "".join(out)


def escape_key(key: str) -> str:
    """A key as ``Properties.store`` writes it: blanks, separators and comment marks escaped too."""
    return _escape(key, " =:#!")


def escape_value(value: str) -> str:
    """A value as ``Properties.store`` writes it: a leading blank escaped, the rest kept readable."""
    escaped = _escape(value, "")
    return "\\" + escaped if escaped.startswith(" ") else escaped


def format_properties(texts: dict[str, str]) -> str:
    """``texts`` as a properties text, one ``key=value`` line each, sorted by key, escaped so that
    :func:`parse_properties` (and Java) read back ``texts``."""
    return "".join(f"{escape_key(key)}={escape_value(text)}\n" for key, text in sorted(texts.items()))


def parse_property_args(args: list[str]) -> dict[str, str]:
    """``["--listenPort", "0", "--a=b"]`` -> ``{"listenPort": "0", "a": "b"}``; a trailing bare flag means "true".

    Raises :class:`CommandLineError` for a token that is not ``--name``.
    """
    props: dict[str, str] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--") or len(token) < 3:
            raise CommandLineError(f"unexpected argument {token!r}; properties are given as --name value")
        name, eq, value = token[2:].partition("=")
        if eq:
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
            i += 2
        else:
            value = "true"
            i += 1
        props[name] = value
    return props


#: What :func:`_convert` returns for a number Java's parser refuses: the key is skipped.
_UNPARSED: Final = object()


def _convert(value: str, field: attrs.Attribute[Any], key: str, strict: bool) -> Any:
    """``value`` as ``field``'s type, blanks around it ignored (ours: Java's number parsers refuse them, an enum
    setter refuses them and keeps the default, and a name or address keeps a trailing one, silently different).
    :data:`_UNPARSED` for a number ``Integer.parseInt``, ``Long.parseLong`` or ``Double.parseDouble`` refuses, or a
    text outside ``metadata["choices"]`` (an enum's names, which ``valueOf`` refuses).
    ``strict``: :class:`PropertiesError` for a boolean other than true/false."""
    kind = field.type
    if kind in (bool, "bool", "bool | None"):  # None: not set (tls.enable, whose default depends on another)
        # Boolean.parseBoolean, as common/src/main/java/org/apache/rocketmq/common/MixAll.java properties2Object
        # reads every boolean: a case-insensitive "true" is true, anything else false, never an error.
        lowered = value.strip(_BLANKS).lower()
        if lowered not in ("true", "false"):
            if strict:
                raise PropertiesError(f"{key}: expected true or false, got {value!r}")
            log.warning("%s: %r is not true or false, read as false as Java reads it", key, value)
        return lowered == "true"
    if kind is int or kind == "int":
        return _integer(value.strip(_BLANKS), field, key)
    if kind is float or kind == "float":
        number = value.strip(_BLANKS)
        if not _DECIMAL.fullmatch(number) or not math.isfinite(parsed := float(number.rstrip("dDfF"))):
            return _UNPARSED
        return parsed
    # A password keeps its blanks, as Properties.getProperty returns them (TlsHelper's tls.*.keyPassword).
    text = value if field.metadata.get("secret") else value.strip(_BLANKS)
    # An enum's setter calls valueOf, whose IllegalArgumentException properties2Object swallows: the key is skipped.
    return _UNPARSED if text not in field.metadata.get("choices", (text,)) else text


def _integer(value: str, field: attrs.Attribute[Any], key: str) -> Any:
    """``Integer.parseInt`` or ``Long.parseLong`` (``metadata["java"]``): :data:`_UNPARSED` for what they refuse;
    then ``metadata["range"]`` if any (``listenPort``: Java parses 70000 and fails to bind it), whose breach raises
    :class:`PropertiesError`."""
    java_low, java_high = _JAVA_RANGES[field.metadata.get("java", "int")]
    if not _INTEGER.fullmatch(value) or not java_low <= (number := int(value)) <= java_high:
        return _UNPARSED
    low, high = field.metadata.get("range", (java_low, java_high))
    if not low <= number <= high:
        raise PropertiesError(f"{key}: {value} is out of range ({low}..{high})")
    return number


def camel_case(name: str) -> str:
    """``listen_port`` -> ``listenPort``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def property_name(field: attrs.Attribute[Any]) -> str:
    """The RocketMQ property name of a settings field."""
    return str(field.metadata.get("key", camel_case(field.name)))


def property_texts(config: attrs.AttrsInstance, *, secrets: bool = False) -> dict[str, str]:
    """A settings object's values as property texts by property name (booleans as ``true``/``false``). Fields marked
    ``metadata["secret"]`` (passwords) are left out, so they are never shown, unless ``secrets`` (a file written back
    keeps a password set); so are settings left unset (None)."""
    texts = {}
    for field in attrs.fields(type(config)):
        if field.metadata.get("secret") and not (secrets and getattr(config, field.name)):
            continue
        value = getattr(config, field.name)
        if value is None:  # not set: no text (a file holding it would set it)
            continue
        texts[property_name(field)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return texts


def in_print_order(texts: Mapping[str, str], order: Sequence[str]) -> list[tuple[str, str]]:
    """``texts``' items as a Java ``-p`` prints them: the keys ``order`` names in its order (Java's config classes'
    declared fields, which common/src/main/java/org/apache/rocketmq/common/MixAll.java printObjectProperties walks),
    then the others in their own order."""
    rank = {key: index for index, key in enumerate(order)}
    return [(key, texts[key]) for key in sorted(texts, key=lambda key: rank.get(key, len(rank)))]


def apply_properties(config: T, props: dict[str, str], *, strict: bool = False) -> tuple[T, list[str]]:
    """A copy of the attrs ``config`` with each field named in ``props`` replaced by the converted value (``strict``:
    a boolean other than true/false or a number that does not parse raises :class:`PropertiesError`, not read as
    ``MixAll.properties2Object`` reads it).

    A field's property name is its camelCase form, or ``metadata["key"]`` where RocketMQ spells it otherwise.
    Returns the new config and the keys that matched no field, so the caller can warn about typos.
    """
    changes, unknown = _field_values(type(config), props, strict)
    return attrs.evolve(config, **changes), unknown  # type: ignore[misc]


def config_from_properties(cls: type[T], props: dict[str, str], **overrides: object) -> tuple[T, list[str]]:
    """A new ``cls`` from ``props``, then ``overrides`` (snake_case field names), over its defaults; returns it and
    the keys that matched no field. Unlike :func:`apply_properties` on a default instance, a default computed from
    other fields (``attrs.Factory(..., takes_self=True)``: brokerIP1 from listenHost) follows the values given."""
    changes, unknown = _field_values(cls, props, strict=False)
    return cls(**{**changes, **overrides}), unknown


def _field_values(cls: type[Any], props: dict[str, str], strict: bool) -> tuple[dict[str, Any], list[str]]:
    """``props`` converted to ``cls``'s field values by field name, and the keys that matched no field."""
    by_key = {property_name(f): f for f in attrs.fields(cls)}
    values: dict[str, Any] = {}
    unknown = []
    for key, value in props.items():
        field = by_key.get(key)
        if field is None:
            unknown.append(key)
            continue
        converted = _convert(value, field, key, strict)
        if converted is _UNPARSED and strict:
            raise PropertiesError(f"{key}: expected a number, got {value!r}")
        if converted is _UNPARSED:
            # MixAll.properties2Object swallows the NumberFormatException (common/src/main/java/org/apache/rocketmq/
            # common/MixAll.java): the setting keeps its value and the start or update goes on.
            log.warning("%s: %r is not a value Java reads, ignored: the setting keeps its value", key, value)
            continue
        values[field.name] = converted
    return values, unknown


def black_listed_keys(fixed: Iterable[str], configured: str) -> frozenset[str]:
    """The keys a config update may not name: ``fixed`` and the ``;``-separated keys of a ``configBlackList``
    setting, which only adds to them (``initConfigBlackList`` of RocketMQ's ``AdminBrokerProcessor`` and
    ``DefaultRequestProcessor``)."""
    return frozenset(fixed) | {key.strip() for key in configured.split(";") if key.strip()}


def load_config(defaults: T, text: str | None = None, **overrides: object) -> tuple[T, list[str]]:
    """``defaults``, then the properties ``text`` (a file's content, if any), then keyword overrides (snake_case field
    names). Returns the settings and the text's unknown keys (the caller warns about them). Raises
    :class:`PropertiesError` for a value out of its range."""
    config, unknown = (defaults, []) if text is None else apply_properties(defaults, parse_properties(text))
    return attrs.evolve(config, **overrides), unknown  # type: ignore[misc]
