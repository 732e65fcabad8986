"""Java ``.properties`` text, and typed settings classes read from and written to it. Sans-IO: callers read files.

The text is what RocketMQ's ``mqbroker -c`` and ``mqnamesrv -c`` read and what the config requests carry in their
bodies (GET_BROKER_CONFIG, UPDATE_BROKER_CONFIG). Only the subset RocketMQ configs use: ``key=value`` or ``key: value``
lines, ``#``/``!`` comments, blank lines, surrounding whitespace trimmed, and a trailing backslash continuing a line.
The command-line form ``--name value`` (``mqbroker --listenPort 0``) is :func:`parse_property_args`.

A settings class is an attrs class; each field's property name is its camelCase form, or ``metadata["key"]`` where
RocketMQ spells it otherwise (``brokerIP1``). Errors: :class:`PropertiesError` for a value of the wrong type or a
malformed argument.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

T = TypeVar("T")


class PropertiesError(ValueError):
    """A config value does not convert to its field's type; the message names the key and the file."""


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = (pending + raw.strip()) if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            out[line] = ""
        else:
            out[line[:sep].strip()] = line[sep + 1 :].strip()
    if pending:
        out[pending] = ""
    return out


def parse_property_args(args: list[str]) -> dict[str, str]:
    """``["--listenPort", "0", "--a=b"]`` -> ``{"listenPort": "0", "a": "b"}``; a trailing bare flag means "true".

    Raises :class:`PropertiesError` for a token that is not ``--name``.
    """
    props: dict[str, str] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--") or len(token) < 3:
            raise PropertiesError(f"unexpected argument {token!r}; properties are given as --name value")
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


def _convert(value: str, kind: Any, key: str) -> Any:
    if kind is bool or kind == "bool":
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise PropertiesError(f"{key}: expected true or false, got {value!r}")
        return lowered == "true"
    if kind is int or kind == "int":
        try:
            return int(value)
        except ValueError:
            raise PropertiesError(f"{key}: expected an integer, got {value!r}") from None
    if kind is float or kind == "float":
        try:
            return float(value)
        except ValueError:
            raise PropertiesError(f"{key}: expected a number, got {value!r}") from None
    return value


def camel_case(name: str) -> str:
    """``listen_port`` -> ``listenPort``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def property_name(field: attrs.Attribute[Any]) -> str:
    """The RocketMQ property name of a settings field."""
    return str(field.metadata.get("key", camel_case(field.name)))


def property_texts(config: attrs.AttrsInstance) -> dict[str, str]:
    """A settings object's values as property texts by property name (booleans as ``true``/``false``). Fields marked
    ``metadata["secret"]`` (passwords) are left out, so they are never shown or written back."""
    texts = {}
    for field in attrs.fields(type(config)):
        if field.metadata.get("secret"):
            continue
        value = getattr(config, field.name)
        texts[property_name(field)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return texts


def format_properties(texts: dict[str, str]) -> str:
    """``texts`` as a properties text, one ``key=value`` line each, sorted by key."""
    return "".join(f"{key}={text}\n" for key, text in sorted(texts.items()))


def apply_properties(config: T, props: dict[str, str]) -> tuple[T, list[str]]:
    """A copy of the attrs ``config`` with each field named in ``props`` replaced by the converted value.

    A field's property name is its camelCase form, or ``metadata["key"]`` where RocketMQ spells it otherwise.
    Returns the new config and the keys that matched no field, so the caller can warn about typos.
    """
    fields = attrs.fields(type(config))  # type: ignore[arg-type]
    by_key = {property_name(f): f for f in fields}
    changes: dict[str, Any] = {}
    unknown = []
    for key, value in props.items():
        field = by_key.get(key)
        if field is None:
            unknown.append(key)
            continue
        changes[field.name] = _convert(value, field.type, key)
    return attrs.evolve(config, **changes), unknown  # type: ignore[misc]


def load_config(defaults: T, text: str | None = None, **overrides: object) -> tuple[T, list[str]]:
    """``defaults``, then the properties ``text`` (a file's content, if any), then keyword overrides (snake_case field
    names). Returns the settings and the text's unknown keys (the caller warns about them). Raises
    :class:`PropertiesError` for a value of the wrong type."""
    config, unknown = (defaults, []) if text is None else apply_properties(defaults, parse_properties(text))
    return attrs.evolve(config, **overrides), unknown  # type: ignore[misc]
