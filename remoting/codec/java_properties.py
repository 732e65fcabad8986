"""Java ``.properties`` files as RocketMQ's ``mqbroker -c`` and ``mqnamesrv -c`` read them.

Only the subset RocketMQ configs use: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments, blank lines,
surrounding whitespace trimmed, and a trailing backslash continuing a line. Shared by the broker and the name server.
"""

from __future__ import annotations

from pathlib import Path
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


def load_properties(path: str | Path) -> dict[str, str]:
    return parse_properties(Path(path).read_text(encoding="utf-8"))


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


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def apply_properties(config: T, props: dict[str, str]) -> tuple[T, list[str]]:
    """A copy of the attrs ``config`` with each field named in ``props`` replaced by the converted value.

    A field's property name is its camelCase form, or ``metadata["key"]`` where RocketMQ spells it otherwise.
    Returns the new config and the keys that matched no field, so the caller can warn about typos.
    """
    fields = attrs.fields(type(config))  # type: ignore[arg-type]
    by_key = {f.metadata.get("key", _camel(f.name)): f for f in fields}
    changes: dict[str, Any] = {}
    unknown = []
    for key, value in props.items():
        field = by_key.get(key)
        if field is None:
            unknown.append(key)
            continue
        changes[field.name] = _convert(value, field.type, key)
    return attrs.evolve(config, **changes), unknown  # type: ignore[misc]


def load_config(defaults: T, path: str | Path | None = None, **overrides: object) -> tuple[T, list[str]]:
    """``defaults``, then the properties file (if any), then keyword overrides (snake_case field names).

    Returns the config and the file's unknown keys (the caller warns about them). Raises :class:`PropertiesError`
    for a value of the wrong type and ``OSError`` for an unreadable file.
    """
    config, unknown = (defaults, []) if path is None else apply_properties(defaults, load_properties(path))
    return attrs.evolve(config, **overrides), unknown  # type: ignore[misc]
