"""Writing changed properties back to ``broker.conf`` (RocketMQ's ``Configuration.persist`` after an
UPDATE_BROKER_CONFIG), so a restart with the same ``-c`` file keeps them.

Unlike Java, which rewrites the file as a dump of every setting, only the changed keys are touched: each line that
defines one gets the new value (keeping its indentation and ``=``/``:`` separator; a value continued over several
lines with ``\\`` becomes one line), keys the file lacks are appended at the end, and every other line (comments,
blank lines, keys we do not know) is kept byte for byte. Lines are found as ``java.util.Properties.load`` reads them
(:mod:`remoting.codec.java_properties`), the file is ISO-8859-1 as Java reads it, and new values are escaped so that
Java reads them back unchanged.

A file that is missing when an update comes (removed while the broker runs) is written whole: every setting and
the start's file-only keys with the changes, as Java's dump, so the next start keeps them.

The write is atomic: a temp file of its own next to it, fsynced, renamed over the original, then the directory
fsynced; a crash leaves either the old or the new file. Concurrent writers are serialised, so none loses another's
keys. Blocking; errors are ``OSError`` (the caller logs them: the running broker already uses the new values).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

from remoting.codec.java_properties import (
    escape_key,
    escape_value,
    logical_lines,
    physical_lines,
    properties_file_encoding,
    split_line,
    unescape,
)
from store.metadata_files import replace_atomically

__all__ = ["persist_properties", "rewrite_properties"]

#: Serialises every read-modify-write of a conf file (Java's ``Configuration`` does it under its write lock).
_WRITE_LOCK = threading.Lock()


def _new_line(original: str, logical: str, value: str) -> str:
    """``original``'s first physical line re-written with ``value``: its indentation, key and separator kept."""
    raw_key, raw_value = split_line(logical)
    separator = logical[len(raw_key) : len(logical) - len(raw_value)]
    if "=" not in separator and ":" not in separator:
        separator = "="
    indent = original[: len(original) - len(original.lstrip(" \t\f"))]
    ending = original[len(original.rstrip("\r\n")) :] or "\n"
    return f"{indent}{raw_key}{separator}{escape_value(value)}{ending}"


def rewrite_properties(text: str, changes: Mapping[str, str]) -> str:
    """``text`` (a properties file) with each key of ``changes`` set to its value; see the module docstring."""
    lines = physical_lines(text)
    out: list[str] = []
    written: set[str] = set()
    done = 0
    for first, end, logical in logical_lines(lines):
        key = unescape(split_line(logical)[0])
        if key not in changes:
            continue
        out.extend(lines[done:first])
        out.append(_new_line(lines[first], logical, changes[key]))
        written.add(key)
        done = end
    out.extend(lines[done:])
    missing = [key for key in changes if key not in written]
    if missing and out and not out[-1].endswith(("\n", "\r")):
        out.append("\n")
    out.extend(f"{escape_key(key)}={escape_value(changes[key])}\n" for key in missing)
    return "".join(out)


def persist_properties(path: Path, changes: Mapping[str, str], everything: Mapping[str, str] | None = None) -> None:
    """Apply :func:`rewrite_properties` to the file at ``path`` atomically. A missing file is created with
    ``everything`` (every property the broker holds) and ``changes``, as Java's dump would hold them all."""
    with _WRITE_LOCK:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raw = b""
            changes = {**(everything or {}), **changes}
        # Written back in the encoding it was read in, so untouched lines keep their bytes (new values are escaped
        # to ASCII by escape_value).
        encoding = properties_file_encoding(raw)
        data = rewrite_properties(raw.decode(encoding), changes).encode(encoding)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        replace_atomically(path, data, tmp, keep_mode=True)
